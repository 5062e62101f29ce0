//! Fuzzes the vector text format (`[1,2.5,-3]`, pgvector's): any input either fails to parse with
//! a typed error whose messages render, or parses into values that keep every promise the parser
//! makes:
//!
//! - at least one and at most `MAX_DIMENSIONS` elements, every one finite;
//! - `halfvec` (`ElementKind::F16`) accepts a subset of what `vector` accepts, with the same
//!   values, each of which converts to a finite `f16`;
//! - formatting the values and parsing the text again gives the same bits, and formatting is
//!   canonical (format ∘ parse ∘ format = format);
//! - for the `f16`-rounded values, the same round trip holds under `ElementKind::F16`.
//!
//! Besides the text, the input's bytes read as `f32`s (finite ones only) are formatted and must
//! parse back to the same bits: the writer's promise for every finite `f32`.
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none vector_text seeds/vector_text`.

#![no_main]

use half::f16;
use libfuzzer_sys::fuzz_target;
use strata_engine::store::ElementKind;
use strata_engine::vector_text::{format, parse};
use strata_engine::MAX_DIMENSIONS;

/// Asserts `values` equal `expected` bit for bit (so `-0` and `0` differ).
fn assert_same_bits(values: &[f32], expected: &[f32], text: &str) {
    assert_eq!(values.len(), expected.len(), "element count changed reading back {text:?}");
    for (got, want) in values.iter().zip(expected) {
        assert_eq!(got.to_bits(), want.to_bits(), "{want:e} read back from {text:?} as {got:e}");
    }
}

/// Checks the promises of a successful parse of `input` as `element`.
fn check_parsed(input: &str, values: &[f32], element: ElementKind) {
    assert!(!values.is_empty(), "{input:?} parsed into no elements");
    assert!(values.len() <= MAX_DIMENSIONS, "{input:?} parsed into {} elements", values.len());
    for value in values {
        assert!(value.is_finite(), "{input:?} parsed into the non-finite element {value}");
        if element == ElementKind::F16 {
            assert!(f16::from_f32(*value).is_finite(), "{input:?} parsed as halfvec into {value}, beyond f16");
        }
    }
    let text = format(values.iter().copied());
    let again = parse(&text, element).unwrap_or_else(|e| panic!("{text:?} (formatted from {input:?}) fails: {e}"));
    assert_same_bits(&again, values, &text);
    assert_eq!(format(again), text, "formatting is not canonical for {input:?}");
}

fn check_text(input: &str) {
    let as_f32 = parse(input, ElementKind::F32);
    let as_f16 = parse(input, ElementKind::F16);
    for (result, type_name) in [(&as_f32, "vector"), (&as_f16, "halfvec")] {
        if let Err(error) = result {
            // The messages must render for any input.
            assert!(!error.message(type_name, input).is_empty());
            let _ = error.detail(type_name);
            let _ = error.class();
        }
    }
    if let Ok(values) = &as_f32 {
        check_parsed(input, values, ElementKind::F32);
    }
    match (&as_f32, &as_f16) {
        (Ok(wide), Ok(half)) => {
            assert_same_bits(half, wide, input);
            check_parsed(input, half, ElementKind::F16);
            // What a halfvec stores: the values rounded to f16, which must read back unchanged.
            let rounded: Vec<f32> = half.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
            check_parsed(input, &rounded, ElementKind::F16);
        }
        (Err(_), Ok(_)) => panic!("{input:?} is a halfvec but not a vector"),
        (_, Err(_)) => {}
    }
}

/// Every finite `f32` in `data` (4 bytes each, little-endian) is written and read back exactly.
fn check_floats(data: &[u8]) {
    let values: Vec<f32> = data
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .filter(|v| v.is_finite())
        .take(MAX_DIMENSIONS)
        .collect();
    if values.is_empty() {
        return;
    }
    let text = format(values.iter().copied());
    let back = parse(&text, ElementKind::F32).unwrap_or_else(|e| panic!("{text:?} fails: {e}"));
    assert_same_bits(&back, &values, &text);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = std::str::from_utf8(data) {
        check_text(input);
    }
    check_floats(data);
});
