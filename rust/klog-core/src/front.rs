//! Sans-IO pieces of the broker's native front (`klog-py`'s `front`): a connection's read buffer,
//! bounded, cut into request frames. The front's epoll thread reads into [`InBuf::spare`], then takes
//! frames with [`InBuf::next_frame`] until none is complete; what it cannot serve leaves with
//! [`InBuf::rest`] (the bytes from the first frame it did not serve) for the Python front.
//!
//! Large frames (issue 38: a throughput producer's Produce carries up to `batch.size` bytes for each of
//! many partitions, hundreds of KiB): a buffer made with [`InBuf::with_large_frames`] reports a frame
//! over its small buffer but within its frame bound as [`Next::Large`]; the front judges the frame's
//! first bytes ([`peek_large_produce`]), reserves its bytes in the front-wide [`FrontMemory`] and
//! [`InBuf::grow`]s the buffer to exactly that frame, so the rest of the frame is read straight into
//! the buffer it is served from and nothing after it is read meanwhile. Once served,
//! [`InBuf::shrink`] returns to the small buffer and says how many bytes to release.

use crate::produce_request::{FIRST_FLEXIBLE_VERSION, FIRST_TOPIC_ID_VERSION, MAX_NATIVE_VERSION, MIN_NATIVE_VERSION};
use crate::wire::{FrameError, Reader};

/// What the buffer holds at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Not a whole frame yet (or nothing).
    Incomplete,
    /// A whole frame: its length without the 4-byte size prefix.
    Frame(usize),
    /// A frame over the small buffer but within the frame bound (its length without the prefix):
    /// [`InBuf::grow`] makes room for it, else the Python front takes it.
    Large(usize),
    /// A size prefix over the front's bound (or negative): the Python front judges it.
    TooLarge,
}

/// A connection's received bytes not yet served: at most `capacity` of them, or one large frame.
///
/// An idle buffer (nothing held) needs no storage: the small buffer is allocated at the first read
/// ([`InBuf::spare`]), or lent by the reader ([`InBuf::lend`]) and taken back once the bytes read are
/// all served ([`InBuf::give_back`]), so hundreds of idle connections do not each keep one resident.
pub struct InBuf {
    /// The small buffer (empty: not allocated, nothing held), or the large frame's while grown.
    data: Vec<u8>,
    /// The small buffer's size.
    capacity: usize,
    start: usize,
    end: usize,
    /// The small buffer, set aside while `data` holds one large frame (empty otherwise).
    small: Vec<u8>,
    /// The largest frame (without its size prefix) the buffer may grow for.
    max_large_frame: usize,
}

/// The Produce API key.
pub const PRODUCE_KEY: i16 = 0;
/// The Fetch API key.
pub const FETCH_KEY: i16 = 1;

impl InBuf {
    /// A buffer holding at most `capacity` bytes (frames up to `capacity - 4` bytes can be cut).
    pub fn new(capacity: usize) -> InBuf {
        InBuf::with_large_frames(capacity, 0)
    }

    /// A buffer of `capacity` bytes that may also hold one frame of up to `max_frame` bytes (without
    /// its size prefix) at a time, in a buffer of its own ([`InBuf::grow`]).
    pub fn with_large_frames(capacity: usize, max_frame: usize) -> InBuf {
        InBuf { data: Vec::new(), capacity: capacity.max(8), start: 0, end: 0, small: Vec::new(), max_large_frame: max_frame }
    }

    /// Take `spare` (a reader's buffer of this buffer's size, or an empty Vec) as the small buffer if
    /// this one has none (it holds nothing): the next read lands in memory shared by idle connections.
    pub fn lend(&mut self, spare: &mut Vec<u8>) {
        if self.data.is_empty() && spare.len() == self.capacity {
            std::mem::swap(&mut self.data, spare);
        }
    }

