//! The cleaner's key -> latest offset map (Kafka's `SkimpyOffsetMap`): a fixed-size open-addressing
//! table of (128-bit key digest, offset) slots, 24 bytes each, sized from
//! `log.cleaner.dedupe.buffer.size`. Keys themselves are never stored, so memory is bounded by the
//! configured buffer whatever the key sizes; two keys share a slot only if their xxh3-128 digests
//! collide (probability ~2^-128 per pair).

use twox_hash::XxHash3_128;

/// Bytes per slot: a 16-byte digest and an 8-byte offset (as Kafka's map with MD5).
pub const SLOT_BYTES: usize = 24;
/// Digest 0 marks an empty slot; a key hashing to 0 is stored as 1.
const EMPTY: u128 = 0;

pub struct OffsetMap {
    digests: Vec<u128>,
    offsets: Vec<i64>,
    mask: usize,
    entries: usize,
    max_entries: usize,
    latest_offset: i64,
}

pub fn key_digest(key: &[u8]) -> u128 {
    match XxHash3_128::oneshot(key) {
        EMPTY => 1,
        d => d,
    }
}

impl OffsetMap {
    /// A map using at most `memory_bytes` (rounded down to a power-of-two slot count), filled to at
    /// most `load_factor` of its slots (`log.cleaner.io.buffer.load.factor`). At least 2 slots.
    pub fn new(memory_bytes: usize, load_factor: f64) -> Self {
        let want = (memory_bytes / SLOT_BYTES).max(2);
        let slots = if want.is_power_of_two() { want } else { want.next_power_of_two() / 2 };
        let max_entries = ((slots as f64 * load_factor) as usize).clamp(1, slots - 1);
        OffsetMap {
            digests: vec![EMPTY; slots],
            offsets: vec![0; slots], // zero pages stay unmapped until touched
            mask: slots - 1,
            entries: 0,
            max_entries,
            latest_offset: -1,
        }
    }

    pub fn slots(&self) -> usize {
        self.digests.len()
    }
    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// Keys the map takes before it is full.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// Bytes held by the table.
    pub fn memory_bytes(&self) -> usize {
        self.slots() * SLOT_BYTES
    }
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots() as f64
    }
    /// The last offset added to the map: records after it were not indexed and are kept.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    fn find(&self, digest: u128) -> usize {
        let mut i = (digest as usize ^ (digest >> 64) as usize) & self.mask;
        loop {
            let d = self.digests[i];
            if d == digest || d == EMPTY {
                return i;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Record `offset` as the latest for the key with `digest`. False (nothing changed) when the
    /// key is new and the map is full.
    pub fn put(&mut self, digest: u128, offset: i64) -> bool {
        let i = self.find(digest);
        if self.digests[i] == EMPTY {
            if self.entries >= self.max_entries {
                return false;
            }
            self.digests[i] = digest;
            self.entries += 1;
        }
        self.offsets[i] = offset;
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The latest offset recorded for the key, -1 if none.
    pub fn get(&self, digest: u128) -> i64 {
        let i = self.find(digest);
        if self.digests[i] == EMPTY {
            -1
        } else {
            self.offsets[i]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_offsets_replace_earlier_ones_and_a_full_map_refuses_new_keys() {
        let mut m = OffsetMap::new(SLOT_BYTES * 16, 0.5);
        assert_eq!((m.slots(), m.max_entries()), (16, 8));
        for i in 0..8 {
            assert!(m.put(key_digest(format!("k{i}").as_bytes()), i));
        }
        assert!(!m.put(key_digest(b"new"), 100), "full: a new key is refused");
        assert!(m.put(key_digest(b"k3"), 50), "an existing key is still updated");
        assert_eq!(m.get(key_digest(b"k3")), 50);
        assert_eq!(m.get(key_digest(b"k4")), 4);
        assert_eq!(m.get(key_digest(b"absent")), -1);
        assert_eq!((m.len(), m.latest_offset()), (8, 50));
    }

    #[test]
    fn memory_never_exceeds_the_configured_bytes() {
        for bytes in [48, 1000, 24 * 1024, 1 << 20, (1 << 20) + 7] {
            let m = OffsetMap::new(bytes, 0.9);
            assert!(m.memory_bytes() <= bytes.max(2 * SLOT_BYTES), "{bytes}: {}", m.memory_bytes());
            assert!(m.memory_bytes() * 2 > bytes, "{bytes}: uses at least half: {}", m.memory_bytes());
        }
    }
}
