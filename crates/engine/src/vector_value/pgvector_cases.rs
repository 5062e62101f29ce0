//! The value-level cases of pgvector 0.8.6's `test/expected/vector_type.out`, `halfvec.out` and
//! `cast.out` for `vector` and `halfvec`, run against this module's functions: each input with
//! the output or the error message (and DETAIL) pgvector's expected file shows for it.

#![allow(clippy::float_cmp)]

use half::f16;

use super::avg::AvgState;
use super::ops::{concat, distance, elementwise, subvector, DistanceFunction};
use super::{cast_from_f32, convert, format_text, parse_text, typmod_in, HalfVec, Vector, VectorError, VectorType};
use crate::vector_math::Elementwise;

/// `'input'::K` as `K_out` prints it, or the error's message and detail.
fn io<K: VectorType>(input: &str) -> Result<String, (String, Option<String>)> {
    parse_text::<K>(input, -1).map(|v| format_text::<K>(&v)).map_err(|e| (e.to_string(), e.detail()))
}

fn value<K: VectorType>(input: &str) -> Vec<K::Elem> {
    parse_text::<K>(input, -1).unwrap_or_else(|e| panic!("{input}: {e}"))
}

fn message<T>(result: Result<T, VectorError>) -> String {
    result.err().map(|e| e.to_string()).unwrap_or_default()
}

/// Text input cases shared by `vector_type.out` and `halfvec.out` (same inputs, the type name in
/// the messages), then each file's own.
fn text_cases<K: VectorType>() {
    let name = K::NAME;
    for (input, output) in [
        ("[1,2,3]", "[1,2,3]"),
        ("[-1,-2,-3]", "[-1,-2,-3]"),
        ("[1.,2.,3.]", "[1,2,3]"),
        (" [ 1,  2 ,    3  ] ", "[1,2,3]"),
        ("[1e-46,1]", "[0,1]"),
    ] {
        assert_eq!(io::<K>(input).as_deref(), Ok(output), "{name} {input}");
    }
    let syntax = |input: &str| format!("invalid input syntax for type {name}: \"{input}\"");
    let start = Some("Vector contents must start with \"[\".".to_owned());
    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("[hello,1]", syntax("[hello,1]"), None),
        ("[NaN,1]", format!("NaN not allowed in {name}"), None),
        ("[Infinity,1]", format!("infinite value not allowed in {name}"), None),
        ("[-Infinity,1]", format!("infinite value not allowed in {name}"), None),
        ("[4e38,1]", format!("\"4e38\" is out of range for type {name}"), None),
        ("[1,2,3", syntax("[1,2,3"), None),
        ("[1,2,3]9", syntax("[1,2,3]9"), Some("Junk after closing right brace.".to_owned())),
        ("1,2,3", syntax("1,2,3"), start.clone()),
        ("", syntax(""), start),
        ("[", syntax("["), None),
        ("[ ", syntax("[ "), None),
        ("[,", syntax("[,"), None),
        ("[]", format!("{name} must have at least 1 dimension"), None),
        ("[ ]", format!("{name} must have at least 1 dimension"), None),
        ("[,]", syntax("[,]"), None),
        ("[1,]", syntax("[1,]"), None),
        ("[1a]", syntax("[1a]"), None),
        ("[1,,3]", syntax("[1,,3]"), None),
        ("[1, ,3]", syntax("[1, ,3]"), None),
    ];
    for (input, message, detail) in cases {
        assert_eq!(io::<K>(input), Err((message, detail)), "{name} {input}");
    }
    assert_eq!(message(parse_text::<K>("[1,2,3]", 2)), "expected 2 dimensions, not 3");
    assert_eq!(parse_text::<K>("[1,2,3]", 3).map(|v| v.len()), Ok(3));
    assert_eq!(message(typmod_in::<K>(&[3, 2])), "invalid type modifier");
    assert_eq!(message(typmod_in::<K>(&[0])), format!("dimensions for type {name} must be at least 1"));
    assert_eq!(message(typmod_in::<K>(&[16_001])), format!("dimensions for type {name} cannot exceed 16000"));
}

