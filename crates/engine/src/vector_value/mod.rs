//! Values of the `vector` and `halfvec` SQL types, independent of PostgreSQL: the element types,
//! their validation and conversion, and the checks and computations behind every SQL function on
//! them, each with pgvector's error texts and in pgvector's order. pg_strata's V1 functions only
//! move datums in and out and raise the [`VectorError`]s returned here.
//!
//! On-disk and in-memory layout (identical to pgvector's, so dumps and binary COPY interoperate):
//!
//! ```text
//! offset 0  u32  varlena header (4-byte form; total size)
//! offset 4  i16  dimensions
//! offset 6  i16  unused, always 0
//! offset 8  [E]  elements: f32 (vector) or IEEE binary16 (halfvec)
//! ```

pub mod avg;
pub mod binary;
mod error;
pub mod ops;
#[cfg(test)]
mod pgvector_cases;

use half::f16;

pub use error::{ErrorClass, SparseError, VectorError};

use crate::kernels::{self, DotAndNorms};
use crate::store::ElementKind;
use crate::vector_math::check_finite;
use crate::vector_text;
use crate::MAX_DIMENSIONS;

/// Bytes before the first element of a stored value.
pub const HEADER_BYTES: usize = 8;

/// One of the two vector types: its SQL name, element type, binary encoding and kernels.
pub trait VectorType: 'static {
    /// The stored element type.
    type Elem: Copy + 'static;
    /// The SQL type name, used in error messages.
    const NAME: &'static str;
    /// The element precision.
    const ELEMENT: ElementKind;
    /// Bytes per element in binary send/recv messages.
    const WIRE_BYTES: usize;

    /// Widens one element (exactly).
    fn to_f32(elem: Self::Elem) -> f32;
    /// Rounds an `f32` to the element type without a range check (pgvector's
    /// `Float4ToHalfUnchecked`): a value beyond the element range becomes an infinity.
    fn from_f32_unchecked(value: f32) -> Self::Elem;
    /// Appends the element's big-endian bit pattern ([`Self::WIRE_BYTES`] bytes) to `out`.
    fn to_wire(elem: Self::Elem, out: &mut Vec<u8>);
    /// Reads an element from exactly [`Self::WIRE_BYTES`] big-endian bytes.
    fn from_wire(bytes: &[u8]) -> Self::Elem;

    /// Squared Euclidean distance (equal lengths).
    fn l2_squared(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Inner product (equal lengths).
    fn dot(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Manhattan distance (equal lengths).
    fn l1(a: &[Self::Elem], b: &[Self::Elem]) -> f32;
    /// Inner product and squared norms (equal lengths).
    fn dot_and_norms(a: &[Self::Elem], b: &[Self::Elem]) -> DotAndNorms;
}

/// `vector`: single-precision elements.
pub struct Vector;
/// `halfvec`: half-precision elements.
pub struct HalfVec;

impl VectorType for Vector {
    type Elem = f32;
    const NAME: &'static str = "vector";
    const ELEMENT: ElementKind = ElementKind::F32;
    const WIRE_BYTES: usize = 4;

    fn to_f32(elem: f32) -> f32 {
        elem
    }
    fn from_f32_unchecked(value: f32) -> f32 {
        value
    }
    fn to_wire(elem: f32, out: &mut Vec<u8>) {
        out.extend_from_slice(&elem.to_bits().to_be_bytes());
    }
    fn from_wire(bytes: &[u8]) -> f32 {
        f32::from_bits(u32::from_be_bytes(bytes.try_into().expect("4 wire bytes")))
    }
    fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
        kernels::l2_squared(a, b)
    }
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        kernels::dot(a, b)
    }
    fn l1(a: &[f32], b: &[f32]) -> f32 {
        kernels::l1(a, b)
    }
    fn dot_and_norms(a: &[f32], b: &[f32]) -> DotAndNorms {
        kernels::dot_and_norms(a, b)
    }
}

