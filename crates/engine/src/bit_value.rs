//! pgvector's functions over PostgreSQL's `bit` / `bit varying` strings, independent of
//! PostgreSQL: `binary_quantize(vector | halfvec)`, `hamming_distance` (`<~>`) and
//! `jaccard_distance` (`<%>`), computed as pgvector 0.8.6 computes them (its `src/bitvec.c`,
//! `src/bitutils.c`, and `binary_quantize` in `src/vector.c` / `src/halfvec.c`; pgvector is under
//! the PostgreSQL licence).
//!
//! A bit string is its length in bits and its bytes, as PostgreSQL's `VarBit` holds them: bit 0 is
//! the most significant bit of byte 0, and the bits after the length in the last byte (padding) are
//! zero.

use crate::vector_value::{VectorError, VectorType};

/// An owned bit string: `len` bits in `len.div_ceil(8)` bytes, most significant bit first, padding
/// bits zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitString {
    len: u32,
    bytes: Vec<u8>,
}

/// A borrowed bit string (the payload of a `bit`/`varbit` datum): `len` bits in exactly
/// `len.div_ceil(8)` bytes. Padding bits are ignored (PostgreSQL keeps them zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bits<'a> {
    len: u32,
    bytes: &'a [u8],
}

impl BitString {
    /// The bit length.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the string has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, most significant bit first, padding zero.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The string borrowed.
    pub fn as_bits(&self) -> Bits<'_> {
        Bits { len: self.len, bytes: &self.bytes }
    }
}

impl<'a> Bits<'a> {
    /// `len` bits held in `bytes`; `None` unless `bytes` has exactly `len.div_ceil(8)` bytes.
    pub fn new(len: u32, bytes: &'a [u8]) -> Option<Self> {
        (usize::try_from(len.div_ceil(8)).ok()? == bytes.len()).then_some(Self { len, bytes })
    }

    /// The bit length.
    pub fn len(self) -> u32 {
        self.len
    }

    /// Whether the string has no bits.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The bytes, most significant bit first (padding bits as stored).
    pub fn bytes(self) -> &'a [u8] {
        self.bytes
    }

    /// Byte `i` with its padding bits cleared.
    fn byte(self, i: usize) -> u8 {
        let byte = self.bytes[i];
        let used = self.len - 8 * u32::try_from(i).expect("fewer than 2^29 bytes");
        if used >= 8 {
            byte
        } else {
            byte & !(0xffu8 >> used)
        }
    }
}

/// `binary_quantize(vector)` / `binary_quantize(halfvec)`: one bit per element, set when the
/// element is greater than zero (so `0`, `-0` and negatives are 0), element 0 the most significant
/// bit of byte 0.
pub fn binary_quantize<K: VectorType>(elems: &[K::Elem]) -> BitString {
    let len = u32::try_from(elems.len()).expect("a vector has at most 16000 elements");
    let mut bytes = vec![0u8; elems.len().div_ceil(8)];
    for (i, &e) in elems.iter().enumerate() {
        if K::to_f32(e) > 0.0 {
            bytes[i / 8] |= 0x80 >> (i % 8);
        }
    }
    BitString { len, bytes }
}

/// pgvector's `CheckDims` for bit strings: "different bit lengths 3 and 2".
fn check_same_length(a: Bits<'_>, b: Bits<'_>) -> Result<(), VectorError> {
    if a.len != b.len {
        return Err(VectorError::DifferentBitLengths { a: a.len, b: b.len });
    }
    Ok(())
}

/// `hamming_distance(bit, bit)` (`<~>`): the number of positions where the bits differ, as
/// `float8`, after checking that the lengths agree.
pub fn hamming_distance(a: Bits<'_>, b: Bits<'_>) -> Result<f64, VectorError> {
    check_same_length(a, b)?;
    let differing: u64 = (0..a.bytes.len()).map(|i| u64::from((a.byte(i) ^ b.byte(i)).count_ones())).sum();
    Ok(differing as f64)
}

/// `jaccard_distance(bit, bit)` (`<%>`): `1 − |a ∧ b| / |a ∨ b|` over the set bits, as `float8`;
/// `1` when no bit is set in both (also for two empty or all-zero strings), after checking that
/// the lengths agree.
pub fn jaccard_distance(a: Bits<'_>, b: Bits<'_>) -> Result<f64, VectorError> {
    check_same_length(a, b)?;
    let (mut both, mut in_a, mut in_b) = (0u64, 0u64, 0u64);
    for i in 0..a.bytes.len() {
        let (x, y) = (a.byte(i), b.byte(i));
        both += u64::from((x & y).count_ones());
        in_a += u64::from(x.count_ones());
        in_b += u64::from(y.count_ones());
    }
    if both == 0 {
        return Ok(1.0);
    }
    Ok(1.0 - both as f64 / (in_a + in_b - both) as f64)
}

