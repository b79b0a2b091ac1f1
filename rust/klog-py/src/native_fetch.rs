//! The native Fetch path: one call takes a whole Fetch request frame, decodes it
//! (`klog_core::fetch_request`), resolves its partitions among those the broker's Python side
//! routed here (`FetchRoutes`: partitions it leads), reads each below its high watermark (a
//! read_committed consumer's below the last stable offset, told the aborted transactions it
//! overlaps, both from the log as the broker's transaction state sets them; a replica's to its log
//! end, once the Python side judged the fetch: [`Judge`]) and returns the encoded answer, records
//! as segment file regions (sendfile) or bytes. A request that must wait (nothing to return yet,
//! `max_wait_ms` > 0) is parked in the routes' wait table (`crate::fetch_wait`), which answers it from its own thread when a high
//! watermark moves or at the deadline; or, when the table is full or the connection has no native
//! send queue, returns the partitions to wait on, and the broker calls again once woken or at the
//! deadline. The work itself ([`serve`]) takes no Python object, so both callers share it. Anything
//! the common case does not cover (a replica's fetch judged other than a plain read, a fetch
//! session's opening, an unknown or unrouted partition, a fenced leader epoch, an offset out of
//! range, a rack-aware consumer, a read error, ...) returns None before any state changed (but a
//! replica's recorded position, which the Python path records again to the same effect), and the
//! broker's Python path handles the frame unchanged. How a request takes this path:
//! klog/broker/native_fetch.py.
//!
//! KIP-227 fetch sessions: the Python side (klog/broker/fetch_sessions.py) creates, evicts and
//! bounds them; once a consumer's session has every partition routed here, it hands the session's
//! state over (`adopt_session`) and the native path serves its incremental fetches that only
//! update partitions already in the session (the common case: new offsets, or nothing on a
//! caught-up poll), answering with only the partitions that have news as the Python path does.
//! Anything else (a new or forgotten partition, a wrong epoch, an unrouted partition) returns None
//! with the session unchanged, and Python takes the state back (`release_session`) before serving.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};


use klog_core::fetch_request::{
    decode_fetch_frame, encode_fetch_response, FetchFrame, FetchPartition, PartitionAnswer, Piece, TopicAnswer, TopicRef,
    FIRST_TOPIC_ID_VERSION,
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

/// A topic as a session keeps it: by name (sessions opened before Fetch v13) or by id.
#[derive(Clone, PartialEq, Eq)]
enum SessionTopic {
    Name(String),
    Id([u8; 16]),
}

impl SessionTopic {
    fn as_ref(&self) -> TopicRef<'_> {
        match self {
            SessionTopic::Name(name) => TopicRef::Name(name),
            SessionTopic::Id(id) => TopicRef::Id(*id),
        }
    }
}

/// One partition of a session: its fetch parameters and what the last answer told the client of it
/// (klog/broker/fetch_sessions.py::FetchPartition).
#[derive(Clone)]
struct SessionPartition {
    topic: SessionTopic,
    partition: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    log_start_offset: i64,
    /// the high watermark and log start last answered (-1: not yet, or an error)
    answered_high_watermark: i64,
    answered_log_start_offset: i64,
}

/// A consumer's fetch session handed over by the Python side: the epoch its next fetch must carry
/// and its partitions in the order they are read.
struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    /// a replica's (Kafka's privileged session): only replicas' fetches continue it natively
    replica: bool,
    partitions: Vec<SessionPartition>,
}

/// The tuple a session partition crosses the boundary as: (topic name or 16-byte id, partition,
/// fetch offset, partition max bytes, current leader epoch, last fetched epoch, log start offset,
/// answered high watermark, answered log start offset).
type PartitionState<'py> = (Bound<'py, PyAny>, i32, i64, i32, i32, i32, i64, i64, i64);

/// KIP-227's next epoch (Kafka's `FetchMetadata.nextEpoch`): after i32::MAX comes 1.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[derive(Default)]
struct Table {
    partitions: HashMap<(String, i32), Route>,
    /// topic id -> name, for the topics routed (Fetch v13+ names topics by id)
    names: HashMap<[u8; 16], String>,
    /// the fetch sessions handed over by the Python side, by session id (kept when routes are
    /// forgotten: Python takes each back when it next serves one of its fetches)
    sessions: HashMap<i32, Session>,
}

