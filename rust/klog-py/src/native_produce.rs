//! The native Produce path: one call takes a whole Produce request frame, decodes it
//! (`klog_core::produce_request`), checks and appends each partition's batch to the partition
//! logs the broker's Python side routed here (`ProduceRoutes`), and returns the encoded answer.
//! Anything the common case does not cover (an unknown or unrouted partition, a transactional
//! batch the broker's check does not take as in its producer's transaction, an idempotent batch its
//! partition's producer table does not take as next in sequence, a batch the
//! checks refuse, acks=all on a replicated partition the broker's min-ISR check refuses, ...)
//! returns None before anything is appended, and the broker's Python path handles the frame
//! unchanged. How a request takes this path: docs/architecture.md, "A Produce on the native path".

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt;

use klog_core::batch::produced::{accept_produced_batch, ProduceRequestRules, ProducedBatch};
use klog_core::batch::recompress::{rewrite_produced_batch, TargetCodec};
use klog_core::batch::validate::ProducePolicy;
use klog_core::batch::Compression;
use klog_core::produce_request::{
    decode_produce_frame, encode_produce_response, PartitionAnswer, TopicKey, FIRST_TOPIC_ID_VERSION,
};
use klog_core::storage::partition_log::SharedProducers;
use klog_core::storage::producer_state::{BatchMetadata as ProducerBatchMetadata, ProducerTable, SequenceCheck};
use klog_core::storage::{self as core, StorageError as CoreError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::ByteInput;
use crate::storage::PyPartitionLog;

/// Kafka's error codes the native path answers with, given by the broker from its one table
/// (klog/protocol/error_codes.py): the Rust side writes none as a number.
#[derive(Clone, Copy)]
struct AnswerCodes {
    none: i16,
    corrupt_message: i16,
    message_too_large: i16,
    kafka_storage_error: i16,
}

/// Each topic's partition answers, the topic named by its name and id.
type TopicAnswers<'a> = Vec<(TopicKey<'a>, Vec<PartitionAnswer>)>;
/// [`TopicAnswers`] kept past the request frame.
type OwnedTopicAnswers = Vec<((String, [u8; 16]), Vec<PartitionAnswer>)>;

/// Kafka's acks values a Produce may carry: all (-1), none (0), the leader (1).
const ACKS_ALL: i16 = -1;
const ACKS_NONE: i16 = 0;
const ACKS_LEADER: i16 = 1;

/// A partition the broker led when its Python path last appended to it, with the topic's
/// produce policy as that path read it. The broker forgets routes whenever leadership, configs,
/// topics or log dirs change (`PartitionManager.forget_native_routes`).
#[derive(Clone)]
struct Route {
    log: Arc<core::PartitionLog>,
    leader_epoch: i32,
    /// More than one replica: acks=all waits for the ISR (the Python path does that).
    replicated: bool,
    max_message_bytes: i64,
    compacted: bool,
    create_time: bool,
    before_max_ms: i64,
    after_max_ms: i64,
    target: Option<TargetCodec>,
}

/// The routed partitions and their topics' names by id, behind one lock: a request reads both in
/// one critical section, and `clear` forgets both at once.
#[derive(Default)]
struct RouteTable {
    routes: HashMap<(String, i32), Route>,
    /// The names of the routed partitions' topics by topic id (Produce v13 names topics by id, KIP-516).
    names: HashMap<[u8; 16], String>,
}

/// The partitions the native Produce path may append to, and the broker's validation bounds.
#[pyclass(frozen, module = "klog._native", name = "ProduceRoutes")]
pub struct PyProduceRoutes {
    table: Mutex<RouteTable>,
    /// Held (shared) across every native append, taken whole by `clear`: once `clear` returns, no
    /// append planned with a forgotten route is under way or can start (the native front appends on
    /// its own thread while the broker changes leadership, configs or log dirs on the event loop).
    gate: RwLock<()>,
    /// Bumped by every `clear`: an append planned before it is not made.
    generation: AtomicU64,
    check_records: bool,
    max_decompressed_bytes: usize,
    /// Batches whose records take more than this to walk are left to the Python path (which
    /// validates them on a worker thread).
    work_budget: usize,
    codes: AnswerCodes,
}

