//! `NativeFront`: the broker's native request front (issue 38). One epoll thread reads the plaintext
//! connections the broker hands it, cuts their frames (`klog_core::front`) and serves each Produce
//! the native Produce path serves without asking Python anything (`native_produce::serve_frame`
//! with `NoHooks`: routed partitions, no producer id, acks 0/1, acks=all on unreplicated
//! partitions) without the event loop. Its answers are held until the broker's Python side has
//! accounted the appends (`take`: the high watermark, follower and consumer wake-ups, metrics; one
//! wake-up of the event loop for every request served since the last one), then sent (`release`):
//! a Produce answered is visible to a Fetch, as Kafka's. At the first frame it does not serve (any
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use klog_core::front::{offered_natively, peek_large_produce, FrontMemory, InBuf, LargePeek, Next};
use klog_core::socket_writer::{Chunk, Conn as SendQueue};

use crate::native_produce::{serve_frame, Answer, NoHooks, PyProduceRoutes};
use crate::socket_writer::PySocketQueue;

/// The epoll token of the eventfd that wakes the thread to stop.
const STOP_TOKEN: u64 = u64::MAX;
/// Events taken per `epoll_wait`.
const EVENTS: usize = 256;

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
    /// ended or failed: the event loop then reads the end and closes it, never handing it back).
    handoffs: Vec<(u64, Vec<u8>, bool)>,
    signalled: bool,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.requests == 0 && self.handoffs.is_empty()
    }
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
    /// Frames over the small buffer served (read whole in a grown buffer).
    large_frames: AtomicU64,
    /// A connection whose send queue holds this much (a client reading slowly) is given back: the event loop
    /// applies its back-pressure and write timeout.
    max_queued_bytes: usize,
    enabled: AtomicBool,
    stop: AtomicBool,
}

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
fn serve_connection(shared: &Shared, id: u64) {
    let mut conns = lock(&shared.conns);
    let Some(conn) = conns.get_mut(&id) else {
        return; // unregistered meanwhile
    };
    let mut give_back = false;
    let mut ended = false;
    match read_available(conn) {
        Read::Bytes => {}
        Read::Nothing => return,
        Read::Full => give_back = true,
        Read::Ended => {
            give_back = true;
            ended = true;
        }
    }
    let routes = shared.routes.get();
    let enabled = shared.enabled.load(Ordering::Acquire);
    while !give_back {
        let len = match conn.buf.next_frame() {
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
        let mut pending = lock(&shared.pending);
        pending.requests += 1;
        pending.latencies_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let mut failed = false;
        for (what, _) in &served.answers {
            match what {
                Answer::Appended { topic, partition, size, records, .. } => {
                    let name = served.topics[*topic];
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
                        served.topics[*topic].to_owned(),
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
        if let Some(response) = response {
            pending.held.push((id, conn.queue.clone(), response));
        }
        drop(pending);
        conn.buf.consume(len);
        let released = conn.buf.shrink();
        if released > 0 {
            lock(&shared.memory).release(released);
            shared.large_frames.fetch_add(1, Ordering::Relaxed);
        }
        // a failed append: the broker judges the connection (an acks=0 one is closed) before its next request
        give_back = failed;
    }
    if give_back {
        let conn = conns.remove(&id).expect("present");
        lock(&shared.pending).handoffs.push((id, conn.buf.rest().to_vec(), ended));
        shared.forget(conn);
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
    loop {
        // SAFETY: waits on our own epoll set into a live buffer of EVENTS entries.
        let n = unsafe { libc::epoll_wait(shared.epfd, events.as_mut_ptr(), EVENTS as i32, -1) };
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
            serve_connection(&shared, token);
        }
        let mut pending = lock(&shared.pending);
        if !pending.is_empty() && !pending.signalled {
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
    /// when its send queue holds `max_queued_bytes`.
    #[new]
    #[pyo3(signature = (routes, *, max_version, buffer_bytes, max_queued_bytes, max_frame_bytes=0, max_held_bytes=0))]
    fn new(
        routes: Py<PyProduceRoutes>,
        max_version: i16,
        buffer_bytes: usize,
        max_queued_bytes: usize,
        max_frame_bytes: usize,
        max_held_bytes: usize,
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
            large_frames: AtomicU64::new(0),
            max_queued_bytes,
            enabled: AtomicBool::new(true),
            stop: AtomicBool::new(false),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new().name("klog-front".into()).spawn(move || run(worker))?;
        Ok(PyNativeFront { shared, thread: Mutex::new(Some(thread)) })
    }

    /// Read connection `id` (socket `fd`, duplicated; the caller keeps its own, with reading paused)
    /// from now on, answering through `queue`. Its bytes up to now were all read by the caller.
    fn register(&self, id: u64, fd: i32, queue: &Bound<'_, PySocketQueue>) -> PyResult<()> {
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
        };
        let mut conns = lock(&self.shared.conns);
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: id };
        // SAFETY: adds our own duplicate to our own epoll set.
        if unsafe { libc::epoll_ctl(self.shared.epfd, libc::EPOLL_CTL_ADD, own, &mut ev) } < 0 {
            let err = std::io::Error::last_os_error();
            // SAFETY: our own duplicate, closed once.
            unsafe { libc::close(own) };
            return Err(err.into());
        }
        if let Some(old) = conns.insert(id, conn) {
            self.shared.forget(old);
        }
        Ok(())
    }

    /// Stop reading connection `id` (closed): its duplicate descriptor is closed. False if the front
    /// did not hold it (given back already).
    fn unregister(&self, id: u64) -> bool {
        match lock(&self.shared.conns).remove(&id) {
            Some(conn) => {
                self.shared.forget(conn);
                true
            }
            None => false,
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
        Vec<(u64, Bound<'py, PyBytes>, bool)>,
    ) {
        let pending = {
            let mut pending = lock(&self.shared.pending);
            clear(self.shared.notify_fd);
            std::mem::take(&mut *pending)
        };
        lock(&self.shared.taken).extend(pending.held);
        let produced = pending.produced.into_iter().map(|(t, (b, r, n))| (t, b, r, n)).collect();
        let handoffs =
            pending.handoffs.into_iter().map(|(id, bytes, ended)| (id, PyBytes::new(py, &bytes), ended)).collect();
        (pending.requests, pending.latencies_ms, pending.partitions, produced, pending.failures, handoffs)
    }

    /// Send the answers `take` held (their appends are accounted), each connection's in order.
    fn release(&self, py: Python<'_>) {
        let taken = std::mem::take(&mut *lock(&self.shared.taken));
        if taken.is_empty() {
            return;
        }
        py.detach(move || {
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

    /// Stop the thread and close every descriptor the front holds (the connections stay open).
    fn close(&self) {
        self.shared.stop.store(true, Ordering::Release);
        signal(self.shared.stop_fd);
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
        let mut conns = lock(&self.shared.conns);
        for (_, conn) in conns.drain() {
            self.shared.forget(conn);
        }
    }
}

impl Drop for PyNativeFront {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether the front never serves the Produce frame `frame` (without its size prefix) starts, judged from its
/// first bytes as for a large frame: another request, a version it does not serve, an idempotent or
/// transactional producer's (False when the bytes do not tell).
#[pyfunction]
fn front_declines(frame: &[u8], max_version: i16) -> bool {
    peek_large_produce(frame, max_version) == LargePeek::HandBack
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNativeFront>()?;
    m.add_function(wrap_pyfunction!(front_declines, m)?)?;
    Ok(())
}
