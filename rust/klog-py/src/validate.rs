//! Produce-time batch checks (`klog_core::batch::produced`: the produce request's rules, then
//! Kafka's LogValidator rules from `klog_core::batch::validate`), with one exception type per
//! Kafka error code so the broker never parses messages to pick one, and the accepted batch as a
//! `ProducedBatch`: the header fields the broker needs, read once, which the log appends as is.

use klog_core::batch::produced::{accept_produced_batch, ProduceRequestRules, ProducedBatch};
use klog_core::batch::recompress::{rewrite_produced_batch, TargetCodec};
use klog_core::batch::Compression;
use pyo3::types::PyBytes;
use klog_core::batch::validate::{ProducePolicy, Rejection};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::CorruptRecordError;
use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::ByteInput;
use crate::storage::{untracked, RecordTooLargeError};

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
create_exception!(
    _core,
    UnsupportedCompressionTypeError,
    PyValueError,
    "A produced batch uses a codec its Produce version may not (zstd before v7: UNSUPPORTED_COMPRESSION_TYPE)."
);

/// The batch of one Produce partition as the produce checks accepted it: the header fields the
/// idempotent-producer check, the response and the metrics read (copied out once, plain attributes).
/// `PartitionLog.append` takes it in place of the records (it holds them) and does not parse the
/// header again.
#[pyclass(frozen, module = "klog._native", name = "ProducedBatch")]
pub struct PyProducedBatch {
    #[pyo3(get)]
    producer_id: i64,
    #[pyo3(get)]
    producer_epoch: i16,
    #[pyo3(get)]
    base_sequence: i32,
    /// The sequence of the last record (wrapping after 2**31 - 1); -1 without a base sequence.
    #[pyo3(get)]
    last_sequence: i32,
    #[pyo3(get)]
    is_transactional: bool,
    /// The batch's size in bytes.
    #[pyo3(get)]
    size: usize,
    #[pyo3(get)]
    records_count: i32,
    #[pyo3(get)]
    max_timestamp: i64,
    /// The codec id in the attributes (Kafka's CompressionType id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    #[pyo3(get)]
    compression: i16,
    pub(crate) batch: ProducedBatch,
    /// The records object the checks read (the append reads it again, unparsed).
    pub(crate) records: Py<PyAny>,
}

impl PyProducedBatch {
    fn new(batch: ProducedBatch, records: Py<PyAny>) -> Self {
        let h = batch.header();
        PyProducedBatch {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            last_sequence: batch.last_sequence(),
            is_transactional: h.is_transactional(),
            size: batch.size(),
            records_count: h.records_count,
            max_timestamp: h.max_timestamp,
            compression: h.attributes & klog_core::batch::header::ATTR_COMPRESSION_MASK,
            batch,
            records,
        }
    }
}

#[pymethods]
impl PyProducedBatch {
    /// Whether the stored CRC matches the batch (the checks may leave it to the append).
    fn has_valid_crc(&self, py: Python<'_>) -> PyResult<bool> {
        let records = ByteInput::from_object(self.records.bind(py), "records")?;
        Ok(self.batch.verify_crc(records.as_slice()).is_ok())
    }
    fn __repr__(&self) -> String {
        format!(
            "ProducedBatch(size={}, records_count={}, producer_id={}, producer_epoch={}, base_sequence={}, max_timestamp={})",
            self.size, self.records_count, self.producer_id, self.producer_epoch, self.base_sequence, self.max_timestamp
        )
    }
}

/// Check the one batch of a Produce partition: the request's rules (one magic-2 batch, zstd from
/// Produce v7, at most `max_message_bytes`), then with `check_records` its records (Kafka's
/// LogValidator rules). Returns the `ProducedBatch`, or None when `work_budget` bytes of
/// (decompressed) records were not enough to decide (call again without a budget, off the event
/// loop). `verify_crc=False` leaves the CRC of an accepted batch to the log's append (which
/// verifies it), computing it only to classify a refusal. Raises CorruptRecordError
/// (CORRUPT_MESSAGE), InvalidTimestampError (INVALID_TIMESTAMP), InvalidRecordError
/// (INVALID_RECORD), UnsupportedCompressionTypeError (UNSUPPORTED_COMPRESSION_TYPE) or
/// RecordTooLargeError (MESSAGE_TOO_LARGE).
///
/// `compression` is the topic's codec id (None: `compression.type=producer`): a data batch with
/// another codec is recompressed to it (at `compression_level`, None: the codec's default), as
/// Kafka's LogValidator does; the returned batch then holds the new bytes, whose size is checked
/// against `max_message_bytes` again. A batch already in the topic's codec is kept as sent.
#[pyfunction]
#[pyo3(signature = (records, *, version, max_message_bytes, compacted, topic_partition, create_time, now_ms, before_max_ms,
                    after_max_ms, max_decompressed_bytes, check_records=true, work_budget=None, verify_crc=true,
                    compression=None, compression_level=None))]
