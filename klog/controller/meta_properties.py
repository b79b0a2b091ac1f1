"""Kafka's ``meta.properties`` (version, node.id, cluster.id, directory.id) in a log dir: read, written once, and
the cluster id a node's directories agree on. Shared by a quorum member (:mod:`klog.controller.node`), an observer
(:mod:`klog.controller.observer`) and the broker's start.

At startup the node's dirs are sorted as Kafka's ``MetaPropertiesEnsemble.Loader`` does (:func:`load_meta_properties`):
a dir whose ``meta.properties`` cannot be read (the dir is a plain file or cannot be listed, an I/O error, a file that
is not a valid ``meta.properties``) is a failed dir: the node starts with it offline, unless it is the metadata log
dir or every dir failed (:meth:`MetaPropertiesEnsemble.verify`)."""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from klog.metadata.storage import kafka_uuid, random_kafka_uuid

if TYPE_CHECKING:
    from klog.metadata.config import BrokerConfig

__all__ = ["META_PROPERTIES", "MetaPropertiesEnsemble", "load_meta_properties", "node_meta_properties",
           "read_meta_properties", "stored_cluster_id", "stored_directory_id", "write_meta_properties"]

log = logging.getLogger("klog.controller.meta_properties")

META_PROPERTIES = "meta.properties"


def read_meta_properties(directory: str) -> dict[str, str] | None:
    """The properties of ``directory``'s meta.properties (None: it has none); read as Java reads a properties file
    (ISO 8859-1, ``\\u`` escapes). Any other error (an I/O error, the dir is a plain file) is raised."""
    import javaproperties

    try:
        with open(os.path.join(directory, META_PROPERTIES), "rb") as handle:
            return dict(javaproperties.load(handle))
    except FileNotFoundError:
        return None


def _invalid(props: Mapping[str, str]) -> str | None:
    """Why ``props`` is not a valid meta.properties (Kafka's ``MetaProperties.Builder(Properties).build()``), None
    when it is one."""
    from klog.metadata.storage import parse_kafka_uuid

    version = props.get("version", "0")
    if version not in ("0", "1"):
        return f"Unknown meta.properties version number {version}"
    id_key = "node.id" if version == "1" else "broker.id"
    if id_key in props or version == "1":
        if id_key not in props:
            return f"Failed to find {id_key}"
        try:
            int(props[id_key])
        except ValueError:
            return f"Unable to read {id_key} as a base-10 number."
    raw = props.get("directory.id")
    if raw is not None:
        try:
            parse_kafka_uuid(raw)
        except ValueError:
            try:   # the hex form a single-node data dir of an older klog wrote
                uuid.UUID(raw)
            except ValueError:
                return f"Unable to read directory.id as a Uuid: {raw!r}"
    if version == "1" and "cluster.id" not in props:
        return "cluster.id was not found."
    return None


@dataclass(frozen=True)
class MetaPropertiesEnsemble:
    """Kafka's ``MetaPropertiesEnsemble``: the meta.properties of each of a node's dirs (``props``), the dirs that
    have none yet (``empty``: klog writes it at the first start, as ``kafka-storage format`` would) and those whose
    file could not be read (``failed``: dir -> why), in the order of ``dirs``."""

    dirs: tuple[str, ...]
    metadata_log_dir: str
    props: Mapping[str, Mapping[str, str]]
    empty: frozenset[str]
    failed: Mapping[str, str]

    @property
    def usable_dirs(self) -> list[str]:
        """The dirs that did not fail, in order (the metadata log dir first)."""
        return [d for d in self.dirs if d not in self.failed]

    def verify(self) -> None:
        """Refuse the start as Kafka's ``MetaPropertiesEnsemble.verify`` and ``KafkaRaftServer.initializeLogDirs``
        do: every dir failed, the metadata log dir failed, or a readable file without a node or cluster id
        (RuntimeError naming the dir). A failed dir is otherwise left offline. (:func:`stored_cluster_id` checks
        the ids the files name.)"""
        if self.failed and not self.props and not self.empty:
            if len(self.failed) == 1:
                [(d, why)] = self.failed.items()
                raise RuntimeError(f"log.dirs: cannot use the data directory {d}: No readable meta.properties files "
                                   f"found ({why})")
            raise RuntimeError(f"log.dirs: cannot use the data directories {', '.join(self.failed)}: No readable "
                               "meta.properties files found ("
                               + "; ".join(f"{d}: {why}" for d, why in self.failed.items()) + ")")
        if self.metadata_log_dir in self.failed:
            raise RuntimeError(f"Encountered I/O error in metadata log directory {self.metadata_log_dir} "
                               f"({self.failed[self.metadata_log_dir]}). Cannot continue.")
        for d, props in self.props.items():
            node = props.get("node.id", props.get("broker.id"))
            if node is None:
                raise RuntimeError(f"Error: node ID not found in {d} ({os.path.join(d, META_PROPERTIES)} names none)")
            if "cluster.id" not in props:
                raise RuntimeError(f"Error: cluster ID not found in {d} ({os.path.join(d, META_PROPERTIES)} names "
                                   "none)")


