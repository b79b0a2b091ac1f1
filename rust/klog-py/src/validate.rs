//! Produce-time batch validation (`klog_core::batch::validate`, Kafka's LogValidator rules),
//! with one exception type per Kafka error code so the broker never parses messages to pick one.

use klog_core::batch::validate::{validate_produce_batch as validate_core, ProducePolicy, Rejection};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::CorruptRecordError;
use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::ByteInput;

create_exception!(
    _core,
    InvalidRecordError,
    PyValueError,
    "A produced batch breaks a record rule (INVALID_RECORD). args: (message, record_errors), record_errors a list of (batch_index, message) as Kafka's ProduceResponse lists them."
);
create_exception!(
    _core,
    InvalidTimestampError,
    InvalidRecordError,
    "A produced batch holds a record timestamp out of the topic's bounds (INVALID_TIMESTAMP). args: (message, record_errors)."
);

/// Validate the one batch of a Produce partition. Returns True when it passed, False when
/// `work_budget` bytes of (decompressed) records were not enough to decide (call again without
/// a budget, off the event loop). `verify_crc=False` leaves the CRC of an accepted batch to the
/// log's append (which verifies it), computing it only to classify a refusal. Raises
/// CorruptRecordError (CORRUPT_MESSAGE),
/// InvalidTimestampError (INVALID_TIMESTAMP) or InvalidRecordError (INVALID_RECORD).
#[pyfunction]
#[pyo3(signature = (records, *, compacted, create_time, now_ms, before_max_ms, after_max_ms,
                    max_decompressed_bytes, work_budget=None, verify_crc=true))]
#[allow(clippy::too_many_arguments)]
fn validate_produce_batch(
    py: Python<'_>,
    records: ByteInput<'_>,
    compacted: bool,
    create_time: bool,
    now_ms: i64,
    before_max_ms: i64,
    after_max_ms: i64,
    max_decompressed_bytes: usize,
    work_budget: Option<usize>,
    verify_crc: bool,
) -> PyResult<bool> {
    let data = records.as_slice();
    let policy = ProducePolicy {
        compacted,
        create_time,
        now_ms,
        before_max_ms,
        after_max_ms,
        max_decompressed_bytes,
        verify_crc,
    };
    // Unbudgeted calls are the large ones (run off the event loop): never hold the GIL there.
    let detach = work_budget.is_none() || data.len() >= DETACH_THRESHOLD;
    match run_detached_if(py, detach, || validate_core(data, &policy, work_budget)) {
        Ok(_) => Ok(true),
        Err(Rejection::OverBudget) => Ok(false),
        Err(Rejection::Corrupt(message)) => Err(CorruptRecordError::new_err(message)),
        Err(Rejection::InvalidRecord { message, record_errors }) => {
            let errors: Vec<(i32, String)> = record_errors.into_iter().map(|e| (e.batch_index, e.message)).collect();
            Err(InvalidRecordError::new_err((message, errors)))
        }
        Err(Rejection::InvalidTimestamp { message, record_errors }) => {
            let errors: Vec<(i32, String)> = record_errors.into_iter().map(|e| (e.batch_index, e.message)).collect();
            Err(InvalidTimestampError::new_err((message, errors)))
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InvalidRecordError", m.py().get_type::<InvalidRecordError>())?;
    m.add("InvalidTimestampError", m.py().get_type::<InvalidTimestampError>())?;
    m.add_function(wrap_pyfunction!(validate_produce_batch, m)?)?;
    Ok(())
}