impl Table {
    fn name_of<'a>(&'a self, topic: TopicRef<'a>) -> Option<&'a str> {
        match topic {
            TopicRef::Name(name) => Some(name),
            TopicRef::Id(id) => self.names.get(&id).map(String::as_str),
        }
    }
}

/// The routes' state, shared with the wait thread (`crate::fetch_wait`).
pub(crate) struct RoutesShared {
    table: Mutex<Table>,
    /// `replica.selector.class` is set: a consumer naming its rack may be sent to a follower
    /// (KIP-392), which the Python path decides.
    rack_aware: bool,
    /// Kafka's code of no error, given by the broker from its one table (klog/protocol/error_codes.py).
    none: i16,
    /// The parked long polls (`klog.fetch.native.wait.max.parked`).
    pub(crate) waits: Arc<crate::fetch_wait::Waits>,
}

impl RoutesShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // every update is one insert or removal: a poisoned lock holds a whole map
        self.table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for RoutesShared {
    fn drop(&mut self) {
        self.waits.stop();
    }
}

/// The partitions the native Fetch path may serve. The broker forgets them whenever leadership,
/// partitions, topics, configs or log dirs change (`PartitionManager.forget_native_routes`), and a
/// partition's route when a transaction starts on it. Holds the parked long polls too.
#[pyclass(frozen, module = "klog._native", name = "FetchRoutes")]
pub struct PyFetchRoutes {
    pub(crate) shared: Arc<RoutesShared>,
}

impl PyFetchRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.shared.lock()
    }
}

fn topic_id(bytes: &[u8]) -> PyResult<[u8; 16]> {
    bytes.try_into().map_err(|_| PyValueError::new_err(format!("a topic id is 16 bytes, got {}", bytes.len())))
}

#[pymethods]
impl PyFetchRoutes {
    #[new]
    /// `error_none`: Kafka's code of no error. `max_parked`: the most long polls parked at once
    /// (`klog.fetch.native.wait.max.parked`; 0: none, the Python side waits).
    #[pyo3(signature = (*, rack_aware, error_none, max_parked=0))]
    fn new(rack_aware: bool, error_none: i16, max_parked: usize) -> PyResult<Self> {
        let waits = crate::fetch_wait::Waits::new(max_parked)?;
        Ok(PyFetchRoutes { shared: Arc::new(RoutesShared { table: Mutex::new(Table::default()), rack_aware, none: error_none, waits }) })
    }

    /// Route `topic`-`partition` (whose topic has the 16-byte id `topic_id`) to `log`, led in
    /// `leader_epoch`, for replicas' and consumers' fetches.
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

    /// Forget every route.
    fn clear(&self) {
        {
            let mut table = self.lock();
            table.partitions.clear();
            table.names.clear();
        }
        self.shared.waits.wake_all();
    }

    fn __len__(&self) -> usize {
        self.lock().partitions.len()
    }

    /// Take over the state of fetch session `session_id` (a consumer's) whose next fetch carries
    /// `epoch`: its partitions in read order, each a [`PartitionState`] tuple (topic by 16-byte id
    /// when `uses_topic_ids`, else by name). False (nothing kept) unless every partition is routed:
    /// the Python path keeps serving it. `replica`: a replica's session (continued only by replicas'
    /// fetches).
    #[pyo3(signature = (session_id, *, epoch, uses_topic_ids, partitions, replica=false))]
    fn adopt_session(&self, session_id: i32, epoch: i32, uses_topic_ids: bool, partitions: Vec<PartitionState<'_>>, replica: bool) -> PyResult<bool> {
        let mut kept = Vec::with_capacity(partitions.len());
        for (topic, partition, fetch_offset, partition_max_bytes, current_leader_epoch, last_fetched_epoch, log_start_offset, answered_high_watermark, answered_log_start_offset) in partitions {
            let topic = if uses_topic_ids {
                SessionTopic::Id(self::topic_id(&topic.extract::<Vec<u8>>()?)?)
            } else {
                SessionTopic::Name(topic.extract::<String>()?)
            };
            kept.push(SessionPartition {
                topic,
                partition,
                fetch_offset,
                partition_max_bytes,
                current_leader_epoch,
                last_fetched_epoch,
                log_start_offset,
                answered_high_watermark,
                answered_log_start_offset,
            });
        }
        let mut table = self.lock();
        let routed = kept.iter().all(|p| {
            table.name_of(p.topic.as_ref()).is_some_and(|name| {
                table.partitions.contains_key(&(name.to_owned(), p.partition))
            })
        });
        if !routed || kept.is_empty() {
            return Ok(false);
        }
        table.sessions.insert(session_id, Session { epoch, uses_topic_ids, replica, partitions: kept });
        Ok(true)
    }

