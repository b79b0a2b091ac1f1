//! `NativeFront`: the broker's native request front (issue 38). One epoll thread reads the plaintext
//! connections the broker hands it, cuts their frames (`klog_core::front`) and serves each Produce
//! the native Produce path serves without asking Python anything (`native_produce::serve_frame`
//! with `NoHooks`: routed partitions, no producer id, acks 0/1, acks=all on unreplicated
//! partitions) without the event loop. A request whose partitions all have one replica and are not
//! compacted is answered at once: the front moves their high watermarks to their log ends itself
//! (never past a transaction's first offset, `first_unstable_offset`), so a Produce answered is
//! visible to a Fetch, as Kafka's, and the event loop accounts those appends (follower and consumer
//! wake-ups, metrics) within `account_interval`, one wake-up for all of them, or at once when
//! a long poll in Python waits for one of those partitions (`high_watermark_waited`). Any other
//! answer is held until the event loop has accounted the appends (`take`: the high watermark, the
//! wake-ups, metrics), then sent (`release`). At the first frame it does not serve (any
//! other request, a Produce needing a decision, an append that failed, end of stream) the front
//! gives the connection back: it stops reading it and hands the bytes it holds, from that frame
//! on, to the event loop (`take`'s hand-offs), which reads the connection again until it is idle.
//! A Produce over the small read buffer (a throughput producer's: many partitions of `batch.size`
//! bytes each) is read whole into a buffer of its own when its first bytes say the front may serve it
//! and its bytes fit the front-wide bound on such buffers (`read_large_frame`); that buffer goes once
//! the frame is served.
//! How a connection moves between the two: docs/architecture.md, "The native front".

use std::collections::HashMap;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use klog_core::front::{is_fetch, offered_natively, peek_large_produce, FrontMemory, InBuf, LargePeek, Next};
use klog_core::socket_writer::{Chunk, Conn as SendQueue};

use crate::fetch_wait::{chunks_of, park_on, Behind, Owner};
use crate::native_fetch::{commit_session, serve as serve_fetch, Judge, PyFetchRoutes, RoutesShared, Served};
use crate::native_produce::{serve_frame, Answer, NoHooks, PyProduceRoutes};
use crate::socket_writer::PySocketQueue;

/// The epoll token of the eventfd that wakes the thread to stop.
const STOP_TOKEN: u64 = u64::MAX;
/// The epoll token of the eventfd that wakes the thread for the long polls the wait table sent back.
const RETURNED_TOKEN: u64 = u64::MAX - 1;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;
/// Long polls parked since the event loop last counted them after which the front wakes it to count
/// them (and the wait table's answers, `drain_answered`) ...
const FETCH_ACCOUNT_EVERY: u64 = 256;
/// ... or once this long has passed since it last woke it for that.
const FETCH_ACCOUNT_INTERVAL: Duration = Duration::from_secs(1);


fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
    unsafe {
        libc::write(fd, &one as *const u64 as *const libc::c_void, 8);
    }
}

fn clear(fd: RawFd) {
    let mut buf: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from our own non-blocking eventfd.
    unsafe {
        libc::read(fd, &mut buf as *mut u64 as *mut libc::c_void, 8);
    }
}

/// A connection the front reads.
struct FrontConn {
    /// Our duplicate of the connection's socket (the event loop keeps its own).
    fd: RawFd,
    buf: InBuf,
    queue: Arc<SendQueue>,
    last_read: Instant,
    /// its Fetch requests may be served from here (the connection sends records with sendfile)
    fetch: bool,
    /// the long poll parked in the wait table from here: (park id, frame), until answered (the
    /// connection's next frame finds it answered) or handed to the event loop with the connection
    parked: Option<(u64, Vec<u8>)>,
}

impl FrontConn {
    fn close(&self, epfd: RawFd) {
        // SAFETY: our own duplicate, removed from our epoll set and closed once (the entry is dropped).
        unsafe {
            libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, self.fd, std::ptr::null_mut());
            libc::close(self.fd);
        }
    }
}

/// A failed append, for the broker's accounting: (connection, acks, client id, topic, partition,
/// error code, message, errno, log dir).
type Failure = (u64, i16, Option<String>, String, i32, i16, String, Option<i32>, String);

/// A connection given back (see `Pending::handoffs`).
type Handoff = (u64, Vec<u8>, bool, Option<(u64, Vec<u8>)>);

/// The long polls the wait table sent back (a route forgotten, a session taken back, ...): the front
/// gives their connections back. Told by the table's thread (`fetch_wait::Owner`).
struct Returned {
    ids: Mutex<Vec<u64>>,
    /// in the front's epoll set (RETURNED_TOKEN)
    wake_fd: RawFd,
}

impl Drop for Returned {
    fn drop(&mut self) {
        // SAFETY: our own eventfd, closed once (the wait table's entries hold this, not the descriptor).
        unsafe {
            libc::close(self.wake_fd);
        }
    }
}

