//! Deadline tracking for the group coordinator: member session expiry (heartbeats) and the coordinator's
//! other per-group timers, keyed by a `u64` the caller chooses.
//!
//! Heartbeats are the hot path: every member of every group pushes its session deadline forward every few
//! seconds, while deadlines rarely actually pass. So extending a deadline is a hash-map update only: the
//! heap keeps the *earlier* deadline it was queued with, and when that entry surfaces the tracker sees the
//! key was extended and requeues it once at its current deadline. A key therefore costs one heap entry, and
//! a heartbeat costs O(1) instead of O(log n). Moving a deadline earlier (rare) pushes a fresh entry; the
//! superseded one is recognised by its sequence number and dropped when it surfaces (or on compaction).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Heap entries beyond `COMPACT_SLACK + 2 * live keys` trigger a rebuild that drops superseded entries,
/// so cancel-heavy workloads cannot grow the heap without bound.
const COMPACT_SLACK: usize = 1024;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The deadline the key must meet (updated in place by extensions).
    deadline: i64,
    /// The deadline of this key's live heap entry (<= `deadline`).
    queued: i64,
    /// Identifies the live heap entry; entries with another sequence are stale.
    seq: u64,
}

/// A set of `(key, deadline_ms)` pairs that yields the keys whose deadline has passed.
#[derive(Debug, Default)]
pub struct DeadlineTracker {
    entries: HashMap<u64, Entry>,
    heap: BinaryHeap<Reverse<(i64, u64, u64)>>,
    next_seq: u64,
}

