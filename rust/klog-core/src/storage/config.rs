//! Per-partition log configuration, named after Kafka's topic configs (`segment.bytes` ->
//! `segment_bytes`). Every value is validated when the config is built, so the log never
//! meets a negative size or an unknown policy at run time.

use super::error::{StorageError, StorageResult};

/// How a record's timestamp is set: by the producer, or by the broker at append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn parse(name: &str) -> StorageResult<Self> {
        match name {
            "CreateTime" => Ok(TimestampType::CreateTime),
            "LogAppendTime" => Ok(TimestampType::LogAppendTime),
            other => Err(StorageError::config(
                "message_timestamp_type",
                format!("unknown timestamp type {other:?}; expected \"CreateTime\" or \"LogAppendTime\""),
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Smallest `segment.bytes` Kafka ever accepted (a legacy v0 record overhead); small values
/// are useful in tests, large ones are capped by the int32 file positions of the index.
pub const MIN_SEGMENT_BYTES: i64 = 14;
pub const MAX_SEGMENT_BYTES: i64 = i32::MAX as i64;
/// An index file must hold at least one entry of either kind.
pub const MIN_SEGMENT_INDEX_BYTES: i64 = 12;

/// Plain values only (`Copy`): the append path copies it out of the lock instead of sharing it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: i64,
    pub segment_ms: i64,
    pub segment_index_bytes: i64,
    pub index_interval_bytes: i64,
    pub retention_ms: i64,
    /// Negative (any value, as Kafka takes them): no size bound.
    pub retention_bytes: i64,
    /// `None`: never flush because of a message count (rely on the page cache and `flush()`).
    pub flush_messages: Option<i64>,
    /// `None`: never flush because of elapsed time.
    pub flush_ms: Option<i64>,
    pub message_timestamp_type: TimestampType,
    pub file_delete_delay_ms: i64,
    pub preallocate: bool,
    /// Largest batch accepted by `append` (Kafka's `max.message.bytes`).
    pub max_message_bytes: i64,
    /// `cleanup.policy` holds `compact`: the log cleaner keeps the latest record of each key.
    pub compact: bool,
    /// `cleanup.policy` holds `delete`: `retention.ms` / `retention.bytes` remove old segments.
    pub delete: bool,
    /// `delete.retention.ms`: how long a tombstone stays once the cleaner set its delete horizon.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty bytes / cleanable bytes above which the log is cleaned.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this stay uncompacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the log cleanable whatever its
    /// dirty ratio (and bounds how long the active segment of a compacted log stays open).
    pub max_compaction_lag_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            segment_index_bytes: 10_485_760,
            index_interval_bytes: 4096,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            flush_messages: None,
            flush_ms: None,
            message_timestamp_type: TimestampType::CreateTime,
            file_delete_delay_ms: 60_000,
            preallocate: false,
            max_message_bytes: 1_048_588,
            compact: false,
            delete: true,
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
        }
    }
}

fn at_least(key: &'static str, value: i64, min: i64) -> StorageResult<()> {
    if value < min {
        return Err(StorageError::config(key, format!("{value} is below the minimum {min}")));
    }
    Ok(())
}

impl LogConfig {
    /// Check every value; the error names the offending key.
    pub fn validate(&self) -> StorageResult<()> {
        at_least("segment_bytes", self.segment_bytes, MIN_SEGMENT_BYTES)?;
        if self.segment_bytes > MAX_SEGMENT_BYTES {
            return Err(StorageError::config(
                "segment_bytes",
                format!("{} exceeds the maximum {MAX_SEGMENT_BYTES} (index positions are int32)", self.segment_bytes),
            ));
        }
        at_least("segment_ms", self.segment_ms, 1)?;
        at_least("segment_index_bytes", self.segment_index_bytes, MIN_SEGMENT_INDEX_BYTES)?;
        if self.segment_index_bytes > i32::MAX as i64 {
            return Err(StorageError::config(
                "segment_index_bytes",
                format!("{} exceeds the maximum {}", self.segment_index_bytes, i32::MAX),
            ));
        }
        at_least("index_interval_bytes", self.index_interval_bytes, 0)?;
        at_least("retention_ms", self.retention_ms, -1)?;
        // any negative retention.bytes is no size bound (Kafka's LogConfig has no lower bound for it)
        if let Some(n) = self.flush_messages {
            at_least("flush_messages", n, 1)?;
        }
        if let Some(ms) = self.flush_ms {
            at_least("flush_ms", ms, 0)?;
        }
        at_least("file_delete_delay_ms", self.file_delete_delay_ms, 0)?;
        at_least("max_message_bytes", self.max_message_bytes, 0)?;
        at_least("delete_retention_ms", self.delete_retention_ms, 0)?;
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return Err(StorageError::config(
                "min_cleanable_dirty_ratio",
                format!("{} is outside [0, 1]", self.min_cleanable_dirty_ratio),
            ));
        }
        at_least("min_compaction_lag_ms", self.min_compaction_lag_ms, 0)?;
        at_least("max_compaction_lag_ms", self.max_compaction_lag_ms, 1)?;
        Ok(())
    }

    /// Parse Kafka's `cleanup.policy` (a comma-separated list of `delete` and `compact`) into
    /// (compact, delete).
    pub fn parse_cleanup_policy(policy: &str) -> StorageResult<(bool, bool)> {
        let (mut compact, mut delete) = (false, false);
        for item in policy.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item {
                "compact" => compact = true,
                "delete" => delete = true,
                other => {
                    return Err(StorageError::config(
                        "cleanup_policy",
                        format!("unknown policy {other:?}; expected \"delete\" and/or \"compact\""),
                    ))
                }
            }
        }
        Ok((compact, delete))
    }

    /// `cleanup.policy` as Kafka writes it.
    pub fn cleanup_policy(&self) -> String {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete".into(),
            (true, false) => "compact".into(),
            (false, true) => "delete".into(),
            (false, false) => String::new(),
        }
    }

    /// Age after which the active segment rolls: `segment.ms`, and for compacted logs at most
    /// `max.compaction.lag.ms` (so old records do not wait in the uncleanable active segment).
    pub fn roll_ms(&self) -> i64 {
        if self.compact {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// Maximum number of entries in a segment's offset index before the segment rolls.
    pub fn max_offset_index_entries(&self) -> usize {
        (self.segment_index_bytes / 8) as usize
    }
    /// Maximum number of entries in a segment's time index before the segment rolls.
    pub fn max_time_index_entries(&self) -> usize {
        (self.segment_index_bytes / 12) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid() {
        LogConfig::default().validate().unwrap();
    }

    #[test]
    fn negative_segment_bytes_is_rejected_naming_the_key() {
        let c = LogConfig { segment_bytes: -5, ..Default::default() };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("segment_bytes"), "{e}");
    }

    #[test]
    fn unknown_timestamp_type_is_rejected() {
        let e = TimestampType::parse("WallClock").unwrap_err().to_string();
        assert!(e.contains("message_timestamp_type") && e.contains("WallClock"), "{e}");
    }

    #[test]
    fn zero_flush_messages_is_rejected() {
        let c = LogConfig { flush_messages: Some(0), ..Default::default() };
        assert!(c.validate().unwrap_err().to_string().contains("flush_messages"));
    }
}
