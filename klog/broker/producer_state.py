"""Idempotent-producer state: producer id allocation and per-partition sequence enforcement.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), per partition and producer id:
- a batch whose (epoch, first sequence, last sequence) matches one of the last 5 batches appended is a retry:
  it is answered with the original offsets and not appended again;
- an older epoch is fenced (INVALID_PRODUCER_EPOCH); a newer epoch must start at sequence 0 unless the
  producer was unknown;
- otherwise the first sequence must follow the last one (wrapping after 2**31 - 1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER. An unknown producer (new, expired, or its data deleted) may start anywhere.

All work is per batch (one per partition per request), never per record. Each partition's producers live in a
``klog._native.ProducerTable`` (Rust, ``klog_core::storage::producer_state``) set on the partition's log, as Kafka's
UnifiedLog holds its ProducerStateManager: the native Produce paths check, append and record a batch under the
table's lock; the Python path ``check``s with ``hold=True`` and ``update``s (or ``release``s) after its append, and
the native paths leave a held table's batches to it. The transactions (open, completed, aborted) stay here, in
Python. State is kept in memory and snapshotted to ``klog-producer-state.json`` (with each partition's log end
offset) at every offset checkpoint and at shutdown. At startup the snapshot is loaded and the log written after it
is replayed from the batch headers, as Kafka rebuilds from its .snapshot files, so retries after a crash are still
recognised. Producer ids come from persisted blocks so they are never reused after a restart.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from klog import _native
from klog.protocol.errors import ErrorCode

log = logging.getLogger("klog.broker.producers")

STATE_FILE = "klog-producer-state.json"
#: single-node klog's producer id block file (migrated into the metadata log: klog.controller.producer_ids)
ID_BLOCK_FILE = "klog-producer-id-block"

BATCH_HEADER_SIZE = 61
#: record batch v2 header (see klog.broker.handlers.produce)
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
#: KIP-534: BaseTimestamp is the batch's delete horizon (the cleaner set it on a tombstone's or marker's batch)
DELETE_HORIZON_FLAG = 0x40
#: control record types (the key's int16 type, after its int16 version)
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
#: completed transactions per partition remembered for a follower's truncation (their markers may be cut off)
COMPLETED_TO_RETAIN = 1000
#: ``PartitionLog.first_unstable_offset`` of a partition without transactions: no bound (the log's own initial value)
NO_UNSTABLE_OFFSET = 2**63 - 1

NONE = ErrorCode.NONE
#: Kafka's code for each verdict of ``klog._native.ProducerTable``'s checks (append or a retry's duplicate, an
#: older epoch, a sequence out of order, a marker from an older coordinator epoch)
VERDICT_CODES = (NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                 ErrorCode.TRANSACTION_COORDINATOR_FENCED)
INVALID_TXN_STATE = ErrorCode.INVALID_TXN_STATE


@dataclass
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int          # max timestamp of the batch (-1 unknown)
    log_append_time: int = -1


@dataclass
class CompletedTxn:
    """A transaction a marker ended on one partition: producer, first offset, the marker's offset."""
    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass
class PartitionTxns:
    """One partition's transactions (see the module docstring)."""
    #: producer id -> first offset of its ongoing transaction
    ongoing: dict[int, int] = field(default_factory=dict)
    #: the latest completed transactions, oldest first (for the LSO until the ISR has their markers, and for a
    #: follower that truncates a marker away)
    completed: deque[CompletedTxn] = field(default_factory=lambda: deque(maxlen=COMPLETED_TO_RETAIN))
    #: every aborted transaction still in the log, by marker offset (Kafka's .txnindex entries)
    aborted: list[CompletedTxn] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not self.ongoing and not self.completed and not self.aborted