impl PyProduceRoutes {
    fn lock(&self) -> MutexGuard<'_, RouteTable> {
        // a panic while holding it cannot leave a half-written table: every update is inserts or clears
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyProduceRoutes {
    #[new]
    /// `error_codes`: Kafka's codes of NONE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE and KAFKA_STORAGE_ERROR.
    #[pyo3(signature = (*, check_records, max_decompressed_bytes, work_budget, error_codes))]
    fn new(check_records: bool, max_decompressed_bytes: usize, work_budget: usize, error_codes: (i16, i16, i16, i16)) -> Self {
        let (none, corrupt_message, message_too_large, kafka_storage_error) = error_codes;
        PyProduceRoutes {
            table: Mutex::new(RouteTable::default()),
            gate: RwLock::new(()),
            generation: AtomicU64::new(0),
            check_records,
            max_decompressed_bytes,
            work_budget,
            codes: AnswerCodes { none, corrupt_message, message_too_large, kafka_storage_error },
        }
    }

    /// Route `topic`-`partition` to `log`: the native path appends to it, stamped with
    /// `leader_epoch`, under the topic's produce policy given here. `topic_id`: the topic's 16-byte id
    /// (Produce v13 requests name the topic by it; None: only by name).
    #[pyo3(signature = (topic, partition, log, *, leader_epoch, replicated, max_message_bytes, compacted,
                        create_time, before_max_ms, after_max_ms, compression=None, compression_level=None,
                        topic_id=None))]
    #[allow(clippy::too_many_arguments)]
    fn learn(
        &self,
        topic: String,
        partition: i32,
        log: &Bound<'_, PyPartitionLog>,
        leader_epoch: i32,
        replicated: bool,
        max_message_bytes: i64,
        compacted: bool,
        create_time: bool,
        before_max_ms: i64,
        after_max_ms: i64,
        compression: Option<i16>,
        compression_level: Option<i32>,
        topic_id: Option<&[u8]>,
    ) -> PyResult<()> {
        let topic_id: Option<[u8; 16]> = topic_id
            .map(|id| id.try_into().map_err(|_| PyValueError::new_err(format!("topic_id: {} bytes, not 16", id.len()))))
            .transpose()?;
        let target = match compression {
            None => None,
            Some(id) => Some(TargetCodec {
                codec: Compression::from_attributes(id, 0).map_err(|e| PyValueError::new_err(e.to_string()))?,
                level: compression_level,
            }),
        };
        let route = Route {
            log: log.get().shared_log(),
            leader_epoch,
            replicated,
            max_message_bytes,
            compacted,
            create_time,
            before_max_ms,
            after_max_ms,
            target,
        };
        let mut table = self.lock();
        if let Some(id) = topic_id {
            table.names.insert(id, topic.clone());
        }
        table.routes.insert((topic, partition), route);
        Ok(())
    }

    /// Whether `topic`-`partition` is routed.
    fn knows(&self, topic: &str, partition: i32) -> bool {
        self.lock().routes.contains_key(&(topic.to_owned(), partition))
    }

    /// Forget every route (the next request of each partition takes the Python path, which routes
    /// it again).
    ///
    /// Waits for the gate without the GIL: a large frame's append holds the gate's read side with
    /// the GIL released and takes the GIL back before letting go, so a caller holding the GIL here
    /// (the broker's flush runs in a worker thread) would wait on it forever while it waits on us.
    fn clear(&self, py: Python<'_>) {
        py.detach(|| {
            let _gate = self.gate.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            self.generation.fetch_add(1, Ordering::AcqRel);
            let mut table = self.lock();
            table.routes.clear();
            table.names.clear();
        });
    }

    fn __len__(&self) -> usize {
        self.lock().routes.len()
    }
}

/// What the native path did with a frame: the response frame to send (None for acks=0), the
/// batches appended, and the appends that failed (answered in the response already).
#[pyclass(frozen, module = "klog._native", name = "NativeProduceOutcome")]
pub struct PyNativeProduceOutcome {
    /// The whole response frame with its size prefix (None: acks=0, nothing is sent).
    #[pyo3(get)]
    response: Option<Py<PyBytes>>,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    api_version: i16,
    #[pyo3(get)]
    acks: i16,
    /// The request's timeout_ms (how long acks=all answers may wait for the ISR).
    #[pyo3(get)]
    timeout_ms: i32,
    /// The request header's client id.
    #[pyo3(get)]
    client_id: Option<String>,
    /// Each appended batch: (topic, partition, batch bytes, records, producer id, producer epoch, first
    /// sequence, last sequence, base offset, last offset, max timestamp, log append time, transactional).
    #[pyo3(get)]
    appended: Py<PyList>,
    /// Each refused append: (topic, partition, error code, message, errno or None, log dir).
    #[pyo3(get)]
    failures: Py<PyList>,
    /// acks=all with a replicated partition appended: `response` is None, the broker registers the
    /// waits on the high watermark and encodes the answer with :meth:`respond` once they end.
    #[pyo3(get)]
    waits: bool,
    /// The answer as encoded at once (each topic's name and id, and partition answers), kept for `respond`.
    answers: OwnedTopicAnswers,
    /// Where each appended batch's answer is in `answers`: (topic position, partition position).
    slots: Vec<(usize, usize)>,
}

