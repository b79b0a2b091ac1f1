"""Type stubs for klog._native._core. Each concern keeps its own section."""

__version__: str

class CorruptRecordError(ValueError): ...

# --- produce checks (the Produce request's rules, Kafka's LogValidator rules) -----------------
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

class InvalidRecordError(ValueError):
    """A produced batch breaks a record rule (INVALID_RECORD); args: (message, [(batch_index, message), ...])."""

class InvalidTimestampError(InvalidRecordError):
    """A record timestamp is out of the topic's bounds (INVALID_TIMESTAMP); args: (message, record_errors)."""

class UnsupportedCompressionTypeError(ValueError):
    """zstd in a Produce request before v7 (UNSUPPORTED_COMPRESSION_TYPE)."""

@final
class ProducedBatch:
    """A Produce partition's batch as the produce checks accepted it: its header fields, read once.
    ``PartitionLog.append`` takes it in place of the records and does not parse the header again."""
    # for the idempotent producer's sequence check
    @property
    def producer_id(self) -> int:
        """-1 when the producer is not idempotent."""
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int:
        """The last record's sequence (wrapping after 2**31 - 1); -1 without a base sequence."""
    @property
    def is_transactional(self) -> bool: ...
    # for the response and the metrics
    @property
    def size(self) -> int:
        """Bytes: the partition's records are this one batch."""
    @property
    def records_count(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def compression(self) -> int:
        """Kafka's CompressionType id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
    def has_valid_crc(self) -> bool:
        """The checks leave the CRC to the append: a retry answered without one checks it here."""

def validate_produce_batch(
    records: bytes | bytearray | memoryview | Any,
    *,
    version: int,
    max_message_bytes: int,
    compacted: bool,
    topic_partition: str,
    create_time: bool,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    max_decompressed_bytes: int,
    check_records: bool = True,
    work_budget: int | None = None,
    verify_crc: bool = True,
    compression: int | None = None,
    compression_level: int | None = None,
) -> ProducedBatch | None:
    """The Produce request's rules, then (``check_records``) the records; None when ``work_budget`` was not
    enough to decide. With ``compression`` (the topic's codec id) a data batch of another codec is recompressed
    to it (at ``compression_level``) and the returned batch holds the new bytes. ``topic_partition``: the
    partition's name as Kafka prints it (``topic-0``), named in a keyless record's error. Raises CorruptRecordError, InvalidRecordError, InvalidTimestampError,
    UnsupportedCompressionTypeError or RecordTooLargeError, one per Kafka error code."""

# --- the native Produce path (klog/broker/native_produce.py) -----------------------------------

@final
class ProduceRoutes:
    """The partitions the native Produce path may append to (learned by the broker's Python path), and the
    broker's validation bounds. ``error_codes``: Kafka's NONE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE and
    KAFKA_STORAGE_ERROR codes."""
    def __new__(
        cls, *, check_records: bool, max_decompressed_bytes: int, work_budget: int,
        error_codes: tuple[int, int, int, int]
    ) -> ProduceRoutes: ...
    def learn(
        self,
        topic: str,
        partition: int,
        log: PartitionLog,
        *,
        leader_epoch: int,
        replicated: bool,
        max_message_bytes: int,
        compacted: bool,
        create_time: bool,
        before_max_ms: int,
        after_max_ms: int,
        compression: int | None = None,
        compression_level: int | None = None,
        topic_id: bytes | None = None,
    ) -> None: ...
    def knows(self, topic: str, partition: int) -> bool: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...

@final
class NativeProduceOutcome:
    """What the native path did with a Produce frame."""
    @property
    def response(self) -> bytes | None: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def acks(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def appended(self) -> list[tuple[str, int, int, int, int, int, int, int, int, int, int, int, bool]]: ...
    @property
    def failures(self) -> list[tuple[str, int, int, str, int | None, str]]: ...
    @property
    def timeout_ms(self) -> int: ...
    @property
    def waits(self) -> bool:
        """acks=all with a replicated partition appended: no ``response`` yet; :meth:`respond` once the
        waits on the high watermark end."""
    def respond(self, codes: list[int]) -> bytes:
        """The response frame after the waits: one error code per ``appended`` batch (non-zero: that batch's
        answer gets the code, base offset -1 and no message)."""

def native_produce(
    frame: bytes | bytearray | memoryview | Any,
    routes: ProduceRoutes,
    *,
    now_ms: int,
    max_version: int,
    allow: Callable[[str], bool] | None = None,
    check_replicated: Callable[[list[tuple[str, int]]], bool] | None = None,
    check_transaction: Callable[[str, int, str, int, int, int, int, int], bool] | None = None,
) -> NativeProduceOutcome | None:
    """Serve a Produce frame (without its size prefix): decode, check and append every partition's batch and
    encode the answer; None (nothing appended) when the Python path must serve it. ``check_transaction``
    (transactional_id, api_version, topic, partition, producer_id, epoch, first_seq, last_seq): whether a
    transactional batch is in sequence and in its producer's transaction (None: transactional requests are the
    Python path's)."""

# --- the native Fetch path (klog/broker/native_fetch.py) -------------------------------------

@final
class FetchRoutes:
    """The partitions the native Fetch path may serve consumers and replicas from (learned by the broker's Python
    path).
    ``rack_aware``: replica.selector.class is set (a consumer naming its rack takes the Python path). Holds the
    native wait table of parked long polls too (at most ``max_parked``; 0: none)."""
    def __new__(cls, *, rack_aware: bool, error_none: int, max_parked: int = 0) -> FetchRoutes: ...
    def learn(self, topic: str, partition: int, log: PartitionLog, *, topic_id: bytes, leader_epoch: int) -> None: ...
    def knows(self, topic: str, partition: int) -> bool: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def adopt_session(self, session_id: int, *, epoch: int, uses_topic_ids: bool,
                      partitions: list[tuple[str | bytes, int, int, int, int, int, int, int, int]],
                      replica: bool = False) -> bool:
        """Hold a consumer's (``replica``: a replica's) fetch session (its next epoch; its partitions in read order as
        (topic name or 16-byte id, partition, fetch offset, partition max bytes, current leader epoch, last fetched
        epoch, log start offset, answered high watermark, answered log start offset)); False (not held) unless all
        are routed."""
    def release_session(self, session_id: int
                        ) -> tuple[int, list[tuple[str | bytes, int, int, int, int, int, int, int, int]]] | None:
        """Give back and forget a held session's state (as ``adopt_session`` takes it), None if not held."""
    def drop_session(self, session_id: int) -> None: ...
    def session_count(self) -> int: ...
    def take_back(self, parked: int) -> int | None:
        """Take a parked long poll back: None if the table answered it, else the milliseconds left of its wait."""
    def disown(self, parked: int) -> bool:
        """Parked long poll ``parked`` (the native front's) is the Python side's from now on: True if the wait
        table sent it back already."""
    def take_returned(self) -> list[int]:
        """The parked long polls the table sends back to the Python path (their ids)."""
    def take_answered(self) -> list[tuple[int, int, list[tuple[str, int]], float]]:
        """(parked id, session id, [(topic, record bytes)], seconds waited) per answer since the last call."""
    def take_answered_summary(
        self, bounds_ms: Sequence[float]
    ) -> tuple[int, list[tuple[int, int]], list[tuple[str, int, int]], list[int], float]:
        """``take_answered`` summed: (answers, [(session id, answers)], [(topic, record bytes, topic entries)], the
        answers' times in ms counted into the histogram buckets ``bounds_ms`` (as ``bisect_left``), their sum)."""
    @property
    def wait_notify_fd(self) -> int:
        """An eventfd readable when ``take_returned`` has ids (-1 off Linux)."""
    def wait_stats(self) -> tuple[int, int, int, int, int]:
        """(parked now, answered after a wake-up, answered at the deadline, sent back, refused: table full)."""

@final
class NativeFetchOutcome:
    """What the native path made of a Fetch frame: the response's chunks, or the partitions to wait on."""
    @property
    def chunks(self) -> list[bytes | FileSlice] | None: ...
    @property
    def correlation_id(self) -> int: ...
    @property
    def api_version(self) -> int: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def max_wait_ms(self) -> int: ...
    @property
    def wait_keys(self) -> list[tuple[str, int]] | None: ...
    @property
    def replica(self) -> bool:
        """A replica's fetch: its ``wait_keys`` wait for an append, not a high watermark."""
    @property
    def topic_bytes(self) -> list[tuple[str, int]] | None: ...
    @property
    def session_id(self) -> int:
        """The fetch session an incremental fetch continued (0: sessionless)."""
    @property
    def parked(self) -> int:
        """The id of the long poll parked in the routes' wait table (0: not parked)."""

def native_fetch(
    frame: bytes | bytearray | memoryview | Any,
    routes: FetchRoutes,
    *,
    max_version: int,
    fetch_max_bytes: int,
    zero_copy: bool,
    may_wait: bool = True,
    allow: Callable[[str], bool] | None = None,
    park: SocketQueue | None = None,
    judge: Callable[[int, int, list[tuple[str, int, int, int, int, int]]], bool] | None = None,
    judged: bool = False,
) -> NativeFetchOutcome | None:
    """Serve a Fetch frame (without its size prefix): decode, read below the high watermarks (a replica's to the log
    ends) and encode the answer, or return the partitions to wait on (``chunks`` None); None (nothing changed) when
    the Python path must serve it. ``judge(replica_id, broker_epoch, [(topic, partition, current leader epoch,
    fetch offset, last fetched epoch, log start offset)])``: judges a replica's fetch before its reads (None:
    replicas' fetches are the Python path's); ``judged``: it was judged when it arrived."""

# --- records (codec) ---------------------------------------------------------------------
from collections.abc import Iterable
from typing import Any, final

DEFAULT_MAX_DECOMPRESSED_SIZE: int

# Bytes-like arguments accept anything with the (C-contiguous) buffer protocol, read in place.
def crc32c(data: bytes | bytearray | memoryview | Any) -> int: ...
def murmur2(data: bytes | bytearray | memoryview | Any) -> int: ...
def encode_columns(
    values: Any,
    keys: Any = None,
    *,
    timestamps: Any = None,
    headers: Any = None,
    shared_headers: Any = None,
    rows: Any = None,
    compression: str = "none",
    compression_level: int | None = None,
    max_batch_bytes: int | None = None,
    max_batch_records: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = ...,
    producer_id: int = ...,
    producer_epoch: int = ...,
    base_sequence: int = ...,
    is_transactional: bool = False,
    timestamp_type: str = "create",
    mutable: bool = False,
    reuse: list[bytearray] | None = None,
) -> list[tuple[bytes, int]]:
    """Columns (Arrow/NumPy/lists) -> [(record batch, record count), ...]; see klog.records.encode_columns.
    ``reuse`` (with ``mutable=True``, uncompressed): bytearrays taken out of the list and rewritten in place as
    the batches: only those nothing else references, for each batch the shortest it fits in (else the longest);
    the others stay in the list."""
def partitions_for_keys(keys: Any, num_partitions: int, *, null_partition: int = ...) -> NativeBuffer: ...
def with_producer_fields(
    batch: bytes | bytearray | memoryview | Any, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes: ...
def set_producer_fields(batch: bytearray | memoryview | Any, producer_id: int, producer_epoch: int, base_sequence: int) -> None: ...
def encode_batch(
    records: Iterable[Any],
    *,
    compression: str = "none",
    compression_level: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = ...,
    producer_id: int = ...,
    producer_epoch: int = ...,
    base_sequence: int = ...,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: str = "create",
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes: ...
def decode_batches(
    data: bytes | bytearray | memoryview | Any,
    *,
    verify_crc: bool = True,
    allow_partial_trailing: bool = False,
    allow_compacted: bool = False,
    max_decompressed_size: int = ...,
    include_records: bool = True,
) -> list[Batch]: ...
def parse_control_record_key(key: bytes | bytearray | memoryview | Any) -> tuple[int, int]: ...
def decode_columns(
    data: bytes | bytearray | memoryview | Any,
    *,
    verify_crc: bool = True,
    allow_partial_trailing: bool = False,
    allow_compacted: bool = False,
    max_decompressed_size: int = ...,
    skip_control: bool = True,
    min_offset: int | None = None,
) -> dict[str, Any]: ...
@final
class NativeBuffer:
    @property
    def address(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def typestr(self) -> str: ...
    @property
    def __array_interface__(self) -> dict[str, Any]: ...
    def __len__(self) -> int: ...
    def __bytes__(self) -> bytes: ...
@final
class Record:
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[tuple[str, bytes | None]]: ...
@final
class Batch:
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    @property
    def compression(self) -> str: ...
    @property
    def timestamp_type(self) -> str: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def control_type(self) -> int | None: ...
    @property
    def records(self) -> list[Record]: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    def __len__(self) -> int: ...

# --- storage -------------------------------------------------------------------------------
import os

class StorageError(OSError):
    """A storage operation failed (I/O error such as a full disk, corrupt data on disk, closed log)."""

class CorruptLogError(StorageError):
    """Segment bytes failed their CRC or header check outside recovery (message: file, byte, offset); not served."""

class OffsetOutOfRange(ValueError):
    """The offset is below the log start offset or above the log end offset."""

class RecordTooLargeError(ValueError):
    """A batch is larger than the topic's max.message.bytes."""

@final
class LogConfig:
    """Partition log settings, Kafka topic-config names in snake_case; validated (ValueError naming the key)."""

    def __new__(
        cls,
        *,
        segment_bytes: int = 1073741824,
        segment_ms: int = 604800000,
        segment_index_bytes: int = 10485760,
        index_interval_bytes: int = 4096,
        retention_ms: int = 604800000,
        retention_bytes: int = ...,  # -1: unlimited
        flush_messages: int | None = None,
        flush_ms: int | None = None,
        message_timestamp_type: str = "CreateTime",
        file_delete_delay_ms: int = 60000,
        preallocate: bool = False,
        max_message_bytes: int = 1048588,
        cleanup_policy: str = "delete",
        delete_retention_ms: int = 86400000,
        min_cleanable_dirty_ratio: float = 0.5,
        min_compaction_lag_ms: int = 0,
        max_compaction_lag_ms: int = ...,  # Long.MAX_VALUE
    ) -> LogConfig: ...
    @property
    def segment_bytes(self) -> int: ...
    @property
    def segment_ms(self) -> int: ...
    @property
    def segment_index_bytes(self) -> int: ...
    @property
    def index_interval_bytes(self) -> int: ...
    @property
    def retention_ms(self) -> int: ...
    @property
    def retention_bytes(self) -> int: ...
    @property
    def flush_messages(self) -> int | None: ...
    @property
    def flush_ms(self) -> int | None: ...
    @property
    def message_timestamp_type(self) -> str: ...
    @property
    def file_delete_delay_ms(self) -> int: ...
    @property
    def preallocate(self) -> bool: ...
    @property
    def max_message_bytes(self) -> int: ...
    @property
    def cleanup_policy(self) -> str: ...
    @property
    def delete_retention_ms(self) -> int: ...
    @property
    def min_cleanable_dirty_ratio(self) -> float: ...
    @property
    def min_compaction_lag_ms(self) -> int: ...
    @property
    def max_compaction_lag_ms(self) -> int: ...
    def to_dict(self) -> dict[str, int | float | str | bool | None]: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class AppendResult:
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def log_append_time(self) -> int: ...  # -1 for CreateTime topics
    @property
    def log_start_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def num_batches(self) -> int: ...
    @property
    def num_bytes(self) -> int: ...

@final
class FileSlice:
    """A range of an open segment file for os.sendfile; the descriptor stays open while this object lives."""

    @property
    def fd(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def path(self) -> str: ...
    def to_bytes(self) -> bytes: ...

@final
class ReadResult:
    @property
    def slices(self) -> list[FileSlice]: ...
    @property
    def length(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    def to_bytes(self) -> bytes: ...
    def __len__(self) -> int: ...

#: (first sequence, last sequence, base offset, last offset, max timestamp, log append time)
_Batch = tuple[int, int, int, int, int, int]

@final
class ProducerTable:
    """One partition's idempotent-producer state (Kafka's producer state entries), shared with its log."""
    def __init__(self) -> None: ...
    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              hold: bool = False) -> tuple[int, _Batch | None]: ...  # (verdict, the duplicate's batch)
    def update(self, producer_id: int, epoch: int, batch: _Batch, now_ms: int) -> None: ...
    def release(self) -> None: ...
    @property
    def held(self) -> bool: ...
    def end_transaction(self, producer_id: int, epoch: int, now_ms: int, coordinator_epoch: int,
                        timestamp: int) -> None: ...
    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int | None = None,
                     transaction_version: int = 0) -> int: ...  # verdict: producer_state.VERDICT_CODES
    def epoch(self, producer_id: int) -> int | None: ...
    def producers(self) -> list[tuple[int, int, int, int, int, int, list[_Batch]]]: ...
    def restore(self, producer_id: int, epoch: int, last_seen_ms: int, coordinator_epoch: int, last_timestamp: int,
                batches: list[_Batch]) -> None: ...
    def truncate(self, log_end_offset: int) -> None: ...
    def expire(self, now_ms: int, expiration_ms: int) -> int: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...  # the same table

@final
class PartitionLog:
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def dir(self) -> str: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @high_watermark.setter
    def high_watermark(self, value: int) -> None: ...  # clamped to [log_start_offset, log_end_offset]
    def raise_high_watermark(self, value: int) -> int: ...  # clamped likewise, never lowered: the high watermark now
    @property
    def first_unstable_offset(self) -> int: ...  # the log cleaner stays below it (a transaction's first offset)
    @first_unstable_offset.setter
    def first_unstable_offset(self, value: int) -> None: ...
    @property
    def aborted_transactions(self) -> list[tuple[int, int, int]]: ...  # (producer id, first offset, marker offset)
    @aborted_transactions.setter
    def aborted_transactions(self, value: list[tuple[int, int, int]]) -> None: ...
    def add_aborted_transaction(self, producer_id: int, first_offset: int, marker_offset: int) -> None: ...
    @property
    def producers(self) -> ProducerTable | None: ...  # its producer table (the native paths check and record in it)
    @producers.setter
    def producers(self, value: ProducerTable | None) -> None: ...
    @property
    def high_watermark_waited(self) -> bool: ...  # a long poll in Python waits for it: the native front wakes the broker
    @high_watermark_waited.setter
    def high_watermark_waited(self, value: bool) -> None: ...
    @property
    def recovery_point(self) -> int: ...
    @property
    def closed(self) -> bool:
        """Every call raises StorageError (log closed): closed, deleted, or closed by a full truncation that failed
        midway (until a restart)."""
    @property
    def config(self) -> LogConfig: ...
    @property
    def size_in_bytes(self) -> int: ...
    def append(
        self, records: bytes | bytearray | memoryview | ProducedBatch, *, leader_epoch: int, now_ms: int | None = None
    ) -> AppendResult: ...
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult: ...
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult: ...
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...
    def max_timestamp_offset(self) -> tuple[int, int]: ...
    def delete_records_before(self, offset: int) -> int: ...
    def truncate_to(self, offset: int) -> None: ...
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (log start = log end = high watermark = ``offset``, no epochs)."""
    def apply_retention(self, now_ms: int | None = None) -> int: ...
    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Remove ``*.deleted`` files of deleted segments once ``file_delete_delay_ms`` has passed."""
    def pending_deleted_files(self) -> list[str]: ...
    def clean(self, first_dirty_offset: int | None = None, *, now_ms: int | None = None,
              dedupe_buffer_size: int = 134217728, dedupe_buffer_load_factor: float = 0.9,
              io_buffer_size: int = 524288, producer_id_expiration_ms: int = 86400000,
              ) -> tuple[int, dict[str, int | float]] | None:
        """One log cleaner pass now: (new first dirty offset, counters), None if the log changed meanwhile."""
    def roll(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def update_config(self, config: LogConfig) -> None: ...
    def assign_topic_id(self, topic_id: str) -> None: ...
    def recorded_topic_id(self) -> str | None: ...
    def leader_epoch_entries(self) -> list[tuple[int, int]]: ...
    def assign_epoch_start(self, epoch: int) -> None: ...
    def segment_base_offsets(self) -> list[int]: ...

@final
class LogManager:
    def __new__(cls, log_dirs: list[str] | list[os.PathLike[str]], default_config: LogConfig, *,
                max_open_segment_files: int | None = None, excluded_topics: list[str] | None = None,
                offline_dirs: Mapping[str, str] | None = None) -> LogManager:
        """``offline_dirs``: log dir -> why it is offline from the start (never read nor written); a log dir that
        cannot be made, listed or loaded starts offline too (an error when none is left)."""
    @property
    def open_segment_files(self) -> tuple[int, int]:
        """(bound, open now): sealed segments' ``.log`` descriptors (LRU-closed beyond the bound)."""
    @property
    def log_dirs(self) -> list[str]: ...
    @property
    def default_config(self) -> LogConfig: ...
    def get(self, topic: str, partition: int) -> PartitionLog | None: ...
    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               log_dir: str | os.PathLike[str] | None = None) -> PartitionLog: ...
    def delete_topic(self, topic: str, *, first_partition: int = 0) -> int: ...
    def delete_partition(self, topic: str, partition: int) -> bool: ...
    def mark_stray(self, topic: str, partition: int) -> str | None:
        """Stop serving the log and rename its directory ``<topic>-<p>.<id>-stray``, its files kept."""
    def copy_to_future(self, topic: str, partition: int, future: str | os.PathLike[str], max_bytes: int
                       ) -> tuple[int, int, int, bool]:
        """One copy pass of at most about ``max_bytes`` of a move into ``future``: (bytes copied, generation, log
        end offset copied up to, whether the pass copied everything it listed)."""
    def swap_in_future(self, topic: str, partition: int, future: str | os.PathLike[str], generation: int) -> bool:
        """Finish a move under the log's lock; False if the log changed since ``generation``."""
    @property
    def offline_dirs(self) -> list[tuple[str, str]]: ...
    def mark_dir_offline(self, log_dir: str | os.PathLike[str], error: str) -> bool: ...
    @property
    def cordoned_dirs(self) -> list[str]: ...
    def set_cordoned_dirs(self, log_dirs: Sequence[str | os.PathLike[str]]) -> None:
        """Cordon ``log_dirs`` (each one of ``log_dirs``; cordoned.log.dirs, KIP-1066) and uncordon the others: a new
        log is made in a cordoned dir only when it is named, or when every online dir is cordoned."""
    def partitions(self) -> list[tuple[str, int]]: ...
    def checkpoint(self) -> None: ...
    def flush_all(self) -> None: ...
    def flush_due(self, now_ms: int | None = None) -> int: ...
    def apply_retention(self, now_ms: int | None = None) -> int: ...
    def delete_expired_files(self, now_ms: int | None = None) -> int: ...
    def close(self, threads: int = 1) -> None:
        """Flush and close every log on ``threads`` threads (at most 64), then write the checkpoints and the
        clean-shutdown marker."""
    def start_cleaner(self, *, threads: int = 1, dedupe_buffer_size: int = 134217728,
                      dedupe_buffer_load_factor: float = 0.9, io_buffer_size: int = 524288,
                      backoff_ms: int = 15000, producer_id_expiration_ms: int = 86400000,
                      io_max_bytes_per_second: float = 1.7976931348623157e308) -> None:
        """Start ``threads`` log cleaner threads (no GIL) compacting every log with cleanup policy "compact"."""
    def wake_cleaner(self) -> None: ...
    def cleaner_stats(self) -> dict[str, int | float] | None: ...
    def cleaner_checkpoints(self) -> list[tuple[str, int, int]]: ...
    def __len__(self) -> int: ...

def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int: ...

# --- memory --------------------------------------------------------------------------------
def release_free_heap() -> bool:
    """glibc's malloc_trim(0) with the GIL released: the heap's free pages go back to the kernel; True if any
    did (always False without glibc)."""
    ...

# --- groups (consumer group coordinator) -----------------------------------------------------
@final
class SessionTracker:
    """Deadlines in ms keyed by non-negative ints; yields keys whose deadline passed (heartbeats are O(1))."""
    def __init__(self) -> None: ...
    def schedule(self, key: int, deadline_ms: int) -> None: ...
    def cancel(self, key: int) -> bool: ...
    def deadline(self, key: int) -> int | None: ...
    def next_deadline(self) -> int | None: ...
    def expired(self, now_ms: int, max_count: int | None = None) -> list[int]: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: int, /) -> bool: ...

# --- producer_batch (client producer's open batches) -------------------------------------------

RECORD_FRAMING_MAX: int

@final
class RecordAppender:
    """An open record batch for one partition: records are encoded into it as they are sent."""

    def __new__(cls, capacity: int, compression: str = "none", compression_level: int | None = None,
                future_type: type[tuple[Any, ...]] | None = None, outcome: object | None = None) -> RecordAppender: ...
    def append_future(self, key: bytes | None, value: bytes | None) -> Any: ...
    def append(self, key: bytes | None, value: bytes | None, timestamp: int = ...,
               headers: list[tuple[str, bytes | None]] | None = None) -> int: ...
    def seal(self) -> None: ...
    def finish(self, producer_id: int, producer_epoch: int, base_sequence: int,
               reuse: list[bytearray] | None = None) -> bytes | bytearray:
        """The encoded batch: bytes, or with ``reuse`` a bytearray (one of those nothing else references,
        rewritten, when there is one)."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def sealed(self) -> bool: ...

# --- consumer_records (client consumer's per-record decoding) ---------------------------------

def decode_records(data: bytes | bytearray | memoryview, record_type: type[tuple[Any, ...]], topic: str,
                   partition: int, *, min_offset: int | None = None, verify_crc: bool = True,
                   allow_partial_trailing: bool = True, allow_compacted: bool = True,
                   max_decompressed_size: int = ...) -> list[Any]: ...

# --- socket_writer (broker responses sent from a native thread; Linux only) --------------------

@final
class SocketQueue:
    @property
    def id(self) -> int: ...
    @property
    def queued_bytes(self) -> int: ...
    @property
    def error(self) -> int | None: ...
    def send(self, chunks: list[Any]) -> int: ...  # bytes-like objects and FileSlice-like regions
    def notify_when_empty(self) -> bool: ...
    def close_after_flush(self) -> None: ...
    def abort(self) -> None: ...

@final
class SocketWriter:
    def __init__(self) -> None: ...
    def register(self, fd: int) -> SocketQueue: ...
    def kick(self) -> None: ...
    def reap(self, queue: SocketQueue) -> None: ...
    @property
    def notify_fd(self) -> int: ...
    def take_drained(self) -> list[int]: ...

@final
class NativeFront:
    def __new__(cls, routes: ProduceRoutes, *, max_version: int, buffer_bytes: int,
                max_queued_bytes: int, max_frame_bytes: int = 0, max_held_bytes: int = 0,
                account_interval_ms: int = 5,
                fetch_routes: FetchRoutes | None = None, fetch_max_version: int = ...,
                fetch_max_bytes: int = 0) -> NativeFront: ...
    def register(self, id: int, fd: int, queue: SocketQueue, *, fetch: bool = False,
                 parked: tuple[int, bytes] | None = None) -> bool: ...
    def take_fetches(self) -> int: ...
    fetch_max_bytes: int
    def unregister(self, id: int) -> bool: ...
    def idle_seconds(self, id: int) -> float | None: ...
    @property
    def held_bytes(self) -> tuple[int, int]: ...
    @property
    def large_frames(self) -> int: ...
    def __len__(self) -> int: ...
    enabled: bool
    @property
    def notify_fd(self) -> int: ...
    def take(self) -> tuple[int, list[float], list[tuple[str, int]], list[tuple[str, int, int, int]],
                            list[tuple[int, int, str | None, str, int, int, str, int | None, str]],
                            list[tuple[int, bytes, bool, tuple[int, bytes] | None]]]: ...
    def release(self) -> None: ...
    # panics caught on the front's thread: (the connection it was serving, dropped, for the caller to close; message)
    def take_faults(self) -> list[tuple[int | None, str]]: ...
    def fail_next_serve(self, id: int) -> None: ...  # the next serve of connection ``id`` panics (tests)
    def close(self) -> None: ...

def front_declines(frame: bytes, max_version: int) -> bool: ...

# --- raft (controller quorum over the __cluster_metadata-0 log) -------------------------------
class RaftError(Exception):
    """A controller-quorum (Raft) operation failed; the message says why."""

class NotLeaderError(RaftError):
    """A proposal reached a node that is not the quorum's leader."""

@final
class RaftNode:
    """One quorum member: raft-rs's RawNode over the metadata log in ``directory``."""
    def __new__(cls, directory: str | os.PathLike[str], node_id: int, voters: list[int], *,
                election_tick: int = 10, min_election_tick: int = 0, max_election_tick: int = 0,
                heartbeat_tick: int = 2, max_size_per_msg: int = 1048576, max_inflight_msgs: int = 256,
                max_uncommitted_size: int = 67108864, max_entry_bytes: int = 8388608,
                max_committed_size_per_ready: int = 16777216, segment_bytes: int = 1073741824,
                segment_ms: int = 604800000) -> RaftNode: ...
    def tick(self) -> bool: ...
    def step(self, message: bytes) -> None: ...
    def propose(self, batch: bytes) -> int: ...
    def propose_voter_change(self, node_id: int, add: bool) -> int: ...
    def campaign(self) -> None: ...
    def transfer_leader(self, to: int) -> None: ...
    def report_unreachable(self, to: int) -> None: ...
    def has_ready(self) -> bool: ...
    def begin_ready(self) -> list[tuple[int, bytes]]:
        """Messages that may go out before this node persists (a leader's appends); ``ready`` next."""
    def ready(self) -> tuple[list[tuple[int, bytes]], list[tuple[int, int, str, bytes, int, int]],
                             tuple[int, int, bytes] | None]:
        """Persist (fsync, GIL released), then (messages to send, committed entries, installed snapshot)."""
    def create_snapshot(self, index: int, data: bytes) -> str: ...
    def latest_snapshot(self) -> tuple[int, bytes] | None: ...
    @property
    def node_id(self) -> int: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def term(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def commit_index(self) -> int: ...
    @property
    def leader_commit(self) -> int | None:
        """The commit index the leader of the current term sent this follower in its appends (its view of the
        quorum's high watermark; a heartbeat's is short of it whenever this node lacks entries); None before that
        leader's first append, or on a leader."""
    @property
    def last_index(self) -> int: ...
    @property
    def voters(self) -> list[int]: ...
    @property
    def log_voters(self) -> list[int]: ...
    @property
    def log_end_offset(self) -> int: ...
    def end_offset_through(self, index: int) -> int | None:
        """The Kafka end offset of the log through raft ``index`` (None: compacted away or not in the log)."""
    def replica_progress(self) -> list[tuple[int, bool, int]]:
        """On the leader: (node id, is voter, matched raft index) of every replica; empty elsewhere."""
    def close(self) -> None: ...

# --- TLS (klog_core::tls: a sans-IO TLS server session, rustls with the ring provider) ----------
class TlsError(ConnectionError):
    """The TLS peer broke the protocol or the handshake failed: the session is over, and ``outgoing()`` holds the
    alert that tells the peer why."""

@final
class TlsServerConfig:
    """What a TLS listener serves with (Kafka's ssl.* settings, stores read: PEM bytes). ValueError names a setting
    that cannot be used."""
    def __new__(cls, cert_chain_pem: bytes | bytearray | memoryview | Any, key_pem: bytes | bytearray | memoryview | Any,
                *, client_ca_pem: bytes | bytearray | memoryview | Any | None = None, client_auth: str = "none",
                protocols: Sequence[str] = ..., cipher_suites: Sequence[str] = ...) -> TlsServerConfig: ...

@final
class TlsServerSession:
    """One TLS connection's server side; the caller reads and writes the socket."""
    def __new__(cls, config: TlsServerConfig) -> TlsServerSession: ...
    def receive(self, data: bytes | bytearray | memoryview | Any) -> bytes:
        """The application data of every complete record in ``data`` (a partial record waits for the next call);
        TlsError when the session failed."""
    def receive_into(self, data: bytes | bytearray | memoryview | Any, target: bytearray | memoryview | Any
                     ) -> tuple[int, int]:
        """Decrypts the records of ``data`` straight into ``target`` until it is full or ``data`` is used up:
        (bytes of ``data`` consumed, bytes written). A writable ``data`` is decrypted in place (what it held is
        gone); a read-only one is copied first. Plaintext that did not fit waits for the next call
        (``plaintext_waiting``) and the ciphertext behind it is not consumed: pass it again. The handshake's
        records are consumed whatever the room. TlsError when the session failed."""
    def send(self, data: bytes | bytearray | memoryview | Any) -> bytes:
        """``data`` encrypted (with any handshake bytes still due)."""
    def outgoing(self) -> bytes:
        """The ciphertext due to the peer: handshake messages, alerts, session tickets."""
    def close(self) -> bytes:
        """close_notify, with anything else still due."""
    @property
    def handshaking(self) -> bool: ...
    @property
    def peer_closed(self) -> bool: ...
    @property
    def plaintext_waiting(self) -> int:
        """Plaintext bytes decrypted but not yet delivered: the next ``receive_into`` delivers them."""
    @property
    def protocol_version(self) -> str | None: ...
    @property
    def cipher_suite(self) -> str | None: ...
    @property
    def server_name(self) -> str | None: ...
    def peer_certificates(self) -> list[bytes]: ...