#[test]
fn text_input_and_output() {
    text_cases::<Vector>();
    text_cases::<HalfVec>();
    // vector_type.out
    assert_eq!(io::<Vector>("[1.23456]").as_deref(), Ok("[1.23456]"));
    assert_eq!(io::<Vector>("[1.5e38,-1.5e38]").as_deref(), Ok("[1.5e+38,-1.5e+38]"));
    assert_eq!(io::<Vector>("[1.5e+38,-1.5e+38]").as_deref(), Ok("[1.5e+38,-1.5e+38]"));
    assert_eq!(io::<Vector>("[1.5e-38,-1.5e-38]").as_deref(), Ok("[1.5e-38,-1.5e-38]"));
    assert_eq!(io::<Vector>("[-4e38,1]"), Err(("\"-4e38\" is out of range for type vector".into(), None)));
    assert_eq!(io::<Vector>("[-1e-46,1]").as_deref(), Ok("[-0,1]"));
    // halfvec.out
    assert_eq!(io::<HalfVec>("[1.23456]").as_deref(), Ok("[1.234375]"));
    assert_eq!(io::<HalfVec>("[65519,-65519]").as_deref(), Ok("[65504,-65504]"));
    assert_eq!(io::<HalfVec>("[65520,-65520]"), Err(("\"65520\" is out of range for type halfvec".into(), None)));
    assert_eq!(io::<HalfVec>("[1e-8,-1e-8]").as_deref(), Ok("[0,-0]"));
}

fn arithmetic_cases<K: VectorType>(big: &str, tiny: &str) {
    let name = K::NAME;
    let op = |op, a: &str, b: &str| elementwise::<K>(op, &value::<K>(a), &value::<K>(b)).map(|v| format_text::<K>(&v));
    let different = format!("different {name} dimensions 2 and 1");
    assert_eq!(op(Elementwise::Add, "[1,2,3]", "[4,5,6]").as_deref(), Ok("[5,7,9]"));
    assert_eq!(message(op(Elementwise::Add, big, big)), "value out of range: overflow");
    assert_eq!(message(op(Elementwise::Add, "[1,2]", "[3]")), different);
    assert_eq!(op(Elementwise::Sub, "[1,2,3]", "[4,5,6]").as_deref(), Ok("[-3,-3,-3]"));
    let negative_big = big.replace('[', "[-");
    assert_eq!(message(op(Elementwise::Sub, &negative_big, big)), "value out of range: overflow");
    assert_eq!(message(op(Elementwise::Sub, "[1,2]", "[3]")), different);
    assert_eq!(op(Elementwise::Mul, "[1,2,3]", "[4,5,6]").as_deref(), Ok("[4,10,18]"));
    assert_eq!(message(op(Elementwise::Mul, tiny, tiny)), "value out of range: underflow");
    assert_eq!(message(op(Elementwise::Mul, "[1,2]", "[3]")), different);
    let joined = concat::<K>(&value::<K>("[1,2,3]"), &value::<K>("[4,5]")).map(|v| format_text::<K>(&v));
    assert_eq!(joined.as_deref(), Ok("[1,2,3,4,5]"));
    let zeros = vec![K::from_f32_unchecked(0.0); 16_000];
    assert_eq!(
        message(concat::<K>(&zeros, &value::<K>("[1]"))),
        format!("{name} cannot have more than 16000 dimensions")
    );
    for f in [DistanceFunction::L2, DistanceFunction::InnerProduct, DistanceFunction::Cosine, DistanceFunction::L1] {
        assert_eq!(message(distance::<K>(f, &value::<K>("[1,2]"), &value::<K>("[3]"))), different, "{f:?}");
    }
    let sub = |start, count| subvector::<K>(&value::<K>("[1,2,3,4,5]"), start, count).map(|v| format_text::<K>(v));
    assert_eq!(sub(3, i32::MAX).as_deref(), Ok("[3,4,5]"));
    assert_eq!(sub(-2_147_483_644, i32::MAX).as_deref(), Ok("[1,2]"));
    let at_least_one = format!("{name} must have at least 1 dimension");
    for (start, count) in [(1, 0), (3, -1), (-1, 2), (i32::MAX, 10)] {
        assert_eq!(message(sub(start, count)), at_least_one, "subvector({start}, {count})");
    }
}

