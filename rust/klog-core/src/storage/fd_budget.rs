//! A bound on the `.log` descriptors a log manager keeps open for sealed segments.
//!
//! Sealed segments open their `.log` lazily (on the first read) and would otherwise keep it
//! open forever: with many partitions and segments that runs into the process's descriptor
//! limit. Each segment's descriptor lives in an `FdSlot`; a sealed segment's slot is
//! registered here when it opens, and when more than `max_open` are registered the least
//! recently used one that nobody is using is closed (the segment reopens it on demand).
//!
//! A descriptor is in use while anything besides its slot holds it: a read in progress, or a
//! file range handed out for `sendfile`. Those are never closed under their holder (the
//! `Arc<File>` keeps the descriptor alive); such slots are skipped, so the bound can be
//! exceeded by at most the descriptors in use at that moment. Active segments pin their
//! descriptor and are never registered.
//!
//! Lock order: the budget's lock, then a slot's lock. Segment code never holds a slot's lock
//! while calling into the budget.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Default bound on open sealed-segment descriptors per log manager (also capped at half the
/// process's descriptor limit, leaving room for sockets and everything else).
pub const DEFAULT_MAX_OPEN_SEGMENT_FILES: usize = 10_000;

/// One segment's `.log` descriptor, if open.
#[derive(Debug, Default)]
pub struct FdSlot {
    file: Mutex<Option<Arc<File>>>,
    last_used: AtomicU64,
}

impl FdSlot {
    pub fn get(&self) -> Option<Arc<File>> {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn set(&self, f: Option<Arc<File>>) {
        let old = std::mem::replace(&mut *self.file.lock().unwrap_or_else(|p| p.into_inner()), f);
        drop(old); // closed (if unused elsewhere) outside the lock
    }
    pub fn is_open(&self) -> bool {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }
    /// Close the descriptor unless something besides this slot holds it. True if closed (or
    /// already closed).
    fn close_if_unused(&self) -> bool {
        let Ok(mut g) = self.file.try_lock() else { return false };
        match &*g {
            None => true,
            Some(f) if Arc::strong_count(f) == 1 => {
                let f = g.take();
                drop(g);
                drop(f);
                true
            }
            Some(_) => false,
        }
    }
}

#[derive(Debug)]
pub struct FdBudget {
    max_open: usize,
    clock: AtomicU64,
    registered: Mutex<Vec<Weak<FdSlot>>>,
}

impl FdBudget {
    pub fn new(max_open: usize) -> Self {
        FdBudget { max_open: max_open.max(1), clock: AtomicU64::new(0), registered: Mutex::new(Vec::new()) }
    }

    /// The default bound: `DEFAULT_MAX_OPEN_SEGMENT_FILES`, at most half the descriptor limit.
    pub fn default_max_open() -> usize {
        let mut max = DEFAULT_MAX_OPEN_SEGMENT_FILES;
        #[cfg(unix)]
        {
            let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: plain syscall filling a local struct.
            if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 && r.rlim_cur != libc::RLIM_INFINITY {
                max = max.min((r.rlim_cur / 2).max(16) as usize);
            }
        }
        max
    }

    pub fn max_open(&self) -> usize {
        self.max_open
    }

    /// Mark `slot` as just used (cheap: no lock).
    pub fn touch(&self, slot: &FdSlot) {
        slot.last_used.store(self.clock.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
    }

    /// `slot` (of a sealed segment) just opened its descriptor: count it, and close the least
    /// recently used unused ones beyond the bound. The caller holds no slot lock.
    pub fn register(&self, slot: &Arc<FdSlot>) {
        self.touch(slot);
        let mut reg = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        reg.push(Arc::downgrade(slot));
        if reg.len() <= self.max_open {
            return;
        }
        // Forget slots that were closed or dropped meanwhile (segment closed or deleted).
        reg.retain(|w| w.upgrade().is_some_and(|s| s.is_open()));
        if reg.len() <= self.max_open {
            return;
        }
        // Close down to 90% of the bound in one pass (one sort per ~max/10 opens, not one per
        // open), least recently used first, skipping descriptors in use.
        let target = self.max_open - self.max_open / 10;
        let mut order: Vec<(u64, usize)> = reg
            .iter()
            .enumerate()
            .filter_map(|(i, w)| w.upgrade().map(|s| (s.last_used.load(Ordering::Relaxed), i)))
            .collect();
        order.sort_unstable();
        let mut open = reg.len();
        let mut closed = vec![false; reg.len()];
        for &(_, i) in &order {
            if open <= target {
                break;
            }
            if reg[i].upgrade().is_some_and(|s| !Arc::ptr_eq(&s, slot) && s.close_if_unused()) {
                closed[i] = true;
                open -= 1;
            }
        }
        // Every remaining descriptor in use: over the bound until they are released.
        let mut i = 0;
        reg.retain(|_| {
            i += 1;
            !closed[i - 1]
        });
    }

    /// Registered slots with an open descriptor.
    pub fn open_count(&self) -> usize {
        let reg = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        reg.iter().filter(|w| w.upgrade().is_some_and(|s| s.is_open())).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_slot(dir: &std::path::Path, i: usize) -> Arc<FdSlot> {
        let p = dir.join(format!("f{i}"));
        std::fs::write(&p, b"x").unwrap();
        let s = Arc::new(FdSlot::default());
        s.set(Some(Arc::new(File::open(&p).unwrap())));
        s
    }

    #[test]
    fn least_recently_used_unused_descriptors_are_closed_beyond_the_bound() {
        let dir = std::env::temp_dir().join(format!("klog-fd-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let budget = FdBudget::new(3);
        let slots: Vec<_> = (0..3).map(|i| open_slot(&dir, i)).collect();
        for s in &slots {
            budget.register(s);
        }
        budget.touch(&slots[0]); // slots[1] is now the least recently used
        let in_use = slots[1].get().unwrap(); // ...but in use (a handed-out file range)
        let extra = open_slot(&dir, 3);
        budget.register(&extra);
        assert!(slots[1].is_open(), "a descriptor in use is never closed");
        assert!(!slots[2].is_open(), "the least recently used unused one is");
        assert!(slots[0].is_open() && extra.is_open());
        assert_eq!(budget.open_count(), 3);
        drop(in_use);
        let more = open_slot(&dir, 4);
        budget.register(&more);
        assert!(!slots[1].is_open());
        assert_eq!(budget.open_count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
