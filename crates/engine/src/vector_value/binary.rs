//! The binary send/recv format of `vector` and `halfvec` (pgvector's): `u16 dimensions`,
//! `u16 unused` (0), then each element's bit pattern (`f32`: 4 bytes, `f16`: 2 bytes), all in
//! network byte order.

use super::{check_dimensions, check_element, check_typmod, VectorError, VectorType};

/// The binary message for `values`.
pub fn encode<K: VectorType>(values: &[K::Elem]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + values.len() * K::WIRE_BYTES);
    let dims = u16::try_from(values.len()).expect("a stored value has at most 16000 dimensions");
    out.extend_from_slice(&dims.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for &value in values {
        K::to_wire(value, &mut out);
    }
    out
}

/// Reads a value of type K from the start of `message`, with pgvector's checks in pgvector's order:
/// both header fields are read, then the dimension count, the typmod and the unused field are
/// checked; elements are then read and checked one by one. A message that ends early is
/// [`VectorError::InsufficientData`] where PostgreSQL's `pq_getmsg*` would raise it. Returns the
/// elements and the number of bytes read (bytes after them are left for the caller to reject).
pub fn decode<K: VectorType>(message: &[u8], typmod: i32) -> Result<(Vec<K::Elem>, usize), VectorError> {
    let mut at = 0;
    let mut take = |len: usize| {
        let bytes = message.get(at..at + len).ok_or(VectorError::InsufficientData)?;
        at += len;
        Ok::<_, VectorError>(bytes)
    };
    let dims = usize::from(u16::from_be_bytes(take(2)?.try_into().expect("2 bytes")));
    let unused = u16::from_be_bytes(take(2)?.try_into().expect("2 bytes"));
    check_dimensions::<K>(dims)?;
    check_typmod(typmod, dims)?;
    if unused != 0 {
        return Err(VectorError::UnusedNotZero(i32::from(unused)));
    }
    let values = (0..dims)
        .map(|_| {
            let elem = K::from_wire(take(K::WIRE_BYTES)?);
            check_element::<K>(elem)?;
            Ok(elem)
        })
        .collect::<Result<Vec<_>, VectorError>>()?;
    Ok((values, at))
}

#[cfg(test)]
mod tests {
    use half::f16;
    use proptest::prelude::*;

    use super::*;
    use crate::vector_math::ElementError;
    use crate::vector_value::{HalfVec, Vector};

    /// Reference encoder: the layout written out field by field.
    fn reference_vector(values: &[f32], unused: u16) -> Vec<u8> {
        let mut out = vec![(values.len() >> 8) as u8, values.len() as u8, (unused >> 8) as u8, unused as u8];
        for v in values {
            let bits = v.to_bits();
            out.extend([(bits >> 24) as u8, (bits >> 16) as u8, (bits >> 8) as u8, bits as u8]);
        }
        out
    }

    #[test]
    fn header_and_element_errors_come_in_pgvector_order() {
        assert_eq!(decode::<Vector>(&[], -1), Err(VectorError::InsufficientData));
        assert_eq!(decode::<Vector>(&[0, 1, 0], -1), Err(VectorError::InsufficientData));
        assert_eq!(decode::<Vector>(&[0, 0, 0, 0], -1), Err(VectorError::TooFewDimensions("vector")));
        // The dimension count is checked before the typmod, the typmod before the unused field.
        assert_eq!(
            decode::<HalfVec>(&[0x3e, 0x81, 0, 1], 3),
            Err(VectorError::TooManyDimensions { type_name: "halfvec", max: 16_000 })
        );
        assert_eq!(
            decode::<Vector>(&reference_vector(&[1.0, 2.0], 9), 3),
            Err(VectorError::UnexpectedDimensions { expected: 3, actual: 2 })
        );
        assert_eq!(decode::<Vector>(&reference_vector(&[1.0], 9), 1), Err(VectorError::UnusedNotZero(9)));
        // Elements are checked as they are read: a NaN before the end of a short message wins.
        let mut nan_then_short = reference_vector(&[f32::NAN, 1.0], 0);
        nan_then_short.truncate(9);
        assert_eq!(decode::<Vector>(&nan_then_short, -1), Err(ElementError::NotANumber("vector").into()));
        let inf = f16::INFINITY.to_bits().to_be_bytes();
        assert_eq!(decode::<HalfVec>(&[0, 1, 0, 0, inf[0], inf[1]], -1), Err(ElementError::Infinite("halfvec").into()));
    }

    proptest! {
        /// Encoding matches the reference layout and decodes back to the same bits, consuming
        /// exactly the encoded bytes; every truncation is `InsufficientData`.
        #[test]
        fn vector_round_trips(values in prop::collection::vec(-1e30f32..1e30, 1..40), extra in prop::collection::vec(any::<u8>(), 0..3)) {
            let message = encode::<Vector>(&values);
            prop_assert_eq!(&message, &reference_vector(&values, 0));
            let mut with_extra = message.clone();
            with_extra.extend(&extra);
            let (back, used) = decode::<Vector>(&with_extra, values.len() as i32).unwrap();
            prop_assert_eq!(used, message.len());
            prop_assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), values.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            for cut in 0..message.len() {
                prop_assert_eq!(decode::<Vector>(&message[..cut], -1), Err(VectorError::InsufficientData));
            }
        }

        #[test]
        fn halfvec_round_trips(bits in prop::collection::vec(any::<u16>(), 1..41)) {
            let values: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
            let message = encode::<HalfVec>(&values);
            prop_assert_eq!(message.len(), 4 + 2 * values.len());
            prop_assert_eq!(&message[..2], &(values.len() as u16).to_be_bytes());
            match values.iter().find(|v| !v.is_finite()) {
                None => {
                    let (back, used) = decode::<HalfVec>(&message, -1).unwrap();
                    prop_assert_eq!(used, message.len());
                    prop_assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), bits);
                }
                Some(bad) => {
                    let expected = if bad.is_nan() { ElementError::NotANumber("halfvec") } else { ElementError::Infinite("halfvec") };
                    prop_assert_eq!(decode::<HalfVec>(&message, -1), Err(expected.into()));
                }
            }
        }
    }
}