    /// Once everything read is served (nothing held, not grown): the small buffer goes back to `spare`
    /// if that has none, else is freed; an idle connection keeps no storage.
    pub fn give_back(&mut self, spare: &mut Vec<u8>) {
        if self.is_grown() || self.start != self.end || self.data.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.data);
        if spare.is_empty() {
            *spare = data;
        }
    }

    /// Whether the buffer has storage of its own now (the small buffer, or a large frame's).
    pub fn is_allocated(&self) -> bool {
        !self.data.is_empty()
    }

    /// The largest frame (without its size prefix) this buffer can hold whole, growing if it may.
    pub fn max_frame(&self) -> usize {
        self.small_capacity().saturating_sub(4).max(self.max_large_frame)
    }

    fn small_capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the buffer holds one large frame (grown).
    pub fn is_grown(&self) -> bool {
        !self.small.is_empty()
    }

    /// The bytes of the large frame's buffer (0: not grown), reserved in the front's [`FrontMemory`].
    pub fn grown_bytes(&self) -> usize {
        if self.is_grown() { self.data.len() } else { 0 }
    }

    /// Make room for the large frame of `len` bytes `next_frame` found: a buffer of exactly its size
    /// (prefix included), holding what was read of it; returns the bytes it takes ([`InBuf::grown_bytes`]).
    pub fn grow(&mut self, len: usize) -> usize {
        debug_assert!(!self.is_grown() && len + 4 > self.data.len() && len <= self.max_large_frame);
        let mut large = vec![0; len + 4];
        let held = self.end - self.start;
        large[..held].copy_from_slice(&self.data[self.start..self.end]);
        self.small = std::mem::replace(&mut self.data, large);
        self.start = 0;
        self.end = held;
        self.data.len()
    }

    /// Back to the small buffer once the large frame was served (consumed): the bytes to release
    /// (0 while the frame is held, or when not grown).
    pub fn shrink(&mut self) -> usize {
        if !self.is_grown() || self.start != self.end {
            return 0;
        }
        let released = self.data.len();
        self.data = std::mem::take(&mut self.small);
        self.start = 0;
        self.end = 0;
        released
    }

    /// Where the next read goes (empty when the buffer is full: the held frame is then too large,
    /// which `next_frame` says first). A partial frame is moved to the start once less than a quarter
    /// of the buffer is left after it.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.data.is_empty() {
            self.data = vec![0; self.capacity];
        }
        if self.start > 0 && self.data.len() - self.end < self.data.len() / 4 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.data[self.end..]
    }

    /// `n` bytes were read into `spare`.
    pub fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.data.len());
    }

    /// The bytes held.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// What starts the held bytes.
    pub fn next_frame(&self) -> Next {
        let held = &self.data[self.start..self.end];
        if held.len() < 4 {
            return Next::Incomplete;
        }
        let size = i32::from_be_bytes([held[0], held[1], held[2], held[3]]);
        if size < 0 || size as usize > self.max_frame() {
            return Next::TooLarge;
        }
        if size as usize + 4 > self.data.len() {
            return Next::Large(size as usize);
        }
        if held.len() - 4 < size as usize {
            return Next::Incomplete;
        }
        Next::Frame(size as usize)
    }

    /// The frame `next_frame` found (`len` bytes, without its size prefix).
    pub fn frame(&self, len: usize) -> &[u8] {
        &self.data[self.start + 4..self.start + 4 + len]
    }

    /// Drop the frame of `len` bytes (served).
    pub fn consume(&mut self, len: usize) {
        self.start = (self.start + 4 + len).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Every byte held, from the first frame not served.
    pub fn rest(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }
}

/// Whether `frame` (without its size prefix) is a request the front offers to the native Produce
/// path: the Produce API key (the path itself decides the rest, and leaves what it cannot serve).
pub fn offered_natively(frame: &[u8]) -> bool {
    frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == PRODUCE_KEY
}

/// What the first bytes of a large frame say about serving it natively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LargePeek {
    /// More bytes are needed to tell.
    Unknown,
    /// A Produce the native path is likely to serve (no transactional id, acks 0/1/-1, its first batch
    /// of magic 2 and not transactional): worth reading whole.
    Grow,
    /// Not one the front serves (another request, a version it does not serve, a transactional
    /// producer's): the Python front takes it without the front reading it whole.
    HandBack,
}

/// Judge a large frame (without its size prefix) from its first bytes: the header, the body up to the
/// first partition's first batch header. The native Produce path decides for good once it is whole.
pub fn peek_large_produce(prefix: &[u8], max_version: i16) -> LargePeek {
    match peek_produce(prefix, max_version) {
        Ok(true) => LargePeek::Grow,
        Ok(false) => LargePeek::HandBack,
        Err(FrameError::Truncated(_)) => LargePeek::Unknown,
        Err(_) => LargePeek::HandBack,
    }
}

