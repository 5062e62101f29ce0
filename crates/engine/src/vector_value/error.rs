//! The errors of the `vector`, `halfvec`, `sparsevec` and `bit` SQL functions, worded as pgvector
//! 0.8.6 words them (`src/vector.c`, `src/halfvec.c`, `src/sparsevec.c`, `src/bitvec.c`), and the
//! SQLSTATE class each one maps to.

use thiserror::Error;

use crate::vector_math::{ArithmeticError, ElementError};
use crate::vector_text::{write_float, VectorTextError};

/// The class of an error, which the SQL layer maps to a SQLSTATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// `22P02 invalid_text_representation`.
    InvalidTextRepresentation,
    /// `22000 data_exception`.
    DataException,
    /// `54000 program_limit_exceeded`.
    ProgramLimitExceeded,
    /// `22003 numeric_value_out_of_range`.
    NumericValueOutOfRange,
    /// `22023 invalid_parameter_value`.
    InvalidParameterValue,
    /// `22004 null_value_not_allowed`.
    NullValueNotAllowed,
    /// `08P01 protocol_violation`.
    ProtocolViolation,
    /// `XX000 internal_error` (what PostgreSQL's `elog(ERROR, …)` reports).
    InternalError,
}

/// Why a `vector`/`halfvec`/`sparsevec`/`bit` SQL function rejects its input. The `Display` text is the primary
/// message pgvector reports for the same input, [`VectorError::detail`] its DETAIL line and
/// [`VectorError::class`] its SQLSTATE class.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum VectorError {
    /// The text input `input` of type `type_name` does not parse.
    #[error("{}", .error.message(.type_name, .input))]
    Text {
        /// The parse error.
        error: VectorTextError,
        /// `"vector"` or `"halfvec"`.
        type_name: &'static str,
        /// The whole input text.
        input: String,
    },
    /// A value of the named type with no element.
    #[error("{0} must have at least 1 dimension")]
    TooFewDimensions(&'static str),
    /// A value of type `type_name` with more than `max` dimensions (16000 for `vector` and
    /// `halfvec`, [`crate::sparse_value::MAX_SPARSE_DIMENSIONS`] for `sparsevec`).
    #[error("{type_name} cannot have more than {max} dimensions")]
    TooManyDimensions {
        /// `"vector"`, `"halfvec"` or `"sparsevec"`.
        type_name: &'static str,
        /// The type's limit.
        max: u32,
    },
    /// A value whose dimension count differs from the one required (a typmod or an aggregate state).
    #[error("expected {expected} dimensions, not {actual}")]
    UnexpectedDimensions {
        /// The required count.
        expected: i64,
        /// The value's count.
        actual: usize,
    },
    /// Two operands of a binary function with different dimension counts.
    #[error("different {type_name} dimensions {a} and {b}")]
    DifferentDimensions {
        /// `"vector"`, `"halfvec"` or `"sparsevec"`.
        type_name: &'static str,
        /// The first operand's count.
        a: usize,
        /// The second operand's count.
        b: usize,
    },
    /// A finite `value` beyond the range of `type_name`'s element type (`"65520"` for `halfvec`).
    #[error("\"{}\" is out of range for type {type_name}", float_text(*.value))]
    OutOfRange {
        /// The value, written as `float4out` writes it.
        value: f32,
        /// `"vector"` or `"halfvec"`.
        type_name: &'static str,
    },
    /// A NaN or infinite element.
    #[error(transparent)]
    Element(#[from] ElementError),
    /// An arithmetic result that cannot be stored.
    #[error(transparent)]
    Arithmetic(#[from] ArithmeticError),
    /// A type modifier list that is not exactly one integer.
    #[error("invalid type modifier")]
    InvalidTypmod,
    /// A type modifier below 1.
    #[error("dimensions for type {0} must be at least 1")]
    TypmodBelowOne(&'static str),
    /// A type modifier above the type's dimension limit `max`.
    #[error("dimensions for type {type_name} cannot exceed {max}")]
    TypmodAboveMax {
        /// `"vector"`, `"halfvec"` or `"sparsevec"`.
        type_name: &'static str,
        /// The type's limit.
        max: u32,
    },
    /// A binary message whose reserved field is not zero (a `u16` for `vector`/`halfvec`, read as
    /// pgvector after 0.8.6 reads it; an `i32` for `sparsevec`).
    #[error("expected unused to be 0, not {0}")]
    UnusedNotZero(i32),
    /// A binary message shorter than its header says (PostgreSQL's `pq_getmsg*` wording).
    #[error("insufficient data left in message")]
    InsufficientData,
    /// An aggregate state that is not a non-empty one-dimensional `float8[]` without nulls.
    #[error("{type_name}_{function}: expected state array")]
    StateArray {
        /// The type the state function is declared for.
        type_name: &'static str,
        /// `"accum"`, `"combine"` or `"avg"`.
        function: &'static str,
    },
    /// An element that does not round to an `int4`.
    #[error("integer out of range")]
    IntegerOutOfRange,
    /// A cast from an array of more than one dimension.
    #[error("array must be 1-D")]
    ArrayNotOneDimensional,
    /// A cast from an array holding a NULL.
    #[error("array must not contain nulls")]
    ArrayContainsNulls,
    /// A cast from an array of an element type other than `int4`, `float4`, `float8` or `numeric`.
    #[error("unsupported array type")]
    UnsupportedArrayType,
    /// A `sparsevec` whose indices or non-zero count break the type's rules.
    #[error(transparent)]
    Sparse(#[from] SparseError),
    /// `hamming_distance` / `jaccard_distance` of bit strings of different lengths (pgvector's
    /// `%u` formatting: the lengths as unsigned numbers).
    #[error("different bit lengths {a} and {b}")]
    DifferentBitLengths {
        /// The first operand's length in bits.
        a: u32,
        /// The second operand's length in bits.
        b: u32,
    },
}

/// The `sparsevec` rules on non-zero elements and their indices (pgvector's `CheckNnz`,
/// `CheckIndex` and `sparsevec_recv`), each worded as pgvector words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SparseError {
    /// More non-zero elements than [`crate::sparse_value::MAX_SPARSE_NNZ`] (also: a text input
    /// with more than that many commas plus one).
    #[error("sparsevec cannot have more than {max} non-zero elements", max = crate::sparse_value::MAX_SPARSE_NNZ)]
    TooManyNonZero,
    /// A binary message with a negative non-zero count.
    #[error("sparsevec cannot have negative number of elements")]
    NegativeNonZero,
    /// A binary message with more non-zero elements than dimensions.
    #[error("sparsevec cannot have more elements than dimensions")]
    MoreElementsThanDimensions,
    /// An index outside `[0, dimensions)` (`[1, dimensions]` in the text format).
    #[error("sparsevec index out of bounds")]
    IndexOutOfBounds,
    /// A binary message whose indices are not sorted.
    #[error("sparsevec indices must be in ascending order")]
    IndicesNotAscending,
    /// The same index twice.
    #[error("sparsevec indices must not contain duplicates")]
    DuplicateIndices,
    /// A binary message holding a zero (or negative zero) value.
    #[error("binary representation of sparsevec cannot contain zero values")]
    ZeroInBinary,
}

impl SparseError {
    /// The SQLSTATE class pgvector reports this error with.
    pub fn class(self) -> ErrorClass {
        match self {
            Self::TooManyNonZero | Self::MoreElementsThanDimensions => ErrorClass::ProgramLimitExceeded,
            Self::NegativeNonZero
            | Self::IndexOutOfBounds
            | Self::IndicesNotAscending
            | Self::DuplicateIndices
            | Self::ZeroInBinary => ErrorClass::DataException,
        }
    }
}

fn float_text(value: f32) -> String {
    let mut text = String::new();
    write_float(&mut text, value);
    text
}

impl VectorError {
    /// The SQLSTATE class pgvector reports this error with.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Text { error, .. } => error.class(),
            Self::TooManyDimensions { .. } => ErrorClass::ProgramLimitExceeded,
            Self::Sparse(error) => error.class(),
            Self::OutOfRange { .. } | Self::IntegerOutOfRange => ErrorClass::NumericValueOutOfRange,
            Self::Arithmetic(ArithmeticError::Overflow | ArithmeticError::Underflow) => {
                ErrorClass::NumericValueOutOfRange
            }
            Self::InvalidTypmod | Self::TypmodBelowOne(_) | Self::TypmodAboveMax { .. } => {
                ErrorClass::InvalidParameterValue
            }
            Self::InsufficientData => ErrorClass::ProtocolViolation,
            Self::StateArray { .. } => ErrorClass::InternalError,
            Self::ArrayContainsNulls => ErrorClass::NullValueNotAllowed,
            Self::TooFewDimensions(_)
            | Self::UnexpectedDimensions { .. }
            | Self::DifferentDimensions { .. }
            | Self::Element(_)
            | Self::Arithmetic(ArithmeticError::EmptyResult(_))
            | Self::UnusedNotZero(_)
            | Self::ArrayNotOneDimensional
            | Self::UnsupportedArrayType
            | Self::DifferentBitLengths { .. } => ErrorClass::DataException,
        }
    }

    /// The DETAIL line pgvector attaches, if any.
    pub fn detail(&self) -> Option<String> {
        match self {
            Self::Text { error, type_name, .. } => error.detail(type_name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages and classes pgvector reports (from its source and regression output).
    #[test]
    #[allow(clippy::too_many_lines)]
    fn messages_and_classes_match_pgvector() {
        let cases: Vec<(VectorError, &str, ErrorClass)> = vec![
            (
                VectorError::TooFewDimensions("vector"),
                "vector must have at least 1 dimension",
                ErrorClass::DataException,
            ),
            (
                VectorError::TooManyDimensions { type_name: "halfvec", max: 16_000 },
                "halfvec cannot have more than 16000 dimensions",
                ErrorClass::ProgramLimitExceeded,
            ),
            (
                VectorError::UnexpectedDimensions { expected: 3, actual: 2 },
                "expected 3 dimensions, not 2",
                ErrorClass::DataException,
            ),
            (
                VectorError::DifferentDimensions { type_name: "vector", a: 2, b: 3 },
                "different vector dimensions 2 and 3",
                ErrorClass::DataException,
            ),
            (
                VectorError::OutOfRange { value: 65520.0, type_name: "halfvec" },
                "\"65520\" is out of range for type halfvec",
                ErrorClass::NumericValueOutOfRange,
            ),
            (
                VectorError::OutOfRange { value: 1.5e7, type_name: "halfvec" },
                "\"1.5e+07\" is out of range for type halfvec",
                ErrorClass::NumericValueOutOfRange,
            ),
            (ElementError::NotANumber("vector").into(), "NaN not allowed in vector", ErrorClass::DataException),
            (
                ElementError::Infinite("halfvec").into(),
                "infinite value not allowed in halfvec",
                ErrorClass::DataException,
            ),
            (ArithmeticError::Overflow.into(), "value out of range: overflow", ErrorClass::NumericValueOutOfRange),
            (ArithmeticError::Underflow.into(), "value out of range: underflow", ErrorClass::NumericValueOutOfRange),
            (
                ArithmeticError::EmptyResult("vector").into(),
                "vector must have at least 1 dimension",
                ErrorClass::DataException,
            ),
            (VectorError::InvalidTypmod, "invalid type modifier", ErrorClass::InvalidParameterValue),
            (
                VectorError::TypmodBelowOne("vector"),
                "dimensions for type vector must be at least 1",
                ErrorClass::InvalidParameterValue,
            ),
            (
                VectorError::TypmodAboveMax { type_name: "halfvec", max: 16_000 },
                "dimensions for type halfvec cannot exceed 16000",
                ErrorClass::InvalidParameterValue,
            ),
            (VectorError::UnusedNotZero(7), "expected unused to be 0, not 7", ErrorClass::DataException),
            (VectorError::InsufficientData, "insufficient data left in message", ErrorClass::ProtocolViolation),
            (
                VectorError::StateArray { type_name: "halfvec", function: "accum" },
                "halfvec_accum: expected state array",
                ErrorClass::InternalError,
            ),
            (VectorError::IntegerOutOfRange, "integer out of range", ErrorClass::NumericValueOutOfRange),
            (VectorError::ArrayNotOneDimensional, "array must be 1-D", ErrorClass::DataException),
            (VectorError::ArrayContainsNulls, "array must not contain nulls", ErrorClass::NullValueNotAllowed),
            (VectorError::UnsupportedArrayType, "unsupported array type", ErrorClass::DataException),
            // sparsevec (pgvector's src/sparsevec.c and test/expected/sparsevec.out).
            (
                VectorError::TooManyDimensions { type_name: "sparsevec", max: 1_000_000_000 },
                "sparsevec cannot have more than 1000000000 dimensions",
                ErrorClass::ProgramLimitExceeded,
            ),
            (
                VectorError::TypmodAboveMax { type_name: "sparsevec", max: 1_000_000_000 },
                "dimensions for type sparsevec cannot exceed 1000000000",
                ErrorClass::InvalidParameterValue,
            ),
            (
                VectorError::DifferentDimensions { type_name: "sparsevec", a: 2, b: 1 },
                "different sparsevec dimensions 2 and 1",
                ErrorClass::DataException,
            ),
            (VectorError::UnusedNotZero(-1), "expected unused to be 0, not -1", ErrorClass::DataException),
            (
                SparseError::TooManyNonZero.into(),
                "sparsevec cannot have more than 16000 non-zero elements",
                ErrorClass::ProgramLimitExceeded,
            ),
            (
                SparseError::NegativeNonZero.into(),
                "sparsevec cannot have negative number of elements",
                ErrorClass::DataException,
            ),
            (
                SparseError::MoreElementsThanDimensions.into(),
                "sparsevec cannot have more elements than dimensions",
                ErrorClass::ProgramLimitExceeded,
            ),
            (SparseError::IndexOutOfBounds.into(), "sparsevec index out of bounds", ErrorClass::DataException),
            (
                SparseError::IndicesNotAscending.into(),
                "sparsevec indices must be in ascending order",
                ErrorClass::DataException,
            ),
            (
                SparseError::DuplicateIndices.into(),
                "sparsevec indices must not contain duplicates",
                ErrorClass::DataException,
            ),
            (
                SparseError::ZeroInBinary.into(),
                "binary representation of sparsevec cannot contain zero values",
                ErrorClass::DataException,
            ),
            // bit (src/bitvec.c, test/expected/bit.out).
            (
                VectorError::DifferentBitLengths { a: 3, b: 2 },
                "different bit lengths 3 and 2",
                ErrorClass::DataException,
            ),
        ];
        for (error, message, class) in cases {
            assert_eq!(error.to_string(), message);
            assert_eq!(error.class(), class, "{message}");
            assert_eq!(error.detail(), None);
        }
    }

    #[test]
    fn text_errors_keep_their_message_detail_and_class() {
        let error =
            VectorError::Text { error: VectorTextError::JunkAfterClose, type_name: "halfvec", input: "[1]x".into() };
        assert_eq!(error.to_string(), "invalid input syntax for type halfvec: \"[1]x\"");
        assert_eq!(error.detail().as_deref(), Some("Junk after closing right brace."));
        assert_eq!(error.class(), ErrorClass::InvalidTextRepresentation);
    }
}