#[pymethods]
impl PyNativeProduceOutcome {
    /// The response frame once the acks=all waits ended: `codes` has one error code per appended
    /// batch (in `appended` order); a non-zero one replaces that batch's answer's error code and
    /// base offset (-1) and drops its message, as the Python path's `_await_acks` does.
    fn respond<'py>(&self, py: Python<'py>, codes: Vec<i16>) -> PyResult<Bound<'py, PyBytes>> {
        if codes.len() != self.slots.len() {
            return Err(PyValueError::new_err(format!(
                "codes: {} given for {} appended batches",
                codes.len(),
                self.slots.len()
            )));
        }
        let mut by_topic: TopicAnswers<'_> =
            self.answers.iter().map(|((name, id), parts)| ((name.as_str(), *id), parts.clone())).collect();
        for (&(t, p), &code) in self.slots.iter().zip(&codes) {
            if code != 0 {
                let answer = &mut by_topic[t].1[p];
                answer.error_code = code;
                answer.base_offset = -1;
                answer.error_message = None;
            }
        }
        Ok(PyBytes::new(py, &encode_produce_response(self.api_version, self.correlation_id, &by_topic)))
    }
}

/// A partition's batch as the checks accepted it, ready to append.
struct Checked<'a> {
    route: Route,
    data: std::borrow::Cow<'a, [u8]>,
    batch: ProducedBatch,
}

pub(crate) enum Answer {
    Appended {
        topic: usize,
        partition: i32,
        size: usize,
        records: i32,
        producer: (i64, i16, i32, i32),
        transactional: bool,
        info: core::AppendInfo,
        /// The log, when its high watermark is its log end's as far as replication goes (one replica) and
        /// the cleaner does not read it (not compacted): the native front may move it (see front.rs).
        own_watermark: Option<Arc<core::PartitionLog>>,
    },
    Failed { topic: usize, partition: i32, code: i16, message: String, errno: Option<i32>, dir: String },
}

/// Check one partition's batch as the Python path does, except that every refusal (and a batch
/// that is transactional or not where `transactional`, the request's, says otherwise) is None: the
/// Python path then answers the whole request.
fn check<'a>(
    data: &'a [u8],
    route: Route,
    version: i16,
    routes: &PyProduceRoutes,
    now_ms: i64,
    transactional: bool,
) -> Option<Checked<'a>> {
    let rules = ProduceRequestRules { version, max_message_bytes: route.max_message_bytes };
    let policy = ProducePolicy {
        compacted: route.compacted,
        // any refusal is the Python path's to answer, with the partition's name
        topic_partition: "",
        create_time: route.create_time,
        now_ms,
        before_max_ms: route.before_max_ms,
        after_max_ms: route.after_max_ms,
        max_decompressed_bytes: routes.max_decompressed_bytes,
        // a bad CRC must be found before anything is appended: the Python path answers it
        verify_crc: true,
    };
    let budget = Some(routes.work_budget);
    let batch = accept_produced_batch(data, &rules, routes.check_records.then_some(&policy), budget).ok()?;
    if !routes.check_records && batch.verify_crc(data).is_err() {
        return None;
    }
    let h = batch.header();
    // transactional batches: only in a request with a transactional id (served with the broker's
    // check of each batch's transaction, asked below as idempotent producers' sequences are), and
    // such a request only with transactional batches (anything else is the Python path's to judge)
    if h.is_transactional() != transactional {
        return None;
    }
    match rewrite_produced_batch(data, &batch, route.target.as_ref(), routes.max_decompressed_bytes, budget).ok()? {
        Some(bytes) => {
            let rules = ProduceRequestRules { version: version.max(7), ..rules };
            let rebuilt = accept_produced_batch(&bytes, &rules, None, None).ok()?;
            Some(Checked { route, data: std::borrow::Cow::Owned(bytes), batch: rebuilt })
        }
        None => Some(Checked { route, data: std::borrow::Cow::Borrowed(data), batch }),
    }
}

