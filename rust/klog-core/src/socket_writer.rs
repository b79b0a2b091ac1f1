//! Socket writes on a native thread: the broker's event loop queues each response here and goes on with
//! the next request; one writer thread sends the bytes (non-blocking, waiting for writability with epoll).
//!
//! Why: all of klog's request handling runs on one event-loop thread, and on loopback a `send()` also runs
//! the receiver's TCP input and wakes the client, so it is the largest single cost per small request. On a
//! busy machine the scheduler shares CPU per thread: a second thread doing the sends keeps the broker
//! working while the loop thread waits for a CPU, and vice versa.
//!
//! Each connection gets a [`Conn`] owning a duplicate of the socket descriptor (`dup`), so a descriptor
//! number reused by the process after the event loop closed its own can never receive our bytes. Bytes of a
//! connection go out in the order queued. The event loop learns that a connection's queue emptied (when it
//! asked, see [`Conn::notify_when_empty`]) through an eventfd it watches plus [`SocketWriter::take_drained`].
//! Closing: [`Conn::close_after_flush`] sends what is queued, then closes the duplicate (the peer sees the
//! end of stream once the event loop has closed its descriptor too); [`Conn::abort`] drops what is queued.
//! Linux only (epoll, eventfd).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Chunks gathered into one `sendmsg` call.
const MAX_IOVECS: usize = 64;
/// Events taken per `epoll_wait`.
const MAX_EVENTS: usize = 256;
/// A kick with at most this many connections to send for sends on the calling thread (see `kick`).
const INLINE_FLUSH_MAX_CONNECTIONS: usize = 2;
/// epoll user data of the kick eventfd (connection ids start at 1).
const KICK_TOKEN: u64 = 0;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // a panic while holding the lock cannot leave these plain queues inconsistent: keep going
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A piece of a connection's output: bytes, or a range of a file sent with `sendfile` (zero copy).
pub enum Chunk {
    Bytes(Vec<u8>),
    /// `file` stays open while queued: a segment file's shared descriptor (no new descriptor per queued
    /// range, so responses waiting in a queue do not eat into the process's descriptor limit) or one of its own
    File { file: Arc<std::fs::File>, position: u64, length: u64 },
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File { length, .. } => *length as usize,
        }
    }
}

struct ConnState {
    chunks: VecDeque<Chunk>,
    /// bytes of the first chunk already sent
    offset: usize,
    /// in the ready list or registered with epoll (the writer thread holds a reference)
    scheduled: bool,
    /// registered with epoll (waiting for writability)
    registered: bool,
    /// the first send error (errno); nothing more is sent
    error: Option<i32>,
    /// close once the queue is empty
    closing: bool,
    /// the descriptor was closed (after a flush or an abort)
    closed: bool,
    notify_when_empty: bool,
    /// the failure was reported through the notify eventfd
    error_reported: bool,
}

/// One connection's queue of outgoing bytes.
pub struct Conn {
    id: u64,
    fd: RawFd,
    shared: Arc<Shared>,
    state: Mutex<ConnState>,
    queued: AtomicUsize,
}

struct Shared {
    epfd: RawFd,
    kick_fd: RawFd,
    notify_fd: RawFd,
    ready: Mutex<Vec<Arc<Conn>>>,
    drained: Mutex<Vec<u64>>,
    stop: AtomicBool,
    next_id: AtomicU64,
}

impl Shared {
    fn signal(fd: RawFd) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; EAGAIN (counter full) is harmless.
        unsafe {
            libc::write(fd, &one as *const u64 as *const libc::c_void, 8);
        }
    }

    fn schedule(&self, conn: Arc<Conn>) {
        lock(&self.ready).push(conn);
    }

    /// Send what was queued since the last kick: on the calling thread when only a few connections have
    /// something (waking the writer thread would cost more than the sends), else on the writer thread.
    fn kick(&self) {
        let batch: Vec<Arc<Conn>> = {
            let mut ready = lock(&self.ready);
            if ready.is_empty() {
                return;
            }
            if ready.len() > INLINE_FLUSH_MAX_CONNECTIONS {
                drop(ready);
                Shared::signal(self.kick_fd);
                return;
            }
            ready.drain(..).collect()
        };
        let mut leftover = Vec::new();
        for conn in batch {
            let mut st = lock(&conn.state);
            // connections waiting for writability, closing or watched belong to the writer thread
            if st.closed || st.registered || st.closing || st.notify_when_empty {
                drop(st);
                leftover.push(conn);
                continue;
            }
            let wait = conn.flush(&mut st);
            if wait || st.error.is_some() {
                drop(st);
                leftover.push(conn);
            } else {
                st.scheduled = false;
            }
        }
        if !leftover.is_empty() {
            lock(&self.ready).extend(leftover);
            Shared::signal(self.kick_fd);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: descriptors created in SocketWriter::new and owned only by this struct.
        unsafe {
            libc::close(self.epfd);
            libc::close(self.kick_fd);
            libc::close(self.notify_fd);
        }
    }
}

