//! When to release the GIL around native work.

use pyo3::Python;

/// Inputs at least this large are processed with the GIL released: below it, giving the GIL up
/// and taking it back costs more than the work.
pub(crate) const DETACH_THRESHOLD: usize = 64 * 1024;

/// Runs `work` with the GIL released when `detach` is true, else with it held.
pub(crate) fn run_detached_if<T: Send>(
    py: Python<'_>,
    detach: bool,
    work: impl FnOnce() -> T + Send,
) -> T {
    if detach {
        py.detach(work)
    } else {
        work()
    }
}