/// The answer the Python path gives a failed append (`klog/broker/handlers/produce.py::_append_checked`):
/// its error code and message, and the errno of an I/O error (the broker may take the dir offline).
fn failure(e: CoreError, codes: AnswerCodes) -> (i16, String, Option<i32>) {
    let message = e.to_string();
    match e {
        CoreError::RecordTooLarge { .. } => (codes.message_too_large, message, None),
        CoreError::Io { source, .. } => match source.raw_os_error() {
            // str() of the OSError the Python path catches
            Some(errno) => (codes.kafka_storage_error, format!("[Errno {errno}] {message}"), Some(errno)),
            None => (codes.kafka_storage_error, message, None),
        },
        CoreError::Closed(_) | CoreError::CorruptLog { .. } => (codes.kafka_storage_error, message, None),
        CoreError::InvalidRecords(_)
        | CoreError::Config { .. }
        | CoreError::InvalidArgument(_)
        | CoreError::OffsetOutOfRange { .. }
        | CoreError::DeleteBeyondHighWatermark { .. } => (codes.corrupt_message, message, None),
    }
}

/// The decisions the native Produce path asks of its caller before it appends anything. The broker's
/// Python side answers them through callables (`native_produce`); the native front
/// (`crate::front`) has none of them: it serves only what needs no decision (see `NoHooks`).
pub(crate) trait ProduceHooks {
    /// Whether an authorization hook is set (a transactional request then goes to the Python path).
    fn has_allow(&self) -> bool;
    /// May the connection's principal Write `topic`?
    fn allow(&self, topic: &str) -> PyResult<bool>;
    /// Whether transactional requests may be served (a transaction check is set).
    fn has_transaction_check(&self) -> bool;
    /// A transactional batch (see `native_produce`).
    fn check_transaction(
        &self,
        transactional_id: &str,
        version: i16,
        topic: &str,
        partition: i32,
        producer: (i64, i16, i32, i32),
    ) -> PyResult<Option<bool>>;
    /// Whether acks=all on replicated partitions may be served (a min-ISR check is set).
    fn has_replicated_check(&self) -> bool;
    /// acks=all: every replicated partition `keys` still led here with an ISR that is enough.
    fn check_replicated(&self, keys: &[(&str, i32)]) -> PyResult<bool>;
    /// Run `work`, with the GIL released when `detach` (and a GIL is held).
    fn run<T: Send>(&self, detach: bool, work: impl FnOnce() -> T + Send) -> T;
}

/// No decision available: transactional requests and acks=all on replicated partitions are left to
/// the Python path; no GIL is held.
pub(crate) struct NoHooks;

impl ProduceHooks for NoHooks {
    fn has_allow(&self) -> bool {
        false
    }
    fn allow(&self, _topic: &str) -> PyResult<bool> {
        Ok(true)
    }
    fn has_transaction_check(&self) -> bool {
        false
    }
    fn check_transaction(&self, _: &str, _: i16, _: &str, _: i32, _: (i64, i16, i32, i32)) -> PyResult<Option<bool>> {
        Ok(None)
    }
    fn has_replicated_check(&self) -> bool {
        false
    }
    fn check_replicated(&self, _keys: &[(&str, i32)]) -> PyResult<bool> {
        Ok(false)
    }
    fn run<T: Send>(&self, _detach: bool, work: impl FnOnce() -> T + Send) -> T {
        work()
    }
}

/// The Python callables of `native_produce`.
struct PyHooks<'a, 'py> {
    py: Python<'py>,
    allow: Option<&'a Bound<'py, PyAny>>,
    check_replicated: Option<&'a Bound<'py, PyAny>>,
    check_transaction: Option<&'a Bound<'py, PyAny>>,
}

