"""Committed metadata batches in, images out (Kafka's ``MetadataLoader``, without threads or publishers).

The loader owns the current image. :meth:`MetadataLoader.load_snapshot` replaces it with a snapshot's content;
:meth:`MetadataLoader.apply` replays committed log batches on it. Metadata transactions (KIP-868:
BeginTransactionRecord ... End/AbortTransactionRecord, e.g. the bootstrap records of a new cluster) are applied
atomically: records of an open transaction are held back until its end, dropped on abort, and the image's
``highest_offset`` stays before the transaction until then. :class:`StartupCatchUp` is the rule of when a node
that starts publishes its first image (Kafka's ``MetadataLoader`` "catching up"). Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Iterable

from .delta import MetadataChanges, MetadataDelta, MetadataReplayError, PartitionChange
from .image import EMPTY_IMAGE, MetadataImage
from .records import AnyRecord, MetadataBatch, MetadataRecord, MetadataRecordType

__all__ = ["MAX_TRANSACTION_RECORDS", "MetadataLoader", "StartupCatchUp", "image_changes"]

#: Records an open metadata transaction may hold back before the loader refuses it (Kafka bounds a
#: controller transaction by ``max.records.per.user.op`` batches; this bound keeps memory finite).
MAX_TRANSACTION_RECORDS = 1_000_000


class MetadataLoader:
    def __init__(self, image: MetadataImage = EMPTY_IMAGE) -> None:
        self.image = image
        self._txn: list[tuple[int, int, int, AnyRecord]] | None = None  # (offset, epoch, time, record)
        self._txn_start: int | None = None

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    @property
    def transaction_start(self) -> int | None:
        """The offset of the open transaction's BeginTransactionRecord (None: no transaction is open)."""
        return self._txn_start

    def load_snapshot(self, batches: Iterable[MetadataBatch], *, end_offset: int, epoch: int,
                      last_contained_log_time_ms: int = -1) -> MetadataChanges:
        """Replace the image by a snapshot's records (snapshot id ``end_offset``-``epoch``): the new image's
        highest offset is ``end_offset - 1``. Returns what changed against the previous image."""
        delta = MetadataDelta(EMPTY_IMAGE.with_provenance(self.image.cluster_id, -1, -1, -1))
        for b in batches:
            for i, rec in enumerate(b.records):
                delta.replay(rec, b.base_offset + i)
        delta.highest_offset = end_offset - 1
        delta.epoch = epoch
        new, _ = delta.apply(log_time_ms=last_contained_log_time_ms)
        old = self.image
        self.image = new
        self._txn = None
        self._txn_start = None
        return image_changes(old, new)

    def apply(self, batches: Iterable[MetadataBatch]) -> MetadataChanges:
        """Replay committed batches (in log order, starting after the image's highest offset)."""
        delta = MetadataDelta(self.image)
        for b in batches:
            if b.base_offset <= self.image.highest_offset:
                raise MetadataReplayError(f"batch at offset {b.base_offset} is not after the image's highest "
                                          f"offset {self.image.highest_offset}", offset=b.base_offset)
            for i, rec in enumerate(b.records):
                self._one(delta, b.base_offset + i, b.epoch, b.append_timestamp, rec)
            if self._txn is None:
                delta.last_log_time_ms = b.append_timestamp
        self.image, changes = delta.apply()
        return changes

    def _one(self, delta: MetadataDelta, offset: int, epoch: int, ts: int, rec: AnyRecord) -> None:
        kind = rec.type if isinstance(rec, MetadataRecord) else None
        if kind == MetadataRecordType.BEGIN_TRANSACTION_RECORD:
            if self._txn is not None:
                raise MetadataReplayError(f"BeginTransactionRecord inside the transaction begun at offset "
                                          f"{self._txn_start}", offset=offset)
            self._txn, self._txn_start = [], offset
            return
        if self._txn is not None:
            if kind == MetadataRecordType.END_TRANSACTION_RECORD:
                for o, e, t, r in self._txn:
                    delta.replay(r, o, e)
                    delta.last_log_time_ms = t
                self._txn = self._txn_start = None
                delta.replay(rec, offset, epoch)
            elif kind == MetadataRecordType.ABORT_TRANSACTION_RECORD:
                self._txn = self._txn_start = None
                delta.replay(rec, offset, epoch)
            else:
                if len(self._txn) >= MAX_TRANSACTION_RECORDS:
                    raise MetadataReplayError(f"the transaction begun at offset {self._txn_start} holds more than "
                                              f"MAX_TRANSACTION_RECORDS={MAX_TRANSACTION_RECORDS} records",
                                              offset=offset)
                self._txn.append((offset, epoch, ts, rec))
            return
        if kind in (MetadataRecordType.END_TRANSACTION_RECORD, MetadataRecordType.ABORT_TRANSACTION_RECORD):
            raise MetadataReplayError(f"{rec.name} without a BeginTransactionRecord", offset=offset)
        delta.replay(rec, offset, epoch)


