//! The cleaner's key -> latest offset map (Kafka's `SkimpyOffsetMap`): a fixed-size open-addressing
//! table of (128-bit key digest, offset) slots, 24 bytes each, sized from
//! `log.cleaner.dedupe.buffer.size`. Keys themselves are never stored, so memory is bounded by the
//! configured buffer whatever the key sizes; two keys share a slot only if their xxh3-128 digests
//! collide (probability ~2^-128 per pair). The table starts small and doubles as keys arrive,
//! up to the configured size: memory follows the distinct keys of the dirty section.

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
    /// Keys the current table takes before it grows (or, at its largest, is full).
    max_entries: usize,
    /// Slots of the largest table allowed (the memory bound).
    max_slots: usize,
    load_factor: f64,
    latest_offset: i64,
}

/// Slots of a fresh map (grown by doubling from here).
const INITIAL_SLOTS: usize = 1 << 12;

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
        let max_slots = if want.is_power_of_two() { want } else { want.next_power_of_two() / 2 };
        let slots = max_slots.min(INITIAL_SLOTS);
        OffsetMap {
            digests: vec![EMPTY; slots],
            offsets: vec![0; slots],
            mask: slots - 1,
            entries: 0,
            max_entries: Self::capacity(slots, load_factor),
            max_slots,
            load_factor,
            latest_offset: -1,
        }
    }

    fn capacity(slots: usize, load_factor: f64) -> usize {
        ((slots as f64 * load_factor) as usize).clamp(1, slots - 1)
    }

    /// Double the table (rehashing every key), if the memory bound allows.
    fn grow(&mut self) -> bool {
        let slots = self.slots() * 2;
        if slots > self.max_slots {
            return false;
        }
        let old_digests = std::mem::replace(&mut self.digests, vec![EMPTY; slots]);
        let old_offsets = std::mem::replace(&mut self.offsets, vec![0; slots]);
        self.mask = slots - 1;
        self.max_entries = Self::capacity(slots, self.load_factor);
        for (d, o) in old_digests.into_iter().zip(old_offsets) {
            if d != EMPTY {
                let i = self.find(d);
                self.digests[i] = d;
                self.offsets[i] = o;
            }
        }
        true
    }

    pub fn slots(&self) -> usize {
        self.digests.len()
    }
    /// Slots of the largest table this map may grow to.
    pub fn max_slots(&self) -> usize {
        self.max_slots
    }
    pub fn len(&self) -> usize {
        self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
    /// Keys the map takes before it is full (at its largest table).
    pub fn max_entries(&self) -> usize {
        Self::capacity(self.max_slots, self.load_factor)
    }
    /// Bytes held by the table now.
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
        let mut i = self.find(digest);
        if self.digests[i] == EMPTY {
            if self.entries >= self.max_entries {
                if !self.grow() {
                    return false;
                }
                i = self.find(digest);
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
        assert_eq!((m.max_slots(), m.max_entries()), (16, 8));
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
    fn the_table_grows_with_the_keys_and_never_beyond_the_configured_bytes() {
        for bytes in [48, 1000, 24 * 1024, 1 << 20, (1 << 20) + 7] {
            let mut m = OffsetMap::new(bytes, 0.9);
            assert!(m.max_slots() * SLOT_BYTES <= bytes.max(2 * SLOT_BYTES), "{bytes}");
            assert!(m.max_slots() * SLOT_BYTES * 2 > bytes, "{bytes}: may use at least half");
            let mut n = 0i64;
            while m.put(key_digest(&n.to_be_bytes()), n) {
                n += 1;
            }
            assert_eq!(n as usize, m.max_entries(), "{bytes}: full exactly at the bound");
            assert!(m.memory_bytes() <= bytes.max(2 * SLOT_BYTES));
            for k in (0..n).step_by(97) {
                assert_eq!(m.get(key_digest(&k.to_be_bytes())), k, "kept across growth");
            }
        }
        let small = OffsetMap::new(1 << 30, 0.9);
        assert!(small.memory_bytes() <= INITIAL_SLOTS * SLOT_BYTES, "starts small");
    }
}
