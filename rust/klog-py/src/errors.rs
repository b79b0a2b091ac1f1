//! Python exceptions raised by the native core, and conversion from core errors.

use klog_core::error::CodecError;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    _core,
    CorruptRecordError,
    PyValueError,
    "Input bytes are not a valid Kafka record batch; the message names the field and byte offset."
);

pub fn codec_err(e: CodecError) -> PyErr {
    CorruptRecordError::new_err(e.to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("CorruptRecordError", m.py().get_type::<CorruptRecordError>())?;
    Ok(())
}
