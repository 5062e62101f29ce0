//! Filtered vector search, the segment side (issue 16): filter columns stored in a segment, typed
//! predicates over them evaluated into an allow-set without touching vectors, selectivity
//! estimates from the segment's own statistics, and the choice of search strategy.
//!
//! - [`columns`]: the per-column encoding (postings or row-order blocks, chosen by cardinality;
//!   NULLs kept apart so predicates follow SQL's three-valued logic);
//! - [`predicate`]: [`Predicate`] and its evaluation into [`Truth`];
//! - [`estimate`]: [`Selectivity`] with guaranteed bounds;
//! - [`plan`]: [`plan::choose`], the strategy as a pure function of sizes, with the measured
//!   thresholds;
//! - [`row`]: an index's [`FilterSchema`] and the fixed-width form of one row's filter values
//!   (memtable slots), from which FILTER sections are built.
//!
//! # The FILTER section (tag [`TAG_FILTER`] = `0x4643_0001`)
//!
//! An optional segment section; segments written before it existed simply lack it and open as
//! before (they have no filter columns). All integers little-endian; no alignment (the section is
//! decoded into owned vectors when the segment opens).
//!
//! ```text
//! offset  size  field
//!      0     4  version (u32) = 1
//!      4     4  column count C (u32, ≤ 1024)
//!      8     4  rows N (u32): must equal the segment's row count
//!     12     4  CRC-32 (IEEE) of bytes 16..end
//!     16     …  C columns, each:
//!                 u8 type (0 int4, 1 int8, 2 timestamp, 3 text, 4 int[], 5 text[])
//!                 u8 body (0 postings, 1 blocks)   u16 reserved = 0
//!                 u32 L: bytes of the column after these 8
//!                 posting: the NULL rows
//!                 text / text[] only: u32 D, then D × (u32 byte length, UTF-8 bytes),
//!                   strictly increasing byte-wise: key i is the i-th text
//!                 body 0: u32 K; K × i64 keys, strictly increasing; K × posting (non-empty)
//!                 body 1 (int4/int8/timestamp): u64 distinct non-NULL values;
//!                   N × i64 values in row order (0 in NULL rows);
//!                   ⌈N / 1024⌉ × (i64 min, i64 max, u32 non-NULL rows) per block of 1024 rows
//!                   (min = i64::MAX, max = i64::MIN for a block of NULLs)
//! posting:  u8 form, u32 count, then form 0: count × u32 rows, strictly increasing, < N;
//!           form 1: ⌈N / 64⌉ × u64 bitmap words (bit r % 64 of word r / 64), no bit ≥ N set.
//!           Form 0 exactly when count · 32 < N (the smaller one; canonical).
//! ```
//!
//! Decoding checks the version, the CRC, every count against the bytes left, order and range of
//! every list, key and dictionary entry, that scalar columns' NULL rows and postings partition
//! the rows (array columns: NULL rows hold no element), that block statistics and the distinct
//! count match the values, that each column has the encoding its cardinality calls for, and that
//! nothing follows the last column — so [`FilterColumns::decode`] of any bytes returns a typed
//! error or columns that evaluate without panicking.

mod codec;
pub mod columns;
pub mod estimate;
pub mod plan;
pub mod predicate;
pub mod row;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_format;
#[cfg(test)]
mod tests_row;

pub use columns::{ColumnType, ColumnValues, FilterColumn};
pub use estimate::{Count, Selectivity};
pub use predicate::{Literal, Predicate, Truth};
pub use row::{FilterSchema, FilterSpec, FilterValue, RowError};

use thiserror::Error;

use crate::bitset::Bitset;

/// Section tag of the FILTER section.
pub const TAG_FILTER: u32 = 0x4643_0001;
/// The FILTER section layout version written and read.
pub const FILTER_SECTION_VERSION: u32 = 1;
/// The most filter columns a segment may hold.
pub const MAX_COLUMNS: usize = 1024;

