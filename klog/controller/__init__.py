"""The controller quorum: a Raft-replicated ``__cluster_metadata`` log (raft-rs in the native core)."""