/// What the front needs to park long polls (`klog.fetch.native.enable` and its wait table).
struct FrontFetch {
    routes: Arc<RoutesShared>,
    max_version: i16,
    /// the broker's fetch.max.bytes (the event loop keeps it current)
    max_bytes: AtomicI64,
    returned: Arc<Returned>,
    owner: Owner,
    /// Fetch requests answered or parked since the event loop's last `take_fetches`
    uncounted: AtomicU64,
}

/// What the event loop has to learn since its last `take`.
#[derive(Default)]
struct Pending {
    requests: u64,
    latencies_ms: Vec<f64>,
    /// The partitions appended to (each once).
    partitions: Vec<(String, i32)>,
    /// Per topic: bytes, records, batches appended.
    produced: HashMap<String, (u64, u64, u64)>,
    failures: Vec<Failure>,
    /// Answers held until the appends are accounted: (connection, its send queue, the frame).
    held: Vec<(u64, Arc<SendQueue>, Vec<u8>)>,
    /// Connections given back: (connection, the bytes from the first frame not served, whether the stream
    /// ended or failed: the event loop then reads the end and closes it, never handing it back, the
    /// long poll parked from the front and not yet known answered: (park id, frame)).
    handoffs: Vec<Handoff>,
    /// A high watermark the front moved is waited for in Python (`PartitionLog::high_watermark_waited`).
    waited: bool,
    /// Panics caught on the front's thread: (the connection being served, dropped by the front, which
    /// the event loop closes; the panic's message).
    faults: Vec<(Option<u64>, String)>,
    signalled: bool,
}

struct Shared {
    epfd: RawFd,
    stop_fd: RawFd,
    notify_fd: RawFd,
    conns: Mutex<HashMap<u64, FrontConn>>,
    pending: Mutex<Pending>,
    taken: Mutex<Vec<(u64, Arc<SendQueue>, Vec<u8>)>>,
    routes: Py<PyProduceRoutes>,
    max_version: i16,
    /// The read buffer of each connection.
    buffer_bytes: usize,
    /// The largest frame (without its size prefix) a connection's buffer grows for (0: none).
    max_frame_bytes: usize,
    /// The bytes of the grown buffers, across connections, within their bound.
    memory: Mutex<FrontMemory>,
    /// The longest the event loop waits to account the requests whose answers the front sent itself
    /// (`klog.network.native.front.account.interval.ms`).
    account_interval: Duration,
    /// Frames over the small buffer served (read whole in a grown buffer).
    large_frames: AtomicU64,
    /// A connection whose send queue holds this much (a client reading slowly) is given back: the event loop
    /// applies its back-pressure and write timeout.
    max_queued_bytes: usize,
    enabled: AtomicBool,
    stop: AtomicBool,
    fetch: Option<FrontFetch>,
    /// The connection whose next serve panics (tests of the fault path; NO_CONNECTION: none).
    fail_next_serve: AtomicU64,
}

/// `Shared::fail_next_serve` when no serve is to fail.
const NO_CONNECTION: u64 = u64::MAX;

