"""Kafka's built-in config providers (KIP-297, KIP-887; org.apache.kafka.common.config.provider): a properties file
naming ``config.providers=file`` and ``config.providers.file.class=...FileConfigProvider`` may write a value as
``${file:/path/secrets.properties:key}``, resolved when the file is read, as Kafka's ConfigTransformer does:
``FileConfigProvider`` (a key of a properties file), ``DirectoryConfigProvider`` (the content of a file of a
directory), ``EnvVarConfigProvider`` (an environment variable, ``${env:NAME}``). A reference whose key is not found
is left as it is, as in Kafka. Any other provider class refuses the start: klog runs no Java plugins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from klog.metadata.config_keys import ConfigError, _parse_list

__all__ = ["PROVIDER_CLASSES", "is_provider_key", "resolve"]

_PACKAGE = "org.apache.kafka.common.config.provider."
FILE, DIRECTORY, ENV = _PACKAGE + "FileConfigProvider", _PACKAGE + "DirectoryConfigProvider", \
    _PACKAGE + "EnvVarConfigProvider"
PROVIDER_CLASSES = (FILE, DIRECTORY, ENV)
#: Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key}
_REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def is_provider_key(key: str) -> bool:
    """``config.providers.<alias>.class`` or ``config.providers.<alias>.param.<name>``."""
    return key.startswith("config.providers.")


def _allowed(path: str, allowed_paths: list[str] | None) -> bool:
    """KIP-993 ``allowed.paths``: a path is readable only under one of them (unset: everywhere)."""
    if allowed_paths is None:
        return True
    resolved = Path(path).resolve()
    return any(resolved == Path(a).resolve() or Path(a).resolve() in resolved.parents for a in allowed_paths)


def _lookup(cls: str, params: Mapping[str, str], prefix: str) -> Callable[[str | None, str], str | None]:
    """The provider ``cls``'s lookup of (path, key) under its ``params`` (given as ``prefix`` + name)."""
    allowed = _parse_list(params["allowed.paths"]) if "allowed.paths" in params else None

    def file_value(path: str | None, key: str) -> str | None:
        if not path or not _allowed(path, allowed):
            return None
        import javaproperties

        try:
            with open(path, encoding="utf-8") as handle:
                value = javaproperties.load(handle).get(key)
        except OSError:
            return None
        return None if value is None else str(value)

    def directory_value(path: str | None, key: str) -> str | None:
        if not path or not _allowed(path, allowed):
            return None
        entry = Path(path) / key
        try:
            return entry.read_text(encoding="utf-8") if entry.is_file() else None
        except OSError:
            return None

    try:
        pattern = re.compile(params.get("allowlist.pattern", ".*"))
    except re.error as exc:
        raise ConfigError(prefix + "allowlist.pattern", f"is not a regular expression: {exc}") from None

    def env_value(path: str | None, key: str) -> str | None:
        if path or not pattern.fullmatch(key):
            return None
        return os.environ.get(key)

    return {FILE: file_value, DIRECTORY: directory_value, ENV: env_value}[cls]


def resolve(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with the ``${provider:path:key}`` references of its values resolved through the providers
    ``config.providers`` names (the ``config.providers.*`` keys themselves are kept as they are); a ConfigError
    naming the key of a provider klog does not have."""
    aliases = _parse_list(str(props.get("config.providers") or ""))
    if not aliases:
        return dict(props)
    lookups = {}
    for alias in aliases:
        key = f"config.providers.{alias}.class"
        cls = str(props.get(key, "")).strip()
        if cls not in PROVIDER_CLASSES:
            raise ConfigError(key, f"{cls!r} is not a config provider klog has (it runs no Java plugins): "
                                   f"{', '.join(PROVIDER_CLASSES)}")
        prefix = f"config.providers.{alias}.param."
        lookups[alias] = _lookup(cls, {k[len(prefix):]: str(v) for k, v in props.items() if k.startswith(prefix)},
                                 prefix)

    def substitute(match: re.Match[str]) -> str:
        lookup = lookups.get(match[1])
        value = lookup(match[3], match[4]) if lookup is not None else None
        return match[0] if value is None else value

    return {key: _REFERENCE.sub(substitute, value) if isinstance(value, str) and not is_provider_key(key) else value
            for key, value in props.items()}
