//! The text format of `vector` and `halfvec` values: `[1,2.5,-3]`, exactly as pgvector reads and
//! writes it, so that every client that speaks pgvector speaks to pg_strata unchanged.
//!
//! Parsing accepts what pgvector accepts (whitespace around elements and brackets, any number
//! syntax C's `strtof` takes: `1`, `-2.5`, `1e-3`, `.5`, `inf`, `nan`) and reports the same errors.
//! Formatting writes each element as the shortest decimal that reads back to the same `f32`, laid
//! out as PostgreSQL's `float4out` does (fixed notation for decimal exponents in `[-4, 6)`,
//! otherwise `1.5e+07`).

use half::f16;
use thiserror::Error;

use crate::store::ElementKind;
use crate::vector_value::ErrorClass;
use crate::MAX_DIMENSIONS;

/// How an input failed to parse. [`VectorTextError::message`] renders the pgvector-compatible text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VectorTextError {
    /// Input does not start with `[` (after whitespace).
    #[error("contents must start with \"[\"")]
    MissingOpenBracket,
    /// `sparsevec` input that does not start with `{` (after whitespace).
    #[error("contents must start with \"{{\"")]
    MissingOpenBrace,
    /// `sparsevec` input without `/` after the closing `}` (pgvector: "Unexpected end of input.").
    #[error("unexpected end of input")]
    MissingSlash,
    /// `sparsevec` input with text after the dimension count other than whitespace.
    #[error("junk after closing")]
    JunkAfterDimensions,
    /// `[]`: a vector needs at least one element.
    #[error("a vector must have at least 1 dimension")]
    Empty,
    /// More than [`MAX_DIMENSIONS`] elements.
    #[error("too many dimensions")]
    TooManyDimensions,
    /// A malformed element, separator or missing `]`.
    #[error("invalid syntax")]
    InvalidSyntax,
    /// Text after the closing `]` other than whitespace.
    #[error("junk after closing right brace")]
    JunkAfterClose,
    /// A number too large for the element type (the offending token is kept for the message).
    #[error("\"{0}\" is out of range")]
    OutOfRange(String),
    /// `NaN` element.
    #[error("NaN not allowed")]
    NotANumber,
    /// `±Infinity` element.
    #[error("infinite value not allowed")]
    Infinite,
}

impl VectorTextError {
    /// The primary error message, worded as pgvector words it, for a value of type `type_name`
    /// (`"vector"` or `"halfvec"`) read from `input`.
    pub fn message(&self, type_name: &str, input: &str) -> String {
        match self {
            Self::MissingOpenBracket
            | Self::MissingOpenBrace
            | Self::MissingSlash
            | Self::JunkAfterDimensions
            | Self::InvalidSyntax
            | Self::JunkAfterClose => {
                format!("invalid input syntax for type {type_name}: \"{input}\"")
            }
            Self::Empty => format!("{type_name} must have at least 1 dimension"),
            Self::TooManyDimensions => {
                format!("{type_name} cannot have more than {MAX_DIMENSIONS} dimensions")
            }
            Self::OutOfRange(token) => format!("\"{token}\" is out of range for type {type_name}"),
            Self::NotANumber => format!("NaN not allowed in {type_name}"),
            Self::Infinite => format!("infinite value not allowed in {type_name}"),
        }
    }

    /// The optional detail line pgvector attaches (the same words for every type: pgvector's
    /// `halfvec_in` also says "Vector contents").
    pub fn detail(&self, _type_name: &str) -> Option<String> {
        match self {
            Self::MissingOpenBracket => Some("Vector contents must start with \"[\".".to_owned()),
            Self::MissingOpenBrace => Some("Vector contents must start with \"{\".".to_owned()),
            Self::JunkAfterClose => Some("Junk after closing right brace.".to_owned()),
            Self::MissingSlash => Some("Unexpected end of input.".to_owned()),
            Self::JunkAfterDimensions => Some("Junk after closing.".to_owned()),
            _ => None,
        }
    }

    /// The SQLSTATE class of this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::MissingOpenBracket
            | Self::MissingOpenBrace
            | Self::MissingSlash
            | Self::JunkAfterDimensions
            | Self::InvalidSyntax
            | Self::JunkAfterClose => ErrorClass::InvalidTextRepresentation,
            Self::Empty | Self::NotANumber | Self::Infinite => ErrorClass::DataException,
            Self::TooManyDimensions => ErrorClass::ProgramLimitExceeded,
            Self::OutOfRange(_) => ErrorClass::NumericValueOutOfRange,
        }
    }
}