impl Shared {
    /// Stop reading `conn` (closed, given back or replaced): its descriptor closed, its grown buffer's bytes
    /// released.
    fn forget(&self, conn: FrontConn) {
        conn.close(self.epfd);
        let grown = conn.buf.grown_bytes();
        if grown > 0 {
            lock(&self.memory).release(grown);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        for conn in lock(&self.conns).values() {
            conn.close(self.epfd);
        }
        // SAFETY: our own descriptors, closed once.
        unsafe {
            libc::close(self.epfd);
            libc::close(self.stop_fd);
            libc::close(self.notify_fd);
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Serve what connection `id` has to read (given back at the first frame the front does not serve).
/// `spare`: the front thread's read buffer, lent to a connection that holds nothing (most reads carry
/// whole requests, so idle connections keep no buffer of their own; see `InBuf::lend`).
fn serve_connection(shared: &Shared, id: u64, spare: &mut Vec<u8>, queued: &mut Option<Arc<SendQueue>>) {
    if shared.fail_next_serve.load(Ordering::Relaxed) == id
        && shared.fail_next_serve.compare_exchange(id, NO_CONNECTION, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    {
        panic!("a fault injected into the serve of connection {id}");
    }
    let mut conns = lock(&shared.conns);
    let Some(conn) = conns.get_mut(&id) else {
        return; // unregistered meanwhile
    };
    let mut give_back = false;
    let mut ended = false;
    conn.buf.lend(spare);
    match read_available(conn) {
        Read::Bytes => {}
        // (frames held behind a long poll the table has just answered are served now)
        Read::Nothing if conn.parked.is_none() || conn.buf.is_empty() => {
            conn.buf.give_back(spare);
            return;
        }
        Read::Nothing => {}
        Read::Full => give_back = true,
        Read::Ended => {
            give_back = true;
            ended = true;
        }
    }
    let routes = shared.routes.get();
    let enabled = shared.enabled.load(Ordering::Acquire);
    while !give_back {
        let next = conn.buf.next_frame();
        // a long poll parked from here is answered before anything after it is served: the next frame
        // waits here, read but not served, until the table tells it answered (`give_back_returned`);
        // the connection stays with the front (it goes to the event loop only if the poll is sent back)
        if let (Some((parked, _)), Some(fetch), false) = (&conn.parked, &shared.fetch, next == Next::Incomplete) {
            match fetch.routes.waits.behind(*parked) {
                Behind::Answered => conn.parked = None,
                Behind::Waiting => break,
                Behind::Returned => {
                    give_back = true;
                    break;
                }
            }
        }
        let len = match next {
            Next::Incomplete => break,
            Next::Large(len) => {
                give_back = !read_large_frame(shared, conn, len, enabled);
                break;
            }
            Next::TooLarge => {
                give_back = true;
                break;
            }
            Next::Frame(len) => len,
        };
        let frame = conn.buf.frame(len);
        if enabled && conn.fetch && is_fetch(frame) && conn.queue.queued_bytes() < shared.max_queued_bytes {
            if serve_fetch_frame(shared, id, &mut conn.parked, &conn.queue, frame) {
                conn.buf.consume(len);
                continue;
            }
            give_back = true;
            break;
        }
        if !enabled || !offered_natively(frame) || conn.queue.queued_bytes() >= shared.max_queued_bytes {
            give_back = true;
            break;
        }
        let started = Instant::now();
        let Ok(Some(served)) = serve_frame(frame, routes, now_ms(), shared.max_version, &NoHooks) else {
            give_back = true;
            break;
        };
        let response = served.response();
        // the answer leaves at once when every partition appended is one whose high watermark the front
        // moves itself (`own_watermark`) and that now covers the batch: a Produce answered is visible to
        // a Fetch, as Kafka's. Else it waits for the event loop's accounting (`release`).
        let mut direct = response.is_some();
        let mut waited = false;
        for (what, _) in &served.answers {
            direct &= match what {
                Answer::Appended { own_watermark: Some(log), info, .. } => {
                    waited |= log.high_watermark_waited();
                    advance_own_watermark(log) > info.last_offset
                }
                _ => false,
            };
        }
        let mut pending = lock(&shared.pending);
        pending.requests += 1;
        pending.waited |= waited;
        pending.latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let mut failed = false;
        for (what, _) in &served.answers {
            match what {
                Answer::Appended { topic, partition, size, records, .. } => {
                    let name: &str = &served.topics[*topic];
                    if !pending.partitions.iter().any(|(t, p)| p == partition && t == name) {
                        pending.partitions.push((name.to_owned(), *partition));
                    }
                    let entry = match pending.produced.get_mut(name) {
                        Some(entry) => entry,
                        None => pending.produced.entry(name.to_owned()).or_default(),
                    };
                    entry.0 += *size as u64;
                    entry.1 += (*records).max(0) as u64;
                    entry.2 += 1;
                }
                Answer::Failed { topic, partition, code, message, errno, dir } => {
                    failed = true;
                    let failure = (
                        id,
                        served.acks,
                        served.client_id.map(str::to_owned),
                        served.topics[*topic].to_string(),
                        *partition,
                        *code,
                        message.clone(),
                        *errno,
                        dir.clone(),
                    );
                    pending.failures.push(failure);
                }
            }
        }
        // (a connection's answers leave in order: one held before this one, here or being sent by
        // `release`, holds this one too)
        let mut send_now = None;
        if let Some(response) = response {
            if direct && !answers_held_in(&pending, shared, id) {
                send_now = Some(response);
            } else {
                pending.held.push((id, conn.queue.clone(), response));
            }
        }
        drop(pending);
        conn.buf.consume(len);
        let released = conn.buf.shrink();
        if released > 0 {
            lock(&shared.memory).release(released);
            shared.large_frames.fetch_add(1, Ordering::Relaxed);
        }
        // (after the counters: a client that reads the answer then the counters finds it counted)
        // Queued in order behind the connection's earlier answers; sent once this pass over the ready
        // connections is done (`run`: on this thread when few connections have answers, else on the
        // socket writer's, so that many connections' sends run beside the next reads)
        if let Some(response) = send_now {
            if conn.queue.send_chunks(vec![Chunk::Bytes(response)]).is_ok() {
                // (a closed connection drops it)
                *queued = Some(conn.queue.clone());
            }
        }
        // a failed append: the broker judges the connection (an acks=0 one is closed) before its next request
        give_back = failed;
    }
    if give_back {
        let mut conn = conns.remove(&id).expect("present");
        let parked = conn.parked.take();
        lock(&shared.pending).handoffs.push((id, conn.buf.rest().to_vec(), ended, parked));
        shared.forget(conn);
    } else {
        conn.buf.give_back(spare);
    }
}

/// `serve_connection`, a panic in it caught: the front's one thread serves every connection it reads, and
/// a panic that ended it would leave them all unread without a word. The connection being served is
/// dropped (its state is whatever the panic left) and the event loop closes it and logs the message.
fn serve_guarded(shared: &Shared, id: u64, spare: &mut Vec<u8>, queued: &mut Option<Arc<SendQueue>>) {
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve_connection(shared, id, spare, queued)));
    if let Err(panic) = served {
        // (a lent buffer may be anywhere now: the next read lends a fresh one)
        *spare = Vec::new();
        fault(shared, Some(id), panic);
    }
}

/// Note a panic caught on the front's thread while serving connection `id` (None: not one connection's),
/// dropping that connection, and wake the event loop to close it.
fn fault(shared: &Shared, id: Option<u64>, panic: Box<dyn std::any::Any + Send>) {
    let message = panic
        .downcast_ref::<&str>()
        .map(|m| m.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    if let Some(mut conn) = id.and_then(|id| lock(&shared.conns).remove(&id)) {
        if let (Some((parked, _)), Some(fetch)) = (conn.parked.take(), &shared.fetch) {
            fetch.routes.waits.take_back(parked);
        }
        shared.forget(conn);
    }
    let mut pending = lock(&shared.pending);
    pending.faults.push((id, message));
    if !pending.signalled {
        pending.signalled = true;
        signal(shared.notify_fd);
    }
}

/// Move the high watermark of a log the front owns it for (one replica, not compacted) to its log
/// end, never past the first unstable offset the broker set (a transaction's start: the broker
/// moves it past that once it has accounted the transaction). The high watermark now.
fn advance_own_watermark(log: &klog_core::storage::PartitionLog) -> i64 {
    // raised, never set: the broker's mirror raises it too, to a log end it read earlier or later
    log.raise_high_watermark(log.log_end_offset().min(log.first_unstable_offset()))
}

/// Serve the Fetch `frame` of connection `id` (whose send queue is `queue`) if the native Fetch path
/// serves it without Python (no replica's fetch, no session opened or closed, routed partitions):
/// true, answered (records as sendfile regions) or, a long poll with nothing to answer yet, parked in
/// the native wait table (`parked` is set), which answers it at its deadline or when a high
/// watermark moves. False: the event loop serves it (nothing changed).
fn serve_fetch_frame(shared: &Shared, id: u64, parked: &mut Option<(u64, Vec<u8>)>, queue: &Arc<SendQueue>, frame: &[u8]) -> bool {
    let Some(fetch) = &shared.fetch else {
        return false;
    };
    // the connection's earlier answers must leave first: the table answers from its own thread; a
    // full table: the event loop serves it (and counts the refusal)
    if answers_held(shared, id) || !fetch.routes.waits.has_room() {
        return false;
    }
    let max_bytes = fetch.max_bytes.load(Ordering::Relaxed);
    let wait = match serve_fetch(&fetch.routes, frame, fetch.max_version, max_bytes, true, None, None, Judge::Refuse) {
        Ok(Served::Wait(wait)) => wait,
        Ok(Served::Answer(answered)) => {
            // the session moves on once the answer is certain (unless the Python side took it meanwhile)
            if let Some(commit) = answered.commit {
                if !commit_session(&fetch.routes, commit) {
                    return false;
                }
            }
            // counted before it is sent: a client that reads the answer then the counters finds it counted
            fetch.routes.waits.note_answered(answered.session_id, answered.topic_bytes);
            fetch.uncounted.fetch_add(1, Ordering::Relaxed);
            let _ = queue.send_now(chunks_of(answered.pieces)); // a closed connection drops it
            return true;
        }
        _ => return false,
    };
    match park_on(&fetch.routes, queue.clone(), frame, &wait, fetch.max_version, max_bytes, Some(fetch.owner.clone())) {
        Ok(park_id) if park_id > 0 => {
            *parked = Some((park_id, frame.to_vec()));
            fetch.uncounted.fetch_add(1, Ordering::Relaxed);
            true
        }
        _ => false, // the table is full: the connection waits in Python
    }
}

/// Whether answers of connection `id`'s (Produce) wait for the event loop's `release`.
fn answers_held(shared: &Shared, id: u64) -> bool {
    answers_held_in(&lock(&shared.pending), shared, id)
}

/// `answers_held` with the pending state already locked.
fn answers_held_in(pending: &Pending, shared: &Shared, id: u64) -> bool {
    pending.held.iter().any(|(c, _, _)| *c == id) || lock(&shared.taken).iter().any(|(c, _, _)| *c == id)
}

/// The connections whose long polls the wait table sent back (given back: the event loop serves them),
/// or answered while the connection's next request waited behind it (served now).
fn give_back_returned(shared: &Shared, spare: &mut Vec<u8>, queued: &mut Option<Arc<SendQueue>>) {
    let Some(fetch) = &shared.fetch else {
        return;
    };
    clear(fetch.returned.wake_fd);
    let ids = std::mem::take(&mut *lock(&fetch.returned.ids));
    if ids.is_empty() {
        return;
    }
    let holders: Vec<u64> = lock(&shared.conns)
        .iter()
        .filter(|(_, c)| c.parked.as_ref().is_some_and(|(p, _)| ids.contains(p)))
        .map(|(id, _)| *id)
        .collect();
    // (a connection given back meanwhile took its long poll with it: the event loop owns it); one sent
    // back is given back at its next frame, or now if it has none yet
    for id in holders {
        serve_guarded(shared, id, spare, queued);
        let mut conns = lock(&shared.conns);
        let Some(conn) = conns.get(&id) else { continue };
        let returned = conn.parked.as_ref().is_some_and(|(p, _)| fetch.routes.waits.behind(*p) == Behind::Returned);
        if returned {
            let mut conn = conns.remove(&id).expect("present");
            let parked = conn.parked.take();
            lock(&shared.pending).handoffs.push((id, conn.buf.rest().to_vec(), false, parked));
            shared.forget(conn);
        }
    }
}

/// What a read of a connection's socket gave.
enum Read {
    /// Bytes, now in the buffer.
    Bytes,
    /// Nothing yet (EAGAIN, EINTR).
    Nothing,
    /// No room: the frame held is one the front does not read whole.
    Full,
    /// End of stream or an error: the event loop reads the end (or meets the error) and closes the connection.
    Ended,
}

/// Read what the socket has into the connection's buffer (a grown buffer takes only the rest of its frame).
fn read_available(conn: &mut FrontConn) -> Read {
    let spare = conn.buf.spare();
    if spare.is_empty() {
        return Read::Full;
    }
    // SAFETY: reads into the spare part of our own buffer, its length given.
    let n = unsafe { libc::read(conn.fd, spare.as_mut_ptr() as *mut libc::c_void, spare.len()) };
    if n > 0 {
        conn.buf.filled(n as usize);
        conn.last_read = Instant::now();
        return Read::Bytes;
    }
    if n < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno == libc::EAGAIN || errno == libc::EINTR {
            return Read::Nothing;
        }
    }
    Read::Ended
}

/// The frame of `len` bytes whose start the connection's buffer holds is over its small buffer: grow the
/// buffer for it if the front may serve it (judged from its first bytes) and its bytes fit the front-wide
/// bound. True: the front goes on reading the connection (grown, or more bytes needed to judge); false: give it
/// back (the event loop reads the frame, within queued.max.request.bytes).
fn read_large_frame(shared: &Shared, conn: &mut FrontConn, len: usize, enabled: bool) -> bool {
    if !enabled || conn.queue.queued_bytes() >= shared.max_queued_bytes {
        return false;
    }
    match peek_large_produce(&conn.buf.rest()[4..], shared.max_version) {
        LargePeek::HandBack => false,
        // the small buffer full and still undecided: not a frame the front serves
        LargePeek::Unknown => !conn.buf.spare().is_empty(),
        LargePeek::Grow => {
            if !lock(&shared.memory).try_reserve(len + 4) {
                return false;
            }
            conn.buf.grow(len);
            true
        }
    }
}

fn run(shared: Arc<Shared>) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    // the read buffer lent to each connection read that holds nothing (serve_connection)
    let mut spare: Vec<u8> = Vec::new();
    let mut fetches_counted = Instant::now();
    let mut produce_accounted = Instant::now();
    // a connection whose answer this pass queued (`serve_connection`), to kick the socket writer with
    let mut queued: Option<Arc<SendQueue>> = None;
    loop {
        // requests served and not accounted yet: wake to have them accounted within their interval
        let fetch_due = match shared.fetch.as_ref().map_or(0, |f| f.uncounted.load(Ordering::Relaxed)) {
            0 => None,
            _ => Some(FETCH_ACCOUNT_INTERVAL.saturating_sub(fetches_counted.elapsed())),
        };
        let produce_due = {
            let pending = lock(&shared.pending);
            (pending.requests > 0 && !pending.signalled).then(|| shared.account_interval.saturating_sub(produce_accounted.elapsed()))
        };
        let timeout_ms = match (fetch_due, produce_due) {
            (None, None) => -1,
            (a, b) => a.into_iter().chain(b).min().expect("one is set").as_millis() as i32 + 1,
        };
        // SAFETY: waits on our own epoll set into a live buffer of EVENTS entries.
        let n = unsafe { libc::epoll_wait(shared.epfd, events.as_mut_ptr(), EVENTS as i32, timeout_ms) };
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        if n < 0 {
            continue; // EINTR
        }
        for ev in &events[..n as usize] {
            let token = ev.u64;
            if token == STOP_TOKEN {
                clear(shared.stop_fd);
                continue;
            }
            if token == RETURNED_TOKEN {
                let (spare, queued) = (&mut spare, &mut queued);
                let given = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| give_back_returned(&shared, spare, queued)));
                if let Err(panic) = given {
                    *spare = Vec::new();
                    fault(&shared, None, panic);
                }
                continue;
            }
            serve_guarded(&shared, token, &mut spare, &mut queued);
        }
        // the answers this pass queued (one kick of the socket writer for all of them)
        if let Some(queue) = queued.take() {
            queue.kick_writer();
        }
        let fetches = shared.fetch.as_ref().map_or(0, |f| f.uncounted.load(Ordering::Relaxed));
        let count_fetches = fetches >= FETCH_ACCOUNT_EVERY || (fetches > 0 && fetches_counted.elapsed() >= FETCH_ACCOUNT_INTERVAL);
        let mut pending = lock(&shared.pending);
        // answers held, connections given back, failed appends: now; appends whose answers left already:
        // once per interval (one event loop wake-up for all of them)
        let urgent = pending.waited
            || !pending.held.is_empty()
            || !pending.handoffs.is_empty()
            || !pending.failures.is_empty()
            || !pending.faults.is_empty();
        let produce_due = pending.requests > 0 && produce_accounted.elapsed() >= shared.account_interval;
        if (urgent || produce_due || count_fetches) && !pending.signalled {
            fetches_counted = Instant::now();
            produce_accounted = fetches_counted;
            pending.signalled = true;
            signal(shared.notify_fd);
        }
    }
}