#[allow(clippy::too_many_arguments)]
fn validate_produce_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    version: i16,
    max_message_bytes: i64,
    compacted: bool,
    topic_partition: &str,
    create_time: bool,
    now_ms: i64,
    before_max_ms: i64,
    after_max_ms: i64,
    max_decompressed_bytes: usize,
    check_records: bool,
    work_budget: Option<usize>,
    verify_crc: bool,
    compression: Option<i16>,
    compression_level: Option<i32>,
) -> PyResult<Option<Bound<'py, PyProducedBatch>>> {
    let target = match compression {
        None => None,
        Some(id) => Some(TargetCodec {
            codec: Compression::from_attributes(id, 0).map_err(|e| PyValueError::new_err(e.to_string()))?,
            level: compression_level,
        }),
    };
    let input = ByteInput::from_object(records, "records")?;
    let data = input.as_slice();
    let rules = ProduceRequestRules { version, max_message_bytes };
    let policy = ProducePolicy {
        compacted,
        topic_partition,
        create_time,
        now_ms,
        before_max_ms,
        after_max_ms,
        max_decompressed_bytes,
        verify_crc,
    };
    let policy = check_records.then_some(&policy);
    // Unbudgeted calls are the large ones (run off the event loop): never hold the GIL there.
    let detach = (check_records || target.is_some()) && (work_budget.is_none() || data.len() >= DETACH_THRESHOLD);
    let verdict = run_detached_if(py, detach, || {
        let batch = accept_produced_batch(data, &rules, policy, work_budget)?;
        match rewrite_produced_batch(data, &batch, target.as_ref(), max_decompressed_bytes, work_budget)? {
            Some(bytes) => {
                // the rebuilt batch may use zstd whatever the request's version: only its size is checked again
                let rules = ProduceRequestRules { version: version.max(7), ..rules };
                let rebuilt = accept_produced_batch(&bytes, &rules, None, None)?;
                Ok((rebuilt, Some(bytes)))
            }
            None => Ok((batch, None)),
        }
    });
    let record_errors = |errors: Vec<klog_core::batch::validate::RecordError>| -> Vec<(i32, String)> {
        errors.into_iter().map(|e| (e.batch_index, e.message)).collect()
    };
    match verdict {
        Ok((batch, recompressed)) => {
            let records = match recompressed {
                Some(bytes) => PyBytes::new(py, &bytes).into_any().unbind(),
                None => records.clone().unbind(),
            };
            let produced = PyProducedBatch::new(batch, records);
            // no cycle can run through it: one per produced batch must not drive GC passes
            Ok(Some(untracked(Bound::new(py, produced)?)?))
        }
        Err(Rejection::OverBudget) => Ok(None),
        Err(Rejection::Corrupt(message)) => Err(CorruptRecordError::new_err(message)),
        Err(Rejection::InvalidRecord { message, record_errors: errors }) => {
            Err(InvalidRecordError::new_err((message, record_errors(errors))))
        }
        Err(Rejection::InvalidTimestamp { message, record_errors: errors }) => {
            Err(InvalidTimestampError::new_err((message, record_errors(errors))))
        }
        Err(Rejection::UnsupportedCompression(message)) => Err(UnsupportedCompressionTypeError::new_err(message)),
        Err(Rejection::TooLarge(message)) => Err(RecordTooLargeError::new_err(message)),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("InvalidRecordError", m.py().get_type::<InvalidRecordError>())?;
    m.add("InvalidTimestampError", m.py().get_type::<InvalidTimestampError>())?;
    m.add("UnsupportedCompressionTypeError", m.py().get_type::<UnsupportedCompressionTypeError>())?;
    m.add_class::<PyProducedBatch>()?;
    m.add_function(wrap_pyfunction!(validate_produce_batch, m)?)?;
    Ok(())
}