impl VectorType for HalfVec {
    type Elem = f16;
    const NAME: &'static str = "halfvec";
    const ELEMENT: ElementKind = ElementKind::F16;
    const WIRE_BYTES: usize = 2;

    fn to_f32(elem: f16) -> f32 {
        elem.to_f32()
    }
    fn from_f32_unchecked(value: f32) -> f16 {
        f16::from_f32(value)
    }
    fn to_wire(elem: f16, out: &mut Vec<u8>) {
        out.extend_from_slice(&elem.to_bits().to_be_bytes());
    }
    fn from_wire(bytes: &[u8]) -> f16 {
        f16::from_bits(u16::from_be_bytes(bytes.try_into().expect("2 wire bytes")))
    }
    fn l2_squared(a: &[f16], b: &[f16]) -> f32 {
        kernels::l2_squared_f16(a, b)
    }
    fn dot(a: &[f16], b: &[f16]) -> f32 {
        kernels::dot_f16(a, b)
    }
    fn l1(a: &[f16], b: &[f16]) -> f32 {
        kernels::l1_f16(a, b)
    }
    fn dot_and_norms(a: &[f16], b: &[f16]) -> DotAndNorms {
        kernels::dot_and_norms_f16(a, b)
    }
}

/// The elements widened to `f32` (exactly).
pub fn widen<K: VectorType>(elems: &[K::Elem]) -> Vec<f32> {
    elems.iter().map(|&e| K::to_f32(e)).collect()
}

/// pgvector's `CheckDim`: a value of type K has 1 to [`MAX_DIMENSIONS`] elements.
pub fn check_dimensions<K: VectorType>(dims: usize) -> Result<(), VectorError> {
    check_dimension_count(K::NAME, MAX_DIMENSIONS as u32, i64::try_from(dims).unwrap_or(i64::MAX))
}

/// `CheckDim` of any of pgvector's types: `dims` must lie in `1..=max`, else
/// [`VectorError::TooFewDimensions`] or [`VectorError::TooManyDimensions`] naming `type_name`.
pub fn check_dimension_count(type_name: &'static str, max: u32, dims: i64) -> Result<(), VectorError> {
    if dims < 1 {
        return Err(VectorError::TooFewDimensions(type_name));
    }
    if dims > i64::from(max) {
        return Err(VectorError::TooManyDimensions { type_name, max });
    }
    Ok(())
}

/// pgvector's `CheckExpectedDim`: a typmod other than `-1` must equal the dimension count.
pub fn check_typmod(typmod: i32, dims: usize) -> Result<(), VectorError> {
    if typmod != -1 && usize::try_from(typmod).ok() != Some(dims) {
        return Err(VectorError::UnexpectedDimensions { expected: i64::from(typmod), actual: dims });
    }
    Ok(())
}

/// The operands of a binary function must have the same dimension count.
pub fn check_same_dimensions<K: VectorType>(a: usize, b: usize) -> Result<(), VectorError> {
    if a != b {
        return Err(VectorError::DifferentDimensions { type_name: K::NAME, a, b });
    }
    Ok(())
}

/// `K_typmod_in`: the type modifier list of `K(n)` is exactly one integer in `1..=16000`.
pub fn typmod_in<K: VectorType>(typmods: &[i32]) -> Result<i32, VectorError> {
    typmod_in_for(K::NAME, MAX_DIMENSIONS as u32, typmods)
}

/// The `typmod_in` of any of pgvector's types: exactly one integer in `1..=max`, checked in
/// pgvector's order (count, lower bound, upper bound).
pub fn typmod_in_for(type_name: &'static str, max: u32, typmods: &[i32]) -> Result<i32, VectorError> {
    let &[typmod] = typmods else {
        return Err(VectorError::InvalidTypmod);
    };
    if typmod < 1 {
        return Err(VectorError::TypmodBelowOne(type_name));
    }
    if i64::from(typmod) > i64::from(max) {
        return Err(VectorError::TypmodAboveMax { type_name, max });
    }
    Ok(typmod)
}

