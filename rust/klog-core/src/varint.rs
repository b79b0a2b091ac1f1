//! Zig-zag varints as record batch v2 uses them inside records (protobuf style, signed).

use crate::error::{CodecError, CodecResult};

#[inline]
pub fn zigzag_encode_i64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn zigzag_decode_i64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Append a zig-zag varint (int32 or int64 range) to `out`.
#[inline]
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut u = zigzag_encode_i64(v);
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

#[inline]
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_varlong(out, v as i64)
}

/// Number of bytes `write_varlong(v)` produces.
#[inline]
pub fn varlong_size(v: i64) -> usize {
    let u = zigzag_encode_i64(v);
    let bits = 64 - (u | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// The unsigned value and length of a varint of at most three bytes at `buf[p..]` (21 bits: every
/// record length, offset delta and small timestamp delta), or `None` for the general path.
#[inline(always)]
pub(crate) fn short_varint(buf: &[u8], p: usize) -> Option<(u64, usize)> {
    let b0 = *buf.get(p)?;
    if b0 < 0x80 {
        return Some((b0 as u64, 1));
    }
    let b1 = *buf.get(p + 1)?;
    let low = (b0 & 0x7f) as u64;
    if b1 < 0x80 {
        return Some((low | (b1 as u64) << 7, 2));
    }
    let b2 = *buf.get(p + 2)?;
    if b2 < 0x80 {
        return Some((low | ((b1 & 0x7f) as u64) << 7 | (b2 as u64) << 14, 3));
    }
    None
}

/// Read a zig-zag varlong from `buf[*pos..]`, advancing `*pos`. `base` is added to positions in
/// errors so that they refer to the caller's whole input.
#[inline(always)]
pub fn read_varlong(
    buf: &[u8],
    pos: &mut usize,
    field: &'static str,
    base: usize,
) -> CodecResult<i64> {
    // Fast path: inside records most varints (deltas, lengths) take one to three bytes.
    if let Some((u, n)) = short_varint(buf, *pos) {
        *pos += n;
        return Ok(zigzag_decode_i64(u));
    }
    read_varlong_slow(buf, pos, field, base)
}

#[inline(never)]
fn read_varlong_slow(
    buf: &[u8],
    pos: &mut usize,
    field: &'static str,
    base: usize,
) -> CodecResult<i64> {
    let mut result: u64 = 0;
    let mut shift = 0u32;
    let start = *pos;
    loop {
        if *pos >= buf.len() {
            return Err(CodecError::Truncated {
                field,
                offset: base + start,
                needed: *pos - start + 1,
                available: buf.len() - start,
            });
        }
        let b = buf[*pos];
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err(CodecError::invalid(
                field,
                base + start,
                "varlong longer than 10 bytes",
            ));
        }
        result |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Ok(zigzag_decode_i64(result));
        }
        shift += 7;
        if shift > 63 {
            return Err(CodecError::invalid(
                field,
                base + start,
                "varlong longer than 10 bytes",
            ));
        }
    }
}

/// Read a zig-zag varint that must fit in an int32.
#[inline(always)]
pub fn read_varint(
    buf: &[u8],
    pos: &mut usize,
    field: &'static str,
    base: usize,
) -> CodecResult<i32> {
    // Three bytes or fewer always fit an int32: no range check on the fast path.
    if let Some((u, n)) = short_varint(buf, *pos) {
        *pos += n;
        return Ok(zigzag_decode_i64(u) as i32);
    }
    let start = *pos;
    let v = read_varlong_slow(buf, pos, field, base)?;
    i32::try_from(v).map_err(|_| {
        CodecError::invalid(
            field,
            base + start,
            format!("varint {v} out of int32 range"),
        )
    })
}

/// Number of bytes `write_varint(v)` produces.
#[inline]
pub fn varint_size(v: i32) -> usize {
    varlong_size(v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_and_slow_paths_agree_on_every_length() {
        for shift in 0..64 {
            for v in [1i64 << shift, (1i64 << shift).wrapping_neg(), (1i64 << shift).wrapping_sub(1)] {
                let mut out = Vec::new();
                write_varlong(&mut out, v);
                let mut pos = 0;
                assert_eq!(read_varlong(&out, &mut pos, "t", 0).unwrap(), v);
                assert_eq!(pos, out.len());
                let mut pos = 0;
                match i32::try_from(v) {
                    Ok(v32) => assert_eq!(read_varint(&out, &mut pos, "t", 0).unwrap(), v32),
                    Err(_) => assert!(read_varint(&out, &mut pos, "t", 0).is_err(), "{v} is not an int32"),
                }
                // A truncated copy must fail, never read past the end.
                let mut pos = 0;
                assert!(read_varlong(&out[..out.len() - 1], &mut pos, "t", 0).is_err());
                let mut pos = 0;
                assert!(read_varint(&out[..out.len() - 1], &mut pos, "t", 0).is_err());
            }
        }
    }

    #[test]
    fn roundtrip_edge_values() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_size(v), "size of {v}");
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos, "t", 0).unwrap(), v);
            assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn truncated_varint_names_field_and_offset() {
        let mut pos = 0;
        let err = read_varlong(&[0x80, 0x80], &mut pos, "record.length", 100).unwrap_err();
        assert_eq!(err.offset(), 100);
        assert!(err.to_string().contains("record.length"));
    }
}
