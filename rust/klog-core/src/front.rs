//! Sans-IO pieces of the broker's native front (`klog-py`'s `front`): a connection's read buffer,
//! bounded, cut into request frames. The front's epoll thread reads into [`InBuf::spare`], then takes
//! frames with [`InBuf::next_frame`] until none is complete; what it cannot serve leaves with
//! [`InBuf::rest`] (the bytes from the first frame it did not serve) for the Python front.

/// What the buffer holds at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Not a whole frame yet (or nothing).
    Incomplete,
    /// A whole frame: its length without the 4-byte size prefix.
    Frame(usize),
    /// A size prefix over the front's bound (or negative): the Python front judges it.
    TooLarge,
}

/// A connection's received bytes not yet served, at most `capacity` of them.
pub struct InBuf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

/// The Produce API key.
pub const PRODUCE_KEY: i16 = 0;

impl InBuf {
    /// A buffer holding at most `capacity` bytes (frames up to `capacity - 4` bytes can be cut).
    pub fn new(capacity: usize) -> InBuf {
        InBuf { data: vec![0; capacity.max(8)], start: 0, end: 0 }
    }

    /// The largest frame (without its size prefix) this buffer can hold whole.
    pub fn max_frame(&self) -> usize {
        self.data.len() - 4
    }

    /// Where the next read goes (empty when the buffer is full: the held frame is then too large,
    /// which `next_frame` says first). A partial frame is moved to the start once less than a quarter
    /// of the buffer is left after it.
    pub fn spare(&mut self) -> &mut [u8] {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(!offered_natively(b"\x00"));
    }
}
