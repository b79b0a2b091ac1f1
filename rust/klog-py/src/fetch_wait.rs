//! The native Fetch path's long-poll wait (issue 38): Kafka's fetch purgatory for the consumers'
//! and replicas' fetches the native path serves (`crate::native_fetch`). A replica's fetch waits
//! for an append to one of its logs (`PartitionLog::set_leader_append_hook`) instead of a high
//! watermark move, and is served again as judged when it arrived.
//!
//! A long poll with nothing to answer yet (`fetch.min.bytes` not reached, `max_wait_ms` > 0) is
//! parked here with its frame, its connection's native send queue and its deadline, keyed by the
//! logs of the partitions it reads. A high watermark that moves up on one of them (an append on a
//! partition with one replica, a follower's fetch for acks=all: every move goes through
//! `PartitionLog::set_high_watermark`, whose hook wakes this table) or the deadline has the wait
//! thread serve the frame again without the GIL: an answer goes straight to the connection's send
//! queue (`Conn::send_now`); not enough yet after a wake-up parks it again. Nothing Python runs per
//! parked request: the connection learns the outcome when it next has a request to serve
//! (`take_back`), the metrics from `take_answered`. A frame the native path no longer serves (a
//! route forgotten, a session taken back by the Python side, a read error) goes back to its
//! connection through `take_returned` (an eventfd tells the event loop), which serves it in Python
//! as before. The table holds at most `max_parked` requests (`klog.fetch.native.wait.max.parked`);
//! beyond that the connection waits in Python. A connection has at most one parked request: it
//! serves its requests in order, and takes a parked one back before the next.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use klog_core::fetch_request::Piece;
use klog_core::socket_writer::{Chunk, Conn};
use klog_core::storage::{self as core, FileRange};
use pyo3::prelude::*;

use crate::native_fetch::{commit_session, serve, Judge, MustWait, RoutesShared, Served};
use crate::socket_writer::PySocketQueue;

struct Parked {
    frame: Vec<u8>,
    conn: Arc<Conn>,
    deadline: Instant,
    parked_at: Instant,
    logs: Vec<Arc<core::PartitionLog>>,
    max_version: i16,
    fetch_max_bytes: i64,
    /// a replica's fetch: woken by appends (its logs' ends moving), not high watermarks
    replica: bool,
    /// sent back to the Python path (in `returned`, no longer timed or woken)
    returned: bool,
    /// who learns that it was sent back: the native front that parked it (`crate::front`), else the
    /// Python side (`returned`, `notify_fd`)
    owner: Option<Owner>,
    /// the owner holds its connection's next request until this one is answered (`Waits::behind`):
    /// told once it is answered too
    tell_answered: bool,
}

/// How late the wait thread may answer a parked request at its deadline, so that one wake-up
/// answers every request due within this span (at a thousand caught-up polls a second, about five a
/// wake-up instead of one; Kafka's purgatory ticks every millisecond, behind its request queue).
const EXPIRY_BATCH: Duration = Duration::from_millis(5);

/// Told the id of a parked request the table sends back, or answers when asked to tell
/// (`Waits::behind`) (called without the table's lock).
pub(crate) type Owner = Arc<dyn Fn(u64) + Send + Sync>;

/// Where a parked request stands for the request its connection sent after it (`Waits::behind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behind {
    /// Answered: the next request may be served.
    Answered,
    /// Still waiting: its owner is told when it is answered (or sent back).
    Waiting,
    /// Sent back to the Python path: the connection serves it there, then what follows.
    Returned,
}

/// One answer for the metrics: (parked id, session id, [(topic, record bytes)], seconds waited).
type AnsweredEntry = (u64, i32, Vec<(String, u64)>, f64);

/// `Waits::take_answered_summary`'s: (answers, [(session id, answers)], [(topic, record bytes, topic
/// entries)], histogram bucket counts, total ms).
pub(crate) type AnsweredSummary = (u64, Vec<(i32, u64)>, Vec<(String, u64, u64)>, Vec<u64>, f64);

#[derive(Default)]
struct State {
    next_id: u64,
    parked: HashMap<u64, Parked>,
    /// log (its address: a parked request holds the log, so the address is not reused) -> parked ids
    by_log: HashMap<usize, Vec<u64>>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// ids to serve again (a high watermark moved, routes changed)
    woken: Vec<u64>,
    /// ids the wait thread is answering (a `take_back` waits for it)
    serving: HashSet<u64>,
    /// threads waiting for an id to leave `serving` (the wait thread wakes them per answer then)
    serving_waiters: usize,
    returned: Vec<u64>,
    answered: Vec<AnsweredEntry>,
    thread_started: bool,
    stop: bool,
}

