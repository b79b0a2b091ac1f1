//! Record batch codec bindings (encode, decode, CRC-32C).

use pyo3::prelude::*;

/// CRC-32C (Castagnoli) of a bytes-like object.
#[pyfunction]
fn crc32c(py: Python<'_>, data: &[u8]) -> u32 {
    if data.len() >= 64 * 1024 {
        py.detach(|| klog_core::crc::crc32c(data))
    } else {
        klog_core::crc::crc32c(data)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    Ok(())
}