/// Why filter columns could not be built, read or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    /// A segment of more rows than row ids fit in `u32`.
    #[error("{0} rows exceed the 2^32 - 1 rows of a segment")]
    TooManyRows(usize),
    /// Columns of different lengths, or a section for another number of rows.
    #[error("filter columns hold {actual} rows, the segment {expected}")]
    RowCount {
        /// Rows of the segment.
        expected: usize,
        /// Rows of the column or section.
        actual: usize,
    },
    /// More than [`MAX_COLUMNS`] columns.
    #[error("{0} filter columns exceed the limit of {MAX_COLUMNS}")]
    TooManyColumns(usize),
    /// A section version this code does not read.
    #[error("unsupported FILTER section version {0}")]
    UnsupportedVersion(u32),
    /// The section's checksum does not match.
    #[error("FILTER section checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Stored CRC.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// The section is inconsistent.
    #[error("corrupt FILTER section: {0}")]
    Corrupt(String),
    /// A predicate names a column the segment does not have.
    #[error("no filter column {0}")]
    UnknownColumn(usize),
    /// A predicate applies an operator or literal to a column of the wrong type.
    #[error("operator {op} does not apply to filter column {column} of type {ty:?}")]
    TypeMismatch {
        /// Column index.
        column: usize,
        /// The column's type.
        ty: ColumnType,
        /// The operator.
        op: &'static str,
    },
}

/// The filter columns of one segment, in the segment's row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterColumns {
    rows: usize,
    columns: Vec<FilterColumn>,
}

impl FilterColumns {
    /// Encodes `values` (one entry per column, each with one value per row) for a segment of `rows`.
    ///
    /// Guarantees: fails, rather than building something inconsistent, when a column's length
    /// differs from `rows`, there are more than [`MAX_COLUMNS`] columns or `rows` does not fit `u32`.
    pub fn build(rows: usize, values: &[ColumnValues]) -> Result<Self, FilterError> {
        if values.len() > MAX_COLUMNS {
            return Err(FilterError::TooManyColumns(values.len()));
        }
        if u32::try_from(rows).is_err() {
            return Err(FilterError::TooManyRows(rows));
        }
        let columns = values
            .iter()
            .map(|v| {
                if v.len() == rows {
                    FilterColumn::encode(v)
                } else {
                    Err(FilterError::RowCount { expected: rows, actual: v.len() })
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { rows, columns })
    }

    /// Rows of the segment.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The columns, in declaration order.
    pub fn columns(&self) -> &[FilterColumn] {
        &self.columns
    }

    /// The FILTER section's bytes (layout in the module docs). Deterministic.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Reads a FILTER section for a segment of `rows` rows, validating everything listed in the
    /// module docs; never panics on any input.
    pub fn decode(bytes: &[u8], rows: usize) -> Result<Self, FilterError> {
        codec::decode(bytes, rows)
    }

    /// The rows where `predicate` is TRUE and where it is FALSE, under SQL's three-valued logic.
    ///
    /// Guarantees: equal to evaluating the predicate row by row on the raw values (tested
    /// against such a naive evaluator); a NULL never satisfies `=`, `IN`, a range, `&&` or `@>`.
    pub fn evaluate(&self, predicate: &Predicate) -> Result<Truth, FilterError> {
        predicate::evaluate(&self.columns, self.rows, predicate)
    }

    /// The allow-set of `predicate`: the rows where it is TRUE.
    pub fn allowed(&self, predicate: &Predicate) -> Result<Bitset, FilterError> {
        Ok(self.evaluate(predicate)?.true_rows)
    }

    /// The estimated number of rows where `predicate` is TRUE / FALSE, from the columns'
    /// statistics (postings sizes, block statistics), without building any row set.
    ///
    /// Guarantees: `lower ≤ actual ≤ upper` for both counts; both bounds equal the actual count
    /// for `=`, `IN` and ranges on posting-encoded columns and single-element `&&` / any `@>`
    /// with one element.
    pub fn estimate(&self, predicate: &Predicate) -> Result<Selectivity, FilterError> {
        estimate::estimate(&self.columns, self.rows, predicate)
    }
}