class VerificationGuard:
    """A producer's verification of a partition (Kafka's VerificationStateEntry): shared by its requests asking
    the transaction coordinator at once; ``lowest_sequence``: the lowest first sequence of their batches at
    ``epoch`` (None: batches without sequences, a TxnOffsetCommit's)."""

    __slots__ = ("epoch", "lowest_sequence", "holders")

    def __init__(self, epoch: int, sequence: int | None) -> None:
        self.epoch = epoch
        self.lowest_sequence = sequence
        #: the requests holding it
        self.holders = 0

    def saw(self, epoch: int, sequence: int | None) -> None:
        """Another request's batch (Kafka's maybeUpdateLowestSequenceAndEpoch)."""
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence
        elif epoch == self.epoch and sequence is not None:
            self.lowest_sequence = sequence if self.lowest_sequence is None else min(self.lowest_sequence, sequence)

    def out_of_order(self, sequence: int) -> bool:
        """Whether a batch starting at ``sequence`` would go ahead of a lower sequence still being verified (Kafka's
        ProducerAppendInfo.checkSequence refuses it with OUT_OF_ORDER_SEQUENCE_NUMBER)."""
        return self.lowest_sequence is not None and sequence > self.lowest_sequence


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def control_type(batch: bytes, pos: int, size: int) -> int:
    """The type of the (first) control record of the control batch at ``pos``: COMMIT (1), ABORT (0), or -1."""
    return control_marker(batch, pos, size)[0]


def control_marker(batch: bytes, pos: int, size: int) -> tuple[int, int]:
    """(type, coordinator epoch) of the (first) control record of the control batch at ``pos``: the type COMMIT
    (1), ABORT (0) or -1; the epoch from an ``EndTransactionMarker`` value (version, coordinator epoch), else -1."""
    try:
        p = pos + BATCH_HEADER_SIZE
        _length, p = _varint(batch, p)
        p += 1                                  # attributes
        _, p = _varint(batch, p)                # timestamp delta
        _, p = _varint(batch, p)                # offset delta
        key_length, p = _varint(batch, p)
        if key_length < 4 or p + 4 > pos + size:
            return -1, -1
        kind = int.from_bytes(batch[p + 2:p + 4], "big", signed=True)
        p += key_length
        value_length, p = _varint(batch, p)
        if value_length < 6 or p + 6 > pos + size:
            return kind, -1
        return kind, int.from_bytes(batch[p + 2:p + 6], "big", signed=True)
    except (IndexError, ValueError):
        return -1, -1