pub(crate) struct Waits {
    state: Mutex<State>,
    /// wakes the wait thread (a wake-up, an earlier deadline, stop)
    work: Condvar,
    /// wakes a `take_back` waiting for the wait thread's answer
    served: Condvar,
    max_parked: usize,
    notify_fd: i32,
    woken_answers: AtomicU64,
    expired_answers: AtomicU64,
    returns: AtomicU64,
    refused: AtomicU64,
    /// set once the routes exist: the wait thread serves frames against them
    routes: Mutex<Weak<RoutesShared>>,
}

fn log_key(log: &Arc<core::PartitionLog>) -> usize {
    Arc::as_ptr(log) as usize
}

/// The key of the parked requests on `log` woken by its high watermark (consumers') or, `replica`,
/// by its appends (replicas'): the log's address (aligned: its low bit is free) and that bit.
fn wait_key(log: &Arc<core::PartitionLog>, replica: bool) -> usize {
    log_key(log) | usize::from(replica)
}

impl Drop for Waits {
    fn drop(&mut self) {
        if self.notify_fd >= 0 {
            // SAFETY: our own eventfd, closed once.
            unsafe {
                libc::close(self.notify_fd);
            }
        }
    }
}

impl Waits {
    pub(crate) fn new(max_parked: usize) -> PyResult<Arc<Waits>> {
        #[cfg(target_os = "linux")]
        // SAFETY: creates a descriptor; the result is checked.
        let notify_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        #[cfg(not(target_os = "linux"))]
        let notify_fd = -1;
        if notify_fd < 0 && cfg!(target_os = "linux") {
            return Err(std::io::Error::last_os_error().into());
        }
        Ok(Arc::new(Waits {
            state: Mutex::new(State { next_id: 1, ..State::default() }),
            work: Condvar::new(),
            served: Condvar::new(),
            max_parked,
            notify_fd,
            woken_answers: AtomicU64::new(0),
            expired_answers: AtomicU64::new(0),
            returns: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            routes: Mutex::new(Weak::new()),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait while the wait thread answers request `id` (microseconds: the answer's send).
    fn wait_served<'a>(&self, mut st: MutexGuard<'a, State>, id: u64) -> MutexGuard<'a, State> {
        while st.serving.contains(&id) {
            st.serving_waiters += 1;
            st = self.served.wait(st).unwrap_or_else(|p| p.into_inner());
            st.serving_waiters -= 1;
        }
        st
    }

    /// Request `id` left `serving`: wake whoever waits for it.
    fn done_serving(&self, st: &mut State, id: u64) {
        st.serving.remove(&id);
        if st.serving_waiters > 0 {
            self.served.notify_all();
        }
    }

    pub(crate) fn notify_fd(&self) -> i32 {
        self.notify_fd
    }

    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.work.notify_all();
    }

    fn wake_key(&self, key: usize) {
        let mut st = self.lock();
        let Some(ids) = st.by_log.get(&key) else { return };
        let ids = ids.clone();
        st.woken.extend(ids);
        drop(st);
        self.work.notify_one();
    }

    /// Serve every parked request again (routes cleared, a session taken back).
    pub(crate) fn wake_all(&self) {
        let mut st = self.lock();
        if st.parked.is_empty() {
            return;
        }
        let ids: Vec<u64> = st.parked.iter().filter(|(_, p)| !p.returned).map(|(id, _)| *id).collect();
        st.woken.extend(ids);
        drop(st);
        self.work.notify_one();
    }

    fn unlink(st: &mut State, id: u64) -> Option<Parked> {
        let parked = st.parked.remove(&id)?;
        if parked.returned {
            st.returned.retain(|r| *r != id);
            return Some(parked);
        }
        st.deadlines.remove(&(parked.deadline, id));
        for log in &parked.logs {
            let key = wait_key(log, parked.replica);
            if let Some(ids) = st.by_log.get_mut(&key) {
                ids.retain(|i| *i != id);
                if ids.is_empty() {
                    st.by_log.remove(&key);
                }
            }
        }
        Some(parked)
    }

    /// Put `parked` (new or served again) in the table under `id`; whether the wait thread must look
    /// again (its high watermarks, a replica's log ends, moved since they were read, or its deadline
    /// is now the first).
    fn link(st: &mut State, id: u64, parked: Parked, read_at: &[i64]) -> bool {
        let first = st.deadlines.first().map(|(d, _)| *d);
        let earlier = first.is_none_or(|d| parked.deadline < d);
        st.deadlines.insert((parked.deadline, id));
        for log in &parked.logs {
            let ids = st.by_log.entry(wait_key(log, parked.replica)).or_default();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        let moved = parked.logs.iter().zip(read_at).any(|(log, at)| {
            *at != if parked.replica { log.log_end_offset() } else { log.high_watermark() }
        });
        st.parked.insert(id, parked);
        if moved {
            st.woken.push(id);
        }
        moved || earlier
    }

    /// Take parked request `id` back (see `FetchRoutes.take_back`), waiting while the wait thread
    /// answers it.
    pub(crate) fn take_back(&self, id: u64) -> Option<u64> {
        let mut st = self.wait_served(self.lock(), id);
        Self::taken(&mut st, id)
    }

    /// `take_back` without waiting: Err while the wait thread answers it.
    pub(crate) fn try_take_back(&self, id: u64) -> Result<Option<u64>, ()> {
        let mut st = self.lock();
        if st.serving.contains(&id) {
            return Err(());
        }
        Ok(Self::taken(&mut st, id))
    }

    fn taken(st: &mut State, id: u64) -> Option<u64> {
        let parked = Self::unlink(st, id)?;
        if parked.returned {
            return Some(0);
        }
        // rounded up: the rest of the wait in Python never ends before max_wait_ms
        Some((parked.deadline.saturating_duration_since(Instant::now()).as_micros() as u64).div_ceil(1000))
    }

    /// Whether the table takes one more request now.
    pub(crate) fn has_room(&self) -> bool {
        self.max_parked > 0 && self.lock().parked.len() < self.max_parked
    }

    /// Where parked request `id` (its owner's) stands now that its connection sent the next request:
    /// answered (waiting while the wait thread sends its answer: a client that read it may send the
    /// next request before the thread is done), sent back, or still waiting, in which case its owner
    /// is told (`Owner`) once it is answered, not only if it is sent back: the owner holds the next
    /// request meanwhile, as Kafka mutes a connection while a request of its is in its purgatory.
    pub(crate) fn behind(&self, id: u64) -> Behind {
        let mut st = self.wait_served(self.lock(), id);
        match st.parked.get_mut(&id) {
            None => Behind::Answered,
            Some(parked) if parked.returned => Behind::Returned,
            Some(parked) => {
                parked.tell_answered = true;
                Behind::Waiting
            }
        }
    }

    /// The Python side owns parked request `id` from now on (its connection left the native front):
    /// true if it was sent back already (the connection serves it in Python now).
    pub(crate) fn disown(&self, id: u64) -> bool {
        let mut st = self.wait_served(self.lock(), id);
        match st.parked.get_mut(&id) {
            Some(parked) => {
                parked.owner = None;
                parked.tell_answered = false;
                parked.returned
            }
            None => false,
        }
    }

    /// `owner` (the native front) owns parked request `id` from now on: true, or false if the table
    /// sent it back already (the Python side serves it). An `id` answered already is nobody's: true.
    pub(crate) fn own(&self, id: u64, owner: Owner) -> bool {
        let mut st = self.wait_served(self.lock(), id);
        match st.parked.get_mut(&id) {
            Some(parked) if parked.returned => false,
            Some(parked) => {
                parked.owner = Some(owner);
                true
            }
            None => true,
        }
    }

    pub(crate) fn take_returned(&self) -> Vec<u64> {
        if self.notify_fd >= 0 {
            let mut buf: u64 = 0;
            // SAFETY: drains our own non-blocking eventfd into a live u64.
            unsafe {
                libc::read(self.notify_fd, &mut buf as *mut u64 as *mut libc::c_void, 8);
            }
        }
        self.lock().returned.clone()
    }

    /// An answer sent by the native front without parking (for the metrics, as the table's own).
    pub(crate) fn note_answered(&self, session_id: i32, topic_bytes: Vec<(String, u64)>) {
        self.lock().answered.push((0, session_id, topic_bytes, 0.0));
    }

    pub(crate) fn take_answered(&self) -> Vec<AnsweredEntry> {
        std::mem::take(&mut self.lock().answered)
    }

    /// `take_answered` summed for the metrics, without an object per answer: (answers, [(session id,
    /// answers)], [(topic, record bytes, topic entries)], the answers' times in ms counted into the
    /// histogram buckets `bounds_ms` (as Python's `bisect_left`; one more, over the last), their sum).
    pub(crate) fn take_answered_summary(&self, bounds_ms: &[f64]) -> AnsweredSummary {
        let answered = self.take_answered();
        let mut sessions: Vec<(i32, u64)> = Vec::new();
        let mut topics: Vec<(String, u64, u64)> = Vec::new();
        let mut buckets = vec![0u64; bounds_ms.len() + 1];
        let mut total_ms = 0.0;
        for (_, session_id, topic_bytes, waited_s) in &answered {
            if *session_id != 0 {
                match sessions.iter_mut().find(|(s, _)| s == session_id) {
                    Some(entry) => entry.1 += 1,
                    None => sessions.push((*session_id, 1)),
                }
            }
            for (topic, bytes) in topic_bytes {
                match topics.iter_mut().find(|(t, _, _)| t == topic) {
                    Some(entry) => {
                        entry.1 += bytes;
                        entry.2 += 1;
                    }
                    None => topics.push((topic.clone(), *bytes, 1)),
                }
            }
            let ms = waited_s * 1000.0;
            buckets[bounds_ms.partition_point(|b| *b < ms)] += 1;
            total_ms += ms;
        }
        (answered.len() as u64, sessions, topics, buckets, total_ms)
    }

    pub(crate) fn stats(&self) -> (usize, u64, u64, u64, u64) {
        let parked = self.lock().parked.len();
        (
            parked,
            self.woken_answers.load(Ordering::Relaxed),
            self.expired_answers.load(Ordering::Relaxed),
            self.returns.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

/// Park the long poll `frame` (which must wait: `wait`) for the connection whose native send queue
/// is `queue`: its id, or 0 when it is not parked (the table is full or off, `queue` is not a
/// native queue) and the connection waits in Python.
pub(crate) fn park(
    routes: &Arc<RoutesShared>,
    queue: &Bound<'_, PyAny>,
    frame: &[u8],
    wait: &MustWait,
    max_version: i16,
    fetch_max_bytes: i64,
) -> PyResult<u64> {
    let Ok(queue) = queue.cast::<PySocketQueue>() else {
        return Ok(0);
    };
    Ok(park_on(routes, queue.get().conn.clone(), frame, wait, max_version, fetch_max_bytes, None)?)
}

/// `park` for a connection's send queue `conn`, without Python: `owner` is told if the table sends
/// it back (None: the Python side, through `take_returned`).
pub(crate) fn park_on(
    routes: &Arc<RoutesShared>,
    conn: Arc<Conn>,
    frame: &[u8],
    wait: &MustWait,
    max_version: i16,
    fetch_max_bytes: i64,
    owner: Option<Owner>,
) -> std::io::Result<u64> {
    let waits = &routes.waits;
    if waits.max_parked == 0 {
        return Ok(0);
    }
    // the hooks first: a move after them wakes the table; one before is seen by `link` (a log is
    // the broker's own for its life, as is this table: its hook, once set, is this table's). A
    // consumer's fetch waits for the high watermark, a replica's for an append.
    for log in &wait.logs {
        let set = if wait.replica { log.has_leader_append_hook() } else { log.has_high_watermark_hook() };
        if set {
            continue;
        }
        let weak = Arc::downgrade(waits);
        let key = wait_key(log, wait.replica);
        let hook: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(waits) = weak.upgrade() {
                waits.wake_key(key);
            }
        });
        if wait.replica {
            log.set_leader_append_hook(Some(hook));
        } else {
            log.set_high_watermark_hook(Some(hook));
        }
    }
    let now = Instant::now();
    let parked = Parked {
        frame: frame.to_vec(),
        conn,
        deadline: now + Duration::from_millis(wait.max_wait_ms.max(0) as u64),
        parked_at: now,
        logs: wait.logs.clone(),
        max_version,
        fetch_max_bytes,
        replica: wait.replica,
        returned: false,
        owner,
        tell_answered: false,
    };
    let mut st = waits.lock();
    if st.stop || st.parked.len() >= waits.max_parked {
        drop(st);
        waits.refused.fetch_add(1, Ordering::Relaxed);
        return Ok(0);
    }
    if !st.thread_started {
        *waits.routes.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(routes);
        let worker = waits.clone();
        std::thread::Builder::new().name("klog-fetch-waits".into()).spawn(move || run(worker))?;
        st.thread_started = true;
    }
    let id = st.next_id;
    st.next_id += 1;
    let look = Waits::link(&mut st, id, parked, &wait.read_at);
    drop(st);
    if look {
        waits.work.notify_one();
    }
    Ok(id)
}

/// The wait thread: answer parked requests woken or due, without the GIL.
fn run(waits: Arc<Waits>) {
    loop {
        let mut batch: Vec<(u64, Parked, bool)> = Vec::new();
        {
            let mut st = waits.lock();
            loop {
                if st.stop {
                    return;
                }
                let now = Instant::now();
                // due: the first deadline, then those within EXPIRY_BATCH after it, answered together
                let first = st.deadlines.first().map(|(d, _)| *d + EXPIRY_BATCH);
                if !st.woken.is_empty() || first.is_some_and(|d| d <= now) {
                    break;
                }
                st = match first {
                    Some(d) => waits.work.wait_timeout(st, d - now).unwrap_or_else(|p| p.into_inner()).0,
                    None => waits.work.wait(st).unwrap_or_else(|p| p.into_inner()),
                };
            }
            let now = Instant::now();
            let woken = std::mem::take(&mut st.woken);
            for id in woken {
                if st.parked.get(&id).is_some_and(|p| !p.returned) {
                    let expired = st.parked[&id].deadline <= now;
                    if let Some(p) = Waits::unlink(&mut st, id) {
                        batch.push((id, p, expired));
                    }
                }
            }
            while let Some(&(deadline, id)) = st.deadlines.first() {
                if deadline > now {
                    break;
                }
                match Waits::unlink(&mut st, id) {
                    Some(p) => batch.push((id, p, true)),
                    None => {
                        st.deadlines.remove(&(deadline, id));
                    }
                }
            }
            for (id, _, _) in &batch {
                st.serving.insert(*id);
            }
        }
        let routes = waits.routes.lock().unwrap_or_else(|p| p.into_inner()).upgrade();
        // (each answer wakes whoever waits for it: `done_serving`)
        for (id, parked, expired) in batch {
            answer(&waits, routes.as_deref(), id, parked, expired);
        }
    }
}

/// Serve parked request `id` again: answer it, park it again, or send it back to Python.
fn answer(waits: &Waits, routes: Option<&RoutesShared>, id: u64, parked: Parked, expired: bool) {
    let served = match routes {
        // a replica's fetch was judged as it arrived (Kafka's purgatory does not judge it again)
        Some(routes) => serve(routes, &parked.frame, parked.max_version, parked.fetch_max_bytes, !expired, None, None, Judge::Judged)
            .unwrap_or(Served::NotServed),
        None => Served::NotServed,
    };
    match served {
        Served::Answer(answered) => {
            let committed = match (answered.commit, routes) {
                (Some(commit), Some(routes)) => commit_session(routes, commit),
                (None, _) => true,
                (Some(_), None) => false,
            };
            if committed {
                let chunks = chunks_of(answered.pieces);
                // counted before it is sent: a client that reads the answer and then the broker's
                // counters must find it counted
                if expired {
                    waits.expired_answers.fetch_add(1, Ordering::Relaxed);
                } else {
                    waits.woken_answers.fetch_add(1, Ordering::Relaxed);
                }
                let waited = parked.parked_at.elapsed().as_secs_f64();
                // a closed connection drops it (the Python side cancels the wait as it closes)
                let _ = parked.conn.send_now(chunks);
                {
                    let mut st = waits.lock();
                    st.answered.push((id, answered.session_id, answered.topic_bytes, waited));
                    waits.done_serving(&mut st, id);
                }
                // its owner holds the connection's next request until now
                if let (true, Some(owner)) = (parked.tell_answered, &parked.owner) {
                    owner(id);
                }
                return;
            }
            send_back(waits, id, parked);
        }
        Served::Wait(wait) => {
            let mut st = waits.lock();
            waits.done_serving(&mut st, id);
            Waits::link(&mut st, id, parked, &wait.read_at);
        }
        Served::NotServed => send_back(waits, id, parked),
    }
}

/// An encoded answer's pieces as a send queue's chunks (records as file regions: sendfile).
pub(crate) fn chunks_of(pieces: Vec<Piece<FileRange>>) -> Vec<Chunk> {
    pieces
        .into_iter()
        .map(|piece| match piece {
            Piece::Bytes(b) => Chunk::Bytes(b),
            Piece::Records(range) => Chunk::File { file: range.file, position: range.position, length: range.length },
        })
        .collect()
}

fn send_back(waits: &Waits, id: u64, mut parked: Parked) {
    parked.returned = true;
    waits.returns.fetch_add(1, Ordering::Relaxed);
    let owner = parked.owner.clone();
    {
        let mut st = waits.lock();
        st.parked.insert(id, parked);
        if owner.is_none() {
            st.returned.push(id);
        }
        waits.done_serving(&mut st, id);
    }
    if let Some(owner) = owner {
        owner(id);
        return;
    }
    if waits.notify_fd >= 0 {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd; EAGAIN (counter full) is harmless.
        unsafe {
            libc::write(waits.notify_fd, &one as *const u64 as *const libc::c_void, 8);
        }
    }
}