impl Conn {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes queued and not yet sent.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// The errno of the first failed send, if any.
    pub fn error(&self) -> Option<i32> {
        lock(&self.state).error
    }

    /// Queue `data` after everything queued before. Returns the bytes now queued; `Err(errno)` if an earlier
    /// send failed or the connection was closed. The writer thread only picks the connection up after
    /// [`SocketWriter::kick`].
    pub fn send(self: &Arc<Self>, data: Vec<u8>) -> Result<usize, i32> {
        self.send_chunks(vec![Chunk::Bytes(data)])
    }

    /// Queue bytes and file ranges, in order (see `send`).
    pub fn send_chunks(self: &Arc<Self>, chunks: Vec<Chunk>) -> Result<usize, i32> {
        let n: usize = chunks.iter().map(Chunk::len).sum();
        if n == 0 {
            return Ok(self.queued_bytes());
        }
        let (mut st, queued) = self.enqueue(chunks, n)?;
        if !st.scheduled {
            st.scheduled = true;
            drop(st);
            self.shared.schedule(self.clone());
        }
        Ok(queued)
    }

    /// `SocketWriter::kick` from a thread that holds only connections (the native front, after queueing
    /// the answers of one pass over its ready connections with `send_chunks`): every connection's queued
    /// bytes go, on this thread when few have any, else on the writer thread.
    pub fn kick_writer(&self) {
        self.shared.kick();
    }

    /// Append `chunks` (`n` bytes) to the queue, under the state lock the caller goes on with; the bytes now
    /// queued. `Err(errno)` if an earlier send failed or the connection was closed.
    fn enqueue(&self, chunks: Vec<Chunk>, n: usize) -> Result<(MutexGuard<'_, ConnState>, usize), i32> {
        let mut st = lock(&self.state);
        if let Some(e) = st.error {
            return Err(e);
        }
        if st.closing || st.closed {
            return Err(libc::EBADF);
        }
        st.chunks.extend(chunks.into_iter().filter(|c| c.len() > 0));
        let queued = self.queued.fetch_add(n, Ordering::AcqRel) + n;
        Ok((st, queued))
    }

    /// Queue bytes and file ranges after everything queued before, and send them from the calling
    /// thread (no event loop, no kick) when the connection has nothing else pending; else the writer
    /// thread is woken for them. Returns the bytes still queued; `Err(errno)` as `send`.
    pub fn send_now(self: &Arc<Self>, chunks: Vec<Chunk>) -> Result<usize, i32> {
        let n: usize = chunks.iter().map(Chunk::len).sum();
        let (mut st, _) = self.enqueue(chunks, n)?;
        if !st.scheduled && !st.registered && !st.notify_when_empty {
            let wait = self.flush(&mut st);
            if !wait && st.error.is_none() {
                return Ok(self.queued_bytes());
            }
        }
        if !st.scheduled {
            st.scheduled = true;
            drop(st);
            self.shared.schedule(self.clone());
        } else {
            drop(st);
        }
        Shared::signal(self.shared.kick_fd);
        Ok(self.queued_bytes())
    }

    /// Ask to be told (through the notify eventfd and `take_drained`) when the queue is empty or the
    /// connection failed. Returns false, without arming, if that is already the case.
    pub fn notify_when_empty(&self) -> bool {
        let mut st = lock(&self.state);
        if st.chunks.is_empty() || st.error.is_some() || st.closed {
            return false;
        }
        st.notify_when_empty = true;
        true
    }

    /// Send what is queued, then close the descriptor.
    pub fn close_after_flush(self: &Arc<Self>) {
        let mut st = lock(&self.state);
        if st.closing || st.closed {
            return;
        }
        st.closing = true;
        if !st.scheduled {
            st.scheduled = true;
            drop(st);
            self.shared.schedule(self.clone());
        }
    }