impl ProduceHooks for PyHooks<'_, '_> {
    fn has_allow(&self) -> bool {
        self.allow.is_some()
    }
    fn allow(&self, topic: &str) -> PyResult<bool> {
        match self.allow {
            None => Ok(true),
            Some(allow) => allow.call1((topic,))?.is_truthy(),
        }
    }
    fn has_transaction_check(&self) -> bool {
        self.check_transaction.is_some()
    }
    fn check_transaction(
        &self,
        transactional_id: &str,
        version: i16,
        topic: &str,
        partition: i32,
        producer: (i64, i16, i32, i32),
    ) -> PyResult<Option<bool>> {
        let Some(check) = self.check_transaction else {
            return Ok(None);
        };
        let (id, epoch, first, last) = producer;
        Ok(Some(check.call1((transactional_id, version, topic, partition, id, epoch, first, last))?.is_truthy()?))
    }
    fn has_replicated_check(&self) -> bool {
        self.check_replicated.is_some()
    }
    fn check_replicated(&self, keys: &[(&str, i32)]) -> PyResult<bool> {
        let Some(check) = self.check_replicated else {
            return Ok(false);
        };
        let py = self.py;
        let list = PyList::empty(py);
        for (topic, index) in keys {
            list.append(PyTuple::new(py, [topic.into_pyobject(py)?.into_any(), index.into_pyobject(py)?.into_any()])?)?;
        }
        check.call1((list,))?.is_truthy()
    }
    fn run<T: Send>(&self, detach: bool, work: impl FnOnce() -> T + Send) -> T {
        run_detached_if(self.py, detach, work)
    }
}

/// What the native path did with one Produce frame: its header's fields, each partition's outcome
/// in request order, and the encoded answer (None for acks=0 and for acks=all waits).
pub(crate) struct Served<'a> {
    pub correlation_id: i32,
    pub api_version: i16,
    pub acks: i16,
    pub timeout_ms: i32,
    pub client_id: Option<&'a str>,
    /// Each topic entry's name (looked up by its id from v13).
    pub topics: Vec<Cow<'a, str>>,
    /// Each topic entry's id (v13; zeros before).
    pub topic_ids: Vec<[u8; 16]>,
    pub answers: Vec<(Answer, PartitionAnswer)>,
    pub waits: bool,
}

impl Served<'_> {
    /// The answers grouped by topic, in request order, and where each appended batch's is.
    fn by_topic(&self) -> (TopicAnswers<'_>, Vec<(usize, usize)>) {
        let mut by_topic: TopicAnswers<'_> =
            self.topics.iter().zip(&self.topic_ids).map(|(t, id)| ((t.as_ref(), *id), Vec::new())).collect();
        let mut slots = Vec::new();
        for (what, answer) in &self.answers {
            let topic = match what {
                Answer::Appended { topic, .. } => {
                    slots.push((*topic, by_topic[*topic].1.len()));
                    *topic
                }
                Answer::Failed { topic, .. } => *topic,
            };
            by_topic[topic].1.push(answer.clone());
        }
        (by_topic, slots)
    }

    /// The whole response frame (with its size prefix) when one is sent at once.
    pub fn response(&self) -> Option<Vec<u8>> {
        if self.acks == ACKS_NONE || self.waits {
            return None;
        }
        Some(encode_produce_response(self.api_version, self.correlation_id, &self.by_topic().0))
    }
}

