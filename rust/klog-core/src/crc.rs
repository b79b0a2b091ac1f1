//! CRC-32C (Castagnoli), as Kafka uses it for record batch v2.
//!
//! The `crc32c` crate picks SSE4.2 / ARMv8 CRC instructions at run time and falls back to a
//! portable table implementation elsewhere.

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continue a CRC-32C over more data.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_matches_rfc3720() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn append_equals_whole() {
        let data = b"hello, kafka record batch";
        assert_eq!(crc32c_append(crc32c(&data[..7]), &data[7..]), crc32c(data));
    }
}
