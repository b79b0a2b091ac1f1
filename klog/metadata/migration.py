"""Upgrade seams: a single node's metadata -> the records a new quorum starts with.

:func:`quorum_migration_records` (``klog-broker migrate``): a single node's image (its single-voter
``__cluster_metadata-0``) -> the records that carry it into a new multi-node quorum, every partition placed on the
node that keeps the data directory. The older single-node topic store (``klog-topics.json``) -> records:

A data directory written by a single-node klog keeps its topics when the node first starts as a quorum: the
controller writes these records (in one metadata transaction, before anything else) so the image has the same
topics, ids, partition counts and config overrides. Every partition gets this node as its only replica, ISR and
leader, at leader epoch 0: the epoch single-node klog stamped on every batch it wrote
(``klog.broker.partitions.LEADER_EPOCH``), so the existing logs stay consistent with their leader epoch cache.

Partition directories without an entry in the file are adopted as the broker does on start (data copied in,
a lost metadata file), with no config overrides.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from .image import ConfigResourceType, MetadataImage
from .records import MetadataRecord, MetadataRecordType, record
from .writer import image_records
from .storage import METADATA_TOPIC

__all__ = ["MIGRATED_RECORD_TYPES", "TOPICS_FILE", "quorum_migration_records", "single_node_topic_records",
           "topic_store_records"]

#: The single-node topic store (klog.broker.partitions.TOPICS_FILE), in the first log directory.
TOPICS_FILE = "klog-topics.json"
#: The leader epoch single-node klog writes every batch with (klog.broker.partitions.LEADER_EPOCH).
SINGLE_NODE_LEADER_EPOCH = 0
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def single_node_topic_records(topics: Mapping[str, Mapping[str, Any]], node_id: int,
                              on_disk: Mapping[str, int] | None = None) -> list[MetadataRecord]:
    """Records for ``topics`` (klog-topics.json's ``topics``: name -> {id, partitions, configs, internal}) and
    for partition directories found on disk (``on_disk``: name -> partition count)."""
    merged: dict[str, tuple[uuid.UUID, int, dict[str, str]]] = {}
    for name, entry in topics.items():
        try:
            merged[name] = (uuid.UUID(str(entry["id"])), int(entry["partitions"]),
                            {str(k): str(v) for k, v in (entry.get("configs") or {}).items()})
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{TOPICS_FILE}: topic {name!r}: bad entry {entry!r} ({e})") from e
    for name, count in (on_disk or {}).items():
        known = merged.get(name)
        if known is None:
            merged[name] = (_adopted_topic_id(name), count, {})
        elif count > known[1]:
            merged[name] = (known[0], count, known[2])
    out: list[MetadataRecord] = []
    for name, (topic_id, partitions, configs) in sorted(merged.items()):
        if partitions < 1:
            raise ValueError(f"{TOPICS_FILE}: topic {name!r} has {partitions} partitions")
        out.append(record("TopicRecord", name=name, topic_id=topic_id))
        for p in range(partitions):
            out.append(record("PartitionRecord", partition_id=p, topic_id=topic_id, replicas=[node_id],
                              isr=[node_id], leader=node_id, leader_epoch=SINGLE_NODE_LEADER_EPOCH,
                              partition_epoch=0, directories=[]))
        for key, value in sorted(configs.items()):
            out.append(record("ConfigRecord", resource_type=int(ConfigResourceType.TOPIC), resource_name=name,
                              name=key, value=value))
    return out


def _adopted_topic_id(name: str) -> uuid.UUID:
    # Deterministic, so every node of a new quorum that adopts the same directory proposes the same id.
    return uuid.uuid5(uuid.NAMESPACE_URL, f"klog-adopted-topic:{name}")


def _partition_dirs(log_dirs: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in log_dirs:
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            continue
        for n in names:
            m = _PARTITION_DIR.match(n)
            if m is None or not os.path.isdir(os.path.join(d, n)) or m.group(1) == METADATA_TOPIC:
                continue
            counts[m.group(1)] = max(counts.get(m.group(1), 0), int(m.group(2)) + 1)
    return counts


def topic_store_records(log_dirs: list[str], node_id: int) -> list[MetadataRecord]:
    """The records that carry a single-node data directory's topics into a quorum (empty for a fresh one)."""
    path = os.path.join(log_dirs[0], TOPICS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
    except FileNotFoundError:
        stored = {}
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable topic metadata ({e})") from e
    if not isinstance(stored, dict) or not isinstance(stored.get("topics", {}), dict):
        raise ValueError(f"{path}: expected {{\"version\": 1, \"topics\": {{...}}}}")
    on_disk = _partition_dirs(log_dirs)
    # Creations a crash cut short (recorded in progress by single-node klog, never completed) are not adopted:
    # their directories are left to the broker, which removes partitions of no topic (stray logs).
    for name, entry in (stored.get("creating") or {}).items():
        if name in on_disk:
            on_disk[name] = min(on_disk[name], int(entry["first"]))
            if on_disk[name] == 0:
                del on_disk[name]
    return single_node_topic_records(stored.get("topics", {}), node_id, on_disk)


#: What a single node's image carries into a new quorum: topics and partitions, configs, client quotas, the producer
#: id block (ids handed out are never handed out again), ACLs, SCRAM credentials, delegation tokens. Not carried:
#: feature levels (the new quorum's bootstrap decides them: ``klog-broker format --release-version``), broker and
#: controller registrations (the new nodes register themselves).
MIGRATED_RECORD_TYPES = frozenset({
    MetadataRecordType.TOPIC_RECORD, MetadataRecordType.PARTITION_RECORD, MetadataRecordType.CONFIG_RECORD,
    MetadataRecordType.CLIENT_QUOTA_RECORD, MetadataRecordType.PRODUCER_IDS_RECORD,
    MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD, MetadataRecordType.USER_SCRAM_CREDENTIAL_RECORD,
    MetadataRecordType.DELEGATION_TOKEN_RECORD})


def quorum_migration_records(image: MetadataImage, old_node_id: int, node_id: int) -> list[MetadataRecord]:
    """The records that carry a single node's ``image`` (its node id ``old_node_id``) into a new quorum where the
    node ``node_id`` keeps its data directory: every partition has that node as its only replica, ISR and leader,
    with the leader and partition epochs it had (the logs' leader epoch caches stay consistent), and no ELR; the
    old node's broker-level configs become ``node_id``'s. Raise the replication factor afterwards with
    ``kafka-reassign-partitions``."""
    out: list[MetadataRecord] = []
    for rec in image_records(image):
        if rec.type not in MIGRATED_RECORD_TYPES:
            continue
        if rec.type == MetadataRecordType.PARTITION_RECORD:
            d = rec.data
            rec = record("PartitionRecord", partition_id=d.partition_id, topic_id=d.topic_id, replicas=[node_id],
                         isr=[node_id], leader=node_id, leader_recovery_state=0, leader_epoch=max(d.leader_epoch, 0),
                         partition_epoch=max(d.partition_epoch, 0), directories=[])
        elif (rec.type == MetadataRecordType.CONFIG_RECORD and rec.data.resource_type == int(ConfigResourceType.BROKER)
              and rec.data.resource_name == str(old_node_id)):
            rec = record("ConfigRecord", resource_type=rec.data.resource_type, resource_name=str(node_id),
                         name=rec.data.name, value=rec.data.value)
        out.append(rec)
    return out