    /// Drop what is queued and close the descriptor now (from any thread).
    pub fn abort(&self) {
        let mut st = lock(&self.state);
        st.closing = true;
        st.chunks.clear();
        st.offset = 0;
        self.queued.store(0, Ordering::Release);
        if !st.registered && !st.closed {
            // not known to epoll: nothing else refers to the descriptor
            st.closed = true;
            // SAFETY: our own duplicate, closed exactly once (guarded by `closed`).
            unsafe {
                libc::close(self.fd);
            }
        }
        // registered: the writer thread deregisters and closes it on its next pass (SocketWriter::reap)
    }

    fn fail(&self, st: &mut ConnState, e: i32) {
        st.error = Some(e);
        st.chunks.clear();
        st.offset = 0;
        self.queued.store(0, Ordering::Release);
    }

    /// Account `sent` bytes from the front of the queue.
    fn consume(&self, st: &mut ConnState, sent: usize) {
        let mut left = sent;
        self.queued.fetch_sub(sent, Ordering::AcqRel);
        while left > 0 {
            let first_left = st.chunks[0].len() - st.offset;
            if left >= first_left {
                left -= first_left;
                st.chunks.pop_front();
                st.offset = 0;
            } else {
                st.offset += left;
                left = 0;
            }
        }
    }

    /// Writer thread: send as much as the socket takes. Returns whether to wait for writability.
    fn flush(&self, st: &mut ConnState) -> bool {
        while !st.chunks.is_empty() && st.error.is_none() {
            let sent = if let Chunk::File { file, position, length } = &st.chunks[0] {
                use std::os::unix::io::AsRawFd;
                let mut off = (*position + st.offset as u64) as libc::off_t;
                let count = (*length as usize) - st.offset;
                // SAFETY: sendfile between our own socket duplicate and our own file descriptor.
                let n = unsafe { libc::sendfile(self.fd, file.as_raw_fd(), &mut off, count) };
                if n == 0 {
                    // the file ended before the range: the response cannot be completed
                    self.fail(st, libc::EIO);
                    return false;
                }
                n
            } else {
                let mut iov: [libc::iovec; MAX_IOVECS] =
                    [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_IOVECS];
                let mut count = 0;
                for (i, chunk) in st.chunks.iter().take(MAX_IOVECS).enumerate() {
                    let Chunk::Bytes(bytes) = chunk else { break };
                    let skip = if i == 0 { st.offset } else { 0 };
                    iov[i] = libc::iovec {
                        iov_base: bytes[skip..].as_ptr() as *mut libc::c_void,
                        iov_len: bytes.len() - skip,
                    };
                    count += 1;
                }
                // SAFETY: msghdr points at `count` iovecs over chunks borrowed for the duration of the call.
                unsafe {
                    let mut msg: libc::msghdr = std::mem::zeroed();
                    msg.msg_iov = iov.as_mut_ptr();
                    msg.msg_iovlen = count as _;
                    libc::sendmsg(self.fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                }
            };
            if sent < 0 {
                let e = errno();
                if e == libc::EINTR {
                    continue;
                }
                if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                    return true;
                }
                self.fail(st, e);
                return false;
            }
            self.consume(st, sent as usize);
        }
        false
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if !st.closed {
            // SAFETY: our own duplicate; nothing else holds this Conn any more.
            unsafe {
                libc::close(self.fd);
            }
        }
    }
}

