"""The commit seam: records proposed by the controller become committed entries of ``__cluster_metadata-0``.

:class:`MetadataQuorum` is what the controller and the broker need from a quorum: ``propose(records)`` returns
the offset up to which the log is committed once those records are (the Raft driver implements it by replicating
to a majority); ``committed_end`` is the offset below which everything is committed. :class:`SingleVoterQuorum`
is the quorum of one that ``klog-broker`` without arguments runs: this node is the only voter and the leader, so
an entry is committed as soon as it is durable on its disk (appended and fsynced).

Records of one proposal are committed atomically: up to ``MAX_RECORDS_PER_BATCH`` records are one batch (Kafka
appends a batch atomically); more are wrapped in a metadata transaction (BeginTransactionRecord ...
EndTransactionRecord, KIP-868) over several batches, which the loader applies all at once or not at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Protocol

from klog.metadata.records import MetadataRecord, record
from klog.metadata.storage import MetadataLog, QuorumState

__all__ = ["MAX_RECORDS_PER_BATCH", "MetadataQuorum", "SingleVoterQuorum", "atomic_batches"]

#: Records per metadata log batch (Kafka's controller bounds a batch by ``max.records.per.user.op``, 10,000).
MAX_RECORDS_PER_BATCH = 10_000
#: The Raft epoch a single voter leads in: it elects itself once, at epoch 1, as Kafka's KRaft does on a new log.
SINGLE_VOTER_EPOCH = 1


def atomic_batches(records: Sequence[MetadataRecord]) -> list[Sequence[MetadataRecord]]:
    """The batches that commit ``records`` as one change: one batch, or a metadata transaction (KIP-868) over
    several when they are more than MAX_RECORDS_PER_BATCH (the loader applies it all or not at all)."""
    if len(records) <= MAX_RECORDS_PER_BATCH:
        return [records]
    framed = [record("BeginTransactionRecord", name="klog controller operation"), *records,
              record("EndTransactionRecord")]
    return [framed[i:i + MAX_RECORDS_PER_BATCH] for i in range(0, len(framed), MAX_RECORDS_PER_BATCH)]


class MetadataQuorum(Protocol):
    @property
    def committed_end(self) -> int:
        """Offsets below this are committed (the high watermark of the metadata log)."""

    def propose(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one atomic change; returns the committed end offset covering them. Raises
        (OSError, ...) when they cannot be committed; nothing is then committed."""


class SingleVoterQuorum:
    """A quorum of one over a :class:`MetadataLog`: leader at a fixed epoch, commit = durable append."""

    def __init__(self, log: MetadataLog, node_id: int) -> None:
        self.log = log
        self.node_id = node_id
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
            for batch in atomic_batches(records):
                self.log.append(batch, self.epoch)
            self.log.flush()
        except OSError:
            # not durable, so not committed: cut what was appended, so no later commit takes it along
            with contextlib.suppress(OSError):
                self.log.truncate_to(self._committed_end)
            raise
        self._committed_end = self.log.log_end_offset
        return self._committed_end