/// Whitespace as PostgreSQL's scanner defines it.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The first position at or after `at` that is not whitespace.
pub(crate) fn skip_spaces(bytes: &[u8], mut at: usize) -> usize {
    while at < bytes.len() && is_space(bytes[at]) {
        at += 1;
    }
    at
}

/// Length of the longest prefix of `bytes` that C's `strtof` would consume as a decimal number,
/// an infinity or a NaN (0 when there is none).
pub(crate) fn number_token_len(bytes: &[u8]) -> usize {
    let mut at = 0;
    if at < bytes.len() && matches!(bytes[at], b'+' | b'-') {
        at += 1;
    }
    let rest = &bytes[at..];
    for word in ["infinity", "inf", "nan"] {
        if rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes()) {
            return at + word.len();
        }
    }
    let digits_from = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits_from(at);
    let mut end = int_end;
    let mut mantissa_digits = int_end - at;
    if end < bytes.len() && bytes[end] == b'.' {
        let frac_end = digits_from(end + 1);
        mantissa_digits += frac_end - (end + 1);
        end = frac_end;
    }
    if mantissa_digits == 0 {
        return 0;
    }
    if end < bytes.len() && matches!(bytes[end], b'e' | b'E') {
        let mut exp_at = end + 1;
        if exp_at < bytes.len() && matches!(bytes[exp_at], b'+' | b'-') {
            exp_at += 1;
        }
        let exp_end = digits_from(exp_at);
        if exp_end > exp_at {
            end = exp_end;
        }
    }
    end
}

/// Parses one element token into an `f32`, applying the element type's range and finiteness rules.
fn parse_element(token: &str, element: ElementKind) -> Result<f32, VectorTextError> {
    let value: f32 = token.parse().map_err(|_| VectorTextError::InvalidSyntax)?;
    let lower = token.to_ascii_lowercase();
    let literal_special = lower.contains("inf") || lower.contains("nan");
    if value.is_nan() {
        return Err(VectorTextError::NotANumber);
    }
    if value.is_infinite() {
        return Err(if literal_special {
            VectorTextError::Infinite
        } else {
            VectorTextError::OutOfRange(token.to_owned())
        });
    }
    if element == ElementKind::F16 && f16::from_f32(value).is_infinite() {
        return Err(VectorTextError::OutOfRange(token.to_owned()));
    }
    Ok(value)
}

/// Parses one `sparsevec` value token (from [`number_token_len`]) as pgvector's `sparsevec_in`
/// does: like a `vector` element, except that a non-zero number that rounds to zero is out of
/// range too (`strtof` reports `ERANGE` with a zero result, which `sparsevec_in` rejects and
/// `vector_in` does not: `'{1:1e-46}/1'` fails where `'[1e-46]'` reads as `[0]`).
pub(crate) fn parse_sparse_element(token: &str) -> Result<f32, VectorTextError> {
    let value = parse_element(token, ElementKind::F32)?;
    let mantissa = token.split(['e', 'E']).next().unwrap_or(token);
    if value == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return Err(VectorTextError::OutOfRange(token.to_owned()));
    }
    Ok(value)
}

/// Parses pgvector's text format into `f32` elements (for [`ElementKind::F16`] the values are
/// range-checked but not yet rounded; round with `half::f16::from_f32`).
///
/// Errors are checked in pgvector's order, so the same input fails with the same message.
pub fn parse(input: &str, element: ElementKind) -> Result<Vec<f32>, VectorTextError> {
    let bytes = input.as_bytes();
    let mut at = skip_spaces(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return Err(VectorTextError::MissingOpenBracket);
    }
    at = skip_spaces(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Err(VectorTextError::Empty);
    }
    let mut values = Vec::new();
    loop {
        if values.len() == MAX_DIMENSIONS {
            return Err(VectorTextError::TooManyDimensions);
        }
        at = skip_spaces(bytes, at);
        let len = number_token_len(&bytes[at..]);
        if len == 0 {
            return Err(VectorTextError::InvalidSyntax);
        }
        // The token is ASCII, so slicing the &str at these byte offsets is valid.
        values.push(parse_element(&input[at..at + len], element)?);
        at = skip_spaces(bytes, at + len);
        match bytes.get(at) {
            Some(b',') => at += 1,
            Some(b']') => {
                at += 1;
                break;
            }
            _ => return Err(VectorTextError::InvalidSyntax),
        }
    }
    if skip_spaces(bytes, at) != bytes.len() {
        return Err(VectorTextError::JunkAfterClose);
    }
    Ok(values)
}

