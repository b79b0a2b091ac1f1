//! The Kafka wire primitives the native request paths share: a bounds-checked reader over a
//! request frame (every read names the field it reads, so a damaged frame becomes a
//! [`FrameError`], never a panic) and the writers of the response encoders.

use std::fmt;

/// Why a frame was not decoded natively (the Python path then takes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The frame ends inside `field`.
    Truncated(&'static str),
    /// `field` holds a value no such request may hold (a negative length, bad UTF-8, ...).
    Invalid(&'static str),
    /// Not a request (API key, version) the native path serves.
    NotServed,
    /// Bytes are left after the request body.
    TrailingBytes(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Truncated(field) => write!(f, "the frame ends inside {field}"),
            FrameError::Invalid(field) => write!(f, "invalid {field}"),
            FrameError::NotServed => write!(f, "not a request the native path serves"),
            FrameError::TrailingBytes(n) => write!(f, "{n} bytes after the request body"),
        }
    }
}

impl std::error::Error for FrameError {}

/// A cursor over a frame's bytes; each read borrows from the frame.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], FrameError> {
        let end = self.pos.checked_add(n).ok_or(FrameError::Invalid(field))?;
        let bytes = self.buf.get(self.pos..end).ok_or(FrameError::Truncated(field))?;
        self.pos = end;
        Ok(bytes)
    }
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(crate) fn i8(&mut self, field: &'static str) -> Result<i8, FrameError> {
        Ok(self.take(1, field)?[0] as i8)
    }
    pub(crate) fn i16(&mut self, field: &'static str) -> Result<i16, FrameError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, FrameError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, FrameError> {
        let b = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub(crate) fn uuid(&mut self, field: &'static str) -> Result<[u8; 16], FrameError> {
        let b = self.take(16, field)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(a)
    }
    pub(crate) fn uvarint(&mut self, field: &'static str) -> Result<u32, FrameError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.take(1, field)?[0];
            if i == 4 && b > 0x0f {
                return Err(FrameError::Invalid(field));
            }
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(FrameError::Invalid(field))
    }
    /// A compact length: None for null (0), else the length (n - 1).
    pub(crate) fn compact_len(&mut self, field: &'static str) -> Result<Option<usize>, FrameError> {
        let n = self.uvarint(field)?;
        Ok(if n == 0 { None } else { Some((n - 1) as usize) })
    }
    /// A nullable string (int16 length, or compact when `flexible`).
    pub(crate) fn nullable_string(&mut self, flexible: bool, field: &'static str) -> Result<Option<&'a str>, FrameError> {
        let len = if flexible {
            self.compact_len(field)?
        } else {
            match self.i16(field)? {
                -1 => None,
                n if n < 0 => return Err(FrameError::Invalid(field)),
                n => Some(n as usize),
            }
        };
        match len {
            None => Ok(None),
            Some(n) => Ok(Some(std::str::from_utf8(self.take(n, field)?).map_err(|_| FrameError::Invalid(field))?)),
        }
    }
    pub(crate) fn string(&mut self, flexible: bool, field: &'static str) -> Result<&'a str, FrameError> {
        self.nullable_string(flexible, field)?.ok_or(FrameError::Invalid(field))
    }
    /// Nullable bytes (int32 length, or compact when `flexible`).
    pub(crate) fn nullable_bytes(&mut self, flexible: bool, field: &'static str) -> Result<Option<&'a [u8]>, FrameError> {
        let len = if flexible {
            self.compact_len(field)?
        } else {
            match self.i32(field)? {
                -1 => None,
                n if n < 0 => return Err(FrameError::Invalid(field)),
                n => Some(n as usize),
            }
        };
        match len {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n, field)?)),
        }
    }
    /// An array's entry count (a null array is invalid); each entry takes at least `min_entry`
    /// bytes, which bounds what a forged count may make the decoder allocate.
    pub(crate) fn array_len(&mut self, flexible: bool, min_entry: usize, field: &'static str) -> Result<usize, FrameError> {
        let n = if flexible {
            self.compact_len(field)?.ok_or(FrameError::Invalid(field))?
        } else {
            let n = self.i32(field)?;
            if n < 0 {
                return Err(FrameError::Invalid(field));
            }
            n as usize
        };
        if n.saturating_mul(min_entry) > self.remaining() {
            return Err(FrameError::Truncated(field));
        }
        Ok(n)
    }
    /// Skip a tagged-fields section.
    pub(crate) fn skip_tagged_fields(&mut self, field: &'static str) -> Result<(), FrameError> {
        let count = self.uvarint(field)?;
        for _ in 0..count {
            self.uvarint(field)?;
            let size = self.uvarint(field)? as usize;
            self.take(size, field)?;
        }
        Ok(())
    }
}

pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An array's or a string's length: int32, or compact (n + 1) when `flexible`.
pub(crate) fn put_len(out: &mut Vec<u8>, flexible: bool, n: usize) {
    if flexible {
        put_uvarint(out, n as u32 + 1);
    } else {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    }
}

pub(crate) fn put_string(out: &mut Vec<u8>, flexible: bool, s: &str) {
    if flexible {
        put_uvarint(out, s.len() as u32 + 1);
    } else {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

pub(crate) fn put_nullable_string(out: &mut Vec<u8>, flexible: bool, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, flexible, s),
        None if flexible => out.push(0),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}