/// The writer thread and its epoll set.
pub struct SocketWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl SocketWriter {
    pub fn new() -> io::Result<SocketWriter> {
        // SAFETY: plain descriptor-creating system calls; results checked.
        let (epfd, kick_fd, notify_fd) = unsafe {
            let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            if epfd < 0 {
                return Err(io::Error::last_os_error());
            }
            let kick_fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            if kick_fd < 0 {
                let err = io::Error::last_os_error();
                libc::close(epfd);
                return Err(err);
            }
            let notify_fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
            if notify_fd < 0 {
                let err = io::Error::last_os_error();
                libc::close(epfd);
                libc::close(kick_fd);
                return Err(err);
            }
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: KICK_TOKEN };
            if libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, kick_fd, &mut ev) < 0 {
                let err = io::Error::last_os_error();
                libc::close(epfd);
                libc::close(kick_fd);
                libc::close(notify_fd);
                return Err(err);
            }
            (epfd, kick_fd, notify_fd)
        };
        let shared = Arc::new(Shared {
            epfd,
            kick_fd,
            notify_fd,
            ready: Mutex::new(Vec::new()),
            drained: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("klog-socket-writer".into())
            .spawn(move || run(worker))?;
        Ok(SocketWriter { shared, thread: Some(thread) })
    }

    /// A queue for socket `fd` (duplicated: the caller keeps and closes its own descriptor).
    pub fn register(&self, fd: RawFd) -> io::Result<Arc<Conn>> {
        // SAFETY: dup of a caller-provided descriptor; failure checked.
        let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if own < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Arc::new(Conn {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            fd: own,
            shared: self.shared.clone(),
            state: Mutex::new(ConnState {
                chunks: VecDeque::new(),
                offset: 0,
                scheduled: false,
                registered: false,
                error: None,
                closing: false,
                closed: false,
                notify_when_empty: false,
                error_reported: false,
            }),
            queued: AtomicUsize::new(0),
        }))
    }

    /// Send what was queued since the last kick: on the calling thread when only a few connections have
    /// something (waking the writer thread would cost more than the sends), else on the writer thread.
    pub fn kick(&self) {
        self.shared.kick();
    }

    /// Wake the writer thread for an aborted connection registered with epoll (it deregisters and closes it).
    pub fn reap(&self, conn: &Arc<Conn>) {
        let registered = lock(&conn.state).registered;
        if registered {
            self.shared.schedule(conn.clone());
            Shared::signal(self.shared.kick_fd);
        }
    }

    /// The eventfd that becomes readable when a connection asked to be told its queue emptied.
    pub fn notify_fd(&self) -> RawFd {
        self.shared.notify_fd
    }

    /// Ids of connections whose queue emptied (or failed) since the last call; clears the notify eventfd.
    pub fn take_drained(&self) -> Vec<u64> {
        let mut buf: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe {
            libc::read(self.shared.notify_fd, &mut buf as *mut u64 as *mut libc::c_void, 8);
        }
        std::mem::take(&mut *lock(&self.shared.drained))
    }
}

impl Drop for SocketWriter {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        Shared::signal(self.shared.kick_fd);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // queues still listed hold the shared state (a cycle): release them with the thread gone
        lock(&self.shared.ready).clear();
    }
}

/// The writer thread: send for ready connections; wait for writability of the others.
fn run(shared: Arc<Shared>) {
    let mut waiting: HashMap<u64, Arc<Conn>> = HashMap::new();
    let mut events: Vec<libc::epoll_event> = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
    let mut batch: Vec<Arc<Conn>> = Vec::new();
    loop {
        std::mem::swap(&mut batch, &mut *lock(&shared.ready));
        for conn in batch.drain(..) {
            service(&shared, &conn, &mut waiting);
        }
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        if !lock(&shared.ready).is_empty() {
            continue;
        }
        // SAFETY: epoll_wait into our own buffer of MAX_EVENTS entries.
        let n = unsafe { libc::epoll_wait(shared.epfd, events.as_mut_ptr(), MAX_EVENTS as i32, -1) };
        if n < 0 {
            continue; // EINTR
        }
        for ev in &events[..n as usize] {
            let token = ev.u64;
            if token == KICK_TOKEN {
                let mut buf: u64 = 0;
                // SAFETY: drain the non-blocking kick eventfd into a live u64.
                unsafe {
                    libc::read(shared.kick_fd, &mut buf as *mut u64 as *mut libc::c_void, 8);
                }
            } else if let Some(conn) = waiting.get(&token).cloned() {
                service(&shared, &conn, &mut waiting);
            }
        }
    }
    // stopping: close what is left (the process is shutting the broker down)
    for (_, conn) in waiting.drain() {
        let mut st = lock(&conn.state);
        deregister(&shared, &conn, &mut st);
    }
}

fn deregister(shared: &Shared, conn: &Conn, st: &mut ConnState) {
    if st.registered {
        // SAFETY: removes our own duplicate from our epoll set (a closed description is removed already).
        unsafe {
            libc::epoll_ctl(shared.epfd, libc::EPOLL_CTL_DEL, conn.fd, std::ptr::null_mut());
        }
        st.registered = false;
    }
}

