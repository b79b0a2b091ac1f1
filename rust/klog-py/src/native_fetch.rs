//! The native Fetch path: one call takes a whole Fetch request frame, decodes it
//! (`klog_core::fetch_request`), resolves its partitions among those the broker's Python side
//! routed here (`FetchRoutes`: partitions it leads, without transactions), reads each below its
//! high watermark and returns the encoded answer, records as segment file regions (sendfile) or
//! bytes. A request that must wait (nothing to return yet, `max_wait_ms` > 0) returns the
//! partitions to wait on instead; the broker calls again once woken or at the deadline. Anything
//! the common case does not cover (a replica's fetch, a fetch session, an unknown or unrouted
//! partition, a fenced leader epoch, an offset out of range, a rack-aware consumer, a read error,
//! ...) returns None before any state changed, and the broker's Python path handles the frame
//! unchanged. How a request takes this path: klog/broker/native_fetch.py.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use klog_core::fetch_request::{
    decode_fetch_frame, encode_fetch_response, PartitionAnswer, Piece, TopicAnswer, TopicRef,
};
use klog_core::storage::{self as core, FileRange};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::inputs::ByteInput;
use crate::storage::{ranges_to_bytes, PyFileSlice, PyPartitionLog};

/// Fetch's isolation_level of a read_committed consumer.
const READ_COMMITTED: i8 = 1;
/// The session epoch of a sessionless full fetch (KIP-227's FINAL_EPOCH).
const SESSIONLESS_EPOCH: i32 = -1;

/// A partition the broker leads, as its Python path last served a consumer's fetch of it.
#[derive(Clone)]
struct Route {
    log: Arc<core::PartitionLog>,
    leader_epoch: i32,
}

#[derive(Default)]
struct Table {
    partitions: HashMap<(String, i32), Route>,
    /// topic id -> name, for the topics routed (Fetch v13+ names topics by id)
    names: HashMap<[u8; 16], String>,
}

/// The partitions the native Fetch path may serve. The broker forgets them whenever leadership,
/// partitions, topics, configs or log dirs change (`PartitionManager.forget_native_routes`), and a
/// partition's route when a transaction starts on it.
#[pyclass(frozen, module = "klog._native", name = "FetchRoutes")]
pub struct PyFetchRoutes {
    table: Mutex<Table>,
    /// `replica.selector.class` is set: a consumer naming its rack may be sent to a follower
    /// (KIP-392), which the Python path decides.
    rack_aware: bool,
    /// Kafka's code of no error, given by the broker from its one table (klog/protocol/error_codes.py).
    none: i16,
}

impl PyFetchRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // every update is one insert or removal: a poisoned lock holds a whole map
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn topic_id(bytes: &[u8]) -> PyResult<[u8; 16]> {
    bytes.try_into().map_err(|_| PyValueError::new_err(format!("a topic id is 16 bytes, got {}", bytes.len())))
}

#[pymethods]
impl PyFetchRoutes {
    #[new]
    /// `error_none`: Kafka's code of no error.
    #[pyo3(signature = (*, rack_aware, error_none))]
    fn new(rack_aware: bool, error_none: i16) -> Self {
        PyFetchRoutes { table: Mutex::new(Table::default()), rack_aware, none: error_none }
    }

    /// Route `topic`-`partition` (whose topic has the 16-byte id `topic_id`) to `log`, led in
    /// `leader_epoch`.
    #[pyo3(signature = (topic, partition, log, *, topic_id, leader_epoch))]
    fn learn(&self, topic: String, partition: i32, log: &Bound<'_, PyPartitionLog>, topic_id: &[u8], leader_epoch: i32) -> PyResult<()> {
        let id = self::topic_id(topic_id)?;
        let route = Route { log: log.get().shared_log(), leader_epoch };
        let mut table = self.lock();
        table.names.insert(id, topic.clone());
        table.partitions.insert((topic, partition), route);
        Ok(())
    }

    /// Whether `topic`-`partition` is routed.
    fn knows(&self, topic: &str, partition: i32) -> bool {
        self.lock().partitions.contains_key(&(topic.to_owned(), partition))
    }

    /// Forget `topic`-`partition` (a transaction started on it).
    fn forget(&self, topic: &str, partition: i32) {
        self.lock().partitions.remove(&(topic.to_owned(), partition));
    }

    /// Forget every route.
    fn clear(&self) {
        let mut table = self.lock();
        table.partitions.clear();
        table.names.clear();
    }

