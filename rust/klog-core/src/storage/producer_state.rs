//! One partition's idempotent-producer state: each producer's epoch and its last batches, Kafka's
//! `ProducerStateManager` entries (`ProducerAppendInfo`'s rules). Sans IO: the broker snapshots and
//! replays it (`klog/broker/producer_state.py`), the log's append paths check and update it.
//!
//! Kafka's rules, per producer id:
//! - a batch whose (epoch, first sequence, last sequence) matches one of the last 5 batches
//!   appended is a retry: answered with the original offsets, not appended again;
//! - an older epoch is fenced (INVALID_PRODUCER_EPOCH); a newer epoch must start at sequence 0;
//! - otherwise the first sequence must follow the last one (wrapping after 2**31 - 1), else
//!   OUT_OF_ORDER_SEQUENCE_NUMBER. An unknown producer (new, expired, or its data deleted) may
//!   start anywhere.
//!
//! Every append path checks, appends and records a batch while holding the table's lock
//! (`ProducerTable` behind a `Mutex`), as Kafka does under the log's lock, so two connections of
//! one producer cannot both append the same sequence. The broker's Python path cannot hold a Rust
//! lock across its own steps: it `hold`s the table from its check to its record (`release` on
//! failure) and the native paths leave a held table's batches to it.

use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
pub const BATCHES_TO_RETAIN: usize = 5;
const INT32_MAX: i32 = i32::MAX;

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp (-1 unknown).
    pub timestamp: i64,
    pub log_append_time: i64,
}

/// One producer's state on the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// The last `BATCHES_TO_RETAIN` batches, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    pub last_seen_ms: i64,
    /// The coordinator epoch of the last marker this producer's transactions got here (-1: none).
    pub coordinator_epoch: i32,
    /// The timestamp of its last batch or marker (DescribeProducers' LastTimestamp).
    pub last_timestamp: i64,
}

impl ProducerEntry {
    pub fn new(epoch: i16, coordinator_epoch: i32) -> ProducerEntry {
        ProducerEntry { epoch, batches: VecDeque::new(), last_seen_ms: 0, coordinator_epoch, last_timestamp: -1 }
    }

    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }
}

/// The verdict on a producer's batch before it is appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// A new batch: append it (then `update`).
    Append,
    /// A retry of an appended batch: answer with its offsets.
    Duplicate(BatchMetadata),
    /// An epoch older than the producer's (INVALID_PRODUCER_EPOCH).
    FencedEpoch,
    /// Not the next sequence (OUT_OF_ORDER_SEQUENCE_NUMBER).
    OutOfOrder,
}

/// The verdict on a COMMIT/ABORT marker (`check_marker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerCheck {
    Write,
    /// INVALID_PRODUCER_EPOCH: a marker of an earlier epoch (or at it, under protocol v2).
    FencedEpoch,
    /// TRANSACTION_COORDINATOR_FENCED: from a coordinator epoch older than the last marker's.
    FencedCoordinator,
}

pub fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq == last_seq.wrapping_add(1) || (next_seq == 0 && last_seq == INT32_MAX)
}

/// One partition's producers.
#[derive(Debug, Default)]
pub struct ProducerTable {
    entries: HashMap<i64, ProducerEntry>,
    /// The Python path is between its check and its record of a batch: the native paths leave this
    /// partition's producers' batches to it meanwhile.
    held: bool,
}

impl ProducerTable {
    pub fn new() -> ProducerTable {
        ProducerTable::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.entries.get(&producer_id)
    }

    pub fn entries(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    pub fn is_held(&self) -> bool {
        self.held
    }

    pub fn hold(&mut self) {
        self.held = true;
    }

    pub fn release(&mut self) {
        self.held = false;
    }

    /// Kafka's checks of a batch of `producer_id` at `epoch` with sequences first..=last.
    pub fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> SequenceCheck {
        let Some(entry) = self.entries.get(&producer_id) else {
            return SequenceCheck::Append;
        };
        if epoch < entry.epoch {
            return SequenceCheck::FencedEpoch;
        }
        if epoch > entry.epoch {
            return if first_seq == 0 { SequenceCheck::Append } else { SequenceCheck::OutOfOrder };
        }
        if let Some(batch) = entry.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq) {
            return SequenceCheck::Duplicate(*batch);
        }
        // an entry without batches (a protocol v2 marker moved its epoch up) has last sequence -1:
        // the epoch's first batch starts at 0, as Kafka's checkSequence has it. Accepting any start
        // took a later in-flight batch of a new epoch whose first batch was refused (a coordinator's
        // CONCURRENT_TRANSACTIONS on a 3-node cluster), then refused that first batch's retry
        if !in_sequence(entry.last_seq(), first_seq) {
            return SequenceCheck::OutOfOrder;
        }
        SequenceCheck::Append
    }

