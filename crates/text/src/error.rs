//! [`TextError`]: every way the text engine refuses an input or a file.

use strata_engine::format::FormatError;
use thiserror::Error;

/// Why a document, a parameter set or a text segment was refused.
#[derive(Debug, Error)]
pub enum TextError {
    /// The segment container is damaged (bad magic, a checksum mismatch, truncation...) or a
    /// section the text segment needs is missing.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The container is sound but its sections do not form a valid text segment.
    #[error("corrupt text segment: {0}")]
    Corrupt(String),
    /// The segment was written with a text-segment layout version this code does not read.
    #[error("unsupported text segment layout version {0}")]
    UnsupportedVersion(u32),
    /// A lexeme is empty.
    #[error("empty lexeme")]
    EmptyLexeme,
    /// A document's stated length is smaller than the sum of its term frequencies.
    #[error("document length {length} is smaller than its {occurrences} lexeme occurrences")]
    LengthTooSmall {
        /// The stated length.
        length: u64,
        /// The sum of the term frequencies.
        occurrences: u64,
    },
    /// A document, segment or memtable exceeds the engine's `u32` limits (rows per segment,
    /// term frequency, document length).
    #[error("{0} exceeds the text engine's limits")]
    TooLarge(&'static str),
    /// BM25 parameters out of range (`k1` must be finite and ≥ 0, `b` in `[0, 1]`).
    #[error("invalid BM25 parameters: k1 = {k1}, b = {b}")]
    InvalidParams {
        /// The rejected `k1`.
        k1: f64,
        /// The rejected `b`.
        b: f64,
    },
    /// An index configuration of a vector kind where a text index's was expected.
    #[error("a {0} index is not a text index")]
    NotText(&'static str),
    /// A deletion bitmap does not range over exactly the rows of the source it is applied to.
    #[error("deletion bitmap over {bitmap} rows applied to a source of {rows} rows")]
    DeletionLength {
        /// Rows the bitmap ranges over.
        bitmap: usize,
        /// Rows in the source.
        rows: usize,
    },
    /// A document's memtable row ([`crate::Document::to_words`]) does not decode.
    #[error("corrupt document row: {0}")]
    CorruptRow(&'static str),
    /// Building the term dictionary failed (the `fst` builder's error).
    #[error("term dictionary: {0}")]
    Dictionary(#[from] fst::Error),
}