/// Send for one connection; register it for writability, or finish it (close, notify).
fn service(shared: &Shared, conn: &Arc<Conn>, waiting: &mut HashMap<u64, Arc<Conn>>) {
    let mut st = lock(&conn.state);
    if st.closed {
        deregister(shared, conn, &mut st);
        waiting.remove(&conn.id);
        st.scheduled = false;
        return;
    }
    let wait = conn.flush(&mut st);
    if wait && !(st.closing && st.chunks.is_empty()) {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32,
            u64: conn.id,
        };
        let op = if st.registered { libc::EPOLL_CTL_MOD } else { libc::EPOLL_CTL_ADD };
        // SAFETY: our own duplicate descriptor and epoll set; the event struct lives across the call.
        let r = unsafe { libc::epoll_ctl(shared.epfd, op, conn.fd, &mut ev) };
        if r == 0 {
            st.registered = true;
            st.scheduled = true;
            waiting.insert(conn.id, conn.clone());
            return;
        }
        st.error = Some(errno());
        st.chunks.clear();
        st.offset = 0;
        conn.queued.store(0, Ordering::Release);
    }
    // queue empty (or failed): done with this connection until it queues more
    deregister(shared, conn, &mut st);
    waiting.remove(&conn.id);
    st.scheduled = false;
    if st.closing && !st.closed {
        st.closed = true;
        // SAFETY: our own duplicate, closed exactly once (guarded by `closed`).
        unsafe {
            libc::close(conn.fd);
        }
    }
    // the event loop hears of an emptied queue it waits for, and of every failure (it closes the connection)
    if st.notify_when_empty || (st.error.is_some() && !st.error_reported) {
        st.notify_when_empty = false;
        st.error_reported = st.error.is_some();
        lock(&shared.drained).push(conn.id);
        Shared::signal(shared.notify_fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().expect("socketpair");
        a.set_nonblocking(true).expect("nonblocking");
        (a, b)
    }

    /// Registers `a` and closes the caller's descriptor, as the event loop does once a connection
    /// is handed over: only the writer's duplicate stays open.
    fn register_and_close_original(writer: &SocketWriter, a: UnixStream) -> Arc<Conn> {
        use std::os::unix::io::IntoRawFd;
        let raw = a.into_raw_fd();
        let conn = writer.register(raw).expect("register");
        // SAFETY: closing the caller's own descriptor; the duplicate stays open
        unsafe {
            libc::close(raw);
        }
        conn
    }

    fn wait_for(mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn queued_bytes_arrive_in_order_whether_sent_inline_or_by_the_writer_thread() {
        use std::os::unix::io::AsRawFd;
        let writer = SocketWriter::new().expect("writer");
        // 1 connection: sent on the kicking thread; 5: more than INLINE_FLUSH_MAX_CONNECTIONS, the thread
        for connections in [1usize, 5] {
            let pairs: Vec<(UnixStream, UnixStream)> = (0..connections).map(|_| pair()).collect();
            let conns: Vec<Arc<Conn>> =
                pairs.iter().map(|(a, _)| writer.register(a.as_raw_fd()).expect("register")).collect();
            for round in 0..10u8 {
                for i in 0..10u8 {
                    for conn in &conns {
                        conn.send(vec![round * 10 + i; 10]).expect("send");
                    }
                }
                writer.kick();
            }
            let want: Vec<u8> = (0..100u8).flat_map(|i| vec![i; 10]).collect();
            for (_, b) in &pairs {
                let mut got = vec![0u8; 1000];
                (&*b).read_exact(&mut got).expect("read");
                assert_eq!(got, want);
            }
            for conn in &conns {
                wait_for(|| conn.queued_bytes() == 0);
            }
        }
    }

    #[test]
    fn send_now_keeps_order_with_what_waits_for_a_kick_and_sends_without_one() {
        use std::os::unix::io::AsRawFd;
        let writer = SocketWriter::new().expect("writer");
        let (a, b) = pair();
        let conn = writer.register(a.as_raw_fd()).expect("register");
        // nothing pending: sent on the calling thread, no kick
        assert_eq!(conn.send_now(vec![Chunk::Bytes(vec![1; 4])]), Ok(0));
        // queued for a kick that has not come: send_now goes after it (the writer thread is woken)
        conn.send(vec![2; 4]).expect("send");
        conn.send_now(vec![Chunk::Bytes(vec![3; 4])]).expect("send_now");
        let mut got = vec![0u8; 12];
        (&b).read_exact(&mut got).expect("read");
        assert_eq!(got, [vec![1u8; 4], vec![2; 4], vec![3; 4]].concat());
        wait_for(|| conn.queued_bytes() == 0);
        conn.abort();
        assert_eq!(conn.send_now(vec![Chunk::Bytes(vec![4; 4])]), Err(libc::EBADF));
    }

    #[test]
    fn a_slow_reader_gets_everything_once_it_reads_and_the_drain_is_notified() {
        use std::os::unix::io::AsRawFd;
        let writer = SocketWriter::new().expect("writer");
        let (a, mut b) = pair();
        let conn = writer.register(a.as_raw_fd()).expect("register");
        let chunk: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        for _ in 0..8 {
            conn.send(chunk.clone()).expect("send");
        }
        writer.kick();
        // more than the socket buffer: the writer must be waiting for writability
        std::thread::sleep(Duration::from_millis(50));
        assert!(conn.queued_bytes() > 0);
        assert!(conn.notify_when_empty());
        let mut got = vec![0u8; 8 << 20];
        b.read_exact(&mut got).expect("read");
        for part in got.chunks(1 << 20) {
            assert_eq!(part, &chunk[..]);
        }
        wait_for(|| !writer.take_drained().is_empty() || conn.queued_bytes() == 0);
        assert_eq!(conn.queued_bytes(), 0);
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_signal_or_a_hang() {
        use std::os::unix::io::AsRawFd;
        let writer = SocketWriter::new().expect("writer");
        let (a, b) = pair();
        let conn = writer.register(a.as_raw_fd()).expect("register");
        drop(b);
        conn.send(vec![1; 100]).expect("first send is only queued");
        writer.kick();
        wait_for(|| conn.error().is_some());
        assert_eq!(conn.error(), Some(libc::EPIPE));
        assert!(conn.send(vec![1]).is_err());
    }

    #[test]
    fn close_after_flush_sends_everything_then_closes_the_duplicate() {
        let writer = SocketWriter::new().expect("writer");
        let (a, mut b) = pair();
        let conn = register_and_close_original(&writer, a);
        conn.send(b"hello".to_vec()).expect("send");
        conn.close_after_flush();
        writer.kick();
        let mut got = Vec::new();
        b.read_to_end(&mut got).expect("read to end of stream");
        assert_eq!(got, b"hello");
    }

    #[test]
    fn abort_drops_queued_bytes_and_ends_the_stream() {
        let writer = SocketWriter::new().expect("writer");
        let (a, mut b) = pair();
        let conn = register_and_close_original(&writer, a);
        let big: Vec<u8> = vec![7; 4 << 20];
        conn.send(big).expect("send");
        writer.kick();
        std::thread::sleep(Duration::from_millis(20));
        conn.abort();
        writer.reap(&conn);
        let mut got = Vec::new();
        b.read_to_end(&mut got).expect("read to end of stream");
        assert!(got.len() < 4 << 20);
        assert!(got.iter().all(|&x| x == 7));
    }

    #[test]
    fn file_ranges_are_sent_between_bytes_in_order_and_a_short_file_is_an_error() {
        use std::io::{Seek, Write};
        use std::os::unix::io::AsRawFd;
        let writer = SocketWriter::new().expect("writer");
        let (a, mut b) = pair();
        let conn = writer.register(a.as_raw_fd()).expect("register");
        let path = std::env::temp_dir().join(format!("klog-socket-writer-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).expect("create");
        let body: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
        file.write_all(&body).expect("write");
        file.rewind().expect("rewind");
        let reopen = || std::fs::File::open(&path).expect("open");
        conn.send_chunks(vec![
            Chunk::Bytes(b"head".to_vec()),
            Chunk::File { file: Arc::new(reopen()), position: 10, length: 250_000 },
            Chunk::Bytes(b"tail".to_vec()),
        ])
        .expect("send");
        writer.kick();
        let mut got = vec![0u8; 4 + 250_000 + 4];
        b.read_exact(&mut got).expect("read");
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..250_004], &body[10..250_010]);
        assert_eq!(&got[250_004..], b"tail");
        // a range past the end of the file: the connection fails instead of hanging
        conn.send_chunks(vec![Chunk::File { file: Arc::new(reopen()), position: 299_000, length: 5_000 }]).expect("send");
        writer.kick();
        let mut drained = Vec::new();
        wait_for(|| {
            drained.extend(writer.take_drained());
            !drained.is_empty()
        });
        assert_eq!(drained, vec![conn.id()]);
        assert_eq!(conn.error(), Some(libc::EIO));
        std::fs::remove_file(&path).expect("remove");
    }
}
