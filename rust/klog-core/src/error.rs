//! Errors of the native core. Every variant names the field and the byte offset where the
//! input went wrong, so that a user (or a log line) can say exactly what was rejected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The input ends before a field that must be there.
    #[error("truncated {field} at byte {offset}: need {needed} bytes, have {available}")]
    Truncated {
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid {field} at byte {offset}: {reason}")]
    Invalid {
        field: &'static str,
        offset: usize,
        reason: String,
    },
    /// The stored CRC-32C does not match the bytes it covers.
    #[error("CRC mismatch in batch at byte {offset}: stored 0x{stored:08x}, computed 0x{computed:08x}")]
    CrcMismatch {
        offset: usize,
        stored: u32,
        computed: u32,
    },
    /// Compression or decompression failed.
    #[error("{codec} {op} failed for batch at byte {offset}: {reason}")]
    Compression {
        codec: &'static str,
        op: &'static str,
        offset: usize,
        reason: String,
    },
}

impl CodecError {
    pub fn invalid(field: &'static str, offset: usize, reason: impl Into<String>) -> Self {
        CodecError::Invalid {
            field,
            offset,
            reason: reason.into(),
        }
    }

    /// Byte offset in the input where the error was found.
    pub fn offset(&self) -> usize {
        match self {
            CodecError::Truncated { offset, .. }
            | CodecError::Invalid { offset, .. }
            | CodecError::CrcMismatch { offset, .. }
            | CodecError::Compression { offset, .. } => *offset,
        }
    }
}

pub type CodecResult<T> = Result<T, CodecError>;
