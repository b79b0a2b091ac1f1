//! Kafka's murmur2 hash, used by the Java producer's default partitioner for keyed records.

const SEED: u32 = 0x9747_b28c;
const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// murmur2 of `data` exactly as Java's `Utils.murmur2` computes it (a signed int).
pub fn murmur2(data: &[u8]) -> i32 {
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() == 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive(murmur2(key)) % num_partitions`.
pub fn partition_for_key(key: &[u8], num_partitions: u32) -> u32 {
    ((murmur2(key) as u32) & 0x7fff_ffff) % num_partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafka_utils_test_vectors() {
        // From Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn partition_is_in_range_and_uses_the_positive_hash() {
        for n in 1..50u32 {
            assert!(partition_for_key(b"foobar", n) < n);
        }
        assert_eq!(
            partition_for_key(b"21", 1 << 31),
            (-973932308i32 as u32) & 0x7fff_ffff
        );
    }
}
