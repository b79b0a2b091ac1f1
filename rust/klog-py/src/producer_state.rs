//! `ProducerTable`: one partition's idempotent-producer state (`klog_core::storage::producer_state`),
//! owned by the broker's `ProducerStateManager` and set on the partition's log, whose native Produce
//! paths check, append and record a batch under its lock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use klog_core::storage::partition_log::SharedProducers;
use klog_core::storage::producer_state::{
    BatchMetadata, MarkerCheck, ProducerEntry, ProducerTable, SequenceCheck, BATCHES_TO_RETAIN,
};
use pyo3::prelude::*;

/// The verdicts `check` and `check_marker` answer; the broker maps them to Kafka's codes
/// (`klog/broker/producer_state.py::VERDICT_CODES`).
const VERDICT_APPEND: u8 = 0;
const VERDICT_FENCED_EPOCH: u8 = 1;
const VERDICT_OUT_OF_ORDER: u8 = 2;
const VERDICT_FENCED_COORDINATOR: u8 = 3;

/// (first sequence, last sequence, base offset, last offset, max timestamp, log append time)
type BatchTuple = (i32, i32, i64, i64, i64, i64);

fn to_tuple(b: &BatchMetadata) -> BatchTuple {
    (b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.timestamp, b.log_append_time)
}

fn from_tuple(b: BatchTuple) -> BatchMetadata {
    let (first_seq, last_seq, base_offset, last_offset, timestamp, log_append_time) = b;
    BatchMetadata { first_seq, last_seq, base_offset, last_offset, timestamp, log_append_time }
}

/// A sequence check's verdict for Python, and the duplicate's batch (a retry: the verdict is append's).
fn sequence_verdict(check: SequenceCheck) -> (u8, Option<BatchTuple>) {
    match check {
        SequenceCheck::Append => (VERDICT_APPEND, None),
        SequenceCheck::Duplicate(b) => (VERDICT_APPEND, Some(to_tuple(&b))),
        SequenceCheck::FencedEpoch => (VERDICT_FENCED_EPOCH, None),
        SequenceCheck::OutOfOrder => (VERDICT_OUT_OF_ORDER, None),
    }
}

/// One partition's producers (see the module documentation).
#[pyclass(frozen, module = "klog._native", name = "ProducerTable")]
pub struct PyProducerTable {
    table: SharedProducers,
}

impl PyProducerTable {
    pub(crate) fn from_shared(table: SharedProducers) -> Self {
        PyProducerTable { table }
    }

    pub(crate) fn shared(&self) -> SharedProducers {
        Arc::clone(&self.table)
    }

    fn lock(&self) -> MutexGuard<'_, ProducerTable> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyProducerTable {
    #[new]
    fn new() -> Self {
        PyProducerTable { table: Arc::new(Mutex::new(ProducerTable::new())) }
    }

    /// A batch's verdict before it is appended: (verdict, the duplicate's batch or None).
    /// `hold`: on an append verdict, hold the table until `update` or `release` (the native paths
    /// leave its producers' batches to the caller meanwhile).
    #[pyo3(signature = (producer_id, epoch, first_seq, last_seq, hold=false))]
    fn check(&self, producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32, hold: bool) -> (u8, Option<BatchTuple>) {
        let mut table = self.lock();
        let check = table.check(producer_id, epoch, first_seq, last_seq);
        if hold && check == SequenceCheck::Append {
            table.hold();
        }
        sequence_verdict(check)
    }

    /// Record an appended batch (and end a `hold`).
    fn update(&self, producer_id: i64, epoch: i16, batch: BatchTuple, now_ms: i64) {
        let mut table = self.lock();
        table.update(producer_id, epoch, from_tuple(batch), now_ms);
        table.release();
    }

    /// End a `hold` without a record (the append failed or was not made).
    fn release(&self) {
        self.lock().release();
    }

    #[getter]
    fn held(&self) -> bool {
        self.lock().is_held()
    }

    /// A COMMIT/ABORT marker was written: the producer's epoch moves up to the marker's.
    fn end_transaction(&self, producer_id: i64, epoch: i16, now_ms: i64, coordinator_epoch: i32, timestamp: i64) {
        self.lock().end_transaction(producer_id, epoch, now_ms, coordinator_epoch, timestamp);
    }

    /// Kafka's fencing of a COMMIT/ABORT marker: the verdict (append: write it).
    #[pyo3(signature = (producer_id, epoch, coordinator_epoch=None, transaction_version=0))]
    fn check_marker(&self, producer_id: i64, epoch: i16, coordinator_epoch: Option<i32>, transaction_version: i16) -> u8 {
        match self.lock().check_marker(producer_id, epoch, coordinator_epoch, transaction_version) {
            MarkerCheck::Write => VERDICT_APPEND,
            MarkerCheck::FencedEpoch => VERDICT_FENCED_EPOCH,
            MarkerCheck::FencedCoordinator => VERDICT_FENCED_COORDINATOR,
        }
    }

    /// The producer's epoch, None when unknown.
    fn epoch(&self, producer_id: i64) -> Option<i16> {
        self.lock().get(producer_id).map(|e| e.epoch)
    }

    /// Every producer as (id, epoch, last sequence, last timestamp, coordinator epoch, last seen ms,
    /// [batches]), the batches as `check`'s duplicate.
    fn producers(&self) -> Vec<(i64, i16, i32, i64, i32, i64, Vec<BatchTuple>)> {
        self.lock()
            .entries()
            .map(|(id, e)| {
                (id, e.epoch, e.last_seq(), e.last_timestamp, e.coordinator_epoch, e.last_seen_ms, e.batches.iter().map(to_tuple).collect())
            })
            .collect()
    }

    /// Put back a producer as a snapshot had it (its last `BATCHES_TO_RETAIN` batches).
    #[allow(clippy::too_many_arguments)]
    fn restore(&self, producer_id: i64, epoch: i16, last_seen_ms: i64, coordinator_epoch: i32, last_timestamp: i64, batches: Vec<BatchTuple>) {
        let skip = batches.len().saturating_sub(BATCHES_TO_RETAIN);
        let batches: VecDeque<BatchMetadata> = batches.into_iter().skip(skip).map(from_tuple).collect();
        self.lock().restore(producer_id, ProducerEntry { epoch, batches, last_seen_ms, coordinator_epoch, last_timestamp });
    }

    /// The log was truncated to `log_end_offset` (see `ProducerTable::truncate`).
    fn truncate(&self, log_end_offset: i64) {
        self.lock().truncate(log_end_offset);
    }

    /// Forget producers unseen for more than `expiration_ms`; how many.
    fn expire(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.lock().expire(now_ms, expiration_ms)
    }

    fn clear(&self) {
        self.lock().clear();
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    /// Two handles are equal when they share one table.
    fn __eq__(&self, other: PyRef<'_, Self>) -> bool {
        Arc::ptr_eq(&self.table, &other.table)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProducerTable>()?;
    Ok(())
}
