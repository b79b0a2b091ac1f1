"""The committed metadata log -> a :class:`~klog.metadata.MetadataImage`, and the decisions a quorum member
takes from it (pure: no sockets, no clocks; the caller passes ``now_ms``).

- every committed Raft entry (a v2 batch of ``__cluster_metadata-0`` as stored) is decoded with
  :mod:`klog.metadata.records` and replayed by :class:`~klog.metadata.MetadataLoader`;
- the first leader of a new quorum writes the bootstrap records (a metadata transaction with the
  ``metadata.version`` feature level, as ``kafka-storage format`` prepares them) once its own LeaderChange
  entry is applied, which in Raft means every entry of earlier terms is applied too, so a bootstrap
  already committed is always seen first; the cluster id travels with them, in a klog tagged field of the
  BeginTransactionRecord (Kafka's readers keep unknown tags aside), so every member learns the same id;
- the active controller appends a NoOpRecord every ``metadata.max.idle.interval.ms`` (KIP-835);
- every member snapshots its own image after ``metadata.log.max.record.bytes.between.snapshots`` bytes of
  committed batches, or ``metadata.log.max.snapshot.interval.ms`` after the last snapshot if anything was
  committed since (Kafka's ``SnapshotGenerator``), never inside a metadata transaction.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from klog.metadata import (
    MetadataBatch,
    MetadataImage,
    MetadataLoader,
    MetadataRecord,
    MetadataRecordType,
    image_records,
    record,
)
from klog.metadata.delta import MetadataChanges, replay
from klog.metadata.features import LATEST_METADATA_VERSION, release_features
from klog.metadata.image import METADATA_VERSION_FEATURE
from klog.metadata.records import MAX_RECORDS_PER_BATCH, decode_batches, encode_batch
from klog.metadata.storage import kafka_uuid, random_kafka_uuid

from .partition_change import ELR_FEATURE, MIN_INSYNC_REPLICAS, elr_safety_records


__all__ = [
    "BOOTSTRAP_METADATA_VERSION",
    "CLUSTER_ID_TAG",
    "ClusterIdMismatch",
    "MetadataApplier",
    "SnapshotPolicy",
    "bootstrap_batch",
    "bootstrap_batches",
    "bootstrap_cluster_id",
    "new_cluster_id",
    "noop_batch",
]

#: metadata.version a new cluster starts at unless ``klog-broker format`` chose one: the latest klog implements
#: (4.2-IV1), as ``kafka-storage format`` starts at the latest production level
BOOTSTRAP_METADATA_VERSION = LATEST_METADATA_VERSION
#: The tagged field of the bootstrap BeginTransactionRecord holding the cluster id (UTF-8), and of a snapshot's
#: metadata.version FeatureLevelRecord (a member that catches up from a snapshot, the bootstrap entry compacted
#: away, learns the cluster id from it; Kafka's readers skip unknown tags). klog's tags start at 10,000, far
#: above Kafka's (see rust/klog-core/src/raft/control.rs).
CLUSTER_ID_TAG = 10_003
BOOTSTRAP_TRANSACTION_NAME = "Bootstrap records"


class ClusterIdMismatch(RuntimeError):
    """The committed log names another cluster than this node's meta.properties."""


def new_cluster_id() -> str:
    """Kafka's cluster id: 16 random bytes in URL-safe base64 without padding, never starting with ``-``."""
    return kafka_uuid(random_kafka_uuid())


