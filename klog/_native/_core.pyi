"""Type stubs for klog._native._core. Each concern keeps its own section."""

__version__: str

class CorruptRecordError(ValueError): ...

# --- records (codec) ---------------------------------------------------------------------
def crc32c(data: bytes | bytearray | memoryview) -> int: ...

# --- storage -------------------------------------------------------------------------------
import os

class StorageError(OSError):
    """A storage operation failed (I/O error such as a full disk, corrupt data on disk, closed log)."""

class OffsetOutOfRange(ValueError):
    """The offset is below the log start offset or above the log end offset."""

class RecordTooLargeError(ValueError):
    """A batch is larger than the topic's max.message.bytes."""

class LogConfig:
    """Partition log settings, Kafka topic-config names in snake_case; validated (ValueError naming the key)."""

    def __init__(
        self,
        *,
        segment_bytes: int = 1073741824,
        segment_ms: int = 604800000,
        segment_index_bytes: int = 10485760,
        index_interval_bytes: int = 4096,
        retention_ms: int = 604800000,
        retention_bytes: int = -1,
        flush_messages: int | None = None,
        flush_ms: int | None = None,
        message_timestamp_type: str = "CreateTime",
        file_delete_delay_ms: int = 60000,
        preallocate: bool = False,
        max_message_bytes: int = 1048588,
    ) -> None: ...
    segment_bytes: int
    segment_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    retention_ms: int
    retention_bytes: int
    flush_messages: int | None
    flush_ms: int | None
    message_timestamp_type: str
    file_delete_delay_ms: int
    preallocate: bool
    max_message_bytes: int
    def to_dict(self) -> dict[str, int | str | bool | None]: ...

class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_batches: int
    num_bytes: int

class FileSlice:
    """A range of an open segment file for os.sendfile; the descriptor stays open while this object lives."""

    fd: int
    position: int
    length: int
    path: str
    def to_bytes(self) -> bytes: ...

class ReadResult:
    slices: list[FileSlice]
    length: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    def to_bytes(self) -> bytes: ...
    def __len__(self) -> int: ...

class PartitionLog:
    topic: str
    partition: int
    dir: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int  # settable; clamped to [log_start_offset, log_end_offset]
    recovery_point: int
    config: LogConfig
    size_in_bytes: int
    def append(
        self, records: bytes | bytearray | memoryview, *, leader_epoch: int, now_ms: int | None = None
    ) -> AppendResult: ...
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult: ...
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult: ...
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...
    def max_timestamp_offset(self) -> tuple[int, int]: ...
    def delete_records_before(self, offset: int) -> int: ...
    def truncate_to(self, offset: int) -> None: ...
    def apply_retention(self, now_ms: int | None = None) -> int: ...
    def roll(self) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def update_config(self, config: LogConfig) -> None: ...
    def leader_epoch_entries(self) -> list[tuple[int, int]]: ...
    def segment_base_offsets(self) -> list[int]: ...

class LogManager:
    def __init__(self, log_dirs: list[str] | list[os.PathLike[str]], default_config: LogConfig) -> None: ...
    log_dirs: list[str]
    default_config: LogConfig
    def get(self, topic: str, partition: int) -> PartitionLog | None: ...
    def create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog: ...
    def delete_topic(self, topic: str) -> int: ...
    def partitions(self) -> list[tuple[str, int]]: ...
    def checkpoint(self) -> None: ...
    def flush_all(self) -> None: ...
    def flush_due(self, now_ms: int | None = None) -> int: ...
    def apply_retention(self, now_ms: int | None = None) -> int: ...
    def close(self) -> None: ...
    def __len__(self) -> int: ...

def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int: ...
