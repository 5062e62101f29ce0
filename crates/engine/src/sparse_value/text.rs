//! The text format of `sparsevec`: `{1:1.5,3:2}/5` — 1-based `index:value` pairs of the non-zero
//! elements, then `/` and the number of dimensions — read and written exactly as pgvector 0.8.6's
//! `sparsevec_in` / `sparsevec_out` do (the parsing steps below follow its `src/sparsevec.c`).
//!
//! Input rules (all pgvector's):
//! - whitespace (PostgreSQL's scanner set) may surround every token;
//! - indices are read like C's `strtol` (optional sign, decimal digits, saturating), values like
//!   `strtof` (what [`crate::vector_text`] accepts for `vector`), dimensions like indices;
//! - zero values are dropped; pairs may come in any order and are sorted; a duplicate index, an
//!   index outside `[1, dimensions]`, `NaN`, an infinity, or a non-zero value that rounds to zero
//!   or to infinity is an error;
//! - more than 16000 commas in the whole input is an error before anything else is read.

use crate::vector_text::{number_token_len, parse_sparse_element, skip_spaces, write_float, VectorTextError};
use crate::vector_value::{check_typmod, SparseError, VectorError};

use super::{check_dimensions, check_index, SparseRef, SparseVec, MAX_SPARSE_NNZ, NAME};

/// What C's `strtol(…, 10)` reads at the start of `bytes` (no leading whitespace here): the value,
/// saturated to `i64` as `strtol` saturates to `long`, and the bytes consumed; `None` when there
/// are no digits.
fn parse_long(bytes: &[u8]) -> Option<(i64, usize)> {
    let negative = bytes.first() == Some(&b'-');
    let start = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits = bytes[start..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let magnitude = bytes[start..start + digits]
        .iter()
        .try_fold(0i64, |acc, &d| acc.checked_mul(10)?.checked_sub(i64::from(d - b'0')));
    // Accumulate negatively so that i64::MIN is reachable; overflow saturates like strtol.
    let value = match (magnitude, negative) {
        (Some(m), true) => m,
        (Some(m), false) => m.checked_neg().unwrap_or(i64::MAX),
        (None, true) => i64::MIN,
        (None, false) => i64::MAX,
    };
    Some((value, start + digits))
}

/// `sparsevec_in`: parses `input` and applies `typmod` (`-1`: none), with pgvector's checks in
/// pgvector's order: the comma count, the syntax with each value's range and finiteness as it is
/// read, then the dimensions, the typmod, and the indices (sorted) for bounds and duplicates.
pub fn parse(input: &str, typmod: i32) -> Result<SparseVec, VectorError> {
    let syntax = |error: VectorTextError| VectorError::Text { error, type_name: NAME, input: input.to_owned() };
    let bytes = input.as_bytes();
    // pgvector sizes its buffer by the commas in the whole input before reading anything.
    if 1 + input.matches(',').count() > MAX_SPARSE_NNZ {
        return Err(SparseError::TooManyNonZero.into());
    }
    let mut at = skip_spaces(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return Err(syntax(VectorTextError::MissingOpenBrace));
    }
    at = skip_spaces(bytes, at + 1);
    let mut elements: Vec<(i32, f32)> = Vec::new();
    if bytes.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            at = skip_spaces(bytes, at);
            let (index, len) = parse_long(&bytes[at..]).ok_or_else(|| syntax(VectorTextError::InvalidSyntax))?;
            // Kept in int range (as pgvector does) so that the bounds check reports it.
            let index = index.clamp(i64::from(i32::MIN) + 1, i64::from(i32::MAX));
            at = skip_spaces(bytes, at + len);
            if bytes.get(at) != Some(&b':') {
                return Err(syntax(VectorTextError::InvalidSyntax));
            }
            at = skip_spaces(bytes, at + 1);
            let len = number_token_len(&bytes[at..]);
            if len == 0 {
                return Err(syntax(VectorTextError::InvalidSyntax));
            }
            // The token is ASCII, so slicing the &str at these byte offsets is valid.
            let value = parse_sparse_element(&input[at..at + len]).map_err(syntax)?;
            if value != 0.0 {
                let zero_based = i32::try_from(index - 1).expect("clamped above i32::MIN");
                elements.push((zero_based, value));
            }
            at = skip_spaces(bytes, at + len);
            match bytes.get(at) {
                Some(b',') => at += 1,
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return Err(syntax(VectorTextError::InvalidSyntax)),
            }
        }
    }
    at = skip_spaces(bytes, at);
    if bytes.get(at) != Some(&b'/') {
        return Err(syntax(VectorTextError::MissingSlash));
    }
    at = skip_spaces(bytes, at + 1);
    let (dim, len) = parse_long(&bytes[at..]).ok_or_else(|| syntax(VectorTextError::InvalidSyntax))?;
    let dim = i32::try_from(dim.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).expect("clamped");
    if skip_spaces(bytes, at + len) != bytes.len() {
        return Err(syntax(VectorTextError::JunkAfterDimensions));
    }
    check_dimensions(i64::from(dim))?;
    check_typmod(typmod, usize::try_from(dim).expect("checked positive"))?;
    elements.sort_by_key(|&(index, _)| index);
    let (indices, values): (Vec<i32>, Vec<f32>) = elements.into_iter().unzip();
    for i in 0..indices.len() {
        check_index(&indices, i, dim)?;
    }
    Ok(SparseVec::from_checked_parts(dim, indices, values))
}

/// `sparsevec_out`: `{index:value,…}/dimensions`, 1-based indices, each value the shortest decimal
/// that reads back to the same `f32` (PostgreSQL's `float4out` layout).
pub fn format(value: SparseRef<'_>) -> String {
    let mut out = String::with_capacity(4 + 24 * value.nnz());
    out.push('{');
    for (i, (&index, &v)) in value.indices().iter().zip(value.values()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&(i64::from(index) + 1).to_string());
        out.push(':');
        write_float(&mut out, v);
    }
    out.push_str("}/");
    out.push_str(&value.dim().to_string());
    out
}
