"""The tables every transcribed schema module adds its APIs and headers to (:mod:`klog.protocol.schemas` and the
modules split from it import ``API``/``HEADER`` from here, so none of them imports another)."""

from __future__ import annotations

API_DEFINITIONS: list[tuple[int, str, str, str, tuple, tuple]] = []
HEADER_DEFINITIONS: dict[str, tuple[str, str, tuple]] = {}


def API(api_key: int, name: str, versions: str, *, flexible: str, request: tuple, response: tuple) -> None:
    API_DEFINITIONS.append((api_key, name, versions, flexible, request, response))


def HEADER(name: str, versions: str, *, flexible: str, fields: tuple) -> None:
    HEADER_DEFINITIONS[name] = (versions, flexible, fields)