/// The offset of a record batch's producer id (base offset 8, length 4, leader epoch 4, magic 1, crc 4,
/// attributes 2, last offset delta 4, base and max timestamps 16).
const BATCH_PRODUCER_ID_AT: usize = 43;
const BATCH_MAGIC_AT: usize = 16;
const BATCH_ATTRIBUTES_AT: usize = 21;
const TRANSACTIONAL_ATTRIBUTE: i16 = 0x10;

fn peek_produce(prefix: &[u8], max_version: i16) -> Result<bool, FrameError> {
    let mut r = Reader::new(prefix);
    let api_key = r.i16("api_key")?;
    let version = r.i16("api_version")?;
    if api_key != PRODUCE_KEY || version < MIN_NATIVE_VERSION || version > max_version.min(MAX_NATIVE_VERSION) {
        return Ok(false);
    }
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    r.i32("correlation_id")?;
    r.nullable_string(false, "client_id")?;
    if flexible {
        r.skip_tagged_fields("request header tagged fields")?;
    }
    if r.nullable_string(flexible, "transactional_id")?.is_some() {
        return Ok(false);
    }
    if !matches!(r.i16("acks")?, -1..=1) {
        return Ok(false);
    }
    r.i32("timeout_ms")?;
    if r.array_len(flexible, 1, "topic_data")? == 0 {
        return Ok(false);
    }
    if version >= FIRST_TOPIC_ID_VERSION {
        r.uuid("topic_data.topic_id")?;
    } else {
        r.string(flexible, "topic_data.name")?;
    }
    if r.array_len(flexible, 1, "partition_data")? == 0 {
        return Ok(false);
    }
    r.i32("partition_data.index")?;
    let records = if flexible {
        r.compact_len("partition_data.records")?
    } else {
        usize::try_from(r.i32("partition_data.records")?).ok()
    };
    if records.is_none_or(|n| n < BATCH_PRODUCER_ID_AT + 8) {
        return Ok(false);
    }
    let batch = r.take(BATCH_PRODUCER_ID_AT + 8, "records")?;
    let magic = batch[BATCH_MAGIC_AT];
    let attributes = i16::from_be_bytes([batch[BATCH_ATTRIBUTES_AT], batch[BATCH_ATTRIBUTES_AT + 1]]);
    // an idempotent producer's batch too: the native path checks its sequence in the partition's
    // producer table
    Ok(magic == 2 && attributes & TRANSACTIONAL_ATTRIBUTE == 0)
}

/// The bytes the front's grown buffers hold across its connections, within `capacity` (TigerBeetle's
/// rule: every resource has a named bound): a large frame that does not fit is not read by the front.
#[derive(Debug, Default)]
pub struct FrontMemory {
    capacity: usize,
    held: usize,
    peak: usize,
}

impl FrontMemory {
    pub fn new(capacity: usize) -> FrontMemory {
        FrontMemory { capacity, held: 0, peak: 0 }
    }

    /// Take `bytes` if they fit under the bound.
    pub fn try_reserve(&mut self, bytes: usize) -> bool {
        if self.held + bytes > self.capacity {
            return false;
        }
        self.held += bytes;
        self.peak = self.peak.max(self.held);
        true
    }

    pub fn release(&mut self, bytes: usize) {
        debug_assert!(bytes <= self.held);
        self.held = self.held.saturating_sub(bytes);
    }

    pub fn held(&self) -> usize {
        self.held
    }