/// The native front of a broker's plaintext connections (see the module documentation).
#[pyclass(frozen, module = "klog._native", name = "NativeFront")]
pub struct PyNativeFront {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[pymethods]
impl PyNativeFront {
    /// A front serving Produce requests up to `max_version` on the partitions of `routes`, holding
    /// at most `buffer_bytes` of a connection's unread requests, and for a Produce frame of up to
    /// `max_frame_bytes` (without its size prefix) a buffer of its own while `max_held_bytes` are not
    /// held in such buffers (larger frames, and those, go to the event loop), giving a connection back
    /// when its send queue holds `max_queued_bytes`. With `fetch_routes` (the native Fetch path's, its
    /// wait table on) it serves the Fetch requests (up to `fetch_max_version`) of the connections
    /// registered with `fetch` that the path serves without Python, parking the caught-up long polls.
    #[new]
    #[pyo3(signature = (routes, *, max_version, buffer_bytes, max_queued_bytes, max_frame_bytes=0, max_held_bytes=0, account_interval_ms=5, fetch_routes=None, fetch_max_version=-1, fetch_max_bytes=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        routes: Py<PyProduceRoutes>,
        max_version: i16,
        buffer_bytes: usize,
        max_queued_bytes: usize,
        max_frame_bytes: usize,
        max_held_bytes: usize,
        account_interval_ms: u64,
        fetch_routes: Option<Py<PyFetchRoutes>>,
        fetch_max_version: i16,
        fetch_max_bytes: i64,
    ) -> PyResult<Self> {
        // SAFETY: plain descriptor-creating system calls; results checked.
        let (epfd, stop_fd, notify_fd) = unsafe {
            let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let stop_fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            let notify_fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            if epfd < 0 || stop_fd < 0 || notify_fd < 0 {
                let err = std::io::Error::last_os_error();
                for fd in [epfd, stop_fd, notify_fd] {
                    if fd >= 0 {
                        libc::close(fd);
                    }
                }
                return Err(err.into());
            }
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: STOP_TOKEN };
            if libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, stop_fd, &mut ev) < 0 {
                let err = std::io::Error::last_os_error();
                libc::close(epfd);
                libc::close(stop_fd);
                libc::close(notify_fd);
                return Err(err.into());
            }
            (epfd, stop_fd, notify_fd)
        };
        let fetch = match fetch_routes {
            Some(fetch_routes) => {
                // SAFETY: creates a descriptor; the result is checked; added to our own epoll set.
                let wake_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if wake_fd < 0 {
                    return Err(std::io::Error::last_os_error().into());
                }
                let returned = Arc::new(Returned { ids: Mutex::new(Vec::new()), wake_fd });
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: RETURNED_TOKEN };
                // SAFETY: adds our own eventfd to our own epoll set.
                if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, wake_fd, &mut ev) } < 0 {
                    return Err(std::io::Error::last_os_error().into());
                }
                let told = returned.clone();
                let owner: Owner = Arc::new(move |id| {
                    lock(&told.ids).push(id);
                    signal(told.wake_fd);
                });
                Some(FrontFetch {
                    routes: fetch_routes.get().shared.clone(),
                    max_version: fetch_max_version,
                    max_bytes: AtomicI64::new(fetch_max_bytes),
                    returned,
                    owner,
                    uncounted: AtomicU64::new(0),
                })
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            epfd,
            stop_fd,
            notify_fd,
            conns: Mutex::new(HashMap::new()),
            pending: Mutex::new(Pending::default()),
            taken: Mutex::new(Vec::new()),
            routes,
            max_version,
            buffer_bytes: buffer_bytes.max(64),
            max_frame_bytes,
            memory: Mutex::new(FrontMemory::new(max_held_bytes)),
            account_interval: Duration::from_millis(account_interval_ms),
            large_frames: AtomicU64::new(0),
            max_queued_bytes,
            enabled: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            fetch,
            fail_next_serve: AtomicU64::new(NO_CONNECTION),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new().name("klog-front".into()).spawn(move || run(worker))?;
        Ok(PyNativeFront { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Read connection `id` (socket `fd`, duplicated; the caller keeps its own, with reading paused)
    /// from now on, answering through `queue`. Its bytes up to now were all read by the caller.
    /// `fetch`: its caught-up long polls may be parked from the front (it sends records with sendfile).
    /// `parked`: (park id, frame) of the long poll the connection parked in the wait table, the front's
    /// from now on. False (not held) if the table sent that one back already: the caller serves it.
    #[pyo3(signature = (id, fd, queue, *, fetch=false, parked=None))]
    fn register(&self, id: u64, fd: i32, queue: &Bound<'_, PySocketQueue>, fetch: bool, parked: Option<(u64, Vec<u8>)>) -> PyResult<bool> {
        // SAFETY: dup of a caller-provided descriptor; failure checked.
        let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if own < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let conn = FrontConn {
            fd: own,
            buf: InBuf::with_large_frames(self.shared.buffer_bytes, self.shared.max_frame_bytes),
            queue: queue.get().conn.clone(),
            last_read: Instant::now(),
            fetch: fetch && self.shared.fetch.is_some(),
            parked: None,
        };
        let mut conn = conn;
        // the connections' lock first: the table's sending it back now finds it held
        let mut conns = lock(&self.shared.conns);
        if let Some((park_id, frame)) = parked {
            let Some(fetch) = &self.shared.fetch else {
                // SAFETY: our own duplicate, closed once.
                unsafe { libc::close(own) };
                return Ok(false);
            };
            if !fetch.routes.waits.own(park_id, fetch.owner.clone()) {
                // SAFETY: our own duplicate, closed once.
                unsafe { libc::close(own) };
                return Ok(false);
            }
            conn.parked = Some((park_id, frame));
        }
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: id };
        // SAFETY: adds our own duplicate to our own epoll set.
        if unsafe { libc::epoll_ctl(self.shared.epfd, libc::EPOLL_CTL_ADD, own, &mut ev) } < 0 {
            let err = std::io::Error::last_os_error();
            // SAFETY: our own duplicate, closed once.
            unsafe { libc::close(own) };
            if let (Some((park_id, _)), Some(fetch)) = (&conn.parked, &self.shared.fetch) {
                fetch.routes.waits.disown(*park_id); // still the caller's
            }
            return Err(err.into());
        }
        if let Some(mut old) = conns.insert(id, conn) {
            self.forget_parked(&mut old);
            self.shared.forget(old);
        }
        Ok(true)
    }

    /// Stop reading connection `id` (closed): its duplicate descriptor is closed. False if the front
    /// did not hold it (given back already).
    fn unregister(&self, id: u64) -> bool {
        let removed = lock(&self.shared.conns).remove(&id);
        match removed {
            Some(mut conn) => {
                self.forget_parked(&mut conn);
                self.shared.forget(conn);
                true
            }
            None => false,
        }
    }

    /// The Fetch requests the front answered or parked since the last call (the event loop counts them).
    fn take_fetches(&self) -> u64 {
        self.shared.fetch.as_ref().map_or(0, |f| f.uncounted.swap(0, Ordering::Relaxed))
    }

    /// The broker's fetch.max.bytes, for the long polls parked from the front.
    #[setter]
    fn set_fetch_max_bytes(&self, max_bytes: i64) {
        if let Some(fetch) = &self.shared.fetch {
            fetch.max_bytes.store(max_bytes, Ordering::Relaxed);
        }
    }

    /// Seconds since connection `id` last sent bytes the front read (None: not held by the front).
    fn idle_seconds(&self, id: u64) -> Option<f64> {
        lock(&self.shared.conns).get(&id).map(|c| c.last_read.elapsed().as_secs_f64())
    }

    /// Bytes held now in buffers grown for large frames, and the most ever held at once.
    #[getter]
    fn held_bytes(&self) -> (usize, usize) {
        let memory = lock(&self.shared.memory);
        (memory.held(), memory.peak())
    }

    /// Frames over the small read buffer the front served.
    #[getter]
    fn large_frames(&self) -> u64 {
        self.shared.large_frames.load(Ordering::Relaxed)
    }

    /// Connections the front holds.
    fn __len__(&self) -> usize {
        lock(&self.shared.conns).len()
    }

    /// Serve requests natively (True) or give every connection back at its next frame (False: a
    /// client quota, request tracing, ... the event loop decides each request).
    #[setter]
    fn set_enabled(&self, enabled: bool) {
        self.shared.enabled.store(enabled, Ordering::Release);
    }

    #[getter]
    fn enabled(&self) -> bool {
        self.shared.enabled.load(Ordering::Acquire)
    }

    /// Readable when `take` has something.
    #[getter]
    fn notify_fd(&self) -> i32 {
        self.shared.notify_fd
    }

    /// What the front did since the last call: (requests served, their times in ms, the partitions
    /// appended to [(topic, partition)], per topic [(topic, bytes, records, batches)], the failed
    /// appends [(connection, acks, client id, topic, partition, error code, message, errno, log dir)],
    /// the connections given back [(connection, bytes, whether its stream ended)]). The answers of the requests served are
    /// held until `release`: account the appends first, then release, then take the hand-offs.
    #[allow(clippy::type_complexity)]
    fn take<'py>(
        &self,
        py: Python<'py>,
    ) -> (
        u64,
        Vec<f64>,
        Vec<(String, i32)>,
        Vec<(String, u64, u64, u64)>,
        Vec<Failure>,
        Vec<(u64, Bound<'py, PyBytes>, bool, Option<(u64, Bound<'py, PyBytes>)>)>,
    ) {
        let pending = {
            let mut guard = lock(&self.shared.pending);
            clear(self.shared.notify_fd);
            let mut pending = std::mem::take(&mut *guard);
            // (the faults stay for `take_faults`)
            guard.faults = std::mem::take(&mut pending.faults);
            // into `taken` before `pending` is let go: in between, a held answer would be in neither,
            // and the front (`answers_held_in`) would send the connection's next answer before it
            lock(&self.shared.taken).extend(std::mem::take(&mut pending.held));
            pending
        };
        let produced = pending.produced.into_iter().map(|(t, (b, r, n))| (t, b, r, n)).collect();
        let handoffs =
            pending.handoffs.into_iter().map(|(id, bytes, ended, parked)| {
                (id, PyBytes::new(py, &bytes), ended, parked.map(|(p, frame)| (p, PyBytes::new(py, &frame))))
            }).collect();
        (pending.requests, pending.latencies_ms, pending.partitions, produced, pending.failures, handoffs)
    }

    /// Send the answers `take` held (their appends are accounted), each connection's in order.
    fn release(&self, py: Python<'_>) {
        if lock(&self.shared.taken).is_empty() {
            return;
        }
        let shared = &self.shared;
        py.detach(move || {
            // held through the sends: the front sends a connection's next answer itself only once
            // none of its earlier ones is here (serve_connection)
            let mut held = lock(&shared.taken);
            let taken = std::mem::take(&mut *held);
            // one send per connection: its answers in order, in one buffer
            let mut order: Vec<(Arc<SendQueue>, Vec<u8>)> = Vec::new();
            let mut at: HashMap<u64, usize> = HashMap::new();
            for (id, queue, bytes) in taken {
                match at.get(&id) {
                    Some(&i) => order[i].1.extend_from_slice(&bytes),
                    None => {
                        at.insert(id, order.len());
                        order.push((queue, bytes));
                    }
                }
            }
            for (queue, bytes) in order {
                // a connection closed meanwhile: nothing to answer
                let _ = queue.send_now(vec![Chunk::Bytes(bytes)]);
            }
        });
    }

    /// The panics caught on the front's thread since the last call: (the connection it was serving,
    /// which the front dropped and the caller closes, or None; the message).
    fn take_faults(&self) -> Vec<(Option<u64>, String)> {
        std::mem::take(&mut lock(&self.shared.pending).faults)
    }

    /// Make the front's next serve of connection `id` panic (a test of what a panic there does).
    fn fail_next_serve(&self, id: u64) {
        self.shared.fail_next_serve.store(id, Ordering::Release);
    }

    /// Stop the thread and close every descriptor the front holds (the connections stay open).
    fn close(&self) {
        self.shared.stop.store(true, Ordering::Release);
        signal(self.shared.stop_fd);
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
        let held: Vec<FrontConn> = lock(&self.shared.conns).drain().map(|(_, conn)| conn).collect();
        for mut conn in held {
            self.forget_parked(&mut conn);
            self.shared.forget(conn);
        }
    }
}

impl PyNativeFront {
    /// `conn` closed or no longer read: its parked long poll leaves the wait table unanswered.
    fn forget_parked(&self, conn: &mut FrontConn) {
        // (waits only while the table's thread answers it, which takes no lock of ours)
        if let (Some((parked, _)), Some(fetch)) = (conn.parked.take(), &self.shared.fetch) {
            fetch.routes.waits.take_back(parked);
        }
    }
}

impl Drop for PyNativeFront {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether the front never serves the Produce frame `frame` (without its size prefix) starts, judged from its
/// first bytes as for a large frame: another request, a version it does not serve, a transactional
/// producer's (False when the bytes do not tell).
#[pyfunction]
fn front_declines(frame: &[u8], max_version: i16) -> bool {
    peek_large_produce(frame, max_version) == LargePeek::HandBack
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNativeFront>()?;
    m.add_function(wrap_pyfunction!(front_declines, m)?)?;
    Ok(())
}
