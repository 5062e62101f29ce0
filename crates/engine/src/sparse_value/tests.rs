//! `sparsevec` tests: every value-level case of pgvector 0.8.6's `test/expected/sparsevec.out`,
//! the `sparsevec` cases of `cast.out`, `btree.out` and `copy.sql` (each quoted with pgvector's
//! output), then properties against oracles: the dense vectors the sparse values stand for
//! (distances bit for bit, the btree order, casts, normalisation) and round trips of the text,
//! binary and stored forms.

#![allow(clippy::float_cmp, clippy::too_many_lines)]

use std::cmp::Ordering;

use half::f16;
use proptest::prelude::*;

use super::ops::{compare, distance, l2_normalize, norm};
use super::text::{format, parse};
use super::*;
use crate::vector_math::{self, ArithmeticError, ElementError};
use crate::vector_text::VectorTextError;
use crate::vector_value::ops::DistanceFunction;
use crate::vector_value::{ErrorClass, HalfVec, Vector};

/// `'input'::sparsevec` rendered by `sparsevec_out`, or the error's message.
fn io(input: &str) -> Result<String, String> {
    parse(input, -1).map(|v| format(v.as_ref())).map_err(|e| e.to_string())
}

fn sv(input: &str) -> SparseVec {
    parse(input, -1).unwrap_or_else(|e| panic!("{input}: {e}"))
}