def load_meta_properties(log_dirs: Sequence[str], metadata_log_dir: str) -> MetaPropertiesEnsemble:
    """Read the meta.properties of ``metadata_log_dir`` and each of ``log_dirs`` (Kafka's
    ``MetaPropertiesEnsemble.Loader.load``): a missing file leaves its dir empty, any other error (the dir is a plain
    file or cannot be listed, an I/O error, a file that is not a valid meta.properties) makes its dir a failed one,
    logged as Kafka logs it."""
    dirs = tuple(dict.fromkeys([metadata_log_dir, *log_dirs]))
    props: dict[str, Mapping[str, str]] = {}
    empty: set[str] = set()
    failed: dict[str, str] = {}
    for d in dirs:
        path = os.path.join(d, META_PROPERTIES)
        try:
            read = read_meta_properties(d)
        except (OSError, ValueError) as exc:   # ValueError: a malformed \u escape
            failed[d] = f"{type(exc).__name__}: {exc}"
        else:
            if read is None:
                empty.add(d)
                continue
            why = _invalid(read)
            if why is None:
                props[d] = read
                continue
            failed[d] = why
        log.error("Error while reading meta.properties file %s: %s", path, failed[d])
    return MetaPropertiesEnsemble(dirs, metadata_log_dir, props, frozenset(empty), failed)


def node_meta_properties(config: BrokerConfig) -> MetaPropertiesEnsemble:
    """The meta.properties of a node's metadata log dir and (when it serves clients) log dirs, read once at startup
    as Kafka's ``KafkaRaftServer.initializeLogDirs`` reads them, and verified: a dir whose file cannot be read starts
    offline; RuntimeError (naming the dir) when that is the metadata log dir or every dir."""
    metadata_dir = os.path.abspath(config["metadata.log.dir"] or config.log_dirs[0])
    ensemble = load_meta_properties(config.log_dirs if config.serves_clients else [], metadata_dir)
    ensemble.verify()
    return ensemble


def stored_directory_id(directory: str) -> uuid.UUID | None:
    """The ``directory.id`` of ``directory``'s ``meta.properties`` (KIP-853: the metadata log dir's one is half of
    a replica's key), None when there is none yet."""
    from klog.metadata.storage import parse_kafka_uuid

    raw = (read_meta_properties(directory) or {}).get("directory.id")
    if not raw:
        return None
    try:
        return parse_kafka_uuid(raw)
    except ValueError:
        pass
    try:   # a single-node data dir of an older klog wrote the id in the hex form
        return uuid.UUID(raw)
    except ValueError:
        raise RuntimeError(f"{os.path.join(directory, META_PROPERTIES)}: directory.id {raw!r} is not a Kafka uuid "
                           "(22 characters of URL-safe base64)") from None


def write_meta_properties(directory: str, node_id: int, cluster_id: str, directory_id: uuid.UUID | None = None
                          ) -> None:
    """Kafka's ``meta.properties`` v1 (written once: an existing file is left as it is). ``directory_id``: the one
    an initial voter set names for this directory (default: a new one)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, META_PROPERTIES)
    if os.path.exists(path):
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={node_id}\n"
                     f"directory.id={kafka_uuid(directory_id or random_kafka_uuid())}\nversion=1\ncluster.id={cluster_id}\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def stored_cluster_id(directories: Iterable[str], node_id: int) -> str | None:
    """The cluster id the directories' ``meta.properties`` agree on (None: not formatted). A file of
    another node or two different cluster ids are errors naming the file."""
    found: tuple[str, str] | None = None
    for d in directories:
        props = read_meta_properties(d)
        if props is None:
            continue
        path = os.path.join(d, META_PROPERTIES)
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise RuntimeError(f"{path}: this log dir belongs to node.id {stored_node}, but the config says "
                               f"node.id {node_id}")
        cid = props.get("cluster.id")
        if cid and found is not None and found[0] != cid:
            raise RuntimeError(f"{path} says cluster.id {cid}, {found[1]} says {found[0]}")
        if cid:
            found = (cid, path)
    return found[0] if found else None