    /// Give back fetch session `session_id`'s state and forget it: (the epoch its next fetch must
    /// carry, its partitions in read order as [`PartitionState`] tuples), or None if not held.
    fn release_session<'py>(&self, py: Python<'py>, session_id: i32) -> PyResult<Option<(i32, Bound<'py, PyList>)>> {
        let Some(session) = self.lock().sessions.remove(&session_id) else {
            return Ok(None);
        };
        // a long poll parked on it is served again (and goes back to the Python path)
        self.shared.waits.wake_all();
        let partitions = PyList::empty(py);
        for p in session.partitions {
            let topic = match &p.topic {
                SessionTopic::Name(name) => name.into_pyobject(py)?.into_any(),
                SessionTopic::Id(id) => PyBytes::new(py, id).into_any(),
            };
            partitions.append((topic, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset, p.answered_high_watermark, p.answered_log_start_offset))?;
        }
        Ok(Some((session.epoch, partitions)))
    }

    /// Forget fetch session `session_id` (closed or evicted by the Python side).
    fn drop_session(&self, session_id: i32) {
        self.lock().sessions.remove(&session_id);
    }

    /// The number of fetch sessions held.
    fn session_count(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Take parked long poll `parked` back (the connection has another request to serve, or
    /// closed): None if it was answered meanwhile (the answer is queued on its connection), else
    /// the milliseconds left of its wait (0: over, or it needs the Python path), and it is no longer
    /// parked.
    fn take_back(&self, py: Python<'_>, parked: u64) -> Option<u64> {
        let waits = &self.shared.waits;
        match waits.try_take_back(parked) {
            Ok(left) => left,
            // the wait thread is answering it right now: wait for that without the GIL
            Err(()) => {
                let waits = waits.clone();
                py.detach(move || waits.take_back(parked))
            }
        }
    }

    /// Parked long poll `parked`, parked by the native front, is the Python side's from now on (its
    /// connection left the front): True if the table sent it back already (serve it in Python now);
    /// later sends back come through `take_returned`.
    fn disown(&self, py: Python<'_>, parked: u64) -> bool {
        let waits = self.shared.waits.clone();
        py.detach(move || waits.disown(parked))
    }

    /// The ids of parked long polls the wait table cannot answer (a route forgotten, a session
    /// taken back, a read error): their connections take them back and serve them in Python.
    fn take_returned(&self) -> Vec<u64> {
        self.shared.waits.take_returned()
    }

    /// What the wait table answered since the last call, for the metrics: (parked id, session id,
    /// [(topic, record bytes)], seconds from park to answer) per answer.
    fn take_answered(&self) -> Vec<(u64, i32, Vec<(String, u64)>, f64)> {
        self.shared.waits.take_answered()
    }

    /// `take_answered` summed (one call per event-loop wake-up, no object per answer): (answers,
    /// [(session id, answers)], [(topic, record bytes, topic entries)], the answers' times in ms
    /// counted into the histogram buckets `bounds_ms` (as `bisect_left`, the last over every bound),
    /// their sum in ms).
    fn take_answered_summary(&self, bounds_ms: Vec<f64>) -> crate::fetch_wait::AnsweredSummary {
        self.shared.waits.take_answered_summary(&bounds_ms)
    }

    /// Readable when `take_returned` has ids (an eventfd; -1 off Linux).
    #[getter]
    fn wait_notify_fd(&self) -> i32 {
        self.shared.waits.notify_fd()
    }

    /// (parked now, answered after a wake-up, answered at the deadline, sent back to Python,
    /// refused because the table was full) since start.
    fn wait_stats(&self) -> (usize, u64, u64, u64, u64) {
        self.shared.waits.stats()
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
    /// A replica's fetch: it waits for an append (the log end to move), not the high watermark.
    #[pyo3(get)]
    replica: bool,
    /// (topic, record bytes) of each topic entry of the response, for the metrics.
    #[pyo3(get)]
    topic_bytes: Option<Py<PyList>>,
    /// The fetch session an incremental fetch continued (0: sessionless), for the Python side's
    /// record of its last use.
    #[pyo3(get)]
    session_id: i32,
    /// The id of the long poll parked in the routes' wait table (answered from there: see
    /// `FetchRoutes.take_back`), 0: not parked.
    #[pyo3(get)]
    parked: u64,
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

/// A request that has to wait: the partitions it waits on (their logs, how far each could be read
/// when it was: its high watermark, a replica's log end; their keys) and its header fields.
pub(crate) struct MustWait {
    pub(crate) logs: Vec<Arc<core::PartitionLog>>,
    pub(crate) read_at: Vec<i64>,
    keys: Vec<(String, i32)>,
    correlation_id: i32,
    version: i16,
    client_id: Option<String>,
    pub(crate) max_wait_ms: i32,
    /// a replica's fetch (waits for appends: its log ends to move)
    pub(crate) replica: bool,
}

/// A fetch session's next state, committed once its answer is certain.
pub(crate) struct SessionCommit {
    session_id: i32,
    epoch: i32,
    partitions: Vec<SessionPartition>,
}

/// An encoded answer: the response's pieces, (topic, record bytes) per topic entry, the session it
/// continued (0: none) and its next state.
pub(crate) struct Answered {
    pub(crate) pieces: Vec<Piece<FileRange>>,
    pub(crate) topic_bytes: Vec<(String, u64)>,
    pub(crate) session_id: i32,
    pub(crate) commit: Option<SessionCommit>,
    correlation_id: i32,
    version: i16,
    client_id: Option<String>,
    max_wait_ms: i32,
}

/// What [`serve`] made of a frame.
pub(crate) enum Served {
    /// The Python path serves it (nothing changed).
    NotServed,
    Wait(MustWait),
    Answer(Answered),
}

/// Commit a session's next state; false if the Python side took the session meanwhile (the answer
/// must not be sent: the Python path serves the request).
pub(crate) fn commit_session(routes: &RoutesShared, commit: SessionCommit) -> bool {
    let mut table = routes.lock();
    match table.sessions.get_mut(&commit.session_id) {
        Some(live) if live.epoch == commit.epoch => {
            live.partitions = commit.partitions;
            live.epoch = next_epoch(live.epoch);
            true
        }
        _ => false,
    }
}

/// How a replica's fetch is judged (Kafka's `Partition.updateFollowerFetchState`: its leader epoch,
/// last fetched epoch against the epoch cache, its fetch position recorded, which may move the high
/// watermark, complete acks=all produces and propose an ISR expansion): by the Python side's
/// `judge(replica_id, broker_epoch, [(topic, partition, current_leader_epoch, fetch_offset,
/// last_fetched_epoch, log_start_offset)])`, called once per request with the GIL held before the
/// reads: True when every partition may be read (else nothing is served and the Python path judges
/// the request again, to the same verdicts, and answers it).
pub(crate) enum Judge<'a, 'py> {
    /// replicas' fetches are the Python path's (an authorizer: they need ClusterAction)
    Refuse,
    /// judge a replica's fetch with this hook
    Hook(&'a Bound<'py, PyAny>),
    /// the request was judged as it arrived (served again after a wait: Kafka judges once)
    Judged,
}

/// The native path's work on one Fetch frame, without Python objects: `py` (the GIL held) is given
/// by the Python call, and then the reads release it; None on the wait thread (no GIL). `allow`:
/// the authorization hook (only with `py`). `judge`: how a replica's fetch is judged (`Hook` only
/// with `py`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn serve(
    routes: &RoutesShared,
    frame: &[u8],
    max_version: i16,
    fetch_max_bytes: i64,
    may_wait: bool,
    py: Option<Python<'_>>,
    allow: Option<&Bound<'_, PyAny>>,
    judge: Judge<'_, '_>,
) -> PyResult<Served> {
    let Ok(request) = decode_fetch_frame(frame, max_version) else {
        return Ok(Served::NotServed);
    };
    // sessionless fetches, and the incremental fetches of a session handed over (opening or
    // closing one is the Python path's); a replica's only with a way to judge it
    let incremental = request.session_epoch > 0;
    let replica = request.replica_id >= 0;
    if !incremental && (request.session_epoch != SESSIONLESS_EPOCH || request.session_id != 0) {
        return Ok(Served::NotServed);
    }
    if replica && matches!(judge, Judge::Refuse) {
        return Ok(Served::NotServed);
    }
    // an isolation level neither read_uncommitted nor read_committed: the Python path's error answer
    if request.isolation_level != 0 && request.isolation_level != READ_COMMITTED {
        return Ok(Served::NotServed);
    }
    if !replica && routes.rack_aware && !request.rack_id.is_empty() {
        return Ok(Served::NotServed);
    }
    // a replica reads everything up to the log end: no last stable offset, no aborted transactions
    let read_committed = !replica && request.isolation_level == READ_COMMITTED;
    // an incremental fetch reads its whole session, the request's changes applied (committed only
    // when it is answered: a long poll's wait or a return to the Python path leaves it unchanged)
    let session = if incremental {
        match updated_session(&routes.lock(), &request) {
            Some(partitions) => Some(partitions),
            None => return Ok(Served::NotServed),
        }
    } else {
        None
    };
    // (topic, partition, current leader epoch, fetch offset, partition max bytes, last fetched
    // epoch, log start offset), in read order
    type Wanted<'t> = (TopicRef<'t>, i32, i32, i64, i32, i32, i64);
    let wanted: Vec<Wanted<'_>> = match &session {
        Some(partitions) => partitions
            .iter()
            .map(|p| (p.topic.as_ref(), p.partition, p.current_leader_epoch, p.fetch_offset, p.partition_max_bytes, p.last_fetched_epoch, p.log_start_offset))
            .collect(),
        None => request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (t.topic, p.partition, p.current_leader_epoch, p.fetch_offset, p.partition_max_bytes, p.last_fetched_epoch, p.log_start_offset)
                })
            })
            .collect(),
    };
    // every partition routed, at a leader epoch and offset the Python path would answer without error
    let mut planned: Vec<Planned<'_>> = Vec::with_capacity(wanted.len());
    {
        let table = routes.lock();
        let mut key = (String::new(), 0);
        for &(topic, partition, current_leader_epoch, fetch_offset, partition_max_bytes, last_fetched_epoch, _) in &wanted {
            let Some(name) = table.name_of(topic) else {
                return Ok(Served::NotServed);
            };
            key.0.clear();
            key.0.push_str(name);
            key.1 = partition;
            let Some(route) = table.partitions.get(&key) else {
                return Ok(Served::NotServed);
            };
            if current_leader_epoch != -1 && current_leader_epoch != route.leader_epoch {
                return Ok(Served::NotServed);
            }
            if fetch_offset < route.log.log_start_offset() || fetch_offset > route.log.log_end_offset() {
                return Ok(Served::NotServed);
            }
            // a consumer's last fetched epoch that diverges: a diverging epoch or OFFSET_OUT_OF_RANGE is
            // the answer (Kafka's Partition.readRecords), the Python path's to give (the leader's own
            // epoch, the latest, ends at the log end: no divergence, nothing to look up)
            if !replica
                && last_fetched_epoch >= 0
                && last_fetched_epoch != route.leader_epoch
                && route.log.consumer_epoch_diverges(last_fetched_epoch, fetch_offset).unwrap_or(true)
            {
                return Ok(Served::NotServed);
            }
            planned.push(Planned {
                topic,
                name: key.0.clone(),
                index: partition,
                fetch_offset,
                partition_max_bytes,
                route: route.clone(),
            });
        }
    }
    if let Some(allow) = allow {
        let mut checked: Vec<&str> = Vec::new();
        for p in &planned {
            if checked.contains(&p.name.as_str()) {
                continue;
            }
            if !allow.call1((p.name.as_str(),))?.is_truthy()? {
                return Ok(Served::NotServed);
            }
            checked.push(p.name.as_str());
        }
    }
    if replica {
        if let Judge::Hook(hook) = judge {
            let Some(py) = py else {
                return Ok(Served::NotServed);
            };
            let partitions = PyList::empty(py);
            for (p, w) in planned.iter().zip(&wanted) {
                partitions.append((p.name.as_str(), p.index, w.2, p.fetch_offset, w.5, w.6))?;
            }
            if !hook.call1((request.replica_id, request.replica_epoch, partitions))?.is_truthy()? {
                return Ok(Served::NotServed);
            }
        }
    }
    // how far each partition may be read: a consumer below the high watermark (a read_committed one
    // below the last stable offset), a replica to the log end
    let visible = |log: &core::PartitionLog| if replica { log.log_end_offset() } else { log.high_watermark() };
    let readable_end = |log: &core::PartitionLog, end: i64| if read_committed { log.last_stable_offset(end) } else { end };
    let max_bytes = (request.max_bytes as i64).min(fetch_max_bytes).max(0);
    let readable = planned.iter().any(|p| p.fetch_offset < readable_end(&p.route.log, visible(&p.route.log)));
    // the reads, as the Python path's _read_all makes them (klog/broker/handlers/fetch.py)
    // (the answers, the record bytes they hold, how far each partition could be read when it was: a
    // wait is woken by a move past that, even one made before its hook was set)
    let read_all = || -> Option<(Vec<PartitionAnswer<FileRange>>, i64, Vec<i64>)> {
        let mut total: i64 = 0;
        let mut answers = Vec::with_capacity(planned.len());
        let mut read_at = Vec::with_capacity(planned.len());
        for p in &planned {
            let log = &p.route.log;
            let hw = log.high_watermark();
            // how far the partition is visible, read once: the read stops there and a wait is woken by
            // a move past it, even if the last stable offset stays (read again, a move in between
            // would be neither read nor waited for: its hook may have fired before the wait is linked)
            let seen = if replica { log.log_end_offset() } else { hw };
            read_at.push(seen);
            // a consumer's: the log's first unstable offset below the high watermark (none on a
            // partition without transactions), as the Python path's last stable offset
            let stable = log.last_stable_offset(hw);
            let end = readable_end(log, seen);
            let mut answer = PartitionAnswer {
                index: p.index,
                high_watermark: hw,
                last_stable_offset: if replica { hw } else { stable },
                log_start_offset: log.log_start_offset(),
                // the aborted transactions the read [fetch offset, last stable offset) overlaps
                aborted: read_committed.then(|| log.aborted_between(p.fetch_offset, stable)),
                records: None,
            };
            let remaining = (p.partition_max_bytes as i64).min(max_bytes - total);
            if p.fetch_offset >= end || (remaining <= 0 && total > 0) {
                answers.push(answer);
                continue;
            }
            let limit = if replica { None } else if read_committed { Some(stable) } else { Some(hw) };
            let read = log.read(p.fetch_offset, remaining.max(0) as u64, limit, total == 0).ok()?;
            answer.high_watermark = read.high_watermark;
            // a replica's is the high watermark read (the Python path's), a consumer's no higher than before
            answer.last_stable_offset =
                if replica { read.high_watermark } else { answer.last_stable_offset.min(read.high_watermark) };
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
        Some((answers, total, read_at))
    };
    let read = match py {
        Some(py) if readable => py.detach(read_all),
        _ => read_all(),
    };
    let Some((answers, total, read_at)) = read else {
        return Ok(Served::NotServed);
    };
    let version = request.api_version;
    let client_id = request.client_id.map(str::to_owned);
    let min_bytes = request.min_bytes as i64;
    if may_wait && request.max_wait_ms > 0 && !planned.is_empty() && total < min_bytes {
        return Ok(Served::Wait(MustWait {
            read_at,
            replica,
            logs: planned.iter().map(|p| p.route.log.clone()).collect(),
            keys: planned.iter().map(|p| (p.name.clone(), p.index)).collect(),
            correlation_id: request.correlation_id,
            version,
            client_id,
            max_wait_ms: request.max_wait_ms,
        }));
    }
    // a session's answer holds only the partitions with news (the session's next state: `answered`)
    let (keep, answered) = match &session {
        Some(partitions) => {
            let (keep, next) = session_answer(partitions, &answers);
            (keep, Some(next))
        }
        None => (vec![true; answers.len()], None),
    };
    let session_id = if answered.is_some() { request.session_id } else { 0 };
    // consecutive partitions of one topic answer under one entry, as the Python path's _by_topic
    let mut topics: Vec<TopicAnswer<'_, FileRange>> = Vec::new();
    let mut topic_bytes: Vec<(String, u64)> = Vec::new();
    for ((p, answer), _) in planned.iter().zip(answers).zip(&keep).filter(|(_, kept)| **kept) {
        let bytes = answer.records.as_ref().map_or(0, |(_, n)| *n);
        match topics.last_mut() {
            Some(last) if last.topic == p.topic => {
                last.partitions.push(answer);
                if let Some(m) = topic_bytes.last_mut() {
                    m.1 += bytes;
                }
            }
            _ => {
                topics.push(TopicAnswer { topic: p.topic, partitions: vec![answer] });
                topic_bytes.push((p.name.clone(), bytes));
            }
        }
    }
    let pieces = encode_fetch_response(version, request.correlation_id, routes.none, session_id, topics);
    Ok(Served::Answer(Answered {
        pieces,
        topic_bytes,
        session_id,
        commit: answered.map(|partitions| SessionCommit { session_id: request.session_id, epoch: request.session_epoch, partitions }),
        correlation_id: request.correlation_id,
        version,
        client_id,
        max_wait_ms: request.max_wait_ms,
    }))
}

