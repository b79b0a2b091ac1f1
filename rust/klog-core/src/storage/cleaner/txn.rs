//! Transactions in a cleaning pass: Kafka's `CleanedTransactionMetadata`.
//!
//! The aborted transactions come from the partition's `.txnindex` files (Kafka's
//! `TransactionIndex`, written by the broker when an ABORT marker is appended; 34-byte entries:
//! version, producer id, first offset, last offset = the marker's, last stable offset). Walking
//! the batches in offset order:
//!
//! - a transactional data batch of a producer with an aborted transaction open at that offset is
//!   discarded (its keys never enter the key map either, so an aborted record never shadows a
//!   committed one);
//! - a transaction marker may go once its transaction has no batch left in the log (no batch of
//!   it was met since the last marker of its producer): it first gets a delete horizon, like a
//!   tombstone, and is removed by a pass after `delete.retention.ms`; a marker whose transaction
//!   still has batches (aborted ones being discarded in this very pass included) stays. An ABORT
//!   marker also stays while the index still lists its transaction (the broker drops the entry
//!   once the marker has its horizon): a consumer told of an aborted transaction whose marker it
//!   never meets would skip the producer's later transactions.
//!
//! The cleaner never cleans at or past the first unstable offset (the first offset of a
//! transaction still open or whose marker the ISR lacks), so every transaction it meets has its
//! marker in the log and every aborted one its index entry.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs;
use std::path::Path;

use crate::batch::header::BatchHeader;
use crate::batch::records::{open_batch, DecodeOptions};

use super::super::events::warn;

pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
const ENTRY_SIZE: usize = 34;
/// Control record types (the key's int16 after its int16 version).
pub const CONTROL_ABORT: i16 = 0;
pub const CONTROL_COMMIT: i16 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

/// Every aborted transaction listed by the `.txnindex` files of `dir`, by first offset (a torn
/// last entry, or an unreadable file, is skipped: the broker rewrites the index at its start).
pub fn read_aborted(dir: &Path) -> Vec<AbortedTxn> {
    read_aborted_with(dir, |p| fs::read(p))
}

/// Times `read_aborted` lists the files again when one vanished while it read them.
const RELIST_ATTEMPTS: usize = 8;

/// `read_aborted` reading each file with `read` (tests stand a concurrent broker in it).
///
/// The broker moves the entries of a removed segment's index into the index of the segment that
/// holds their markers now, appending there before it deletes the old file (`remove_orphans` in
/// klog/broker/txn_index.py). A listed file found gone was therefore moved after the files before
/// it were read, and its entries may be in one of them: the files are listed and read again.
pub fn read_aborted_with(dir: &Path, mut read: impl FnMut(&Path) -> std::io::Result<Vec<u8>>) -> Vec<AbortedTxn> {
    let mut out = Vec::new();
    for attempt in 0..RELIST_ATTEMPTS {
        out.clear();
        let Ok(entries) = fs::read_dir(dir) else { return out };
        let mut files: Vec<(i64, std::path::PathBuf)> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let stem = name.to_str()?.strip_suffix(TXN_INDEX_SUFFIX)?.to_owned();
                if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some((stem.parse().ok()?, entry.path()))
            })
            .collect();
        files.sort();
        let last_attempt = attempt + 1 == RELIST_ATTEMPTS;
        let mut vanished = false;
        for (_, path) in &files {
            let data = match read(path) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    vanished = true;
                    if last_attempt {
                        continue; // no more listings: read what is still there
                    }
                    break;
                }
                Err(_) => continue,
            };
            for e in data.chunks_exact(ENTRY_SIZE) {
                if i16::from_be_bytes([e[0], e[1]]) != 0 {
                    break;
                }
                let int64 = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
                out.push(AbortedTxn { producer_id: int64(2), first_offset: int64(10), last_offset: int64(18) });
            }
        }
        if !vanished {
            break;
        }
        if last_attempt {
            warn(format!("{}: .txnindex files kept vanishing while the cleaner read them", dir.display()));
        }
    }
    out.sort_by_key(|a| (a.first_offset, a.last_offset));
    out.dedup();
    out
}