impl DeadlineTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys with a pending deadline.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, key: u64) -> bool {
        self.entries.contains_key(&key)
    }

    /// The pending deadline of `key`, if any.
    pub fn deadline(&self, key: u64) -> Option<i64> {
        self.entries.get(&key).map(|e| e.deadline)
    }

    /// Sets (or replaces) the deadline of `key`.
    pub fn schedule(&mut self, key: u64, deadline_ms: i64) {
        if let Some(entry) = self.entries.get_mut(&key) {
            if deadline_ms >= entry.queued {
                // Extension (the heartbeat case): the queued entry surfaces first and requeues.
                entry.deadline = deadline_ms;
                return;
            }
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.entries.insert(key, Entry { deadline: deadline_ms, queued: deadline_ms, seq });
        self.heap.push(Reverse((deadline_ms, key, seq)));
        self.maybe_compact();
    }

    /// Removes `key`; returns whether it was pending.
    pub fn cancel(&mut self, key: u64) -> bool {
        let removed = self.entries.remove(&key).is_some();
        if removed {
            self.maybe_compact();
        }
        removed
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.heap.clear();
    }

    /// The earliest pending deadline (exact, not the queued lower bound), or None when empty.
    pub fn next_deadline(&mut self) -> Option<i64> {
        loop {
            let Reverse((queued, key, seq)) = *self.heap.peek()?;
            match self.entries.get_mut(&key) {
                Some(entry) if entry.seq == seq => {
                    if entry.deadline == queued {
                        return Some(queued);
                    }
                    // Extended since it was queued: requeue at the real deadline and look again.
                    self.heap.pop();
                    entry.queued = entry.deadline;
                    self.heap.push(Reverse((entry.deadline, key, seq)));
                }
                _ => {
                    self.heap.pop();
                }
            }
        }
    }

    /// Removes and returns up to `max` keys whose deadline is `<= now_ms`, earliest first.
    pub fn pop_expired(&mut self, now_ms: i64, max: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(&Reverse((queued, key, seq))) = self.heap.peek() else { break };
            if queued > now_ms {
                break;
            }
            self.heap.pop();
            let Some(entry) = self.entries.get_mut(&key) else { continue };
            if entry.seq != seq {
                continue;
            }
            if entry.deadline == queued {
                self.entries.remove(&key);
                out.push(key);
            } else {
                // Extended since it was queued: requeue at the real deadline (keeps expiry order exact).
                entry.queued = entry.deadline;
                self.heap.push(Reverse((entry.deadline, key, seq)));
            }
        }
        out
    }

    fn maybe_compact(&mut self) {
        if self.heap.len() <= COMPACT_SLACK + 2 * self.entries.len() {
            return;
        }
        let live: Vec<_> = self
            .entries
            .iter_mut()
            .map(|(&key, entry)| {
                entry.queued = entry.deadline;
                Reverse((entry.deadline, key, entry.seq))
            })
            .collect();
        self.heap = BinaryHeap::from(live);
    }

    /// Heap size including superseded entries (for tests of the compaction bound).
    pub fn heap_len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_keys_come_out_in_deadline_order_and_only_once() {
        let mut t = DeadlineTracker::new();
        t.schedule(1, 300);
        t.schedule(2, 100);
        t.schedule(3, 200);
        assert_eq!(t.pop_expired(99, usize::MAX), Vec::<u64>::new());
        assert_eq!(t.pop_expired(250, usize::MAX), vec![2, 3]);
        assert_eq!(t.pop_expired(250, usize::MAX), Vec::<u64>::new());
        assert_eq!(t.len(), 1);
        assert_eq!(t.pop_expired(300, usize::MAX), vec![1]);
        assert!(t.is_empty());
    }

    #[test]
    fn extending_a_deadline_postpones_expiry_without_growing_the_heap() {
        let mut t = DeadlineTracker::new();
        t.schedule(7, 100);
        for i in 0..10_000 {
            t.schedule(7, 100 + i);
        }
        assert_eq!(t.heap_len(), 1);
        assert_eq!(t.deadline(7), Some(100 + 9_999));
        assert!(t.pop_expired(5_000, usize::MAX).is_empty());
        assert_eq!(t.next_deadline(), Some(10_099));
        assert_eq!(t.pop_expired(10_099, usize::MAX), vec![7]);
    }

    #[test]
    fn moving_a_deadline_earlier_fires_at_the_new_deadline_once() {
        let mut t = DeadlineTracker::new();
        t.schedule(1, 1_000);
        t.schedule(1, 10);
        assert_eq!(t.next_deadline(), Some(10));
        assert_eq!(t.pop_expired(10, usize::MAX), vec![1]);
        assert!(t.pop_expired(2_000, usize::MAX).is_empty());
    }

    #[test]
    fn cancelled_keys_never_expire() {
        let mut t = DeadlineTracker::new();
        t.schedule(1, 10);
        t.schedule(2, 20);
        assert!(t.cancel(1));
        assert!(!t.cancel(1));
        assert_eq!(t.pop_expired(100, usize::MAX), vec![2]);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn rescheduling_after_cancel_uses_the_new_deadline() {
        let mut t = DeadlineTracker::new();
        t.schedule(1, 10);
        t.cancel(1);
        t.schedule(1, 50);
        assert!(t.pop_expired(20, usize::MAX).is_empty());
        assert_eq!(t.pop_expired(50, usize::MAX), vec![1]);
    }

    #[test]
    fn max_limits_the_batch_and_the_rest_stay_pending() {
        let mut t = DeadlineTracker::new();
        for k in 0..10 {
            t.schedule(k, k as i64);
        }
        assert_eq!(t.pop_expired(100, 3), vec![0, 1, 2]);
        assert_eq!(t.len(), 7);
        assert_eq!(t.pop_expired(100, usize::MAX).len(), 7);
    }

    #[test]
    fn cancel_churn_keeps_the_heap_bounded() {
        let mut t = DeadlineTracker::new();
        for round in 0..100_000u64 {
            t.schedule(round % 10, 1_000_000 - round as i64);
            if round % 3 == 0 {
                t.cancel(round % 10);
            }
        }
        assert!(t.heap_len() <= COMPACT_SLACK + 2 * t.len() + 1);
    }

    #[test]
    fn matches_a_naive_model_on_random_operations() {
        use proptest::prelude::*;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::default();
        let op = (0u8..4, 0u64..16, 0i64..1000);
        runner
            .run(&proptest::collection::vec(op, 0..300), |ops| {
                let mut t = DeadlineTracker::new();
                let mut model: HashMap<u64, i64> = HashMap::new();
                let mut now = 0i64;
                for (kind, key, value) in ops {
                    match kind {
                        0 | 1 => {
                            t.schedule(key, now + value);
                            model.insert(key, now + value);
                        }
                        2 => {
                            prop_assert_eq!(t.cancel(key), model.remove(&key).is_some());
                        }
                        _ => {
                            now += value / 4;
                            let mut want: Vec<(i64, u64)> =
                                model.iter().filter(|(_, &d)| d <= now).map(|(&k, &d)| (d, k)).collect();
                            want.sort();
                            let got = t.pop_expired(now, usize::MAX);
                            let got_set: std::collections::HashSet<_> = got.iter().copied().collect();
                            let want_set: std::collections::HashSet<_> = want.iter().map(|p| p.1).collect();
                            prop_assert_eq!(got_set, want_set);
                            // Deadline order (ties in any order).
                            let ds: Vec<i64> = got.iter().map(|k| model[k]).collect();
                            prop_assert!(ds.windows(2).all(|w| w[0] <= w[1]));
                            for k in &got {
                                model.remove(k);
                            }
                        }
                    }
                    prop_assert_eq!(t.len(), model.len());
                    prop_assert_eq!(t.next_deadline(), model.values().min().copied());
                }
                Ok(())
            })
            .unwrap();
    }
}