/// Serve the Produce request `bytes` (without its size prefix) natively, asking `hooks` what the
/// common case cannot decide alone; Ok(None) (nothing appended) for the Python path to serve it.
/// The one implementation of the native Produce path, for `native_produce` and the native front.
pub(crate) fn serve_frame<'a, H: ProduceHooks>(
    bytes: &'a [u8],
    routes: &PyProduceRoutes,
    now_ms: i64,
    max_version: i16,
    hooks: &H,
) -> PyResult<Option<Served<'a>>> {
    let Ok(request) = decode_produce_frame(bytes, max_version) else {
        return Ok(None);
    };
    if !matches!(request.acks, ACKS_ALL | ACKS_NONE | ACKS_LEADER) {
        return Ok(None);
    }
    // a transactional request: its batches' transactions are checked by the transaction check
    let transactional = match request.transactional_id {
        None => false,
        Some(_) if hooks.has_transaction_check() && !hooks.has_allow() => true,
        Some(_) => return Ok(None),
    };
    // One critical section reads the topics' names (v13 names topics by id: a topic id no route
    // knows is the Python path's, UNKNOWN_TOPIC_ID) and every partition's route (None: not routed,
    // or no records), with the generation they belong to.
    let (names, looked_up, generation) = {
        let table = routes.lock();
        let names: Vec<Cow<'a, str>> = if request.api_version >= FIRST_TOPIC_ID_VERSION {
            let mut names = Vec::with_capacity(request.topics.len());
            for topic in &request.topics {
                let Some(name) = table.names.get(&topic.topic_id) else {
                    return Ok(None);
                };
                names.push(Cow::Owned(name.clone()));
            }
            names
        } else {
            request.topics.iter().map(|t| Cow::Borrowed(t.name)).collect()
        };
        let mut looked_up: Vec<Option<(usize, i32, &[u8], Route)>> = Vec::new();
        let mut key = (String::new(), 0);
        for (t, topic) in request.topics.iter().enumerate() {
            key.0.clear();
            key.0.push_str(&names[t]);
            for p in &topic.partitions {
                key.1 = p.index;
                looked_up.push(match (table.routes.get(&key), p.records) {
                    (Some(route), Some(records)) => Some((t, p.index, records, route.clone())),
                    _ => None,
                });
            }
        }
        (names, looked_up, routes.generation.load(Ordering::Acquire))
    };
    if hooks.has_allow() {
        let mut checked: Vec<&str> = Vec::new();
        for name in &names {
            if checked.contains(&name.as_ref()) {
                continue;
            }
            if !hooks.allow(name)? {
                return Ok(None);
            }
            checked.push(name);
        }
    }
    // every partition routed, with records; acks=all on a replicated one only with a min-ISR check
    let mut planned: Vec<(usize, i32, &[u8], Route)> = Vec::with_capacity(looked_up.len());
    let mut replicated: Vec<(&str, i32)> = Vec::new();
    for entry in looked_up {
        let Some((t, index, records, route)) = entry else {
            return Ok(None);
        };
        if route.replicated && request.acks == ACKS_ALL {
            if !hooks.has_replicated_check() {
                return Ok(None);
            }
            replicated.push((&names[t], index));
        }
        planned.push((t, index, records, route));
    }
    if planned.is_empty() {
        return Ok(None);
    }
    let version = request.api_version;
    let detach = bytes.len() >= DETACH_THRESHOLD;
    // first every check (a refusal sends the whole request to the Python path, nothing appended) ...
    let checked = hooks.run(detach, || -> Option<Vec<Checked<'_>>> {
        planned
            .iter()
            .map(|(_, _, records, route)| check(records, route.clone(), version, routes, now_ms, transactional))
            .collect()
    });
    let Some(checked) = checked else {
        return Ok(None);
    };
    // ... and every transactional batch's transaction, as the broker knows it (each producer's
    // sequence is checked with the appends, under its partition's producer table's lock) ...
    for ((t, index, _, _), c) in planned.iter().zip(&checked) {
        let h = c.batch.header();
        if h.producer_id < 0 {
            if h.is_transactional() {
                return Ok(None); // no producer: the Python path answers
            }
            continue;
        }
        // a second batch of the partition would be checked against the state the first one changes
        let name: &str = &names[*t];
        if planned.iter().filter(|(u, i, _, _)| i == index && names[*u] == name).count() > 1 {
            return Ok(None);
        }
        if h.is_transactional() {
            // `transactional` held for this batch to pass its checks: the request has both
            let Some(id) = request.transactional_id else {
                return Ok(None);
            };
            let producer = (h.producer_id, h.producer_epoch, h.base_sequence, c.batch.last_sequence());
            if hooks.check_transaction(id, version, name, *index, producer)? != Some(true) {
                return Ok(None);
            }
        }
    }
    // ... and, for acks=all, the leaders' min-ISR rule, in one call ...
    if !replicated.is_empty() && !hooks.check_replicated(&replicated)? {
        return Ok(None);
    }
    let waits = !replicated.is_empty();
    // ... then the appends, in request order, unless the routes were forgotten meanwhile
    let _gate = routes.gate.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if routes.generation.load(Ordering::Acquire) != generation {
        return Ok(None);
    }
    let Some(answers) = hooks.run(detach, || append_checked(&planned, checked, routes, now_ms)) else {
        return Ok(None);
    };
    Ok(Some(Served {
        correlation_id: request.correlation_id,
        api_version: version,
        acks: request.acks,
        timeout_ms: request.timeout_ms,
        client_id: request.client_id,
        topic_ids: request.topics.iter().map(|t| t.topic_id).collect(),
        topics: names,
        answers,
        waits,
    }))
}

