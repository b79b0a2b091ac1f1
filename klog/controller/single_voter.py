"""The commit seam: records proposed by the controller become committed entries of ``__cluster_metadata-0``.

:class:`MetadataQuorum` is what the controller and the broker need from a quorum: ``propose(records)`` returns
the offset up to which the log is committed once those records are (the Raft driver implements it by replicating
to a majority); ``committed_end`` is the offset below which everything is committed. :class:`SingleVoterQuorum`
is the quorum of one that ``klog-broker`` without arguments runs: this node is the only voter and the leader, so
an entry is committed as soon as it is durable on its disk (appended and fsynced).

Records of one proposal are committed atomically: up to ``klog.controller.max.records.per.batch`` (10,000, Kafka's
QuorumController bound) records are one batch (Kafka appends a batch atomically); more are wrapped in a metadata
transaction (BeginTransactionRecord ... EndTransactionRecord, KIP-868) over several batches, which the loader
applies all at once or not at all. Kafka itself writes a transaction only for a new cluster's bootstrap records and
refuses an atomic operation of more than 10,000 records; klog commits it as a transaction instead. A log that
ends inside a transaction (the writer died between its batches) is closed by the next writer with an
AbortTransactionRecord before anything else (:func:`transaction_abort`), as Kafka's controller does on activation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

from klog.metadata.records import MetadataRecord, record
from klog.metadata.storage import MetadataLog, QuorumState

__all__ = ["ABORT_REASON", "MAX_RECORDS_PER_BATCH", "MetadataQuorum", "SingleVoterQuorum", "atomic_batches",
           "transaction_abort"]

#: Records per metadata log batch (Kafka's controller bounds a batch by ``max.records.per.user.op``, 10,000).
MAX_RECORDS_PER_BATCH = 10_000
#: The BeginTransactionRecord name of a controller operation committed over several batches.
TRANSACTION_NAME = "klog controller operation"
#: The AbortTransactionRecord reason a new controller writes for a transaction the previous one left open (Kafka's).
ABORT_REASON = "Controller failover"
#: The Raft epoch a single voter leads in: it elects itself once, at epoch 1, as Kafka's KRaft does on a new log.
SINGLE_VOTER_EPOCH = 1


def atomic_batches(records: Sequence[MetadataRecord],
                   max_records: int = MAX_RECORDS_PER_BATCH) -> list[Sequence[MetadataRecord]]:
    """The batches that commit ``records`` as one change: one batch, or a metadata transaction (KIP-868) over
    several when they are more than ``max_records`` (``klog.controller.max.records.per.batch``): the loader applies
    it all or not at all, and a new leader that finds it unfinished aborts it (:func:`transaction_abort`)."""
    if max_records < 3:
        raise ValueError(f"max_records={max_records}: a metadata transaction batch needs room for 3 records")
    if len(records) <= max_records:
        return [records]
    framed = [record("BeginTransactionRecord", name=TRANSACTION_NAME), *records, record("EndTransactionRecord")]
    return [framed[i:i + max_records] for i in range(0, len(framed), max_records)]


def transaction_abort(open_since: int | None) -> list[MetadataRecord]:
    """What a controller that takes over a metadata log writes first (Kafka's ``ActivationRecordsGenerator``): an
    AbortTransactionRecord when the log ends inside a metadata transaction (``open_since``: the offset of its
    BeginTransactionRecord; None: it does not), so its records are dropped by every loader and later records
    are not held back behind it."""
    if open_since is None:
        return []
    return [record("AbortTransactionRecord", reason=ABORT_REASON)]


class MetadataQuorum(Protocol):
    @property
    def committed_end(self) -> int:
        """Offsets below this are committed (the high watermark of the metadata log)."""

    def propose(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one atomic change; returns the committed end offset covering them. Raises
        (OSError, ...) when they cannot be committed; nothing is then committed."""


class SingleVoterQuorum:
    """A quorum of one over a :class:`MetadataLog`: leader at a fixed epoch, commit = durable append."""

    def __init__(self, log: MetadataLog, node_id: int, max_records_per_batch: int = MAX_RECORDS_PER_BATCH) -> None:
        self.log = log
        self.node_id = node_id
        self.max_records_per_batch = max_records_per_batch
        state = log.read_quorum_state()
        if state is None or state.leader_id != node_id or state.leader_epoch < SINGLE_VOTER_EPOCH:
            epoch = max(SINGLE_VOTER_EPOCH, state.leader_epoch if state is not None else -1)
            state = QuorumState(leader_id=node_id, leader_epoch=epoch, voted_id=node_id)
            log.write_quorum_state(state)
        self.epoch = state.leader_epoch
        # Everything on a single voter's disk was committed by it (it never had a leader that could truncate it).
        self._committed_end = log.log_end_offset

    @property
    def committed_end(self) -> int:
        return self._committed_end

    def propose(self, records: Sequence[MetadataRecord]) -> int:
        if not records:
            return self._committed_end
        try:
            for batch in atomic_batches(records, self.max_records_per_batch):
                self.log.append(batch, self.epoch)
            self.log.flush()
        except OSError:
            # not durable, so not committed: cut what was appended, so no later commit takes it along
            with contextlib.suppress(OSError):
                self.log.truncate_to(self._committed_end)
            raise
        self._committed_end = self.log.log_end_offset
        return self._committed_end
