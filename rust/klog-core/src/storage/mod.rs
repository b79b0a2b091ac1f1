//! The storage engine: partition logs in Kafka's on-disk format.
//!
//! Layering: `segment` (one `.log` + `.index` + `.timeindex`) -> `partition_log` (segments,
//! offsets, leader epochs, flush, retention, recovery) -> `log_manager` (log dirs,
//! checkpoint files, clean-shutdown marker). Nothing here knows about the network.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod error;
pub mod events;
pub mod fd_budget;
pub mod fileio;
pub mod index_file;
pub mod log_manager;
pub mod offset_index;
pub mod partition_log;
pub mod partition_metadata;
pub mod producer_state;
pub mod segment;
#[cfg(test)]
pub(crate) mod test_dir;
pub mod time_index;

pub use config::{LogConfig, TimestampType};
pub use error::{StorageError, StorageResult};
pub use log_manager::LogManager;
pub use partition_log::{AbortedTransaction, AppendInfo, FileRange, OpenOptions, PartitionLog, ReadInfo};
