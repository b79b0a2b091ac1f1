//! Errors of the storage engine. Each names the file (and position or offset) involved.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::error::CodecError;

#[derive(Debug, Error)]
pub enum StorageError {
    /// An operating-system error on a file of the log (disk full, permission, ...).
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The records passed to an append are not valid batches.
    #[error("{0}")]
    InvalidRecords(#[from] CodecError),
    /// Bytes on disk are not what the log wrote (found outside recovery).
    #[error("corrupt log {path} at byte {position}: {reason}")]
    CorruptLog { path: PathBuf, position: u64, reason: String },
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}] of {partition}")]
    OffsetOutOfRange {
        partition: String,
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    #[error("cannot delete records of {partition} before offset {offset}: outside [log start {log_start_offset}, high watermark {high_watermark}]")]
    DeleteBeyondHighWatermark {
        partition: String,
        offset: i64,
        log_start_offset: i64,
        high_watermark: i64,
    },
    #[error("batch of {size} bytes exceeds {limit} = {max}")]
    RecordTooLarge { size: usize, limit: &'static str, max: i64 },
    #[error("invalid config {key}: {reason}")]
    Config { key: &'static str, reason: String },
    #[error("{0}")]
    InvalidArgument(String),
    #[error("log {0} is closed")]
    Closed(String),
}

impl StorageError {
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        StorageError::Io { op, path: path.to_path_buf(), source }
    }
    pub fn config(key: &'static str, reason: impl Into<String>) -> Self {
        StorageError::Config { key, reason: reason.into() }
    }
    pub fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> Self {
        StorageError::CorruptLog { path: path.to_path_buf(), position, reason: reason.into() }
    }
}

pub type StorageResult<T> = Result<T, StorageError>;

/// Attach an operation and a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &Path) -> StorageResult<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> StorageResult<T> {
        self.map_err(|e| StorageError::io(op, path, e))
    }
}
