//! Warnings the storage engine wants an operator to see (what recovery dropped, which index
//! was rebuilt). They queue here; the Python binding drains them into `logging`, and Rust
//! tests can inspect them. The queue is bounded so an unread queue cannot grow forever.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Oldest warnings are dropped beyond this many unread ones.
const MAX_PENDING_WARNINGS: usize = 10_000;

static PENDING: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
/// Fast check for the common case of nothing queued (read after every storage call).
static HAS_PENDING: AtomicBool = AtomicBool::new(false);

pub fn warn(msg: String) {
    let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
    if q.len() >= MAX_PENDING_WARNINGS {
        q.pop_front();
    }
    q.push_back(msg);
    HAS_PENDING.store(true, Ordering::Release);
}

/// Take every queued warning, oldest first.
pub fn take_warnings() -> Vec<String> {
    if !HAS_PENDING.load(Ordering::Acquire) {
        return Vec::new();
    }
    let mut q = PENDING.lock().unwrap_or_else(|p| p.into_inner());
    HAS_PENDING.store(false, Ordering::Release);
    q.drain(..).collect()
}