class StartupCatchUp:
    """When a starting node publishes its first image, as Kafka's ``MetadataLoader.stillNeedToCatchUp``: nothing
    is published while the node catches up with the quorum, so the broker never acts on an image the quorum has
    already moved past (a topic deleted since, a leadership moved since); the first image published is the one at
    the high watermark, whole, and every later one is published as it is applied.

    It is still catching up while the high watermark is not known (Kafka's broker learns it from its first fetch
    from the leader), while what it loaded ends before the high watermark, and while it has loaded no record yet
    (here: no ``metadata.version``, which a cluster's first records hold). Once caught up it stays caught up.
    ``high_watermark`` is exclusive (the index after the last committed entry), ``loaded`` the last entry applied,
    in the same numbering (raft indices on a quorum)."""

    def __init__(self) -> None:
        self.catching_up = True

    def still_catching_up(self, high_watermark: int | None, loaded: int, seen_record: bool) -> str | None:
        """Why the node is still catching up (None once it is caught up; then None ever after)."""
        if not self.catching_up:
            return None
        if high_watermark is None:
            return "the high watermark is not known yet"
        if high_watermark - 1 > loaded:
            return f"it has loaded up to {loaded}, but the high watermark is {high_watermark}"
        if not seen_record:
            return f"it has loaded no metadata record as of {loaded} (high watermark {high_watermark})"
        self.catching_up = False
        return None


def image_changes(old: MetadataImage, new: MetadataImage) -> MetadataChanges:
    """What differs between two images (used when a snapshot replaces the image wholesale)."""

    created = {tid: t.name for tid, t in new.topics_by_id.items() if tid not in old.topics_by_id}
    deleted = {tid: t.name for tid, t in old.topics_by_id.items() if tid not in new.topics_by_id}
    parts = []
    for tid, t in new.topics_by_id.items():
        before = old.topics_by_id.get(tid)
        for pid, p in sorted(t.partitions.items()):
            prev = before.partitions.get(pid) if before is not None else None
            if prev != p:
                parts.append(PartitionChange(tid, t.name, pid, prev, p))
    brokers = {}
    for bid in set(old.brokers) | set(new.brokers):
        a, b = old.brokers.get(bid), new.brokers.get(bid)
        if a != b:
            brokers[bid] = (a, b)
    return MetadataChanges(
        created_topics=created, deleted_topics=deleted, changed_partitions=tuple(parts), changed_brokers=brokers,
        changed_controllers=frozenset(k for k in set(old.controllers) | set(new.controllers)
                                      if old.controllers.get(k) != new.controllers.get(k)),
        changed_configs=frozenset(k for k in set(old.configs) | set(new.configs)
                                  if old.configs.get(k) != new.configs.get(k)),
        features_changed=old.features != new.features,
        producer_ids_changed=old.next_producer_id != new.next_producer_id,
    )
