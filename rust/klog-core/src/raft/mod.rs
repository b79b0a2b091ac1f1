//! The controller quorum's replicated log: tikv's raft-rs (`RawNode`, sans-IO) over the
//! `__cluster_metadata-0` partition stored in Kafka's format (see `storage`).

pub mod control;
pub mod node;
pub mod storage;

pub use node::{CommittedEntry, NodeConfig, NodeError, RaftNode, ReadyOutput};
pub use storage::{EntryKind, MetadataLog, MetadataLogError};

#[cfg(test)]
mod tests;