/// The control record type of a control batch (its first record's key), None if it has none or
/// does not parse.
pub fn control_type(batch: &[u8], at: usize) -> Option<i16> {
    let view = open_batch(batch, at, &DecodeOptions::fetch()).ok()?;
    let first = view.records().next()?.ok()?;
    let key = first.key?;
    (key.len() >= 4).then(|| i16::from_be_bytes([key[2], key[3]]))
}

/// What the pass does with a batch for its transaction's sake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnAction {
    /// Cleaned as usual.
    Keep,
    /// A batch of an aborted transaction: none of its records survive.
    DiscardRecords,
    /// The marker of a transaction with no batch left: delete horizon, then removal.
    MarkerOfEmptyTxn,
    /// The same, for an ABORT marker the index still lists: delete horizon, but no removal yet.
    IndexedMarkerOfEmptyTxn,
}

/// Kafka's `CleanedTransactionMetadata` over the batches of one pass, in offset order.
pub struct TxnTracker {
    aborted: VecDeque<AbortedTxn>,
    /// (producer id, marker offset) of every aborted transaction the index lists.
    indexed: HashSet<(i64, i64)>,
    /// Producer id -> (its open aborted transaction's marker offset, a batch of it was met). An
    /// entry whose marker is gone (a later batch of the producer is met past it) ends there.
    ongoing_aborted: HashMap<i64, (i64, bool)>,
    ongoing_committed: HashSet<i64>,
}

impl TxnTracker {
    pub fn new(aborted: &[AbortedTxn]) -> Self {
        TxnTracker {
            aborted: aborted.iter().copied().collect(),
            indexed: aborted.iter().map(|a| (a.producer_id, a.last_offset)).collect(),
            ongoing_aborted: HashMap::new(),
            ongoing_committed: HashSet::new(),
        }
    }

    fn consume_up_to(&mut self, offset: i64) {
        while self.aborted.front().is_some_and(|a| a.first_offset <= offset) {
            let a = self.aborted.pop_front().expect("front exists");
            self.ongoing_aborted.insert(a.producer_id, (a.last_offset, false));
        }
    }

    /// The action for a batch whose header is `h` (`bytes` the whole batch at byte `at`).
    pub fn on_batch(&mut self, h: &BatchHeader, bytes: &[u8], at: usize) -> TxnAction {
        self.consume_up_to(h.last_offset());
        if h.is_control() {
            if h.records_count == 0 {
                return TxnAction::MarkerOfEmptyTxn; // an already emptied marker
            }
            match control_type(bytes, at) {
                Some(CONTROL_ABORT) => match self.ongoing_aborted.remove(&h.producer_id) {
                    Some((_, true)) => TxnAction::Keep,
                    _ if self.indexed.contains(&(h.producer_id, h.base_offset)) => TxnAction::IndexedMarkerOfEmptyTxn,
                    _ => TxnAction::MarkerOfEmptyTxn,
                },
                Some(CONTROL_COMMIT) => {
                    if self.ongoing_committed.remove(&h.producer_id) {
                        TxnAction::Keep
                    } else {
                        TxnAction::MarkerOfEmptyTxn
                    }
                }
                _ => TxnAction::Keep,
            }
        } else if h.is_transactional() {
            if let Some((marker, seen)) = self.ongoing_aborted.get_mut(&h.producer_id) {
                if h.base_offset < *marker {
                    *seen = true;
                    return TxnAction::DiscardRecords;
                }
                self.ongoing_aborted.remove(&h.producer_id);
            }
            self.ongoing_committed.insert(h.producer_id);
            TxnAction::Keep
        } else {
            TxnAction::Keep
        }
    }
}