/// pgvector's `Float4ToHalf`: rounds `value` to K's element type; a finite value that does not fit
/// is [`VectorError::OutOfRange`]. NaN and infinities pass through unchanged ([`check_element`]
/// rejects them).
pub fn narrow<K: VectorType>(value: f32) -> Result<K::Elem, VectorError> {
    let elem = K::from_f32_unchecked(value);
    if K::to_f32(elem).is_infinite() && value.is_finite() {
        return Err(VectorError::OutOfRange { value, type_name: K::NAME });
    }
    Ok(elem)
}

/// pgvector's `CheckElement`: an element may not be NaN or infinite.
pub fn check_element<K: VectorType>(elem: K::Elem) -> Result<(), VectorError> {
    Ok(check_finite(&[K::to_f32(elem)], K::NAME)?)
}

/// Rounds computed values to K, checking element by element as pgvector does for computed values
/// ([`narrow`], then [`check_element`]); the first failing element decides the error. Every
/// function that computes new elements (text input, averages, arithmetic, normalisation) stores
/// them through here, so no computed NaN, infinity or out-of-range value can reach a stored value.
pub fn from_f32<K: VectorType>(values: &[f32]) -> Result<Vec<K::Elem>, VectorError> {
    values
        .iter()
        .map(|&value| {
            let elem = narrow::<K>(value)?;
            check_element::<K>(elem)?;
            Ok(elem)
        })
        .collect()
}

/// Converts values as pgvector's casts do: every element is [`narrow`]ed first (as `values`
/// yields it), then every one is checked with [`check_element`].
pub fn cast_from_f32<K: VectorType>(values: impl IntoIterator<Item = f32>) -> Result<Vec<K::Elem>, VectorError> {
    let elems = values.into_iter().map(narrow::<K>).collect::<Result<Vec<_>, _>>()?;
    elems.iter().try_for_each(|&elem| check_element::<K>(elem))?;
    Ok(elems)
}

/// `K_in`: parses the text format, checks the typmod and converts with [`from_f32`].
pub fn parse_text<K: VectorType>(input: &str, typmod: i32) -> Result<Vec<K::Elem>, VectorError> {
    let values = vector_text::parse(input, K::ELEMENT).map_err(|error| VectorError::Text {
        error,
        type_name: K::NAME,
        input: input.to_owned(),
    })?;
    check_typmod(typmod, values.len())?;
    from_f32::<K>(&values)
}

/// `K_out`: the text format, `[1,2.5,-3]`.
pub fn format_text<K: VectorType>(elems: &[K::Elem]) -> String {
    vector_text::format(elems.iter().map(|&e| K::to_f32(e)))
}

/// `vector` ↔ `halfvec` casts: checks the dimension count for `To` and the typmod, then converts
/// with [`cast_from_f32`] (narrowing to `halfvec` fails on a value beyond its range).
pub fn convert<From: VectorType, To: VectorType>(
    values: &[From::Elem],
    typmod: i32,
) -> Result<Vec<To::Elem>, VectorError> {
    check_dimensions::<To>(values.len())?;
    check_typmod(typmod, values.len())?;
    cast_from_f32::<To>(values.iter().map(|&e| From::to_f32(e)))
}

/// The element count of a stored value of type K whose varlena size is `size` bytes (header
/// included) and whose dimension field reads `dims`: `Some(dims)` when `dims` lies in
/// `1..=MAX_DIMENSIONS` and the value is exactly [`HEADER_BYTES`] plus `dims` elements long (the
/// only layout the type's functions and pgvector write), `None` for any other (a corrupt datum,
/// whose elements must not be read).
pub fn stored_dimensions<K: VectorType>(size: usize, dims: i16) -> Option<usize> {
    let dims = usize::try_from(dims).ok().filter(|d| (1..=MAX_DIMENSIONS).contains(d))?;
    (size == HEADER_BYTES + dims * std::mem::size_of::<K::Elem>()).then_some(dims)
}