/// pgvector 0.8.6 `test/expected/sparsevec.out`: text input and output.
#[test]
fn pgvector_text_cases() {
    let ok = [
        ("{1:1.5,3:3.5}/5", "{1:1.5,3:3.5}/5"),
        ("{1:-2,3:-4}/5", "{1:-2,3:-4}/5"),
        ("{1:2.,3:4.}/5", "{1:2,3:4}/5"),
        (" { 1 : 1.5 ,  3  :  3.5  } / 5 ", "{1:1.5,3:3.5}/5"),
        ("{1:1.23456}/1", "{1:1.23456}/1"),
        ("{1:1.5e38,2:-1.5e38}/2", "{1:1.5e+38,2:-1.5e+38}/2"),
        ("{1:1.5e+38,2:-1.5e+38}/2", "{1:1.5e+38,2:-1.5e+38}/2"),
        ("{1:1.5e-38,2:-1.5e-38}/2", "{1:1.5e-38,2:-1.5e-38}/2"),
        ("{}/1", "{}/1"),
        ("{ }/1", "{}/1"),
        ("{1:0,2:1,3:0}/3", "{2:1}/3"),
        ("{2:1,1:1}/2", "{1:1,2:1}/2"),
        ("{}/5", "{}/5"),
        ("{}/1000000000", "{}/1000000000"),
    ];
    for (input, output) in ok {
        assert_eq!(io(input).as_deref(), Ok(output), "{input}");
    }
    let syntax = |input: &str| format!("invalid input syntax for type sparsevec: \"{input}\"");
    let errors: Vec<(&str, String, Option<&str>, ErrorClass)> = vec![
        ("{1:hello,2:1}/2", syntax("{1:hello,2:1}/2"), None, ErrorClass::InvalidTextRepresentation),
        ("{1:NaN,2:1}/2", "NaN not allowed in sparsevec".into(), None, ErrorClass::DataException),
        ("{1:Infinity,2:1}/2", "infinite value not allowed in sparsevec".into(), None, ErrorClass::DataException),
        ("{1:-Infinity,2:1}/2", "infinite value not allowed in sparsevec".into(), None, ErrorClass::DataException),
        (
            "{1:4e38,2:1}/2",
            "\"4e38\" is out of range for type sparsevec".into(),
            None,
            ErrorClass::NumericValueOutOfRange,
        ),
        (
            "{1:-4e38,2:1}/2",
            "\"-4e38\" is out of range for type sparsevec".into(),
            None,
            ErrorClass::NumericValueOutOfRange,
        ),
        (
            "{1:1e-46,2:1}/2",
            "\"1e-46\" is out of range for type sparsevec".into(),
            None,
            ErrorClass::NumericValueOutOfRange,
        ),
        (
            "{1:-1e-46,2:1}/2",
            "\"-1e-46\" is out of range for type sparsevec".into(),
            None,
            ErrorClass::NumericValueOutOfRange,
        ),
        ("", syntax(""), Some("Vector contents must start with \"{\"."), ErrorClass::InvalidTextRepresentation),
        ("{", syntax("{"), None, ErrorClass::InvalidTextRepresentation),
        ("{ ", syntax("{ "), None, ErrorClass::InvalidTextRepresentation),
        ("{:", syntax("{:"), None, ErrorClass::InvalidTextRepresentation),
        ("{,", syntax("{,"), None, ErrorClass::InvalidTextRepresentation),
        ("{}", syntax("{}"), Some("Unexpected end of input."), ErrorClass::InvalidTextRepresentation),
        ("{}/", syntax("{}/"), None, ErrorClass::InvalidTextRepresentation),
        ("{}/1a", syntax("{}/1a"), Some("Junk after closing."), ErrorClass::InvalidTextRepresentation),
        ("{:}/1", syntax("{:}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{,}/1", syntax("{,}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1,}/1", syntax("{1,}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{:1}/1", syntax("{:1}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1:}/1", syntax("{1:}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1a:1}/1", syntax("{1a:1}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1:1a}/1", syntax("{1:1a}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1:1,}/1", syntax("{1:1,}/1"), None, ErrorClass::InvalidTextRepresentation),
        ("{1:1,1:1}/2", "sparsevec indices must not contain duplicates".into(), None, ErrorClass::DataException),
        ("{1:1,2:1,1:1}/2", "sparsevec indices must not contain duplicates".into(), None, ErrorClass::DataException),
        ("{}/-1", "sparsevec must have at least 1 dimension".into(), None, ErrorClass::DataException),
        (
            "{}/1000000001",
            "sparsevec cannot have more than 1000000000 dimensions".into(),
            None,
            ErrorClass::ProgramLimitExceeded,
        ),
        (
            "{}/2147483648",
            "sparsevec cannot have more than 1000000000 dimensions".into(),
            None,
            ErrorClass::ProgramLimitExceeded,
        ),
        ("{}/-2147483649", "sparsevec must have at least 1 dimension".into(), None, ErrorClass::DataException),
        (
            "{}/9223372036854775808",
            "sparsevec cannot have more than 1000000000 dimensions".into(),
            None,
            ErrorClass::ProgramLimitExceeded,
        ),
        ("{}/-9223372036854775809", "sparsevec must have at least 1 dimension".into(), None, ErrorClass::DataException),
        ("{2147483647:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
        ("{2147483648:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
        ("{-2147483648:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
        ("{-2147483649:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
        ("{0:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
        ("{2:1}/1", "sparsevec index out of bounds".into(), None, ErrorClass::DataException),
    ];
    for (input, message, detail, class) in errors {
        let error = parse(input, -1).unwrap_err();
        assert_eq!(error.to_string(), message, "{input}");
        assert_eq!(error.detail().as_deref(), detail, "{input}");
        assert_eq!(error.class(), class, "{input}");
    }
}

/// Orders and edge cases read from `sparsevec_in` itself (no pgvector regression line).
#[test]
fn text_rules_from_pgvector_source() {
    // More than 16000 commas fail before anything is read, even in junk.
    let commas = ",".repeat(16_000);
    assert_eq!(parse(&commas, -1), Err(SparseError::TooManyNonZero.into()));
    assert!(matches!(parse(&",".repeat(15_999), -1), Err(VectorError::Text { .. })));
    // Values are checked as they are read, before dimensions and indices.
    assert_eq!(parse("{0:NaN}/0", -1).unwrap_err().to_string(), "NaN not allowed in sparsevec");
    // Dimensions and typmod before indices; a dropped zero's index is never checked.
    assert_eq!(parse("{0:1}/0", -1), Err(VectorError::TooFewDimensions("sparsevec")));
    assert_eq!(parse("{5:1}/3", 2), Err(VectorError::UnexpectedDimensions { expected: 2, actual: 3 }));
    assert_eq!(io("{0:0,7:0}/3").as_deref(), Ok("{}/3"));
    // Sorted before checking: the bounds error of a later pair beats an earlier duplicate.
    assert_eq!(parse("{9:1,1:1,1:2}/3", -1), Err(SparseError::DuplicateIndices.into()));
    assert_eq!(parse("{1:1,9:1,9:2}/3", -1), Err(SparseError::IndexOutOfBounds.into()));
    // strtol's signs, no hex; strtof's forms.
    assert_eq!(io("{+1:+1,-0:0}/+2").as_deref(), Ok("{1:1}/2"));
    assert!(io("{0x1:1}/2").is_err());
    assert_eq!(io("{1:.5e1,2:1E-1}/2").as_deref(), Ok("{1:5,2:0.1}/2"));
    assert_eq!(io("{1:1e-45}/1").as_deref(), Ok("{1:1e-45}/1"), "a subnormal is not an underflow");
    assert_eq!(io("{1:0e-999}/1").as_deref(), Ok("{}/1"), "an exact zero is not an underflow");
    let tabs = "\t{\n1\r:\x0b2\x0c}\t/\n3\r";
    assert_eq!(io(tabs).as_deref(), Ok("{1:2}/3"));
    assert_eq!(parse("{}/1 x", -1).unwrap_err().detail().as_deref(), Some("Junk after closing."));
    assert_eq!(parse("{} x", -1).unwrap_err().detail().as_deref(), Some("Unexpected end of input."));
}

/// `sparsevec.out`: typmods.
#[test]
fn pgvector_typmod_cases() {
    assert_eq!(parse("{}/3", 3).map(|v| v.dim()), Ok(3));
    assert_eq!(parse("{}/3", 2).unwrap_err().to_string(), "expected 2 dimensions, not 3");
    assert_eq!(typmod_in(&[3, 2]).unwrap_err().to_string(), "invalid type modifier");
    assert_eq!(typmod_in(&[0]).unwrap_err().to_string(), "dimensions for type sparsevec must be at least 1");
    assert_eq!(
        typmod_in(&[1_000_000_001]).unwrap_err().to_string(),
        "dimensions for type sparsevec cannot exceed 1000000000"
    );
    assert_eq!(typmod_in(&[1_000_000_000]), Ok(1_000_000_000));
    let value = sv("{}/3");
    assert_eq!(apply_typmod(value.as_ref(), 3), Ok(()));
    assert_eq!(apply_typmod(value.as_ref(), -1), Ok(()));
    assert_eq!(apply_typmod(value.as_ref(), 4), Err(VectorError::UnexpectedDimensions { expected: 4, actual: 3 }));
}

fn dist(f: DistanceFunction, a: &str, b: &str) -> Result<f64, String> {
    distance(f, sv(a).as_ref(), sv(b).as_ref()).map_err(|e| e.to_string())
}

/// `sparsevec.out`: distances, norms and normalisation.
#[test]
fn pgvector_function_cases() {
    use DistanceFunction::{Cosine, InnerProduct as Ip, NegativeInnerProduct as NegIp, L1, L2};
    let different = Err("different sparsevec dimensions 2 and 1".to_owned());
    let cases: Vec<(DistanceFunction, &str, &str, Result<f64, String>)> = vec![
        (L2, "{}/2", "{1:3,2:4}/2", Ok(5.0)),
        (L2, "{1:3}/2", "{2:4}/2", Ok(5.0)),
        (L2, "{2:4}/2", "{1:3}/2", Ok(5.0)),
        (L2, "{1:3,2:4}/2", "{}/2", Ok(5.0)),
        (L2, "{}/2", "{2:1}/2", Ok(1.0)),
        (Ip, "{1:1,2:2}/2", "{1:2,2:4}/2", Ok(10.0)),
        (Ip, "{1:1,2:2}/2", "{1:3}/1", different.clone()),
        (Ip, "{1:1,3:3}/4", "{2:2,4:4}/4", Ok(0.0)),
        (Ip, "{2:2,4:4}/4", "{1:1,3:3}/4", Ok(0.0)),
        (Ip, "{1:1,3:3,5:5}/5", "{2:4,3:6,4:8}/5", Ok(18.0)),
        (Ip, "{1:1}/2", "{}/2", Ok(0.0)),
        (Ip, "{}/2", "{1:1}/2", Ok(0.0)),
        (Ip, "{1:3e38}/1", "{1:3e38}/1", Ok(f64::INFINITY)),
        (NegIp, "{1:1,2:2}/2", "{1:3,2:4}/2", Ok(-11.0)),
        (Cosine, "{1:1,2:2}/2", "{1:2,2:4}/2", Ok(0.0)),
        (Cosine, "{1:1,2:1}/2", "{1:1,2:1}/2", Ok(0.0)),
        (Cosine, "{1:1}/2", "{2:2}/2", Ok(1.0)),
        (Cosine, "{1:1,2:1}/2", "{1:-1,2:-1}/2", Ok(2.0)),
        (Cosine, "{1:2}/2", "{2:2}/2", Ok(1.0)),
        (Cosine, "{2:2}/2", "{1:2}/2", Ok(1.0)),
        (Cosine, "{1:1,2:2}/2", "{1:3}/1", different.clone()),
        (Cosine, "{1:1,2:1}/2", "{1:1.1,2:1.1}/2", Ok(0.0)),
        (Cosine, "{1:1,2:1}/2", "{1:-1.1,2:-1.1}/2", Ok(2.0)),
        (L1, "{}/2", "{1:3,2:4}/2", Ok(7.0)),
        (L1, "{}/2", "{2:1}/2", Ok(1.0)),
        (L1, "{1:1,2:2}/2", "{1:3}/1", different),
        (L1, "{1:3e38}/1", "{1:-3e38}/1", Ok(f64::INFINITY)),
        (L1, "{1:1,3:3,5:5,7:7}/8", "{2:2,4:4,6:6,8:8}/8", Ok(36.0)),
        (L1, "{1:1,3:3,5:5,7:7,9:9}/9", "{2:2,4:4,6:6,8:8}/9", Ok(45.0)),
    ];
    for (f, a, b, expected) in cases {
        assert_eq!(dist(f, a, b), expected, "{f:?}({a}, {b})");
    }
    // cosine_distance is NaN with a zero vector or when the f32 norms overflow.
    for (a, b) in [("{1:1,2:2}/2", "{}/2"), ("{1:3e38}/1", "{1:3e38}/1"), ("{}/1", "{}/1")] {
        assert!(dist(Cosine, a, b).unwrap().is_nan(), "cosine_distance({a}, {b})");
    }
    // round(l2_norm('{1:1,2:1}/2')::numeric, 5) = 1.41421; l2_norm('{1:3e37,2:4e37}/2')::real = 5e+37.
    assert_eq!(format!("{:.5}", norm(sv("{1:1,2:1}/2").as_ref())), "1.41421");
    assert_eq!(norm(sv("{1:3,2:4}/2").as_ref()), 5.0);
    assert_eq!(norm(sv("{2:1}/2").as_ref()), 1.0);
    assert_eq!(norm(sv("{1:3e37,2:4e37}/2").as_ref()) as f32, 5e37);
    assert_eq!(norm(sv("{}/2").as_ref()).to_bits(), 0.0f64.to_bits(), "0, not -0");
    assert_eq!(norm(sv("{1:2}/1").as_ref()), 2.0);
    let normalize = |input: &str| format(l2_normalize(sv(input).as_ref()).unwrap().as_ref());
    assert_eq!(normalize("{1:3,2:4}/2"), "{1:0.6,2:0.8}/2");
    assert_eq!(normalize("{1:3}/2"), "{1:1}/2");
    assert_eq!(normalize("{2:0.1}/2"), "{2:1}/2");
    assert_eq!(normalize("{}/2"), "{}/2");
    assert_eq!(normalize("{1:3e38}/1"), "{1:1}/1");
    assert_eq!(normalize("{1:3e38,2:1e-37}/2"), "{1:1}/2");
    assert_eq!(normalize("{2:3e37,4:3e-37,6:4e37,8:4e-37}/9"), "{2:0.6,6:0.8}/9");
    // The squared L2 distance (support function of the L2 opclass).
    assert_eq!(dist(DistanceFunction::L2Squared, "{1:3}/2", "{2:4}/2"), Ok(25.0));
    assert_eq!(ArithmeticError::Overflow.to_string(), "value out of range: overflow");
}

fn cmp(a: &str, b: &str) -> Ordering {
    compare(sv(a).as_ref(), sv(b).as_ref())
}

/// `sparsevec.out` comparisons and `sparsevec_cmp`, `btree.out`'s `ORDER BY`.
#[test]
fn pgvector_order_cases() {
    use Ordering::{Equal, Greater, Less};
    let full = "{1:1,2:2,3:3}/3";
    assert_eq!(cmp(full, full), Equal);
    assert_eq!(cmp(full, "{1:1,2:2}/2"), Greater);
    assert_eq!(cmp(full, "{}/3"), Greater);
    assert_eq!(cmp("{}/3", full), Less);
    assert_eq!(cmp("{1:1,2:2}/2", full), Less);
    assert_eq!(cmp("{1:1,2:2}/2", "{1:2,2:3,3:4}/3"), Less);
    assert_eq!(cmp("{1:2,2:3}/2", full), Greater);
    let mut rows = [sv("{}/3"), sv(full), sv("{1:1,2:1,3:1}/3")];
    rows.sort_by(|a, b| compare(a.as_ref(), b.as_ref()));
    let sorted: Vec<String> = rows.iter().map(|r| format(r.as_ref())).collect();
    assert_eq!(sorted, ["{}/3", "{1:1,2:1,3:1}/3", full]);
}

/// `cast.out`'s `sparsevec` cases.
#[test]
fn pgvector_cast_cases() {
    let to_sparse = |v: &[f32], typmod| from_dense::<Vector>(v, typmod).map(|s| format(s.as_ref()));
    assert_eq!(to_sparse(&[0.0, 1.5, 0.0, 3.5, 0.0], -1).as_deref(), Ok("{2:1.5,4:3.5}/5"));
    assert_eq!(to_sparse(&[0.0, 1.5, 0.0, 3.5, 0.0], 5).as_deref(), Ok("{2:1.5,4:3.5}/5"));
    assert_eq!(to_sparse(&[0.0, 1.5, 0.0, 3.5, 0.0], 4).unwrap_err().to_string(), "expected 4 dimensions, not 5");
    let halves: Vec<f16> = [0.0f32, 1.5, 0.0, 3.5, -0.0].iter().map(|&v| f16::from_f32(v)).collect();
    let from_half = from_dense::<HalfVec>(&halves, 5).unwrap();
    assert_eq!(format(from_half.as_ref()), "{2:1.5,4:3.5}/5");
    assert_eq!(from_dense::<HalfVec>(&halves, 4).unwrap_err().to_string(), "expected 4 dimensions, not 5");

    let value = sv("{2:1.5,4:3.5}/5");
    assert_eq!(to_dense::<Vector>(value.as_ref(), -1), Ok(vec![0.0, 1.5, 0.0, 3.5, 0.0]));
    assert_eq!(to_dense::<Vector>(value.as_ref(), 5), Ok(vec![0.0, 1.5, 0.0, 3.5, 0.0]));
    assert_eq!(to_dense::<Vector>(value.as_ref(), 4).unwrap_err().to_string(), "expected 4 dimensions, not 5");
    let big = sv("{}/16001");
    assert_eq!(
        to_dense::<Vector>(big.as_ref(), -1).unwrap_err().to_string(),
        "vector cannot have more than 16000 dimensions"
    );
    assert_eq!(
        to_dense::<HalfVec>(big.as_ref(), -1).unwrap_err().to_string(),
        "halfvec cannot have more than 16000 dimensions"
    );
    let half = to_dense::<HalfVec>(value.as_ref(), 5).unwrap();
    assert_eq!(half.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), [0.0, 1.5, 0.0, 3.5, 0.0]);
    assert_eq!(to_dense::<HalfVec>(value.as_ref(), 4).unwrap_err().to_string(), "expected 4 dimensions, not 5");
    let error = to_dense::<HalfVec>(sv("{1:65520}/1").as_ref(), -1).unwrap_err();
    assert_eq!(
        (error.to_string().as_str(), error.class()),
        ("\"65520\" is out of range for type halfvec", ErrorClass::NumericValueOutOfRange)
    );
    assert_eq!(to_dense::<HalfVec>(sv("{1:1e-8}/1").as_ref(), -1), Ok(vec![f16::ZERO]));

    // ARRAY[1,0,2,0,3,0]::sparsevec (int4, numeric, real, double precision alike).
    let array = |v: &[f32], typmod| from_array(v, typmod).map(|s| format(s.as_ref())).map_err(|e| e.to_string());
    assert_eq!(array(&[1.0, 0.0, 2.0, 0.0, 3.0, 0.0], -1).as_deref(), Ok("{1:1,3:2,5:3}/6"));
    assert_eq!(array(&[1.0, 0.0, 2.0, 0.0, 3.0, 0.0], 6).as_deref(), Ok("{1:1,3:2,5:3}/6"));
    assert_eq!(array(&[1.0, 0.0, 2.0, 0.0, 3.0, 0.0], 5), Err("expected 5 dimensions, not 6".into()));
    assert_eq!(array(&[f32::NAN], -1), Err("NaN not allowed in sparsevec".into()));
    assert_eq!(array(&[f32::INFINITY], -1), Err("infinite value not allowed in sparsevec".into()));
    assert_eq!(array(&[f32::NEG_INFINITY], -1), Err("infinite value not allowed in sparsevec".into()));
    assert_eq!(array(&[], -1), Err("sparsevec must have at least 1 dimension".into()));
    assert_eq!(check_array(0, -1), Err(VectorError::TooFewDimensions("sparsevec")));
    // SELECT array_agg(n)::sparsevec FROM generate_series(1, 16001) n;
    let many: Vec<f32> = (1..=16_001).map(|n| n as f32).collect();
    assert_eq!(array(&many, -1), Err("sparsevec cannot have more than 16000 non-zero elements".into()));
    // The non-zero count is checked before the elements; a NaN counts as non-zero.
    let mut nan_and_many = many.clone();
    nan_and_many[0] = f32::NAN;
    assert_eq!(from_array(&nan_and_many, -1), Err(SparseError::TooManyNonZero.into()));
    let zeros_and_one: Vec<f32> = (0..20_000).map(|i| if i == 19_999 { -2.0 } else { 0.0 }).collect();
    assert_eq!(array(&zeros_and_one, -1).as_deref(), Ok("{20000:-2}/20000"));
    assert_eq!(array(&[-0.0, 0.0], -1).as_deref(), Ok("{}/2"));
}

/// The binary message (copy.sql's binary COPY of `{}/3`, `{1:1,2:2,3:3}/3`, `{1:1,2:1,3:1}/3`) and
/// `sparsevec_recv`'s checks, in its order.
#[test]
fn binary_messages() {
    let message = |fields: &[i32], values: &[f32]| -> Vec<u8> {
        let mut out: Vec<u8> = fields.iter().flat_map(|f| f.to_be_bytes()).collect();
        out.extend(values.iter().flat_map(|v| v.to_bits().to_be_bytes()));
        out
    };
    for input in ["{}/3", "{1:1,2:2,3:3}/3", "{1:1,2:1,3:1}/3"] {
        let value = sv(input);
        let encoded = binary::encode(value.as_ref());
        let fields: Vec<i32> =
            [value.dim(), value.indices().len() as i32, 0].into_iter().chain(value.indices().iter().copied()).collect();
        assert_eq!(encoded, message(&fields, value.values()));
        assert_eq!(binary::decode(&encoded, 3), Ok((value, encoded.len())));
    }
    let decode =
        |fields: &[i32], values: &[f32], typmod| binary::decode(&message(fields, values), typmod).map(|(v, _)| v);
    assert_eq!(decode(&[0, 0, 0], &[], -1), Err(VectorError::TooFewDimensions("sparsevec")));
    assert_eq!(decode(&[-5, -1, 7], &[], 3), Err(VectorError::TooFewDimensions("sparsevec")));
    assert_eq!(
        decode(&[1_000_000_001, 0, 0], &[], -1).unwrap_err().to_string(),
        "sparsevec cannot have more than 1000000000 dimensions"
    );
    assert_eq!(decode(&[3, -1, 7], &[], 2), Err(SparseError::NegativeNonZero.into()));
    assert_eq!(decode(&[20_000, 16_001, 7], &[], 2), Err(SparseError::TooManyNonZero.into()));
    assert_eq!(decode(&[3, 4, 7], &[], 2), Err(SparseError::MoreElementsThanDimensions.into()));
    assert_eq!(decode(&[3, 0, 7], &[], 2), Err(VectorError::UnexpectedDimensions { expected: 2, actual: 3 }));
    assert_eq!(decode(&[3, 0, -7], &[], 3).unwrap_err().to_string(), "expected unused to be 0, not -7");
    assert_eq!(decode(&[3, 2, 0, 0, 3], &[1.0, 1.0], 3), Err(SparseError::IndexOutOfBounds.into()));
    assert_eq!(decode(&[3, 2, 0, 1, 0], &[1.0, 1.0], 3), Err(SparseError::IndicesNotAscending.into()));
    assert_eq!(decode(&[3, 2, 0, 1, 1], &[1.0, 1.0], 3), Err(SparseError::DuplicateIndices.into()));
    // Indices are checked as they are read: a bad index before the end of a short message wins.
    assert_eq!(binary::decode(&message(&[3, 2, 0, 5], &[]), -1), Err(SparseError::IndexOutOfBounds.into()));
    assert_eq!(decode(&[3, 2, 0, 0, 1], &[f32::NAN, 0.0], 3), Err(ElementError::NotANumber("sparsevec").into()));
    assert_eq!(decode(&[3, 2, 0, 0, 1], &[1.0, f32::NEG_INFINITY], 3), Err(ElementError::Infinite("sparsevec").into()));
    assert_eq!(
        decode(&[3, 2, 0, 0, 1], &[1.0, -0.0], 3).unwrap_err().to_string(),
        "binary representation of sparsevec cannot contain zero values"
    );
    assert_eq!(binary::decode(&message(&[3, 1], &[]), -1), Err(VectorError::InsufficientData));
    assert_eq!(binary::decode(&message(&[3, 1, 0, 0], &[]), -1), Err(VectorError::InsufficientData));
}

#[test]
fn stored_layout_and_checked_construction() {
    let value = sv("{2:1.5,4:-3.5}/5");
    let mut datum = vec![0xAAu8; stored_size(2)];
    value.as_ref().write_stored(&mut datum);
    assert_eq!(&datum[..4], &[0xAA; 4], "the varlena header is the caller's");
    assert_eq!(datum.len(), 32);
    assert_eq!(i32::from_ne_bytes(datum[4..8].try_into().unwrap()), 5);
    assert_eq!(i32::from_ne_bytes(datum[8..12].try_into().unwrap()), 2);
    assert_eq!(i32::from_ne_bytes(datum[12..16].try_into().unwrap()), 0);
    assert_eq!(i32::from_ne_bytes(datum[16..20].try_into().unwrap()), 1);
    assert_eq!(f32::from_ne_bytes(datum[28..32].try_into().unwrap()), -3.5);
    // Read back without copying (from 4-byte aligned memory, as a detoasted datum is).
    let words: Vec<u32> = datum.chunks(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
    let aligned: &[u8] = bytemuck::cast_slice(&words);
    assert_eq!(SparseRef::read_stored(aligned), Some(value.as_ref()));
    assert_eq!(SparseRef::read_stored(&aligned[..28]), None);
    assert_eq!(SparseRef::read_stored(&aligned[..12]), None);

    assert_eq!(SparseVec::new(5, vec![1, 3], vec![1.5, -3.5]), Ok(value));
    assert_eq!(SparseVec::new(5, vec![3, 1], vec![1.0, 1.0]), Err(SparseError::IndicesNotAscending.into()));
    assert_eq!(SparseVec::new(5, vec![1], vec![0.0]), Err(SparseError::ZeroInBinary.into()));
    assert_eq!(SparseVec::new(1, vec![0, 1], vec![1.0, 1.0]), Err(SparseError::MoreElementsThanDimensions.into()));
}

// ---- properties against oracles ----

/// A random valid sparse vector: up to 40 non-zero values of the given magnitude in up to 60
/// dimensions.
fn sparse_vec(scale: f32) -> impl Strategy<Value = SparseVec> {
    (1i32..60).prop_flat_map(move |dim| {
        prop::collection::btree_map(
            0..dim,
            (-scale..scale).prop_filter("non-zero", |v| *v != 0.0),
            0..40usize.min(dim as usize + 1),
        )
        .prop_map(move |pairs| {
            let (indices, values) = pairs.into_iter().unzip();
            SparseVec::new(dim, indices, values).unwrap()
        })
    })
}

/// Two random sparse vectors of the same dimensions.
fn sparse_pair(scale: f32) -> impl Strategy<Value = (SparseVec, SparseVec)> {
    (sparse_vec(scale), prop::collection::btree_map(0i32..60, -scale..scale, 0..40)).prop_map(|(a, pairs)| {
        let (indices, values): (Vec<i32>, Vec<f32>) =
            pairs.into_iter().filter(|&(i, v)| i < a.dim() && v != 0.0).unzip();
        let b = SparseVec::new(a.dim(), indices, values).unwrap();
        (a, b)
    })
}

/// The dense vector a sparse value stands for.
fn dense(a: &SparseVec) -> Vec<f32> {
    to_dense::<Vector>(a.as_ref(), -1).unwrap_or_else(|_| {
        let mut out = vec![0.0; a.dim() as usize];
        for (&i, &v) in a.indices().iter().zip(a.values()) {
            out[i as usize] = v;
        }
        out
    })
}

/// pgvector's sums over the dense vectors: `f32`, in index order.
fn dense_oracle(f: DistanceFunction, a: &[f32], b: &[f32]) -> f64 {
    let sum = |term: &dyn Fn(f32, f32) -> f32| a.iter().zip(b).fold(0.0f32, |s, (&x, &y)| s + term(x, y));
    match f {
        DistanceFunction::L2 => f64::from(sum(&|x, y| (x - y) * (x - y))).sqrt(),
        DistanceFunction::L2Squared => f64::from(sum(&|x, y| (x - y) * (x - y))),
        DistanceFunction::InnerProduct => f64::from(sum(&|x, y| x * y)),
        DistanceFunction::NegativeInnerProduct => f64::from(-sum(&|x, y| x * y)),
        DistanceFunction::L1 => f64::from(sum(&|x, y| (x - y).abs())),
        DistanceFunction::Cosine => {
            let norms = f64::from(sum(&|x, _| x * x)) * f64::from(sum(&|_, y| y * y));
            1.0 - (f64::from(sum(&|x, y| x * y)) / norms.sqrt()).clamp(-1.0, 1.0)
        }
    }
}

proptest! {
    /// Every distance equals, bit for bit, pgvector's sum over the dense vectors, and agrees with
    /// `vector`'s own distance functions (f64-accumulating kernels) to f32 precision.
    #[test]
    fn distances_match_dense_oracles((a, b) in sparse_pair(100.0)) {
        let (da, db) = (dense(&a), dense(&b));
        for f in DistanceFunction::ALL {
            let got = distance(f, a.as_ref(), b.as_ref()).unwrap();
            let exact = dense_oracle(f, &da, &db);
            prop_assert!(got.to_bits() == exact.to_bits() || (got.is_nan() && exact.is_nan()), "{:?}: {} vs {}", f, got, exact);
            // f32 sums in order err by at most n·2⁻²⁴ of the sum of absolute terms (n < 60).
            let magnitude: f64 = da.iter().zip(&db).map(|(x, y)| f64::from(x.abs() + y.abs())).map(|t| t * t).sum();
            let tolerance = match f {
                DistanceFunction::L2 => (1e-5 * magnitude).sqrt(),
                DistanceFunction::L1 => 1e-5 * magnitude.sqrt() * 60.0,
                DistanceFunction::Cosine => 1e-4,
                _ => 1e-5 * magnitude,
            };
            let vector = crate::vector_value::ops::distance::<Vector>(f, &da, &db).unwrap();
            prop_assert!((got - vector).abs() <= tolerance || (got.is_nan() && vector.is_nan()), "{:?}: {} vs vector's {}", f, got, vector);
        }
        let other = SparseVec::new(a.dim() + 1, vec![], vec![]).unwrap();
        prop_assert!(distance(DistanceFunction::L2, a.as_ref(), other.as_ref()).is_err());
    }

    /// The btree order is `vector`'s order on the dense vectors (element by element, then the
    /// shorter first), for values of any dimensions.
    #[test]
    fn order_matches_dense_order(a in sparse_vec(3.0), b in sparse_vec(3.0), same in any::<bool>()) {
        let b = if same { a.clone() } else { b };
        let expected = vector_math::compare(&dense(&a), &dense(&b));
        prop_assert_eq!(compare(a.as_ref(), b.as_ref()), expected);
        prop_assert_eq!(compare(b.as_ref(), a.as_ref()), expected.reverse());
    }

    /// Text and binary forms read back to the same value, bit for bit, and the stored layout
    /// reads back too.
    #[test]
    fn text_binary_and_stored_round_trips(a in sparse_vec(1e30), extra in prop::collection::vec(any::<u8>(), 0..3)) {
        let text = format(a.as_ref());
        prop_assert_eq!(parse(&text, a.dim()), Ok(a.clone()));
        prop_assert_eq!(format(parse(&text, -1).unwrap().as_ref()), text);
        let mut message = binary::encode(a.as_ref());
        let len = message.len();
        message.extend(&extra);
        prop_assert_eq!(binary::decode(&message, -1), Ok((a.clone(), len)));
        for cut in 0..len {
            prop_assert_eq!(binary::decode(&message[..cut], -1), Err(VectorError::InsufficientData));
        }
        let mut words = vec![0u32; stored_size(a.indices().len()) / 4];
        a.as_ref().write_stored(bytemuck::cast_slice_mut(&mut words));
        prop_assert_eq!(SparseRef::read_stored(bytemuck::cast_slice(&words)), Some(a.as_ref()));
    }

    /// Dense → sparse → dense is the identity (with `-0` read as `0`), for `vector`, `halfvec` and
    /// arrays; normalisation equals `vector`'s on the dense values with zeros dropped.
    #[test]
    fn casts_and_normalisation_match_dense(values in prop::collection::vec(prop_oneof![Just(0.0f32), -1e3f32..1e3], 1..50)) {
        let sparse = from_dense::<Vector>(&values, -1).unwrap();
        let back = to_dense::<Vector>(sparse.as_ref(), values.len() as i32).unwrap();
        prop_assert_eq!(back, values.iter().map(|&v| if v == 0.0 { 0.0 } else { v }).collect::<Vec<_>>());
        prop_assert_eq!(from_array(&values, -1), Ok(sparse.clone()));
        let halves: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
        let sparse_half = from_dense::<HalfVec>(&halves, -1).unwrap();
        let back_half = to_dense::<HalfVec>(sparse_half.as_ref(), -1).unwrap();
        prop_assert_eq!(back_half.iter().map(|h| h.to_f32()).collect::<Vec<_>>(), halves.iter().map(|h| if h.to_f32() == 0.0 { 0.0 } else { h.to_f32() }).collect::<Vec<_>>());
        let unit = l2_normalize(sparse.as_ref()).unwrap();
        let dense_unit = vector_math::l2_normalize(&values, crate::store::ElementKind::F32).unwrap();
        prop_assert_eq!(unit, from_dense::<Vector>(&dense_unit, -1).unwrap());
        prop_assert_eq!(norm(sparse.as_ref()).to_bits(), vector_math::norm(&values).to_bits());
    }

    /// Any text either parses into a valid value that formats and reads back unchanged, or fails
    /// with a typed error whose message, detail and class render.
    #[test]
    fn any_text_parses_or_fails_cleanly(input in "[ {}:/,0-9.eE+\\-naifNIF]{0,40}") {
        match parse(&input, -1) {
            Ok(value) => {
                prop_assert!(SparseVec::new(value.dim(), value.indices().to_vec(), value.values().to_vec()).is_ok());
                prop_assert_eq!(parse(&format(value.as_ref()), -1), Ok(value));
            }
            Err(error) => {
                prop_assert!(!error.to_string().is_empty());
                let _ = (error.detail(), error.class());
                if let VectorError::Text { error: text_error, .. } = &error {
                    prop_assert!(!matches!(text_error, VectorTextError::MissingOpenBracket | VectorTextError::JunkAfterClose));
                }
            }
        }
    }
}