    /// The most ever held at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

/// Whether `frame` (without its size prefix) is a Fetch request, which the front offers to the native
/// Fetch path to park a caught-up long poll (the path decides the rest).
pub fn is_fetch(frame: &[u8]) -> bool {
    frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == FETCH_KEY
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{put_len, put_nullable_string, put_string};
    use proptest::prelude::*;

    fn fill(buf: &mut InBuf, bytes: &[u8]) {
        let spare = buf.spare();
        spare[..bytes.len()].copy_from_slice(bytes);
        buf.filled(bytes.len());
    }

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn cuts_pipelined_frames_in_order_and_keeps_a_partial_one() {
        let mut buf = InBuf::new(64);
        let mut bytes = framed(b"\x00\x00one");
        bytes.extend(framed(b"\x00\x03two!"));
        bytes.extend(&framed(b"\x00\x00three")[..5]);
        fill(&mut buf, &bytes);
        assert_eq!(buf.next_frame(), Next::Frame(5));
        assert_eq!(buf.frame(5), b"\x00\x00one");
        assert!(offered_natively(buf.frame(5)));
        buf.consume(5);
        assert_eq!(buf.next_frame(), Next::Frame(6));
        assert!(!offered_natively(buf.frame(6)));
        buf.consume(6);
        assert_eq!(buf.next_frame(), Next::Incomplete);
        assert_eq!(buf.rest(), &framed(b"\x00\x00three")[..5]);
        fill(&mut buf, &framed(b"\x00\x00three")[5..]);
        assert_eq!(buf.next_frame(), Next::Frame(7));
        assert_eq!(buf.frame(7), b"\x00\x00three");
        buf.consume(7);
        assert!(buf.is_empty());
    }

    #[test]
    fn an_idle_buffer_keeps_no_storage_and_a_lent_one_goes_back_once_all_is_served() {
        let mut buf = InBuf::new(64);
        assert!(!buf.is_allocated());
        let mut spare = vec![0u8; 64];
        buf.lend(&mut spare);
        assert!(buf.is_allocated() && spare.is_empty());
        let frame = framed(b"abcdef");
        fill(&mut buf, &frame);
        fill(&mut buf, &frame[..5]); // a whole frame and the start of the next
        assert_eq!(buf.next_frame(), Next::Frame(6));
        buf.consume(6);
        buf.give_back(&mut spare);
        assert!(buf.is_allocated() && spare.is_empty(), "a partial frame keeps the buffer");
        fill(&mut buf, &frame[5..]);
        assert_eq!(buf.next_frame(), Next::Frame(6));
        assert_eq!(buf.frame(6), b"abcdef");
        buf.consume(6);
        buf.give_back(&mut spare);
        assert!(!buf.is_allocated() && spare.len() == 64);
        // another connection's read lands in the same memory; one that holds bytes keeps its own
        let mut other = InBuf::new(64);
        fill(&mut other, &frame[..3]);
        other.lend(&mut spare);
        assert_eq!(spare.len(), 64);
        // a buffer freed while the spare is taken
        let mut third = InBuf::new(64);
        third.lend(&mut spare);
        fill(&mut third, &frame);
        assert_eq!(third.next_frame(), Next::Frame(6));
        third.consume(6);
        let mut taken = Vec::new();
        third.give_back(&mut taken);
        assert!(!third.is_allocated() && taken.len() == 64);
    }

    #[test]
    fn a_partial_frame_is_moved_to_the_front_when_the_buffer_end_is_reached() {
        let mut buf = InBuf::new(16);
        fill(&mut buf, &framed(b"abcdefgh"));
        fill(&mut buf, &framed(b"xy")[..3]);
        buf.consume(8);
        assert_eq!(buf.len(), 3);
        assert_eq!(buf.spare().len(), 13);
        fill(&mut buf, &framed(b"xy")[3..]);
        assert_eq!(buf.next_frame(), Next::Frame(2));
        assert_eq!(buf.frame(2), b"xy");
    }

    #[test]
    fn an_oversized_or_negative_size_prefix_is_not_cut() {
        let mut buf = InBuf::new(16);
        fill(&mut buf, &13i32.to_be_bytes());
        assert_eq!(buf.next_frame(), Next::TooLarge);
        let mut buf = InBuf::new(16);
        fill(&mut buf, &(-1i32).to_be_bytes());
        assert_eq!(buf.next_frame(), Next::TooLarge);
        let mut buf = InBuf::new(16);
        fill(&mut buf, &framed(&[7; 12]));
        assert_eq!(buf.next_frame(), Next::Frame(12));
        assert_eq!(buf.spare().len(), 0);
    }

    #[test]
    fn short_input_is_incomplete_and_never_panics() {
        for n in 0..4 {
            let mut buf = InBuf::new(8);
            fill(&mut buf, &[0xff; 4][..n]);
            assert_eq!(buf.next_frame(), Next::Incomplete);
        }
        assert!(!offered_natively(b""));
        assert!(!is_fetch(b"\x00"));
        assert!(is_fetch(b"\x00\x01\x00\x0c"));
        assert!(!offered_natively(b"\x00"));
    }

    /// A Produce frame (without its size prefix) whose one partition holds `records`.
    fn produce(version: i16, transactional_id: Option<&str>, acks: i16, records: &[u8]) -> Vec<u8> {
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut f = Vec::new();
        f.extend_from_slice(&PRODUCE_KEY.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        put_nullable_string(&mut f, false, Some("client"));
        if flexible {
            f.push(0);
        }
        put_nullable_string(&mut f, flexible, transactional_id);
        f.extend_from_slice(&acks.to_be_bytes());
        f.extend_from_slice(&30000i32.to_be_bytes());
        put_len(&mut f, flexible, 1);
        if version >= FIRST_TOPIC_ID_VERSION {
            f.extend_from_slice(&[5; 16]);
        } else {
            put_string(&mut f, flexible, "topic");
        }
        put_len(&mut f, flexible, 1);
        f.extend_from_slice(&3i32.to_be_bytes());
        put_len(&mut f, flexible, records.len());
        f.extend_from_slice(records);
        if flexible {
            f.extend_from_slice(&[0, 0, 0]);
        }
        f
    }

    /// A record batch's bytes: its header (magic 2, `attributes`, `producer_id`), then `body` bytes.
    fn batch(attributes: i16, producer_id: i64, body: usize) -> Vec<u8> {
        let mut b = vec![0u8; 61];
        b[BATCH_MAGIC_AT] = 2;
        b[BATCH_ATTRIBUTES_AT..BATCH_ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
        b[BATCH_PRODUCER_ID_AT..BATCH_PRODUCER_ID_AT + 8].copy_from_slice(&producer_id.to_be_bytes());
        b.resize(61 + body, 0xab);
        b
    }

    #[test]
    fn a_large_frame_is_read_into_a_buffer_of_its_own_size_and_the_small_buffer_comes_back() {
        let mut buf = InBuf::with_large_frames(64, 1000);
        let large = framed(&[5u8; 300]);
        let after = framed(b"\x00\x00next");
        fill(&mut buf, &framed(b"\x00\x00small"));
        fill(&mut buf, &large[..40]);
        assert_eq!(buf.next_frame(), Next::Frame(7));
        buf.consume(7);
        assert_eq!(buf.next_frame(), Next::Large(300));
        assert_eq!(buf.grown_bytes(), 0);
        assert_eq!(buf.grow(300), 304);
        assert!(buf.is_grown());
        assert_eq!(buf.grown_bytes(), 304);
        assert_eq!(buf.rest(), &large[..40]);
        // the rest of the frame goes straight into its buffer, and nothing after it is read meanwhile
        assert_eq!(buf.spare().len(), 264);
        fill(&mut buf, &large[40..200]);
        assert_eq!(buf.next_frame(), Next::Incomplete);
        assert_eq!(buf.shrink(), 0, "the frame is still held");
        fill(&mut buf, &large[200..]);
        assert_eq!(buf.spare().len(), 0);
        assert_eq!(buf.next_frame(), Next::Frame(300));
        assert_eq!(buf.frame(300), &large[4..]);
        buf.consume(300);
        assert_eq!(buf.shrink(), 304);
        assert!(!buf.is_grown());
        assert_eq!(buf.grown_bytes(), 0);
        assert_eq!(buf.spare().len(), 64);
        fill(&mut buf, &after);
        assert_eq!(buf.next_frame(), Next::Frame(6));
        assert_eq!(buf.frame(6), b"\x00\x00next");
        assert_eq!(buf.shrink(), 0, "not grown");
    }

    #[test]
    fn a_frame_at_the_bound_is_large_and_one_over_it_is_too_large() {
        let buf_with = |size: i32| {
            let mut buf = InBuf::with_large_frames(64, 1000);
            fill(&mut buf, &size.to_be_bytes());
            buf.next_frame()
        };
        assert_eq!(buf_with(60), Next::Incomplete, "fits the small buffer");
        assert_eq!(buf_with(61), Next::Large(61));
        assert_eq!(buf_with(1000), Next::Large(1000));
        assert_eq!(buf_with(1001), Next::TooLarge);
        assert_eq!(buf_with(-1), Next::TooLarge);
        assert_eq!(InBuf::with_large_frames(64, 1000).max_frame(), 1000);
        // a buffer without large frames never grows: what is over it is too large, as before
        let mut small = InBuf::new(64);
        fill(&mut small, &61i32.to_be_bytes());
        assert_eq!(small.next_frame(), Next::TooLarge);
        assert_eq!(small.max_frame(), 60);
    }

    #[test]
    fn a_large_frame_cut_short_leaves_whole_with_rest() {
        let mut buf = InBuf::with_large_frames(16, 100);
        let large = framed(&[9u8; 50]);
        fill(&mut buf, &large[..10]);
        assert_eq!(buf.next_frame(), Next::Large(50));
        buf.grow(50);
        fill(&mut buf, &large[10..33]);
        assert_eq!(buf.rest(), &large[..33]);
        assert_eq!(buf.shrink(), 0);
        assert_eq!(buf.grown_bytes(), 54);
    }

    #[test]
    fn front_memory_grants_reservations_up_to_its_bound() {
        let mut memory = FrontMemory::new(1000);
        assert!(memory.try_reserve(600));
        assert!(!memory.try_reserve(401));
        assert!(memory.try_reserve(400));
        assert_eq!(memory.held(), 1000);
        assert!(!memory.try_reserve(1));
        memory.release(600);
        assert_eq!(memory.held(), 400);
        assert!(memory.try_reserve(600));
        memory.release(1000);
        assert_eq!((memory.held(), memory.peak()), (0, 1000));
        assert!(!FrontMemory::new(0).try_reserve(1));
    }

    #[test]
    fn a_plain_or_idempotent_produce_is_grown_for_on_every_served_version_and_acks() {
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            for acks in [-1, 0, 1] {
                for producer_id in [-1, 4000] {
                    let frame = produce(version, None, acks, &batch(0, producer_id, 1000));
                    assert_eq!(peek_large_produce(&frame[..120], MAX_NATIVE_VERSION), LargePeek::Grow, "v{version}");
                }
            }
        }
    }

    #[test]
    fn what_the_front_does_not_serve_is_handed_back_from_its_first_bytes() {
        let plain = batch(0, -1, 1000);
        let cases = [
            ("transactional batch", produce(9, None, 1, &batch(TRANSACTIONAL_ATTRIBUTE, -1, 1000))),
            ("transactional id", produce(9, Some("tx"), 1, &plain)),
            ("acks=2", produce(9, None, 2, &plain)),
            ("version 2", produce(2, None, 1, &plain)),
            ("over the broker's version", produce(12, None, 1, &plain)),
            ("null records", produce(9, None, 1, b"")),
        ];
        for (what, frame) in cases {
            let limit = if what == "over the broker's version" { 11 } else { MAX_NATIVE_VERSION };
            let frame = if what == "null records" {
                let mut f = frame;
                let at = f.len() - 4; // the records' compact length (0: null), then tagged fields
                f[at] = 0;
                f
            } else {
                frame
            };
            assert_eq!(peek_large_produce(&frame, limit), LargePeek::HandBack, "{what}");
        }
        let mut fetch = produce(9, None, 1, &plain);
        fetch[1] = 1;
        assert_eq!(peek_large_produce(&fetch, MAX_NATIVE_VERSION), LargePeek::HandBack);
        let mut old_magic = batch(0, -1, 10);
        old_magic[BATCH_MAGIC_AT] = 1;
        assert_eq!(peek_large_produce(&produce(3, None, 1, &old_magic), MAX_NATIVE_VERSION), LargePeek::HandBack);
    }

    #[test]
    fn every_prefix_short_of_the_first_producer_id_is_unknown() {
        for version in [3, 9, 13] {
            let frame = produce(version, None, 1, &batch(0, -1, 100));
            let records_at = frame.len() - 161 - if version >= 9 { 3 } else { 0 };
            let needed = records_at + BATCH_PRODUCER_ID_AT + 8;
            for cut in 0..needed {
                assert_eq!(peek_large_produce(&frame[..cut], MAX_NATIVE_VERSION), LargePeek::Unknown, "v{version} {cut}");
            }
            assert_eq!(peek_large_produce(&frame[..needed], MAX_NATIVE_VERSION), LargePeek::Grow);
        }
    }

    proptest! {
        #[test]
        fn peeking_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = peek_large_produce(&bytes, MAX_NATIVE_VERSION);
        }
    }
}