/// Serve the Fetch request `frame` (without its size prefix) natively, or return None (nothing
/// changed) for the Python path to serve it. See the module documentation.
///
/// `max_version`: the newest Fetch version the broker advertises. `fetch_max_bytes`: the broker's
/// `fetch.max.bytes`. `zero_copy`: records as file slices (sendfile), else as bytes. `may_wait`:
/// False once the request's wait is over (answer with whatever there is). `allow`: the
/// authorization hook, None without an authorizer; else called once per distinct topic of the
/// request as `allow(topic) -> bool` (may the connection's principal Read it?): a refusal sends the
/// request to the Python path. `park`: the connection's native send queue (a `SocketQueue`): a
/// long poll with nothing to answer yet is parked in the routes' wait table (`parked` of the
/// outcome: its id) and answered from there, unless the table is full (then `wait_keys` as without).
#[pyfunction]
#[pyo3(signature = (frame, routes, *, max_version, fetch_max_bytes, zero_copy, may_wait=true, allow=None, park=None, judge=None, judged=false))]
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
    park: Option<&Bound<'py, PyAny>>,
    judge: Option<&Bound<'py, PyAny>>,
    judged: bool,
) -> PyResult<Option<Bound<'py, PyNativeFetchOutcome>>> {
    let shared = &routes.get().shared;
    let input = ByteInput::from_object(frame, "frame")?;
    let bytes = input.as_slice();
    let judge = match judge {
        None => Judge::Refuse,
        Some(_) if judged => Judge::Judged,
        Some(hook) => Judge::Hook(hook),
    };
    let answered = match serve(shared, bytes, max_version, fetch_max_bytes, may_wait, Some(py), allow, judge)? {
        Served::NotServed => return Ok(None),
        Served::Wait(wait) => {
            let parked = match park {
                Some(queue) => crate::fetch_wait::park(shared, queue, bytes, &wait, max_version, fetch_max_bytes)?,
                None => 0,
            };
            let keys = if parked == 0 {
                let keys = PyList::empty(py);
                for key in &wait.keys {
                    keys.append((key.0.as_str(), key.1))?;
                }
                Some(keys.unbind())
            } else {
                None
            };
            let outcome = PyNativeFetchOutcome {
                chunks: None,
                correlation_id: wait.correlation_id,
                api_version: wait.version,
                client_id: wait.client_id,
                max_wait_ms: wait.max_wait_ms,
                wait_keys: keys,
                replica: wait.replica,
                topic_bytes: None,
                session_id: 0,
                parked,
            };
            return Ok(Some(Bound::new(py, outcome)?));
        }
        Served::Answer(answered) => answered,
    };
    let chunks = PyList::empty(py);
    for piece in answered.pieces {
        match piece {
            Piece::Bytes(b) => chunks.append(PyBytes::new(py, &b))?,
            Piece::Records(range) if zero_copy => chunks.append(Bound::new(py, PyFileSlice::of(range))?)?,
            Piece::Records(range) => match ranges_to_bytes(py, std::slice::from_ref(&range)) {
                Ok(bytes) => chunks.append(bytes)?,
                Err(_) => return Ok(None), // a segment cut since the read: the Python path answers
            },
        }
    }
    if let Some(commit) = answered.commit {
        // the answer is certain: the session moves on (unless the Python side took it meanwhile)
        if !commit_session(shared, commit) {
            return Ok(None);
        }
    }
    let topic_bytes = PyList::empty(py);
    for m in answered.topic_bytes {
        topic_bytes.append(m)?;
    }
    let outcome = PyNativeFetchOutcome {
        chunks: Some(chunks.unbind()),
        correlation_id: answered.correlation_id,
        api_version: answered.version,
        client_id: answered.client_id,
        max_wait_ms: answered.max_wait_ms,
        wait_keys: None,
        replica: false,
        topic_bytes: Some(topic_bytes.unbind()),
        session_id: answered.session_id,
        parked: 0,
    };
    Ok(Some(Bound::new(py, outcome)?))
}