#[test]
fn arithmetic_distances_and_slices() {
    // vector_type.out: '[3e38]' + '[3e38]', '[1e37]' * '[1e37]' overflow; '[1e-37]' * '[1e-37]'.
    arithmetic_cases::<Vector>("[3e38]", "[1e-37]");
    assert_eq!(message(elementwise::<Vector>(Elementwise::Mul, &[1e37], &[1e37])), "value out of range: overflow");
    // halfvec.out: '[65519]' ± '[65519]' and '[65519]' * '[65519]' overflow; '[1e-7]' * '[1e-7]'
    // underflows (1e-7 is a subnormal half whose square rounds to zero).
    arithmetic_cases::<HalfVec>("[65519]", "[1e-7]");
    let big = value::<HalfVec>("[65519]");
    assert_eq!(message(elementwise::<HalfVec>(Elementwise::Mul, &big, &big)), "value out of range: overflow");
}

/// The state functions of `avg`, fed the arrays the regression files build by hand.
fn aggregate_cases<K: VectorType>() {
    let name = K::NAME;
    let accum = |state: &[f64], v: &str| {
        AvgState::read(Some(state), name, "accum")?.accumulate(&super::widen::<K>(&value::<K>(v)))
    };
    let combine = |a: Option<&[f64]>, b: Option<&[f64]>| {
        // halfvec_combine is vector_combine in pgvector: it names itself so.
        AvgState::read(a, "vector", "combine")?.combine(AvgState::read(b, "vector", "combine")?)
    };
    let avg = |state: Option<&[f64]>| {
        AvgState::read(state, name, "avg")?.mean::<K>().map(|m| m.map(|v| format_text::<K>(&v)))
    };
    // SELECT K_avg('{2,2,4,6}') → [1,2,3]; '{0}' → NULL; '{1}' → at least 1 dimension;
    // '{{2,2,4,6}}', '{NULL,2,4,6}', '{}' → expected state array (read() gets None or []).
    assert_eq!(avg(Some(&[2.0, 2.0, 4.0, 6.0])), Ok(Some("[1,2,3]".into())));
    assert_eq!(avg(Some(&[0.0])), Ok(None));
    assert_eq!(message(avg(Some(&[1.0]))), format!("{name} must have at least 1 dimension"));
    assert_eq!(message(avg(None)), format!("{name}_avg: expected state array"));
    assert_eq!(message(avg(Some(&[]))), format!("{name}_avg: expected state array"));
    let counted: Vec<f64> = (1..=16_002).map(f64::from).collect();
    assert_eq!(message(avg(Some(&counted))), format!("{name} cannot have more than 16000 dimensions"));
    // SELECT K_accum('{0}', '[1,2,3]') → {1,1,2,3}; '{0,0,0,0}' too; '{0,0}' → expected 1 not 3.
    assert_eq!(accum(&[0.0], "[1,2,3]"), Ok(vec![1.0, 1.0, 2.0, 3.0]));
    assert_eq!(accum(&[0.0, 0.0, 0.0, 0.0], "[1,2,3]"), Ok(vec![1.0, 1.0, 2.0, 3.0]));
    assert_eq!(message(accum(&[0.0, 0.0], "[1,2,3]")), "expected 1 dimensions, not 3");
    assert_eq!(message(accum(&[], "[1,2,3]")), format!("{name}_accum: expected state array"));
    // avg over '[1,2]' then '[3]': expected 2 dimensions, not 1.
    let state = accum(&[0.0], "[1,2]").unwrap();
    assert_eq!(message(accum(&state, "[3]")), "expected 2 dimensions, not 1");
    // avg of '[1,2,3]' and '[3,5,7]' → [2,3.5,5].
    let state = accum(&accum(&[0.0], "[1,2,3]").unwrap(), "[3,5,7]").unwrap();
    assert_eq!(avg(Some(&state)), Ok(Some("[2,3.5,5]".into())));
    // vector_combine.
    assert_eq!(combine(Some(&[1.0, 2.0]), Some(&[3.0, 4.0])), Ok(vec![4.0, 6.0]));
    for (a, b) in [(None, Some(&[3.0, 4.0][..])), (Some(&[1.0, 2.0][..]), None), (Some(&[][..]), Some(&[0.0][..]))] {
        assert_eq!(message(combine(a, b)), "vector_combine: expected state array");
    }
    assert_eq!(message(combine(Some(&[0.0]), Some(&[]))), "vector_combine: expected state array");
    // 0.8.6 expects "vector must have at least 1 dimension" here; pg_strata returns the empty
    // state, as pgvector does since its issue #1012 (docs/pgvector-compatibility.md).
    assert_eq!(combine(Some(&[0.0]), Some(&[0.0])), Ok(vec![0.0]));
    let too_many = "vector cannot have more than 16000 dimensions";
    assert_eq!(message(combine(Some(&[0.0]), Some(&counted))), too_many);
    assert_eq!(message(combine(Some(&counted), Some(&[0.0]))), too_many);
    assert_eq!(message(combine(Some(&counted), Some(&counted))), too_many);
}

