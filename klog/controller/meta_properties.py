"""Kafka's ``meta.properties`` (version, node.id, cluster.id, directory.id) in a log dir: read, written once, and
the cluster id a node's directories agree on. Shared by a quorum member (:mod:`klog.controller.node`), an observer
(:mod:`klog.controller.observer`) and the broker's start."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable

from klog.metadata.storage import kafka_uuid, random_kafka_uuid

__all__ = ["META_PROPERTIES", "read_meta_properties", "stored_cluster_id", "stored_directory_id",
           "write_meta_properties"]

META_PROPERTIES = "meta.properties"


def read_meta_properties(directory: str) -> dict[str, str] | None:
    import javaproperties

    try:
        with open(os.path.join(directory, META_PROPERTIES), encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except FileNotFoundError:
        return None


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