/// The partitions of the session an incremental fetch continues, in read order, with the request's
/// changes applied (Kafka's `FetchSession.update`), or None when the native path does not serve it:
/// no such session here, another epoch (INVALID_FETCH_SESSION_EPOCH) or topic naming
/// (FETCH_SESSION_TOPIC_ID_ERROR), partitions forgotten, added or named twice (the session's size
/// changes: the Python side bounds it).
fn updated_session(table: &Table, request: &FetchFrame<'_>) -> Option<Vec<SessionPartition>> {
    let session = table.sessions.get(&request.session_id)?;
    let by_id = request.api_version >= FIRST_TOPIC_ID_VERSION;
    if session.epoch != request.session_epoch
        || session.uses_topic_ids != by_id
        || session.replica != (request.replica_id >= 0)
        || !request.forgotten.is_empty()
    {
        return None;
    }
    let mut partitions = session.partitions.clone();
    let mut changes: HashMap<(TopicRef<'_>, i32), &FetchPartition> = HashMap::with_capacity(request.partition_count());
    for t in &request.topics {
        for p in &t.partitions {
            if changes.insert((t.topic, p.partition), p).is_some() {
                return None;
            }
        }
    }
    let mut applied = 0;
    if !changes.is_empty() {
        for cached in &mut partitions {
            let Some(new) = changes.get(&(cached.topic.as_ref(), cached.partition)) else {
                continue;
            };
            // a new leader epoch: the client may have dropped the last answer, which is given again
            if new.current_leader_epoch != cached.current_leader_epoch {
                cached.answered_high_watermark = -1;
                cached.answered_log_start_offset = -1;
            }
            cached.fetch_offset = new.fetch_offset;
            cached.partition_max_bytes = new.partition_max_bytes;
            cached.current_leader_epoch = new.current_leader_epoch;
            cached.last_fetched_epoch = new.last_fetched_epoch;
            cached.log_start_offset = new.log_start_offset;
            applied += 1;
        }
    }
    (applied == changes.len()).then_some(partitions)
}

/// Which of an incremental fetch's answers (one per session partition, in order) its response
/// holds, and the session's partitions afterwards (klog/broker/fetch_sessions.py: `must_answer`
/// and the move of partitions that returned records to the end). The native path answers no
/// errors, preferred read replicas or diverging epochs: records or a moved high watermark or log
/// start are the news.
fn session_answer(partitions: &[SessionPartition], answers: &[PartitionAnswer<FileRange>]) -> (Vec<bool>, Vec<SessionPartition>) {
    let mut keep = Vec::with_capacity(answers.len());
    let mut next = Vec::with_capacity(partitions.len());
    let mut returned_records = Vec::new();
    for (cached, answer) in partitions.iter().zip(answers) {
        let mut cached = cached.clone();
        let mut must = answer.records.is_some();
        if answer.high_watermark != cached.answered_high_watermark {
            cached.answered_high_watermark = answer.high_watermark;
            must = true;
        }
        if answer.log_start_offset != cached.answered_log_start_offset {
            cached.answered_log_start_offset = answer.log_start_offset;
            must = true;
        }
        keep.push(must);
        if answer.records.is_some() {
            returned_records.push(cached); // read last next time: a byte limit starves no partition
        } else {
            next.push(cached);
        }
    }
    next.extend(returned_records);
    (keep, next)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFetchRoutes>()?;
    m.add_class::<PyNativeFetchOutcome>()?;
    m.add_function(wrap_pyfunction!(native_fetch, m)?)?;
    Ok(())
}
