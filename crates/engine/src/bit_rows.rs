//! Packed bit rows: how an index stores `bit(n)` rows, 32 bits per word, up to pgvector's 64,000
//! bits.
//!
//! A packed row of `n` bits is `1 + ⌈n / 32⌉` words, kept in `f32` slots as raw bit patterns (so
//! it fits every fixed-width row store; no arithmetic ever touches them as floats):
//!
//! ```text
//! word 0        n, the bit length (u32)
//! words 1 ..    the bits, bit 0 of the string the most significant bit of word 1; the padding
//!               bits of the last word zero
//! ```
//!
//! Hamming and Jaccard distances are popcounts over the words, equal to pgvector's
//! `hamming_distance` / `jaccard_distance` of the strings ([`crate::bit_value`], tested so).

use crate::bit_value::Bits;
use crate::metric::Metric;

/// The most bits a packed row holds (pgvector's limit for `bit` indexes).
pub const MAX_BITS: u32 = 64_000;

/// Words of a packed row of `bits` bits.
pub fn row_words(bits: u32) -> usize {
    1 + bits.div_ceil(32) as usize
}

/// The packed row of `bits`.
pub fn pack(bits: Bits<'_>) -> Vec<f32> {
    let len = bits.len();
    let mut words = vec![0u32; row_words(len)];
    words[0] = len;
    for (i, &byte) in bits.bytes().iter().enumerate() {
        // The padding bits of the last byte are cleared.
        let used = (len - 8 * i as u32).min(8);
        let byte = byte & !(0xffu8.checked_shr(used).unwrap_or(0));
        words[1 + i / 4] |= u32::from(byte) << (24 - 8 * (i % 4));
    }
    words.into_iter().map(f32::from_bits).collect()
}

/// The bit length a packed row records.
pub fn bit_len(row: &[f32]) -> u32 {
    row.first().map_or(0, |w| w.to_bits())
}

/// The distance between two packed rows under `metric`: Hamming (differing bits) or Jaccard
/// (`1 − |a ∧ b| / |a ∨ b|`, `1` when no bit is set in both); NaN for other metrics.
pub fn distance_between(a: &[f32], b: &[f32], metric: Metric) -> f32 {
    let words = a.len().min(b.len());
    let (mut differing, mut both, mut either) = (0u32, 0u32, 0u32);
    for i in 1..words {
        let (x, y) = (a[i].to_bits(), b[i].to_bits());
        differing += (x ^ y).count_ones();
        both += (x & y).count_ones();
        either += (x | y).count_ones();
    }
    match metric {
        Metric::Hamming => differing as f32,
        Metric::Jaccard if both == 0 => 1.0,
        Metric::Jaccard => (1.0 - f64::from(both) / f64::from(either)) as f32,
        _ => f32::NAN,
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // Hamming distances are small integers, exact in both types
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::bit_value::{hamming_distance, jaccard_distance};

    proptest! {
        /// Hamming and Jaccard over packed rows equal pgvector's functions on the strings, padding
        /// bits set or not.
        #[test]
        fn distances_equal_the_bit_functions(
            (len, a, b) in (1u32..200).prop_flat_map(|len| {
                let bytes = len.div_ceil(8) as usize;
                (Just(len), prop::collection::vec(any::<u8>(), bytes), prop::collection::vec(any::<u8>(), bytes))
            }),
        ) {
            let (x, y) = (Bits::new(len, &a).unwrap(), Bits::new(len, &b).unwrap());
            let (px, py) = (pack(x), pack(y));
            prop_assert_eq!(px.len(), row_words(len));
            prop_assert_eq!(bit_len(&px), len);
            prop_assert_eq!(f64::from(distance_between(&px, &py, Metric::Hamming)), hamming_distance(x, y).unwrap());
            let jaccard = jaccard_distance(x, y).unwrap();
            prop_assert!((f64::from(distance_between(&px, &py, Metric::Jaccard)) - jaccard).abs() < 1e-6);
        }
    }

    #[test]
    fn bit_zero_is_the_top_of_the_first_word() {
        let row = pack(Bits::new(33, &[0x80, 0, 0, 1, 0x80]).unwrap());
        assert_eq!(row.len(), 3);
        assert_eq!((row[1].to_bits(), row[2].to_bits()), (0x8000_0001, 0x8000_0000));
        assert_eq!(row_words(MAX_BITS), 2001);
    }
}
