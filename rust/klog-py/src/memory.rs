//! Giving the C heap's free memory back to the kernel.

use pyo3::prelude::*;

/// glibc's `malloc_trim(0)`, with the GIL released: the free pages at the top of every malloc arena and those
/// inside them go back to the kernel. glibc keeps memory freed below its trim threshold (and all of it in the
/// threads' arenas) resident for reuse, so start-up's and a burst's garbage would count in RSS for good.
/// True if any memory was released; False where there is no glibc.
#[pyfunction]
fn release_free_heap(py: Python<'_>) -> bool {
    py.detach(trim)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only takes the arenas' own locks; pad 0 keeps nothing spare at the top.
    unsafe { libc::malloc_trim(0) != 0 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(release_free_heap, m)?)?;
    Ok(())
}
