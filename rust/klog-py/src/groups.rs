//! Group coordinator bindings: the deadline tracker behind member session expiry.

use klog_core::groups::DeadlineTracker;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Deadlines (milliseconds) keyed by non-negative integers; yields the keys whose deadline has passed.
/// Extending a pending deadline (a heartbeat) is a hash update: thousands of members cost little.
#[pyclass(module = "klog._native._core", name = "SessionTracker")]
pub struct SessionTracker {
    inner: DeadlineTracker,
}

#[pymethods]
impl SessionTracker {
    #[new]
    fn new() -> Self {
        Self { inner: DeadlineTracker::new() }
    }

    /// Sets (or replaces) the deadline of `key`.
    fn schedule(&mut self, key: u64, deadline_ms: i64) {
        self.inner.schedule(key, deadline_ms);
    }

    /// Removes `key`; returns whether it had a pending deadline.
    fn cancel(&mut self, key: u64) -> bool {
        self.inner.cancel(key)
    }

    /// The pending deadline of `key`, or None.
    fn deadline(&self, key: u64) -> Option<i64> {
        self.inner.deadline(key)
    }

    /// The earliest pending deadline, or None when nothing is pending.
    fn next_deadline(&mut self) -> Option<i64> {
        self.inner.next_deadline()
    }

    /// Removes and returns the keys whose deadline is <= `now_ms`, earliest first (at most `max_count`).
    #[pyo3(signature = (now_ms, max_count=None))]
    fn expired(&mut self, now_ms: i64, max_count: Option<i64>) -> PyResult<Vec<u64>> {
        let max = match max_count {
            None => usize::MAX,
            Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            Some(n) => return Err(PyValueError::new_err(format!("max_count must be >= 0, got {n}"))),
        };
        Ok(self.inner.pop_expired(now_ms, max))
    }

    /// Removes every key.
    fn clear(&mut self) {
        self.inner.clear();
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, key: u64) -> bool {
        self.inner.contains(key)
    }

    fn __repr__(&self) -> String {
        format!("SessionTracker(pending={})", self.inner.len())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SessionTracker>()?;
    Ok(())
}