/// The producer tables of the batches with a producer id, locked in one order (by address, so two
/// threads locking several never wait on each other), and each batch's verdict: None when one is
/// not a new batch in sequence (a retry, an error: the Python path answers), when the Python path
/// holds a table between its own check and record, when a partition has no table, or when an
/// idempotent batch's partition may have a transaction open (its producer's batches must then be
/// transactional, Kafka's INVALID_TXN_STATE rule, which the Python path applies).
fn lock_producers<'t>(
    checked: &[Checked<'_>],
    tables: &'t [Option<SharedProducers>],
) -> Option<Vec<Option<MutexGuard<'t, ProducerTable>>>> {
    let mut order: Vec<usize> = (0..tables.len()).filter(|&i| tables[i].is_some()).collect();
    order.sort_by_key(|&i| tables[i].as_ref().map(Arc::as_ptr));
    let mut guards: Vec<Option<MutexGuard<'t, ProducerTable>>> = (0..tables.len()).map(|_| None).collect();
    for i in order {
        let table = tables[i].as_ref()?;
        guards[i] = Some(table.lock().unwrap_or_else(|p| p.into_inner()));
    }
    for (c, guard) in checked.iter().zip(&guards) {
        let h = c.batch.header();
        if h.producer_id < 0 {
            continue;
        }
        let table = guard.as_ref()?;
        if table.is_held() || (!h.is_transactional() && c.route.log.first_unstable_offset() != i64::MAX) {
            return None;
        }
        let verdict = table.check(h.producer_id, h.producer_epoch, h.base_sequence, c.batch.last_sequence());
        if verdict != SequenceCheck::Append {
            return None;
        }
    }
    Some(guards)
}

/// Append each checked batch, in request order, each producer's batch checked and recorded in its
/// partition's producer table under the table's lock: each partition's outcome and answer, or None
/// (nothing appended: `lock_producers`' refusals).
fn append_checked(
    planned: &[(usize, i32, &[u8], Route)],
    checked: Vec<Checked<'_>>,
    routes: &PyProduceRoutes,
    now_ms: i64,
) -> Option<Vec<(Answer, PartitionAnswer)>> {
    let tables: Vec<Option<SharedProducers>> =
        checked.iter().map(|c| if c.batch.header().producer_id < 0 { None } else { c.route.log.producers() }).collect();
    let mut guards = lock_producers(&checked, &tables)?;
    let now = core::partition_log::LazyNow::new(Some(now_ms));
    let mut answers = Vec::with_capacity(planned.len());
    for (((t, index, _, _), c), guard) in planned.iter().zip(checked).zip(guards.iter_mut()) {
        let (t, index) = (*t, *index);
        let own_watermark = (!c.route.replicated && !c.route.compacted).then(|| c.route.log.clone());
        let appended = c.route.log.append_produced(&c.data, &c.batch, c.route.leader_epoch, &now);
        if let (Ok(info), Some(table)) = (&appended, guard.as_mut()) {
            let h = c.batch.header();
            let batch = ProducerBatchMetadata {
                first_seq: h.base_sequence,
                last_seq: c.batch.last_sequence(),
                base_offset: info.base_offset,
                last_offset: info.last_offset,
                timestamp: info.max_timestamp,
                log_append_time: info.log_append_time,
            };
            table.update(h.producer_id, h.producer_epoch, batch, now_ms);
        }
        match appended {
            Ok(info) => answers.push((
                Answer::Appended {
                    topic: t,
                    partition: index,
                    size: c.batch.size(),
                    records: c.batch.header().records_count,
                    producer: (
                        c.batch.header().producer_id,
                        c.batch.header().producer_epoch,
                        c.batch.header().base_sequence,
                        c.batch.last_sequence(),
                    ),
                    transactional: c.batch.header().is_transactional(),
                    info,
                    own_watermark,
                },
                PartitionAnswer {
                    index,
                    error_code: routes.codes.none,
                    base_offset: info.base_offset,
                    log_append_time_ms: info.log_append_time,
                    log_start_offset: info.log_start_offset,
                    error_message: None,
                },
            )),
            Err(e) => {
                let (code, message, errno) = failure(e, routes.codes);
                let dir = c.route.log.dir().parent().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
                answers.push((
                    Answer::Failed { topic: t, partition: index, code, message: message.clone(), errno, dir },
                    PartitionAnswer {
                        index,
                        error_code: code,
                        base_offset: -1,
                        log_append_time_ms: -1,
                        log_start_offset: -1,
                        error_message: Some(message),
                    },
                ))
            }
        }
    }
    Some(answers)
}