def bootstrap_batch(cluster_id: str, *, metadata_version: int = BOOTSTRAP_METADATA_VERSION,
                    timestamp: int | None = None, extra: Sequence[MetadataRecord] = (),
                    static_min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> bytes:
    """The first data entry of a new quorum: one metadata transaction (``extra``: the records ``klog-broker format``
    added, e.g. ``--add-scram`` credentials)."""
    (batch,) = bootstrap_batches(cluster_id, metadata_version=metadata_version, timestamp=timestamp, extra=extra,
                                 static_min_insync_replicas=static_min_insync_replicas)
    return batch


def bootstrap_batches(cluster_id: str, *, metadata_version: int = BOOTSTRAP_METADATA_VERSION,
                      timestamp: int | None = None, extra: Sequence[MetadataRecord] = (),
                      max_records: int = MAX_RECORDS_PER_BATCH,
                      static_min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> list[bytes]:
    """A new quorum's first data entries: one metadata transaction (Kafka's "Bootstrap records"), in as many
    batches of at most ``max_records`` as it needs (``klog-broker format --add-records`` may add a migrated single
    node's topics); the cluster id rides the BeginTransactionRecord. A leader that dies between them leaves the
    transaction open: the next one aborts it and writes the bootstrap records again (Kafka's
    ``recordsForEmptyLog``)."""
    begin = record("BeginTransactionRecord", name=BOOTSTRAP_TRANSACTION_NAME,
                   _unknown_tags={CLUSTER_ID_TAG: cluster_id.encode()})
    framed = [begin, *bootstrap_records(extra, metadata_version, static_min_insync_replicas=static_min_insync_replicas),
              record("EndTransactionRecord")]
    return [encode_batch(framed[i:i + max_records], timestamp=timestamp) for i in range(0, len(framed), max_records)]


#: the records ``klog-broker format`` adds to a new cluster's bootstrap transaction (Kafka's
#: ``kafka-storage format --add-scram`` credentials), in the metadata log directory, as one metadata batch
BOOTSTRAP_RECORDS_FILE = "bootstrap.records"


def write_bootstrap_records(metadata_dir: str, records: Sequence[MetadataRecord]) -> str:
    import os

    os.makedirs(metadata_dir, exist_ok=True)
    path = os.path.join(metadata_dir, BOOTSTRAP_RECORDS_FILE)
    records = list(records)
    with open(path, "wb") as handle:   # batches of MAX_RECORDS_PER_BATCH (a migrated node's topics may be more)
        for i in range(0, len(records), MAX_RECORDS_PER_BATCH):
            handle.write(encode_batch(records[i:i + MAX_RECORDS_PER_BATCH]))
    os.chmod(path, 0o600)   # salted credentials
    return path


def read_bootstrap_records(metadata_dir: str) -> list[MetadataRecord]:
    """The records ``klog-broker format`` wrote (none when it wrote none)."""
    import os

    path = os.path.join(metadata_dir, BOOTSTRAP_RECORDS_FILE)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    return [rec for batch in decode_batches(data) for rec in batch.records if isinstance(rec, MetadataRecord)]


def bootstrap_records(extra: Sequence[MetadataRecord] = (),
                      metadata_version: int = BOOTSTRAP_METADATA_VERSION, *,
                      static_min_insync_replicas: int = MIN_INSYNC_REPLICAS) -> list[MetadataRecord]:
    """A new cluster's first records: its finalized features (metadata.version first), then the other records
    ``klog-broker format`` wrote (``extra``: --add-scram credentials), then, with ELR on, the cluster-level
    ``min.insync.replicas`` (``static_min_insync_replicas``, the writing controller's own) that Kafka's controller
    writes into a new cluster's bootstrap transaction. The features are those ``extra`` holds (``klog-broker
    format --release-version / --feature`` writes every one), else the defaults of ``metadata_version``'s release
    (as ``kafka-storage format`` chooses them)."""
    chosen = {r.data.name: r.data.feature_level for r in extra if r.type == MetadataRecordType.FEATURE_LEVEL_RECORD}
    levels = chosen if METADATA_VERSION_FEATURE in chosen else release_features(metadata_version)
    features = sorted(levels.items(), key=lambda kv: (kv[0] != METADATA_VERSION_FEATURE, kv[0]))
    others = [r for r in extra if r.type != MetadataRecordType.FEATURE_LEVEL_RECORD]
    safety: list[MetadataRecord] = []
    if levels.get(ELR_FEATURE, 0) >= 1:   # the broker configs they set, as the image of them holds them
        configured, _ = replay(MetadataImage(), [r for r in others if r.type == MetadataRecordType.CONFIG_RECORD])
        safety = elr_safety_records(configured, static_min_insync_replicas)
    return [*(record("FeatureLevelRecord", name=name, feature_level=level) for name, level in features if level),
            *others, *safety]


def noop_batch(timestamp: int | None = None) -> bytes:
    return encode_batch([record("NoOpRecord")], timestamp=timestamp)


def bootstrap_cluster_id(batches: Sequence[MetadataBatch]) -> str | None:
    """The cluster id a bootstrap transaction in ``batches`` carries, or a snapshot's metadata.version record,
    if any."""
    for b in batches:
        if b.is_control:
            continue
        for rec in b.records:
            if isinstance(rec, MetadataRecord) and rec.type in (MetadataRecordType.BEGIN_TRANSACTION_RECORD,
                                                                 MetadataRecordType.FEATURE_LEVEL_RECORD):
                tags = rec.data.__dict__.get("_unknown_tags") or {}
                raw = tags.get(CLUSTER_ID_TAG)
                if raw:
                    return bytes(raw).decode()
    return None


@dataclasses.dataclass(frozen=True)
class SnapshotPolicy:
    max_bytes_between: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    max_interval_ms: int = 3_600_000  # metadata.log.max.snapshot.interval.ms (0: no time-based snapshots)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SnapshotPolicy:
        """Kafka's keys, from the broker's config."""
        return cls(int(config["metadata.log.max.record.bytes.between.snapshots"]),
                   int(config["metadata.log.max.snapshot.interval.ms"]))


class MetadataApplier:
    """Owns the loader of one quorum member: committed entries in (in log order), image and decisions out.

    Both quorums use it: the Raft member (:mod:`klog.controller.node`) applies raft entries with :meth:`apply`
    (``applied_index``: the raft index); the single voter (:mod:`klog.broker.cluster_metadata`) replays the batches
    it committed with :meth:`replay` (``applied_index``: the metadata log's committed end offset). Either way
    :meth:`snapshot_due` says when to snapshot the image, by Kafka's two keys."""

    def __init__(self, cluster_id: str | None, policy: SnapshotPolicy, now_ms: float,
                 loader: MetadataLoader | None = None) -> None:
        self.loader = loader or MetadataLoader()
        self.cluster_id = cluster_id
        self.policy = policy
        #: the last entry applied (0: none): a raft index, or the single voter's committed end offset
        self.applied_index = 0
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
        self.snapshot_index = 0
        #: called with (image, changes) after every replay and snapshot load (a broker publishes them)
        self.on_changes: Callable[[MetadataImage, MetadataChanges], None] | None = None

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    @property
    def bootstrapped(self) -> bool:
        return self.loader.image.metadata_version is not None

    def apply(self, index: int, kind: str, data: bytes) -> str | None:
        """Apply committed entry ``index``. Returns the cluster id when this entry establishes it for a node
        that had none; raises :class:`ClusterIdMismatch` when it names another cluster."""
        assert index > self.applied_index, f"entry {index} applied after {self.applied_index}"
        self.applied_index = index
        if kind == "conf_change":  # raft's own bookkeeping (a KRAFT_VOTERS control batch on disk)
            return None
        batches = decode_batches(data)
        learnt = self._learn_cluster_id(batches, f"the metadata log at index {index}")
        self.replay(batches, len(data))
        return learnt

    def _learn_cluster_id(self, batches: Sequence[MetadataBatch], where: str) -> str | None:
        """The cluster id ``batches`` carry when it is new to this node; ClusterIdMismatch when it is another."""
        cid = bootstrap_cluster_id(batches)
        if cid is None or cid == self.cluster_id:
            return None
        if self.cluster_id is not None:
            raise ClusterIdMismatch(f"{where} belongs to cluster {cid}, but meta.properties says "
                                    f"cluster.id={self.cluster_id}")
        self.cluster_id = cid
        return cid

    def replay(self, batches: Sequence[MetadataBatch], size_bytes: int) -> MetadataChanges:
        """Committed batches (``size_bytes`` of log) into the image; they count towards the next snapshot."""
        changes = self.loader.apply(batches)
        self.bytes_since_snapshot += size_bytes
        if self.on_changes is not None:
            self.on_changes(self.loader.image, changes)
        return changes

    def load_snapshot(self, index: int, batches: Sequence[MetadataBatch], end_offset: int, epoch: int,
                      last_contained_log_time_ms: int, now_ms: float) -> str | None:
        """Replace the image with a snapshot's. Returns the cluster id when the snapshot establishes it for a
        node that had none; raises :class:`ClusterIdMismatch` when it names another cluster."""
        learnt = self._learn_cluster_id(batches, f"the metadata snapshot at index {index}")
        changes = self.loader.load_snapshot(batches, end_offset=end_offset, epoch=epoch,
                                            last_contained_log_time_ms=last_contained_log_time_ms)
        self.applied_index = max(self.applied_index, index)
        self.snapshot_index = index
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
        if self.on_changes is not None:
            self.on_changes(self.loader.image, changes)
        return learnt

    def needs_bootstrap(self, *, is_leader: bool, own_leader_change_applied: bool) -> bool:
        """Whether a leader that applied its own LeaderChange writes the bootstrap records (a bootstrap transaction
        a previous leader left open is aborted first: :func:`klog.controller.single_voter.transaction_abort`)."""
        return is_leader and own_leader_change_applied and not self.bootstrapped

    def snapshot_due(self, now_ms: float) -> bool:
        if self.loader.in_transaction or self.applied_index <= self.snapshot_index or self.bytes_since_snapshot == 0:
            return False
        if self.bytes_since_snapshot >= self.policy.max_bytes_between:
            return True
        return self.policy.max_interval_ms > 0 and now_ms - self.last_snapshot_ms >= self.policy.max_interval_ms

    def snapshot_taken(self, index: int, now_ms: float) -> None:
        self.snapshot_index = index
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms

    def snapshot_content(self) -> bytes:
        """The image as record batches (the data part of a ``.checkpoint``)."""
        records = image_records(self.loader.image)
        if self.cluster_id is not None:
            records = [_with_cluster_id(r, self.cluster_id) for r in records]
        return b"".join(encode_batch(records[i:i + MAX_RECORDS_PER_BATCH])
                        for i in range(0, len(records), MAX_RECORDS_PER_BATCH))


def _with_cluster_id(rec: MetadataRecord, cluster_id: str) -> MetadataRecord:
    """The metadata.version FeatureLevelRecord tagged with the cluster id (any other record as it is)."""
    if rec.type != MetadataRecordType.FEATURE_LEVEL_RECORD or rec.data.name != METADATA_VERSION_FEATURE:
        return rec
    return record("FeatureLevelRecord", name=rec.data.name, feature_level=rec.data.feature_level,
                  _unknown_tags={CLUSTER_ID_TAG: cluster_id.encode()})