    /// Record an appended batch (a new epoch starts a new entry, keeping the coordinator epoch).
    pub fn update(&mut self, producer_id: i64, epoch: i16, batch: BatchMetadata, now_ms: i64) {
        let entry = self.entry_at(producer_id, epoch, |old| old != epoch);
        if entry.batches.len() == BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(batch);
        entry.last_seen_ms = now_ms;
        entry.last_timestamp = batch.timestamp;
    }

    /// A COMMIT/ABORT marker of `producer_id` at `epoch` was written: its epoch moves up to the
    /// marker's (protocol v2 bumps it; sequences restart), and its coordinator epoch to the marker's.
    pub fn end_transaction(&mut self, producer_id: i64, epoch: i16, now_ms: i64, coordinator_epoch: i32, timestamp: i64) {
        let entry = self.entry_at(producer_id, epoch, |old| epoch > old);
        entry.last_seen_ms = now_ms;
        entry.last_timestamp = timestamp;
        if coordinator_epoch >= 0 {
            entry.coordinator_epoch = coordinator_epoch;
        }
    }

    /// The producer's entry, replaced by a fresh one at `epoch` (keeping the coordinator epoch) when
    /// there is none or `replace(old epoch)`.
    fn entry_at(&mut self, producer_id: i64, epoch: i16, replace: impl Fn(i16) -> bool) -> &mut ProducerEntry {
        let entry = self.entries.entry(producer_id).or_insert_with(|| ProducerEntry::new(epoch, -1));
        if replace(entry.epoch) {
            *entry = ProducerEntry::new(epoch, entry.coordinator_epoch);
        }
        entry
    }

    /// Kafka's fencing of a COMMIT/ABORT marker (see the broker's `ProducerStateManager.check_marker`).
    pub fn check_marker(&self, producer_id: i64, epoch: i16, coordinator_epoch: Option<i32>, transaction_version: i16) -> MarkerCheck {
        let Some(entry) = self.entries.get(&producer_id) else {
            return MarkerCheck::Write;
        };
        if epoch < entry.epoch || (transaction_version >= 2 && epoch <= entry.epoch) {
            return MarkerCheck::FencedEpoch;
        }
        if coordinator_epoch.is_some_and(|c| c < entry.coordinator_epoch) {
            return MarkerCheck::FencedCoordinator;
        }
        MarkerCheck::Write
    }

    /// Put back an entry as a snapshot had it.
    pub fn restore(&mut self, producer_id: i64, mut entry: ProducerEntry) {
        while entry.batches.len() > BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        self.entries.insert(producer_id, entry);
    }

    /// The log was truncated to `log_end_offset`: forget the batches beyond it, and a producer left
    /// with none of its batches.
    pub fn truncate(&mut self, log_end_offset: i64) {
        self.entries.retain(|_, entry| {
            let before = entry.batches.len();
            entry.batches.retain(|b| b.last_offset < log_end_offset);
            before == 0 || !entry.batches.is_empty()
        });
    }

    /// Forget the producers not seen for more than `expiration_ms`; how many.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, e| now_ms - e.last_seen_ms <= expiration_ms);
        before - self.entries.len()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.held = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(first: i32, last: i32, offset: i64) -> BatchMetadata {
        BatchMetadata {
            first_seq: first,
            last_seq: last,
            base_offset: offset,
            last_offset: offset + i64::from(last - first),
            timestamp: 7,
            log_append_time: -1,
        }
    }

