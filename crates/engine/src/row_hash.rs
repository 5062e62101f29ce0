//! Hash sets and maps keyed by row ids (segment rows, packed heap TIDs) for the per-query
//! bookkeeping of scans: the standard library's default hasher (SipHash, keyed against
//! collision attacks) costs about 20 ns a key, more than the rest of the work a small query does
//! per row; these keys come from the index itself, not from users, so a multiplicative hash
//! with a final mix is enough.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for integer keys: multiply by an odd 64-bit constant (Fibonacci hashing) and fold
/// the high half into the low one, so that keys differing only in high bits (heap TIDs of one
/// line pointer in different blocks: the block is in the high bits) still differ in the low
/// bits a hash table indexes by.
#[derive(Debug, Default, Clone, Copy)]
pub struct RowHasher(u64);

impl Hasher for RowHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 32)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
        }
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.0 = self.0.rotate_left(29) ^ value;
    }

    #[inline]
    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
}

/// [`RowHasher`] as a `BuildHasher`.
pub type RowHash = BuildHasherDefault<RowHasher>;
/// A set of row ids hashed with [`RowHasher`].
pub type RowSet<K = u64> = HashSet<K, RowHash>;
/// A map from row ids hashed with [`RowHasher`].
pub type RowMap<K, V> = HashMap<K, V, RowHash>;

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn keys_differing_in_high_bits_spread_over_the_low_bits() {
        // Packed heap TIDs `block << 16 | offset` of line pointer 1 in 1,024 blocks: a table of
        // 128 buckets indexes by the low 7 bits of the hash, which must take most of their values.
        let build = RowHash::default();
        let buckets: RowSet<u64> = (0..1024u64).map(|block| build.hash_one((block << 16) | 1) & 127).collect();
        assert!(buckets.len() >= 100, "only {} of 128 buckets used", buckets.len());
    }

    #[test]
    fn sets_and_maps_behave_as_the_standard_ones() {
        let mut set: RowSet = RowSet::default();
        let mut map: RowMap<u32, f32> = RowMap::default();
        for i in 0..10_000u64 {
            assert!(set.insert(i.wrapping_mul(0x1_0001)));
            map.insert(i as u32, i as f32);
        }
        assert!(!set.insert(5 * 0x1_0001));
        assert_eq!(set.len(), 10_000);
        assert_eq!(map.get(&77), Some(&77.0));
    }
}