/// The bits as elements `0.0` / `1.0`, bit 0 first: the form `bit` indexes built before packed bit
/// rows ([`crate::bit_rows`]) store. Over these rows the L1 distance is
/// [`hamming_distance`] and [`crate::metric::Metric::Jaccard`] is [`jaccard_distance`].
pub fn to_elements(bits: Bits<'_>) -> Vec<f32> {
    (0..bits.len as usize).map(|i| f32::from((bits.bytes[i / 8] >> (7 - i % 8)) & 1)).collect()
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use half::f16;
    use proptest::prelude::*;

    use super::*;
    use crate::vector_value::{HalfVec, Vector};

    /// A bit string from `'0'`/`'1'` text, as PostgreSQL's `bit_in` reads it (MSB first).
    fn bits(text: &str) -> BitString {
        let len = u32::try_from(text.len()).unwrap();
        let mut bytes = vec![0u8; text.len().div_ceil(8)];
        for (i, c) in text.chars().enumerate() {
            if c == '1' {
                bytes[i / 8] |= 0x80 >> (i % 8);
            }
        }
        BitString { len, bytes }
    }

    /// Text of a bit string, as `bit_out` writes it.
    fn text(b: &BitString) -> String {
        (0..b.len as usize).map(|i| if b.bytes[i / 8] & (0x80 >> (i % 8)) != 0 { '1' } else { '0' }).collect()
    }

    fn hamming(a: &str, b: &str) -> Result<f64, VectorError> {
        hamming_distance(bits(a).as_bits(), bits(b).as_bits())
    }

    fn jaccard(a: &str, b: &str) -> Result<f64, VectorError> {
        jaccard_distance(bits(a).as_bits(), bits(b).as_bits())
    }

    /// pgvector 0.8.6 `test/expected/bit.out`, every case.
    #[test]
    fn pgvector_bit_out() {
        let alternating = "10".repeat(256) + "1"; // 513 bits
        let inverted: String = alternating.chars().map(|c| if c == '1' { '0' } else { '1' }).collect();
        let ends_a = format!("11{}11", "0".repeat(509));
        let ends_b = format!("1{}1", "0".repeat(511));
        let cases: [(&str, &str, f64); 9] = [
            ("111", "111", 0.0),
            ("111", "110", 1.0),
            ("111", "100", 2.0),
            ("111", "000", 3.0),
            ("10101010101010101010", "01010101010101010101", 20.0),
            (&alternating, &alternating, 0.0),
            (&alternating, &inverted, 513.0),
            (&ends_a, &ends_b, 2.0),
            ("", "", 0.0),
        ];
        for (a, b, expected) in cases {
            assert_eq!(hamming(a, b), Ok(expected), "hamming_distance({a}, {b})");
        }
        // SELECT hamming_distance('111', '00'); → ERROR:  different bit lengths 3 and 2
        assert_eq!(hamming("111", "00").unwrap_err().to_string(), "different bit lengths 3 and 2");
        // '000'::varbit(4) is 3 bits long; '0000'::varbit(4) is 4.
        assert_eq!(hamming("111", "000"), Ok(3.0));
        assert_eq!(hamming("111", "0000").unwrap_err().to_string(), "different bit lengths 3 and 4");

        let cases: [(&str, &str, f64); 11] = [
            ("1111", "1111", 0.0),
            ("1111", "1110", 0.25),
            ("1111", "1100", 0.5),
            ("1111", "1000", 0.75),
            ("1111", "0000", 1.0),
            ("1100", "1000", 0.5),
            ("10101010101010101010", "01010101010101010101", 1.0),
            (&alternating, &alternating, 0.0),
            (&alternating, &inverted, 1.0),
            (&ends_a, &ends_b, 0.5),
            ("", "", 1.0),
        ];
        for (a, b, expected) in cases {
            assert_eq!(jaccard(a, b), Ok(expected), "jaccard_distance({a}, {b})");
        }
        assert_eq!(jaccard("1111", "000").unwrap_err().to_string(), "different bit lengths 4 and 3");
        assert_eq!(jaccard("1111", "0000"), Ok(1.0));
        assert_eq!(jaccard("1111", "00000").unwrap_err().to_string(), "different bit lengths 4 and 5");
    }

    /// pgvector 0.8.6's `binary_quantize` cases (test/expected/vector_type.out and halfvec.out):
    /// `'[1,0,-1]'` → `100`, `'[0,0.1,-0.2,-0.3,0.4,0.5,0.6,-0.7,0.8,-0.9,1]'` → `01001110101`,
    /// `'[1,2,3,-4,5,6,-7,8,1,-2,-3,4,5,-6,7,8,-1,2,3]'` → `1110110110011011011`.
    #[test]
    fn binary_quantize_matches_pgvector() {
        assert_eq!(text(&binary_quantize::<Vector>(&[1.0, 0.0, -1.0])), "100");
        let values = [0.0, 0.1, -0.2, -0.3, 0.4, 0.5, 0.6, -0.7, 0.8, -0.9, 1.0];
        assert_eq!(text(&binary_quantize::<Vector>(&values)), "01001110101");
        let halves: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(text(&binary_quantize::<HalfVec>(&halves)), "01001110101");
        let long =
            [1.0, 2.0, 3.0, -4.0, 5.0, 6.0, -7.0, 8.0, 1.0, -2.0, -3.0, 4.0, 5.0, -6.0, 7.0, 8.0, -1.0, 2.0, 3.0];
        assert_eq!(text(&binary_quantize::<Vector>(&long)), "1110110110011011011");
        let halves: Vec<f16> = long.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(text(&binary_quantize::<HalfVec>(&halves)), "1110110110011011011");
        assert_eq!(text(&binary_quantize::<Vector>(&[-0.0, f32::MIN_POSITIVE])), "01");
    }

    #[test]
    fn lengths_and_padding() {
        assert_eq!(Bits::new(9, &[0, 0]).map(Bits::len), Some(9));
        assert_eq!(Bits::new(9, &[0]), None);
        assert_eq!(Bits::new(0, &[]).map(Bits::is_empty), Some(true));
        // Padding bits (never set by PostgreSQL) do not count.
        let a = Bits::new(3, &[0b1110_1111]).unwrap();
        let b = Bits::new(3, &[0b0000_0000]).unwrap();
        assert_eq!(hamming_distance(a, b), Ok(3.0));
        assert_eq!(jaccard_distance(a, a), Ok(0.0));
    }

    proptest! {
        /// Hamming and Jaccard equal their definitions over the bits as booleans, and quantising
        /// sets exactly the positive elements.
        #[test]
        fn distances_match_bitwise_definitions(
            pairs in prop::collection::vec((any::<bool>(), any::<bool>()), 0..200),
            values in prop::collection::vec(-2.0f32..2.0, 1..100),
        ) {
            let a: String = pairs.iter().map(|p| if p.0 { '1' } else { '0' }).collect();
            let b: String = pairs.iter().map(|p| if p.1 { '1' } else { '0' }).collect();
            let differ = pairs.iter().filter(|p| p.0 != p.1).count();
            prop_assert_eq!(hamming(&a, &b), Ok(differ as f64));
            let both = pairs.iter().filter(|p| p.0 && p.1).count();
            let either = pairs.iter().filter(|p| p.0 || p.1).count();
            let expected = if both == 0 { 1.0 } else { 1.0 - both as f64 / either as f64 };
            prop_assert_eq!(jaccard(&a, &b), Ok(expected));
            let quantized = text(&binary_quantize::<Vector>(&values));
            let expected: String = values.iter().map(|&v| if v > 0.0 { '1' } else { '0' }).collect();
            prop_assert_eq!(quantized, expected);
        }
    }

    proptest! {
        /// Over [`to_elements`] rows the index metrics equal the SQL functions.
        #[test]
        fn index_metrics_over_elements_equal_the_functions(
            (a, b) in (0usize..70).prop_flat_map(|n| (prop::collection::vec(any::<bool>(), n), prop::collection::vec(any::<bool>(), n)))
        ) {
            let text = |v: &[bool]| v.iter().map(|&b| if b { '1' } else { '0' }).collect::<String>();
            let (x, y) = (bits(&text(&a)), bits(&text(&b)));
            let (ex, ey) = (to_elements(x.as_bits()), to_elements(y.as_bits()));
            prop_assert_eq!(ex.len(), a.len());
            prop_assert!(ex.iter().zip(&a).all(|(&e, &b)| e == f32::from(u8::from(b))));
            let hamming = hamming_distance(x.as_bits(), y.as_bits()).unwrap();
            prop_assert_eq!(f64::from(crate::metric::Metric::Hamming.distance(&ex, &ey)), hamming);
            let jaccard = jaccard_distance(x.as_bits(), y.as_bits()).unwrap();
            let index = f64::from(crate::metric::Metric::Jaccard.distance(&ex, &ey));
            prop_assert!((index - jaccard).abs() < 1e-6, "{index} vs {jaccard}");
        }
    }
}
