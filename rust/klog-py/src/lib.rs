//! `klog._native._core`: the PyO3 shell over `klog-core`. One file per concern registers its
//! functions and classes; Python-facing errors are defined in `errors`.

use pyo3::prelude::*;

mod consumer_records;
mod errors;
mod gil;
mod groups;
mod producer_batch;
mod producer_state;
mod raft;
mod inputs;
mod memory;
mod fetch_wait;
mod native_fetch;
mod native_produce;
mod records;
mod storage;
mod tls;
mod validate;
#[cfg(target_os = "linux")]
mod socket_writer;
#[cfg(target_os = "linux")]
mod front;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    consumer_records::register(m)?;
    errors::register(m)?;
    groups::register(m)?;
    memory::register(m)?;
    producer_batch::register(m)?;
    producer_state::register(m)?;
    raft::register(m)?;
    native_fetch::register(m)?;
    native_produce::register(m)?;
    records::register(m)?;
    storage::register(m)?;
    tls::register(m)?;
    validate::register(m)?;
    #[cfg(target_os = "linux")]
    socket_writer::register(m)?;
    #[cfg(target_os = "linux")]
    front::register(m)?;
    Ok(())
}