#[test]
fn aggregates() {
    aggregate_cases::<Vector>();
    aggregate_cases::<HalfVec>();
    // avg('[3e38]', '[3e38]') → [3e+38] (f64 sums); avg of '[65504]' twice → [65504].
    let sums = |v: f32| AvgState::read(Some(&[0.0]), "vector", "accum").unwrap().accumulate(&[v]).unwrap();
    let twice = |v: f32| {
        let once = sums(v);
        AvgState::read(Some(&once), "vector", "accum").unwrap().accumulate(&[v]).unwrap()
    };
    let (big, half_max) = (twice(3e38), twice(65504.0));
    assert_eq!(AvgState::read(Some(&big), "vector", "avg").unwrap().mean::<Vector>(), Ok(Some(vec![3e38])));
    let half = AvgState::read(Some(&half_max), "halfvec", "avg").unwrap().mean::<HalfVec>();
    assert_eq!(half, Ok(Some(vec![f16::from_f32(65504.0)])));
}

/// `cast.out`'s `vector`/`halfvec` cases (arrays are converted to `f32` by the caller as C casts
/// do: `'{4e38,-4e38}'::double precision[]` becomes infinities).
#[test]
fn casts() {
    let from_array =
        |values: &[f32]| cast_from_f32::<Vector>(values.iter().copied()).map(|v| format_text::<Vector>(&v));
    assert_eq!(from_array(&[1.0, 2.0, 3.0]).as_deref(), Ok("[1,2,3]"));
    assert_eq!(message(from_array(&[f32::NAN])), "NaN not allowed in vector");
    assert_eq!(message(from_array(&[f32::INFINITY])), "infinite value not allowed in vector");
    assert_eq!(message(from_array(&[4e38f64 as f32, -4e38f64 as f32])), "infinite value not allowed in vector");
    assert_eq!(from_array(&[1e-46f64 as f32, -1e-46f64 as f32]).as_deref(), Ok("[0,-0]"));
    let to_half =
        |values: &[f32], typmod| convert::<Vector, HalfVec>(values, typmod).map(|v| format_text::<HalfVec>(&v));
    assert_eq!(to_half(&[1.0, 2.0, 3.0], 3).as_deref(), Ok("[1,2,3]"));
    assert_eq!(message(to_half(&[1.0, 2.0, 3.0], 2)), "expected 2 dimensions, not 3");
    assert_eq!(message(to_half(&[65520.0], -1)), "\"65520\" is out of range for type halfvec");
    assert_eq!(message(to_half(&[65520.0, -65520.0], -1)), "\"65520\" is out of range for type halfvec");
    assert_eq!(to_half(&[1e-8], -1).as_deref(), Ok("[0]"));
    assert_eq!(to_half(&[1e-8, -1e-8], -1).as_deref(), Ok("[0,-0]"));
    let halves = value::<HalfVec>("[1,2,3]");
    assert_eq!(message(convert::<HalfVec, Vector>(&halves, 2)), "expected 2 dimensions, not 3");
    assert_eq!(convert::<HalfVec, Vector>(&halves, 3), Ok(vec![1.0, 2.0, 3.0]));
}