/// Appends the shortest round-trip decimal of `value` to `out`, in PostgreSQL's `float4out` layout.
pub fn write_float(out: &mut String, value: f32) {
    use std::fmt::Write as _;

    if value == 0.0 {
        out.push_str(if value.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    if !value.is_finite() {
        out.push_str(if value.is_nan() {
            "NaN"
        } else if value > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
        return;
    }
    // `{:e}` yields the shortest digits that round-trip, as `d[.ddd]e±x`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` always has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if value.is_sign_negative() {
        out.push('-');
    }
    if (-4..6).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        } else {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exponent.abs());
    }
}

/// Formats elements as `[a,b,c]`.
pub fn format(values: impl IntoIterator<Item = f32>) -> String {
    let mut out = String::from("[");
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_float(&mut out, value);
    }
    out.push(']');
    out
}

#[cfg(test)]
#[allow(clippy::float_cmp, clippy::unreadable_literal)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn f32s(input: &str) -> Result<Vec<f32>, VectorTextError> {
        parse(input, ElementKind::F32)
    }

    #[test]
    fn parses_pgvector_syntax() {
        assert_eq!(f32s("[1,2.5,-3]").unwrap(), vec![1.0, 2.5, -3.0]);
        assert_eq!(f32s("  [ 1 , 2 ]  ").unwrap(), vec![1.0, 2.0]);
        assert_eq!(f32s("[.5,1e-3,+2E2]").unwrap(), vec![0.5, 0.001, 200.0]);
        assert_eq!(f32s("[1.]").unwrap(), vec![1.0]);
    }

    #[test]
    fn rejects_bad_input_with_pgvector_errors() {
        assert_eq!(f32s("1,2"), Err(VectorTextError::MissingOpenBracket));
        assert_eq!(f32s("[1,2"), Err(VectorTextError::InvalidSyntax));
        assert_eq!(f32s("[]"), Err(VectorTextError::Empty));
        assert_eq!(f32s("[ ]"), Err(VectorTextError::Empty));
        assert_eq!(f32s("[1,,2]"), Err(VectorTextError::InvalidSyntax));
        assert_eq!(f32s("[1,]"), Err(VectorTextError::InvalidSyntax));
        assert_eq!(f32s("[1 2]"), Err(VectorTextError::InvalidSyntax));
        assert_eq!(f32s("[a]"), Err(VectorTextError::InvalidSyntax));
        assert_eq!(f32s("[1]x"), Err(VectorTextError::JunkAfterClose));
        assert_eq!(f32s("[NaN]"), Err(VectorTextError::NotANumber));
        assert_eq!(f32s("[Infinity]"), Err(VectorTextError::Infinite));
        assert_eq!(f32s("[-inf]"), Err(VectorTextError::Infinite));
        assert_eq!(f32s("[1e39]"), Err(VectorTextError::OutOfRange("1e39".into())));
        assert_eq!(parse("[65520]", ElementKind::F16), Err(VectorTextError::OutOfRange("65520".into())));
        assert_eq!(parse("[65504]", ElementKind::F16).unwrap(), vec![65504.0]);
        let too_many = format!("[{}]", vec!["1"; MAX_DIMENSIONS + 1].join(","));
        assert_eq!(f32s(&too_many), Err(VectorTextError::TooManyDimensions));
        let max = format!("[{}]", vec!["1"; MAX_DIMENSIONS].join(","));
        assert_eq!(f32s(&max).unwrap().len(), MAX_DIMENSIONS);
    }

    #[test]
    fn messages_match_pgvector() {
        let err = f32s("[1,2").unwrap_err();
        assert_eq!(err.message("vector", "[1,2"), "invalid input syntax for type vector: \"[1,2\"");
        assert_eq!(VectorTextError::Empty.message("halfvec", ""), "halfvec must have at least 1 dimension");
        assert_eq!(
            VectorTextError::MissingOpenBracket.detail("vector").unwrap(),
            "Vector contents must start with \"[\"."
        );
    }

    #[test]
    fn formats_like_float4out() {
        let cases: [(f32, &str); 12] = [
            (1.0, "1"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (100_000.0, "100000"),
            (1_000_000.0, "1e+06"),
            (1.5e7, "1.5e+07"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.234_567_8e-5, "1.2345678e-05"),
            (3.4028235e38, "3.4028235e+38"),
            (0.1, "0.1"),
            (123.456, "123.456"),
        ];
        for (value, text) in cases {
            let mut out = String::new();
            write_float(&mut out, value);
            assert_eq!(out, text, "formatting {value:e}");
        }
        assert_eq!(format([1.0, 2.5, -3.0]), "[1,2.5,-3]");
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(values in prop::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 1..50)) {
            let text = format(values.iter().copied());
            let back = f32s(&text).unwrap();
            prop_assert_eq!(back.len(), values.len());
            for (a, b) in back.iter().zip(&values) {
                prop_assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }
}