    #[test]
    fn a_retry_of_one_of_the_last_five_batches_is_a_duplicate_and_an_older_one_is_out_of_order() {
        let mut t = ProducerTable::new();
        for i in 0..6 {
            assert_eq!(t.check(1, 0, i * 10, i * 10 + 9), SequenceCheck::Append);
            t.update(1, 0, batch(i * 10, i * 10 + 9, i64::from(i) * 10), 5);
        }
        assert_eq!(t.check(1, 0, 10, 19), SequenceCheck::Duplicate(batch(10, 19, 10)));
        assert_eq!(t.check(1, 0, 0, 9), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(1, 0, 61, 61), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(1, 0, 60, 60), SequenceCheck::Append);
        assert_eq!(t.get(1).unwrap().batches.len(), BATCHES_TO_RETAIN);
    }

    #[test]
    fn epochs_fence_older_ones_and_a_newer_one_starts_at_sequence_zero() {
        let mut t = ProducerTable::new();
        t.update(1, 3, batch(0, 4, 0), 5);
        assert_eq!(t.check(1, 2, 5, 5), SequenceCheck::FencedEpoch);
        assert_eq!(t.check(1, 4, 5, 5), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(1, 4, 0, 0), SequenceCheck::Append);
        assert_eq!(t.check(2, 0, 77, 80), SequenceCheck::Append, "an unknown producer starts anywhere");
        t.update(1, 3, batch(5, 5, 5), 5);
        assert_eq!(t.check(1, 3, 6, 6), SequenceCheck::Append);
        assert!(in_sequence(i32::MAX, 0));
    }

    #[test]
    fn a_marker_moves_the_epoch_up_keeps_the_coordinator_epoch_and_fences_late_markers() {
        let mut t = ProducerTable::new();
        t.update(1, 0, batch(0, 0, 0), 5);
        assert_eq!(t.check_marker(1, 1, Some(3), 2), MarkerCheck::Write);
        t.end_transaction(1, 1, 6, 3, 9);
        let e = t.get(1).unwrap();
        assert_eq!((e.epoch, e.coordinator_epoch, e.last_timestamp, e.batches.len()), (1, 3, 9, 0));
        assert_eq!(t.check_marker(1, 1, Some(3), 2), MarkerCheck::FencedEpoch, "v2: a marker at the epoch is late");
        assert_eq!(t.check_marker(1, 1, Some(3), 0), MarkerCheck::Write);
        assert_eq!(t.check_marker(1, 2, Some(2), 2), MarkerCheck::FencedCoordinator);
        t.update(1, 2, batch(0, 0, 4), 7);
        assert_eq!(t.get(1).unwrap().coordinator_epoch, 3, "a new epoch keeps the coordinator epoch");
    }

    #[test]
    fn after_a_marker_moved_the_epoch_up_the_epochs_first_batch_starts_at_sequence_zero() {
        let mut t = ProducerTable::new();
        t.update(1, 0, batch(0, 9, 0), 5);
        t.end_transaction(1, 1, 6, 3, 9); // protocol v2: the marker is written at the next epoch
        assert_eq!(t.check(1, 1, 10, 19), SequenceCheck::OutOfOrder, "a later in-flight batch first");
        assert_eq!(t.check(1, 1, 0, 9), SequenceCheck::Append);
        t.update(1, 1, batch(0, 9, 11), 7);
        assert_eq!(t.check(1, 1, 10, 19), SequenceCheck::Append);
        t.end_transaction(2, 4, 6, 3, 9); // a producer known by its marker alone
        assert_eq!(t.check(2, 4, 5, 5), SequenceCheck::OutOfOrder);
        assert_eq!(t.check(2, 4, 0, 5), SequenceCheck::Append);
    }

    #[test]
    fn truncation_forgets_batches_beyond_the_end_and_producers_left_with_none() {
        let mut t = ProducerTable::new();
        t.update(1, 0, batch(0, 0, 0), 5);
        t.update(1, 0, batch(1, 1, 5), 5);
        t.update(2, 0, batch(0, 0, 6), 5);
        t.end_transaction(3, 0, 10, 1, 5);
        t.truncate(5);
        assert_eq!(t.get(1).unwrap().batches.len(), 1);
        assert!(t.get(2).is_none());
        assert!(t.get(3).is_some(), "a producer known by its marker alone stays");
        assert_eq!(t.expire(100, 94), 1);
        assert_eq!(t.expire(100, 89), 1);
        assert!(t.is_empty());
    }
}