/// The `int4` an element casts to: rounded to nearest, ties to even (PostgreSQL's `float4 → int4`),
/// or [`VectorError::IntegerOutOfRange`].
pub fn to_int4(value: f32) -> Result<i32, VectorError> {
    crate::vector_math::to_i32_rounded(value).ok_or(VectorError::IntegerOutOfRange)
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::vector_math::ElementError;

    /// Reference narrowing: a finite value whose rounding to binary16 overflows is out of range.
    fn reference_narrow_f16(value: f32) -> Result<f16, VectorError> {
        let rounded = f16::from_f32(value);
        if value.is_finite() && value.abs() >= 65520.0 {
            assert!(rounded.is_infinite());
            return Err(VectorError::OutOfRange { value, type_name: "halfvec" });
        }
        Ok(rounded)
    }

    #[test]
    fn stored_dimensions_match_the_size() {
        assert_eq!(stored_dimensions::<Vector>(8 + 3 * 4, 3), Some(3));
        assert_eq!(stored_dimensions::<HalfVec>(8 + 3 * 2, 3), Some(3));
        assert_eq!(stored_dimensions::<Vector>(8 + 16_000 * 4, 16_000), Some(16_000));
        // A dimension count the size does not hold, either way, is corrupt.
        assert_eq!(stored_dimensions::<Vector>(8, 3), None);
        assert_eq!(stored_dimensions::<Vector>(8 + 3 * 4 - 1, 3), None);
        assert_eq!(stored_dimensions::<Vector>(8 + 4 * 4, 3), None);
        assert_eq!(stored_dimensions::<HalfVec>(8 + 3 * 4, 3), None);
        // Counts no value of the type can have.
        assert_eq!(stored_dimensions::<Vector>(8, 0), None);
        assert_eq!(stored_dimensions::<Vector>(8, -1), None);
        assert_eq!(stored_dimensions::<Vector>(8 + 16_001 * 4, 16_001), None);
        assert_eq!(stored_dimensions::<HalfVec>(0, i16::MIN), None);
    }

    #[test]
    fn dimension_and_typmod_checks() {
        assert_eq!(check_dimensions::<Vector>(0), Err(VectorError::TooFewDimensions("vector")));
        assert_eq!(
            check_dimensions::<HalfVec>(16_001),
            Err(VectorError::TooManyDimensions { type_name: "halfvec", max: 16_000 })
        );
        assert!(check_dimensions::<Vector>(1).is_ok() && check_dimensions::<Vector>(16_000).is_ok());
        assert!(check_typmod(-1, 5).is_ok() && check_typmod(5, 5).is_ok());
        assert_eq!(check_typmod(3, 2), Err(VectorError::UnexpectedDimensions { expected: 3, actual: 2 }));
        assert_eq!(check_typmod(-7, 2), Err(VectorError::UnexpectedDimensions { expected: -7, actual: 2 }));
        assert_eq!(
            check_same_dimensions::<HalfVec>(2, 3),
            Err(VectorError::DifferentDimensions { type_name: "halfvec", a: 2, b: 3 })
        );
    }

    #[test]
    fn typmod_in_accepts_one_integer_in_range() {
        assert_eq!(typmod_in::<Vector>(&[3]), Ok(3));
        assert_eq!(typmod_in::<Vector>(&[16_000]), Ok(16_000));
        assert_eq!(typmod_in::<Vector>(&[]), Err(VectorError::InvalidTypmod));
        assert_eq!(typmod_in::<Vector>(&[1, 2]), Err(VectorError::InvalidTypmod));
        assert_eq!(typmod_in::<HalfVec>(&[0]), Err(VectorError::TypmodBelowOne("halfvec")));
        assert_eq!(typmod_in::<Vector>(&[i32::MIN]), Err(VectorError::TypmodBelowOne("vector")));
        assert_eq!(
            typmod_in::<HalfVec>(&[16_001]),
            Err(VectorError::TypmodAboveMax { type_name: "halfvec", max: 16_000 })
        );
    }

    #[test]
    fn computed_values_fail_at_the_first_bad_element() {
        assert_eq!(from_f32::<Vector>(&[1.0, 2.5]).unwrap(), vec![1.0, 2.5]);
        assert_eq!(from_f32::<HalfVec>(&[65504.0]).unwrap(), vec![f16::from_f32(65504.0)]);
        assert_eq!(from_f32::<HalfVec>(&[f32::NAN, 70_000.0]), Err(ElementError::NotANumber("halfvec").into()));
        assert_eq!(
            from_f32::<HalfVec>(&[70_000.0, f32::NAN]),
            Err(VectorError::OutOfRange { value: 70_000.0, type_name: "halfvec" })
        );
        assert_eq!(from_f32::<Vector>(&[1.0, f32::NEG_INFINITY]), Err(ElementError::Infinite("vector").into()));
    }

    #[test]
    fn casts_narrow_everything_before_checking() {
        // pgvector's casts convert all elements first: a later out-of-range value beats an earlier NaN.
        assert_eq!(
            cast_from_f32::<HalfVec>([f32::NAN, 70_000.0]),
            Err(VectorError::OutOfRange { value: 70_000.0, type_name: "halfvec" })
        );
        assert_eq!(cast_from_f32::<Vector>([1.0, f32::INFINITY]), Err(ElementError::Infinite("vector").into()));
        assert_eq!(
            convert::<Vector, HalfVec>(&[65520.0], -1),
            Err(VectorError::OutOfRange { value: 65520.0, type_name: "halfvec" })
        );
        assert_eq!(
            convert::<Vector, HalfVec>(&[1.0, 2.0], 3),
            Err(VectorError::UnexpectedDimensions { expected: 3, actual: 2 })
        );
        assert_eq!(convert::<HalfVec, Vector>(&[f16::from_f32(0.5)], 1).unwrap(), vec![0.5]);
        assert_eq!(to_int4(2.5), Ok(2));
        assert_eq!(to_int4(3e9), Err(VectorError::IntegerOutOfRange));
    }

    #[test]
    fn text_input_checks_syntax_then_typmod_then_elements() {
        assert_eq!(parse_text::<Vector>("[1,2]", 2).unwrap(), vec![1.0, 2.0]);
        assert_eq!(parse_text::<Vector>("[1,2]", 3), Err(VectorError::UnexpectedDimensions { expected: 3, actual: 2 }));
        let error = parse_text::<HalfVec>("1,2", 3).unwrap_err();
        assert_eq!(error.to_string(), "invalid input syntax for type halfvec: \"1,2\"");
        assert_eq!(error.detail().as_deref(), Some("Vector contents must start with \"[\"."));
        assert_eq!(
            parse_text::<HalfVec>("[65520]", -1).unwrap_err().to_string(),
            "\"65520\" is out of range for type halfvec"
        );
        assert_eq!(format_text::<HalfVec>(&parse_text::<HalfVec>("[0.1, 2]", -1).unwrap()), "[0.099975586,2]");
    }

    proptest! {
        /// Narrowing agrees with the reference on every finite and non-finite `f32`.
        #[test]
        fn narrowing_matches_reference(bits in any::<u32>()) {
            let value = f32::from_bits(bits);
            let ours = narrow::<HalfVec>(value);
            let reference = reference_narrow_f16(value);
            match (ours, reference) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a.to_bits(), b.to_bits()),
                (a, b) => prop_assert_eq!(a, b),
            }
            prop_assert_eq!(narrow::<Vector>(value).map(f32::to_bits), Ok(bits));
        }

        /// Text output reads back as the same elements.
        #[test]
        fn text_round_trips(values in prop::collection::vec(-65504.0f32..65504.0, 1..33)) {
            let elems = cast_from_f32::<HalfVec>(values.iter().copied()).unwrap();
            let back = parse_text::<HalfVec>(&format_text::<HalfVec>(&elems), elems.len() as i32).unwrap();
            prop_assert_eq!(back, elems);
        }
    }
}