    fn __len__(&self) -> usize {
        self.lock().partitions.len()
    }
}

/// What the native path made of a Fetch frame: the response's pieces, or the partitions to wait on.
#[pyclass(frozen, module = "klog._native", name = "NativeFetchOutcome")]
pub struct PyNativeFetchOutcome {
    /// The response frame as chunks for the connection's writer (bytes, and file slices or bytes
    /// for records), the first with the size prefix; None: nothing to answer yet, wait first.
    #[pyo3(get)]
    chunks: Option<Py<PyList>>,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    api_version: i16,
    #[pyo3(get)]
    client_id: Option<String>,
    #[pyo3(get)]
    max_wait_ms: i32,
    /// The (topic, partition) keys to wait on (only when `chunks` is None).
    #[pyo3(get)]
    wait_keys: Option<Py<PyList>>,
    /// (topic, record bytes) of each topic entry of the response, for the metrics.
    #[pyo3(get)]
    topic_bytes: Option<Py<PyList>>,
}

/// One partition to read: where its answer goes, its route and the request's parameters.
struct Planned<'a> {
    topic: TopicRef<'a>,
    name: String,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    route: Route,
}

/// Serve the Fetch request `frame` (without its size prefix) natively, or return None (nothing
/// changed) for the Python path to serve it. See the module documentation.
///
/// `max_version`: the newest Fetch version the broker advertises. `fetch_max_bytes`: the broker's
/// `fetch.max.bytes`. `zero_copy`: records as file slices (sendfile), else as bytes. `may_wait`:
/// False once the request's wait is over (answer with whatever there is). `allow`: the
/// authorization hook, None without an authorizer; else called once per distinct topic of the
/// request as `allow(topic) -> bool` (may the connection's principal Read it?): a refusal sends the
/// request to the Python path.
#[pyfunction]
#[pyo3(signature = (frame, routes, *, max_version, fetch_max_bytes, zero_copy, may_wait=true, allow=None))]
#[allow(clippy::too_many_arguments)]
fn native_fetch<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyAny>,
    routes: &Bound<'py, PyFetchRoutes>,
    max_version: i16,
    fetch_max_bytes: i64,
    zero_copy: bool,
    may_wait: bool,
    allow: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyNativeFetchOutcome>>> {
    let routes = routes.get();
    let input = ByteInput::from_object(frame, "frame")?;
    let Ok(request) = decode_fetch_frame(input.as_slice(), max_version) else {
        return Ok(None);
    };
    // consumers' sessionless fetches only: replicas and fetch sessions are the Python path's
    if request.replica_id >= 0 || request.session_epoch != SESSIONLESS_EPOCH || request.session_id != 0 {
        return Ok(None);
    }
    if routes.rack_aware && !request.rack_id.is_empty() {
        return Ok(None);
    }
    let read_committed = request.isolation_level == READ_COMMITTED;
    // every partition routed, at a leader epoch and offset the Python path would answer without error
    let mut planned: Vec<Planned<'_>> = Vec::with_capacity(request.partition_count());
    {
        let table = routes.lock();
        let mut key = (String::new(), 0);
        for topic in &request.topics {
            let name = match topic.topic {
                TopicRef::Name(name) => name,
                TopicRef::Id(id) => match table.names.get(&id) {
                    Some(name) => name.as_str(),
                    None => return Ok(None),
                },
            };
            key.0.clear();
            key.0.push_str(name);
            for p in &topic.partitions {
                key.1 = p.partition;
                let Some(route) = table.partitions.get(&key) else {
                    return Ok(None);
                };
                if p.current_leader_epoch != -1 && p.current_leader_epoch != route.leader_epoch {
                    return Ok(None);
                }
                if p.fetch_offset < route.log.log_start_offset() || p.fetch_offset > route.log.log_end_offset() {
                    return Ok(None);
                }
                planned.push(Planned {
                    topic: topic.topic,
                    name: key.0.clone(),
                    index: p.partition,
                    fetch_offset: p.fetch_offset,
                    partition_max_bytes: p.partition_max_bytes,
                    route: route.clone(),
                });
            }
        }
    }
    if let Some(allow) = allow {
        let mut checked: Vec<&str> = Vec::new();
        for p in &planned {
            if checked.contains(&p.name.as_str()) {
                continue;
            }
            if !allow.call1((p.name.as_str(),))?.is_truthy()? {
                return Ok(None);
            }
            checked.push(p.name.as_str());
        }
    }
    let max_bytes = (request.max_bytes as i64).min(fetch_max_bytes).max(0);
    let readable = planned.iter().any(|p| p.fetch_offset < p.route.log.high_watermark());
    // the reads, as the Python path's _read_all makes them (klog/broker/handlers/fetch.py)
    let read_all = || -> Option<(Vec<PartitionAnswer<FileRange>>, i64)> {
        let mut total: i64 = 0;
        let mut answers = Vec::with_capacity(planned.len());
        for p in &planned {
            let log = &p.route.log;
            let hw = log.high_watermark();
            let mut answer = PartitionAnswer {
                index: p.index,
                high_watermark: hw,
                last_stable_offset: hw,
                log_start_offset: log.log_start_offset(),
                aborted: read_committed.then(Vec::new),
                records: None,
            };
            let remaining = (p.partition_max_bytes as i64).min(max_bytes - total);
            if p.fetch_offset >= hw || (remaining <= 0 && total > 0) {
                answers.push(answer);
                continue;
            }
            let read = log.read(p.fetch_offset, remaining.max(0) as u64, Some(hw), total == 0).ok()?;
            answer.high_watermark = read.high_watermark;
            answer.last_stable_offset = answer.last_stable_offset.min(read.high_watermark);
            answer.log_start_offset = read.log_start_offset;
            if let Some(range) = read.range {
                if range.length > 0 {
                    total += range.length as i64;
                    let length = range.length;
                    answer.records = Some((range, length));
                }
            }
            answers.push(answer);
        }
        Some((answers, total))
    };
    let read = if readable { py.detach(read_all) } else { read_all() };
    let Some((answers, total)) = read else {
        return Ok(None);
    };
    let version = request.api_version;
    let client_id = request.client_id.map(str::to_owned);
    let min_bytes = request.min_bytes as i64;
    if may_wait && request.max_wait_ms > 0 && !planned.is_empty() && total < min_bytes {
        let keys = PyList::empty(py);
        for p in &planned {
            keys.append((p.name.as_str(), p.index))?;
        }
        let outcome = PyNativeFetchOutcome {
            chunks: None,
            correlation_id: request.correlation_id,
            api_version: version,
            client_id,
            max_wait_ms: request.max_wait_ms,
            wait_keys: Some(keys.unbind()),
            topic_bytes: None,
        };
        return Ok(Some(Bound::new(py, outcome)?));
    }
    // consecutive partitions of one topic answer under one entry, as the Python path's _by_topic
    let mut topics: Vec<TopicAnswer<'_, FileRange>> = Vec::new();
    let mut metrics: Vec<(&str, u64)> = Vec::new();
    for (p, answer) in planned.iter().zip(answers) {
        let bytes = answer.records.as_ref().map_or(0, |(_, n)| *n);
        match topics.last_mut() {
            Some(last) if last.topic == p.topic => {
                last.partitions.push(answer);
                if let Some(m) = metrics.last_mut() {
                    m.1 += bytes;
                }
            }
            _ => {
                topics.push(TopicAnswer { topic: p.topic, partitions: vec![answer] });
                metrics.push((p.name.as_str(), bytes));
            }
        }
    }
    let chunks = PyList::empty(py);
    for piece in encode_fetch_response(version, request.correlation_id, routes.none, 0, topics) {
        match piece {
            Piece::Bytes(b) => chunks.append(PyBytes::new(py, &b))?,
            Piece::Records(range) if zero_copy => chunks.append(Bound::new(py, PyFileSlice::of(range))?)?,
            Piece::Records(range) => match ranges_to_bytes(py, std::slice::from_ref(&range)) {
                Ok(bytes) => chunks.append(bytes)?,
                Err(_) => return Ok(None), // a segment cut since the read: the Python path answers
            },
        }
    }
    let topic_bytes = PyList::empty(py);
    for m in metrics {
        topic_bytes.append(m)?;
    }
    let outcome = PyNativeFetchOutcome {
        chunks: Some(chunks.unbind()),
        correlation_id: request.correlation_id,
        api_version: version,
        client_id,
        max_wait_ms: request.max_wait_ms,
        wait_keys: None,
        topic_bytes: Some(topic_bytes.unbind()),
    };
    Ok(Some(Bound::new(py, outcome)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFetchRoutes>()?;
    m.add_class::<PyNativeFetchOutcome>()?;
    m.add_function(wrap_pyfunction!(native_fetch, m)?)?;
    Ok(())
}