class ProducerStateManager:
    def __init__(self, log_dir: str, expiration_ms: int,
                 on_txn_started: Callable[[str, int, int], None] | None = None,
                 on_txns_changed: Callable[[str, int, CompletedTxn | None, bool], None] | None = None) -> None:
        self.log_dir = log_dir
        self.expiration_ms = expiration_ms
        #: each partition's producers (its log holds the same table: ``PartitionLog.producers``)
        self._state: dict[tuple[str, int], _native.ProducerTable] = {}
        self._txns: dict[tuple[str, int], PartitionTxns] = {}
        #: (topic, partition, producer id) -> the verification its transaction coordinator is asked for (Kafka's
        #: VerificationGuard): a marker of the producer on the partition ends it, so a batch verified before that
        #: marker does not open a transaction after it (which no marker would ever close)
        self._verifying: dict[tuple[str, int, int], VerificationGuard] = {}
        #: called with (topic, partition, first offset) when a producer's transaction starts on a partition (the
        #: broker keeps the log cleaner below it at once)
        self.on_txn_started = on_txn_started
        #: called with (topic, partition, the aborted transaction added or None, whether the aborted transactions
        #: were replaced) after a transaction of the partition ended or its aborted transactions changed otherwise
        #: (the broker sets the first unstable offset and the aborted transactions on the partition's log again,
        #: where the native Fetch path reads them for consumers)
        self.on_txns_changed = on_txns_changed

    # ---- producer ids (handed out by klog.broker.producer_id_blocks) ---------------------------------------

    def legacy_block_path(self) -> str:
        """Where single-node klog kept the end of its last producer id block (read once, to migrate)."""
        return os.path.join(self.log_dir, ID_BLOCK_FILE)

    def legacy_block_end(self) -> int:
        """The end of the last block single-node klog reserved in its file (0: none), to start after it."""
        try:
            with open(self.legacy_block_path(), encoding="utf-8") as handle:
                return int(handle.read().strip() or 0)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{self.legacy_block_path()}: unreadable producer id block ({exc})") from exc

    # ---- sequence checks ----------------------------------------------------------------------------

    def table(self, topic: str, partition: int) -> _native.ProducerTable:
        """The partition's producer table (made when first needed; the broker sets it on the partition's log)."""
        table = self._state.get((topic, partition))
        if table is None:
            table = self._state[(topic, partition)] = _native.ProducerTable()
        return table

    def check(self, topic: str, partition: int, producer_id: int, epoch: int, first_seq: int,
              last_seq: int, *, hold: bool = False) -> tuple[int, BatchMetadata | None]:
        """Check a batch before appending: (error code, duplicate batch or None).

        (NONE, metadata) means a retry of an appended batch: answer with ``metadata``'s offsets. ``hold``: a new
        batch holds the partition's table until :meth:`update` records it or :meth:`release` (the append failed):
        the native paths append none of the partition's producers' batches meanwhile."""
        table = self.table(topic, partition) if hold else self._state.get((topic, partition))
        if table is None:
            return NONE, None
        verdict, duplicate = table.check(producer_id, epoch, first_seq, last_seq, hold)
        return VERDICT_CODES[verdict], (BatchMetadata(*duplicate) if duplicate is not None else None)

    def release(self, topic: str, partition: int) -> None:
        """End a :meth:`check`'s hold without a record."""
        table = self._state.get((topic, partition))
        if table is not None:
            table.release()

    def check_transactional(self, topic: str, partition: int, producer_id: int, transactional: bool) -> int:
        """Kafka's rule for a producer with a transaction open on the partition: its batches must all be
        transactional until a marker ends it (INVALID_TXN_STATE)."""
        txns = self._txns.get((topic, partition))
        if not transactional and txns is not None and producer_id in txns.ongoing:
            return INVALID_TXN_STATE
        return NONE

    def update(self, topic: str, partition: int, producer_id: int, epoch: int, batch: BatchMetadata,
               now_ms: int, transactional: bool = False) -> None:
        """Record an appended batch (ending a :meth:`check`'s hold)."""
        self.table(topic, partition).update(producer_id, epoch, (batch.first_seq, batch.last_seq, batch.base_offset,
                                                                 batch.last_offset, batch.timestamp,
                                                                 batch.log_append_time), now_ms)
        if transactional:
            self.txn_appended(topic, partition, producer_id, batch.base_offset)

    def txn_appended(self, topic: str, partition: int, producer_id: int, base_offset: int) -> None:
        """A transactional batch of the producer was appended at ``base_offset`` (and recorded in the table: the
        native paths record theirs there themselves): it opens the producer's transaction on the partition."""
        # the verification is over: from here the open transaction admits the producer's batches (Kafka
        # clears the producer's VerificationStateEntry at any transactional append)
        self._verifying.pop((topic, partition, producer_id), None)
        txns = self._txns.get((topic, partition))
        if txns is None:
            txns = self._txns[(topic, partition)] = PartitionTxns()
        if producer_id not in txns.ongoing:
            txns.ongoing[producer_id] = base_offset
            if self.on_txn_started is not None:
                self.on_txn_started(topic, partition, base_offset)

    # ---- transactions -------------------------------------------------------------------------------

    def check_marker(self, topic: str, partition: int, producer_id: int, epoch: int,
                     coordinator_epoch: int | None = None, transaction_version: int = 0) -> int:
        """A COMMIT/ABORT marker older than the producer's epoch on this partition is refused (Kafka fences it:
        a delayed marker of an earlier transaction must not end a later one), and so is one from a coordinator
        epoch older than the producer's last marker's (TRANSACTION_COORDINATOR_FENCED: a deposed coordinator).
        Under transaction protocol v2 (``transaction_version`` 2) every end bumps the epoch, so a marker must be
        above the producer's epoch: one at it is a late marker of an earlier transaction (or a retry of one
        written already) and must not end the transaction that epoch runs now."""
        table = self._state.get((topic, partition))
        if table is None:
            return NONE
        return VERDICT_CODES[table.check_marker(producer_id, epoch, coordinator_epoch, transaction_version)]

    def start_verification(self, topic: str, partition: int, producer_id: int, epoch: int = -1,
                           sequence: int | None = None) -> VerificationGuard:
        """Before asking the producer's coordinator whether the partition is in its transaction: the guard
        :meth:`verification_holds` checks after the answer. One per partition and producer (Kafka's
        VerificationStateEntry): concurrent requests share it, and it keeps the lowest first ``sequence`` of their
        batches at ``epoch`` (a later batch is not appended ahead of it). It ends when a transactional batch or
        marker of the producer is appended to the partition, or when no request holds it any more; a request
        whose batch is refused does not end it for the others."""
        guard = self._verifying.get((topic, partition, producer_id))
        if guard is None:
            guard = self._verifying[(topic, partition, producer_id)] = VerificationGuard(epoch, sequence)
        else:
            guard.saw(epoch, sequence)
        guard.holders += 1
        return guard

    def verification_holds(self, topic: str, partition: int, producer_id: int, token: object) -> bool:
        """Whether no transactional batch or marker of the producer landed on the partition since ``token``
        was started."""
        return self._verifying.get((topic, partition, producer_id)) is token

    def verifying(self, topic: str, partition: int, producer_id: int) -> bool:
        """Whether a request of the producer is verifying the partition (its guard is current)."""
        return (topic, partition, producer_id) in self._verifying

    def end_verification(self, topic: str, partition: int, producer_id: int, token: VerificationGuard) -> None:
        """A request holding ``token`` is done with it (its batch appended, or refused): forgotten once no
        request holds it (a marker or an append may have ended it already)."""
        token.holders -= 1
        key = (topic, partition, producer_id)
        if token.holders <= 0 and self._verifying.get(key) is token:
            del self._verifying[key]

    def in_transaction(self, topic: str, partition: int, producer_id: int, epoch: int) -> bool:
        """Whether the producer has a transaction open on the partition at ``epoch`` (Kafka's
        ``hasOngoingTransaction(producerId, epoch)``: a batch of a later epoch starts a new transaction)."""
        txns = self._txns.get((topic, partition))
        if txns is None or producer_id not in txns.ongoing:
            return False
        table = self._state.get((topic, partition))
        return table is not None and table.epoch(producer_id) == epoch

    def complete_txn(self, topic: str, partition: int, producer_id: int, epoch: int, marker_offset: int,
                     commit: bool, now_ms: int, coordinator_epoch: int = -1,
                     marker_timestamp: int | None = None) -> CompletedTxn | None:
        """A marker at ``marker_offset`` ended the producer's transaction on this partition (if it had one):
        returns the completed transaction. The producer's epoch moves to the marker's (protocol v2 bumps it)."""
        self._verifying.pop((topic, partition, producer_id), None)   # a batch verified before it is refused
        # a new epoch restarts the sequences
        self.table(topic, partition).end_transaction(producer_id, epoch, now_ms, coordinator_epoch,
                                                     now_ms if marker_timestamp is None else marker_timestamp)
        txns = self._txns.get((topic, partition))
        if txns is None or producer_id not in txns.ongoing:
            return None
        first = txns.ongoing.pop(producer_id)
        done = CompletedTxn(producer_id, first, marker_offset, not commit)
        txns.completed.append(done)
        added = None
        if not commit and not (txns.aborted and txns.aborted[-1].last_offset >= marker_offset):
            # (a restart replaying markers the index already has adds nothing)
            txns.aborted.append(done)
            added = done
        self._changed(topic, partition, added, replaced=False)
        return done

    def _changed(self, topic: str, partition: int, added: CompletedTxn | None = None, *, replaced: bool = True) -> None:
        if self.on_txns_changed is not None:
            self.on_txns_changed(topic, partition, added, replaced)

    def restore_aborted(self, topic: str, partition: int, entries: list[tuple[int, int, int, int]]) -> None:
        """The aborted transactions of a partition as its .txnindex files list them (producer id, first offset,
        last offset, last stable offset), replacing what the snapshot had."""
        txns = self._txns.get((topic, partition))
        if txns is None:
            txns = self._txns[(topic, partition)] = PartitionTxns()
        txns.aborted = [CompletedTxn(pid, first, last, True) for pid, first, last, _ in entries]
        self._changed(topic, partition)

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int, log_start_offset: int = 0) -> int:
        """The first offset a read_committed consumer may not read: the first offset of the earliest transaction
        still open or whose marker the ISR does not have, else the high watermark; never below the log's start
        (an open transaction's first records deleted by DeleteRecords), as Kafka raises its first unstable offset
        to the log start offset."""
        first_unstable = self.first_unstable_offset(topic, partition, high_watermark)
        return min(high_watermark, max(log_start_offset, first_unstable))

    def first_unstable_offset(self, topic: str, partition: int, high_watermark: int) -> int:
        """The bound the partition's log keeps for its transactions (``PartitionLog.first_unstable_offset``: the
        cleaner stays below it, the native front moves the high watermark no further, the native Fetch path's
        read_committed consumers read no further), Kafka's
        ``firstUnstableOffset``: the first offset of the earliest transaction still open or whose marker the ISR
        does not have (at ``high_watermark``), else none (NO_UNSTABLE_OFFSET), also on a partition whose
        transactions have all ended (its aborted ones stay in its state for read_committed fetches, but bound
        nothing). The log itself lowers it when a transactional batch is appended, before this state learns the
        transaction."""
        txns = self._txns.get((topic, partition))
        if txns is None:
            return NO_UNSTABLE_OFFSET
        bound = min(txns.ongoing.values(), default=NO_UNSTABLE_OFFSET)
        for done in reversed(txns.completed):
            if done.last_offset < high_watermark:
                break   # markers are appended in offset order: the older ones are replicated too
            bound = min(bound, done.first_offset)
        return bound

    def aborted_txns(self, topic: str, partition: int, fetch_offset: int, upper_offset: int) -> list[CompletedTxn]:
        """The aborted transactions a read_committed fetch of [fetch_offset, upper_offset) must skip: those that
        overlap the range (Kafka's collectAbortedTransactions)."""
        txns = self._txns.get((topic, partition))
        if txns is None or not txns.aborted:
            return []
        return [a for a in txns.aborted if a.last_offset >= fetch_offset and a.first_offset < upper_offset]

    def active_producers(self, topic: str, partition: int) -> list[dict[str, int]]:
        """The producers this partition's state holds, as DescribeProducers answers them (Kafka's
        ``UnifiedLog.activeProducers``): id, epoch, last sequence, last timestamp, coordinator epoch and the
        first offset of its open transaction (-1: none)."""
        txns = self._txns.get((topic, partition))
        ongoing = txns.ongoing if txns is not None else {}
        table = self._state.get((topic, partition))
        return [{"producer_id": pid, "producer_epoch": epoch, "last_sequence": last_seq,
                 "last_timestamp": last_timestamp, "coordinator_epoch": coordinator_epoch,
                 "current_txn_start_offset": ongoing.get(pid, -1)}
                for pid, epoch, last_seq, last_timestamp, coordinator_epoch, _, _ in
                (table.producers() if table is not None else [])]

    def ongoing_txns(self, topic: str, partition: int) -> dict[int, int]:
        """Producer id -> first offset of each ongoing transaction (DescribeProducers, tests)."""
        txns = self._txns.get((topic, partition))
        return dict(txns.ongoing) if txns is not None else {}

    def aborted_in_log(self, topic: str, partition: int) -> list[CompletedTxn]:
        """The aborted transactions of the partition (its .txnindex entries), oldest first."""
        txns = self._txns.get((topic, partition))
        return list(txns.aborted) if txns is not None else []

    def drop_aborted(self, topic: str, partition: int, markers: set[tuple[int, int]]) -> None:
        """Forget the aborted transactions named by (producer id, marker offset)."""
        txns = self._txns.get((topic, partition))
        if txns is not None:
            txns.aborted = [a for a in txns.aborted if (a.producer_id, a.last_offset) not in markers]
            self._changed(topic, partition)

    def drop_aborted_before(self, topic: str, partition: int, log_start_offset: int) -> None:
        """Retention removed the log below ``log_start_offset``: forget the aborted transactions it ended."""
        txns = self._txns.get((topic, partition))
        if txns is not None and txns.aborted and txns.aborted[0].last_offset < log_start_offset:
            txns.aborted = [a for a in txns.aborted if a.last_offset >= log_start_offset]
            self._changed(topic, partition)

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted (its logs with it: a topic made again under its name gets new tables)."""
        for key in [k for k in self._state if k[0] == topic]:
            self._state.pop(key).clear()
        for key in [k for k in self._txns if k[0] == topic]:
            del self._txns[key]
        for guard in [k for k in self._verifying if k[0] == topic]:
            del self._verifying[guard]

    def expire(self, now_ms: int) -> int:
        return sum(table.expire(now_ms, self.expiration_ms) for table in self._state.values())

    # ---- persistence ------------------------------------------------------------------------------

    def _state_path(self) -> str:
        return os.path.join(self.log_dir, STATE_FILE)

    def save(self, log_end_offsets: dict[tuple[str, int], int]) -> None:
        """Snapshot the state as of each partition's log end offset (Kafka's .snapshot files, in one file)."""
        payload = []
        for (topic, partition), table in self._state.items():
            for producer_id, epoch, _, last_timestamp, coordinator_epoch, last_seen_ms, batches in table.producers():
                payload.append({
                    "topic": topic, "partition": partition, "producer_id": producer_id, "epoch": epoch,
                    "last_seen_ms": last_seen_ms, "coordinator_epoch": coordinator_epoch,
                    "last_timestamp": last_timestamp, "batches": [list(b) for b in batches],
                })
        offsets = [[topic, partition, offset] for (topic, partition), offset in log_end_offsets.items()]
        txns = []
        for (topic, partition), t in self._txns.items():
            end = log_end_offsets.get((topic, partition))
            if t.is_empty() or end is None:
                continue
            # only what the snapshot's log covers: the rest is replayed from the log at the next start
            txns.append({"topic": topic, "partition": partition,
                         "ongoing": [[pid, first] for pid, first in t.ongoing.items() if first < end],
                         "completed": [[c.producer_id, c.first_offset, c.last_offset, int(c.aborted)]
                                       for c in t.completed if c.last_offset < end],
                         "aborted": [[c.producer_id, c.first_offset, c.last_offset]
                                     for c in t.aborted if c.last_offset < end]})
        tmp = self._state_path() + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"version": 3, "offsets": offsets, "producers": payload, "txns": txns}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._state_path())

    def load(self) -> dict[tuple[str, int], int] | None:
        """Load the last snapshot; returns the log end offset it was taken at per partition (the log after
        that offset must be replayed), or None when there is no snapshot."""
        path = self._state_path()
        try:
            with open(path, encoding="utf-8") as handle:
                payload = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable producer state (%s); rebuilding it from the logs", path, exc)
            return None
        for item in payload.get("producers", []):
            try:
                batches = [BatchMetadata(*[int(x) for x in b]) for b in item["batches"]]
                self.table(str(item["topic"]), int(item["partition"])).restore(
                    int(item["producer_id"]), int(item["epoch"]), int(item.get("last_seen_ms", 0)),
                    int(item.get("coordinator_epoch", -1)), int(item.get("last_timestamp", -1)),
                    [(b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.timestamp, b.log_append_time)
                     for b in batches])
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                log.warning("%s: skipping a malformed producer entry (%s)", path, exc)
        for item in payload.get("txns", []):
            try:
                t = PartitionTxns()
                t.ongoing = {int(pid): int(first) for pid, first in item["ongoing"]}
                t.completed.extend(CompletedTxn(int(a), int(b), int(c), bool(d)) for a, b, c, d in item["completed"])
                t.aborted = [CompletedTxn(int(a), int(b), int(c), True) for a, b, c in item["aborted"]]
                self._txns[(item["topic"], int(item["partition"]))] = t
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("%s: skipping malformed transaction state (%s)", path, exc)
        offsets: dict[tuple[str, int], int] = {}
        for item in payload.get("offsets", []):
            try:
                offsets[(str(item[0]), int(item[1]))] = int(item[2])
            except (IndexError, TypeError, ValueError):
                continue
        return offsets

    def replay(self, topic: str, partition: int, records: bytes, now_ms: int) -> int:
        """Rebuild state from stored record batches (headers only, no decompression); returns the offset
        after the last whole batch."""
        pos, end, next_offset = 0, len(records), -1
        while pos + BATCH_HEADER_SIZE <= end:
            (base_offset, length, _epoch, _magic, _crc, attributes, last_delta, _base_ts, max_ts, producer_id,
             producer_epoch, base_sequence, _count) = _BATCH_HEADER.unpack_from(records, pos)
            size = length + 12
            if size < BATCH_HEADER_SIZE or pos + size > end:
                break
            next_offset = base_offset + last_delta + 1
            if producer_id < 0:
                pos += size
                continue
            if attributes & CONTROL_FLAG:
                kind, coordinator_epoch = control_marker(records, pos, size)
                if kind in (CONTROL_ABORT, CONTROL_COMMIT):
                    self.complete_txn(topic, partition, producer_id, producer_epoch, base_offset,
                                      kind == CONTROL_COMMIT, now_ms, coordinator_epoch, max_ts)
                pos += size
                continue
            pos += size
            last_seq = (base_sequence + last_delta) % 2**31 if base_sequence >= 0 else base_sequence
            self.update(topic, partition, producer_id, producer_epoch,
                        BatchMetadata(base_sequence, last_seq, base_offset, base_offset + last_delta, max_ts),
                        now_ms, transactional=bool(attributes & TRANSACTIONAL_FLAG))
        return next_offset

    def truncate_check(self, topic: str, partition: int, log_end_offset: int) -> None:
        """Drop cached batches beyond the log end (the log was truncated by recovery or by a follower that
        diverged); a transaction whose marker was cut off is open again, one that started beyond the end is gone."""
        txns = self._txns.get((topic, partition))
        if txns is not None:
            for pid in [p for p, first in txns.ongoing.items() if first >= log_end_offset]:
                del txns.ongoing[pid]
            reopened = [c for c in txns.completed if c.last_offset >= log_end_offset]
            if reopened:
                txns.completed = deque((c for c in txns.completed if c.last_offset < log_end_offset),
                                       maxlen=COMPLETED_TO_RETAIN)
                txns.aborted = [a for a in txns.aborted if a.last_offset < log_end_offset]
                self._changed(topic, partition)
                for c in reopened:
                    if c.first_offset < log_end_offset:
                        txns.ongoing[c.producer_id] = c.first_offset
        table = self._state.get((topic, partition))
        if table is not None:
            table.truncate(log_end_offset)