/// Serve the Produce request `frame` (without its size prefix) natively, or return None (nothing
/// appended) for the Python path to serve it. See the module documentation.
///
/// `max_version`: the newest Produce version the broker advertises. `allow`: the authorization
/// hook, None without an authorizer; else called once per distinct topic of the request, before
/// anything is appended, as `allow(topic) -> bool` (may the connection's principal Write it?): a
/// topic it refuses sends the request to the Python path, which answers TOPIC_AUTHORIZATION_FAILED.
/// `check_producer`: the idempotent producer's check, None to leave every batch with a producer id to
/// the Python path; else called once per such batch, after every batch passed its checks and before
/// anything is appended, as `check_producer(topic, partition, producer_id, epoch, first_sequence,
/// last_sequence) -> bool` (True: a new batch in sequence, to append; False: the Python path answers).
/// `check_transaction`: transactional batches, None to leave every request with a transactional id
/// to the Python path (and so it is with `allow`: the transactional id's authorization is the
/// Python path's); else called once per transactional batch, at the same point as
/// `check_producer`, as `check_transaction(transactional_id, api_version, topic, partition,
/// producer_id, epoch, first_sequence, last_sequence) -> bool` (True: in sequence and in the
/// producer's transaction as the broker knows it, to append; False: the Python path answers, and
/// asks the transaction coordinator where it has to).
/// `check_replicated`: acks=all on replicated partitions, None to leave it to the Python path; else
/// called once per such request, after every batch passed its checks and before anything is
/// appended, as `check_replicated([(topic, partition), ...]) -> bool` (True: each is led here with
/// an ISR that satisfies min.insync.replicas; False: the Python path answers). The outcome then
/// has no response but `waits`: the broker waits on the high watermark and calls `respond`.
#[pyfunction]
#[pyo3(signature = (frame, routes, *, now_ms, max_version, allow=None, check_replicated=None, check_transaction=None))]
#[allow(clippy::too_many_arguments)]
fn native_produce<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyAny>,
    routes: &Bound<'py, PyProduceRoutes>,
    now_ms: i64,
    max_version: i16,
    allow: Option<&Bound<'py, PyAny>>,
    check_replicated: Option<&Bound<'py, PyAny>>,
    check_transaction: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyNativeProduceOutcome>>> {
    let routes = routes.get();
    let input = ByteInput::from_object(frame, "frame")?;
    let hooks = PyHooks { py, allow, check_replicated, check_transaction };
    let Some(served) = serve_frame(input.as_slice(), routes, now_ms, max_version, &hooks)? else {
        return Ok(None);
    };
    let appended = PyList::empty(py);
    let failures = PyList::empty(py);
    for (what, _) in &served.answers {
        match what {
            Answer::Appended { topic, partition, size, records, producer, transactional, info, .. } => {
                let (producer_id, epoch, first_seq, last_seq) = *producer;
                // more than pyo3's 12 tuple fields: built from a list of objects
                let item = [
                    served.topics[*topic].as_ref().into_bound_py_any(py)?,
                    partition.into_bound_py_any(py)?,
                    size.into_bound_py_any(py)?,
                    records.into_bound_py_any(py)?,
                    producer_id.into_bound_py_any(py)?,
                    epoch.into_bound_py_any(py)?,
                    first_seq.into_bound_py_any(py)?,
                    last_seq.into_bound_py_any(py)?,
                    info.base_offset.into_bound_py_any(py)?,
                    info.last_offset.into_bound_py_any(py)?,
                    info.max_timestamp.into_bound_py_any(py)?,
                    info.log_append_time.into_bound_py_any(py)?,
                    transactional.into_bound_py_any(py)?,
                ];
                appended.append(PyTuple::new(py, item)?)?;
            }
            Answer::Failed { topic, partition, code, message, errno, dir } => {
                failures.append((served.topics[*topic].as_ref(), *partition, *code, message.as_str(), *errno, dir.as_str()))?;
            }
        }
    }
    let response = served.response().map(|r| PyBytes::new(py, &r).unbind());
    let (answers, slots) = if served.waits {
        let (by_topic, slots) = served.by_topic();
        (by_topic.into_iter().map(|((name, id), parts)| ((name.to_owned(), id), parts)).collect(), slots)
    } else {
        (Vec::new(), Vec::new())
    };
    let outcome = PyNativeProduceOutcome {
        response,
        correlation_id: served.correlation_id,
        api_version: served.api_version,
        acks: served.acks,
        timeout_ms: served.timeout_ms,
        client_id: served.client_id.map(str::to_owned),
        appended: appended.unbind(),
        failures: failures.unbind(),
        waits: served.waits,
        answers,
        slots,
    };
    Ok(Some(Bound::new(py, outcome)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProduceRoutes>()?;
    m.add_class::<PyNativeProduceOutcome>()?;
    m.add_function(wrap_pyfunction!(native_produce, m)?)?;
    Ok(())
}
