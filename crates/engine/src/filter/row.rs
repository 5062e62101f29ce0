//! Filter values of one row in fixed-width form: what a memtable slot holds next to its vector,
//! and how a segment's FILTER section is built from such rows (and read back into them, for
//! merges).
//!
//! An index's [`FilterSchema`] lists its filter columns (the index's key columns after the
//! vector, in order). Each row's values are encoded into [`FilterSchema::row_words`] `u32` words
//! so that memtable slabs keep fixed-size rows:
//!
//! ```text
//! word 0                 NULL bits: bit c set = column c is NULL (at most 31 columns)
//! then per column c:
//!   int4 / int8 / timestamp / text    2 words: the key as i64, little-endian word order
//!   int[] / text[]                    1 word: element count n ≤ slots, then slots × 2 words:
//!                                     the n distinct keys, increasing, then zeros
//! ```
//!
//! Keys: integers and timestamps (microseconds) are their value; a text is its [`text_key`], a
//! 64-bit SipHash of its bytes. Texts are therefore compared by hash: two different texts may
//! share a key (probability about n² / 2⁶⁵ for n distinct texts), so a match on a text column
//! is a candidate that the executor rechecks against the row — pg_strata's scans always ask
//! for that recheck when they filter. An array keeps its distinct non-NULL elements (PostgreSQL's
//! `&&` and `@>` never match a NULL element, and duplicates do not change either operator), at
//! most the column's `slots`; a longer array is refused ([`RowError::ArrayTooLong`]).
//!
//! In a segment, text columns are stored as `int8` columns of their keys and text-array columns
//! as integer-array columns ([`FilterSchema::build_columns`]); [`FilterSchema::storage_predicate`]
//! turns a predicate's texts into keys so that it evaluates on both forms.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::columns::{ColumnBody, ColumnType, ColumnValues};
use super::predicate::{in_range, Literal, Predicate};
use super::{FilterColumns, FilterError};

/// The most filter columns an index may have (PostgreSQL's 32 index columns, less the vector).
pub const MAX_ROW_COLUMNS: usize = 31;
/// The array elements a filter column keeps per row unless the index says otherwise.
pub const DEFAULT_ARRAY_SLOTS: u16 = 32;
/// The most array elements a filter column may keep per row.
pub const MAX_ARRAY_SLOTS: u16 = 1024;

/// The key of a text: SipHash-1-3 of its bytes with fixed keys, as `i64`. Stable across
/// versions and platforms (it is stored in segment files).
pub fn text_key(bytes: &[u8]) -> i64 {
    use std::hash::Hasher;
    let mut hasher = siphasher::sip::SipHasher13::new_with_keys(0x7374_7261_7461_2d66, 0x696c_7465_722d_6b31);
    hasher.write(bytes);
    hasher.finish() as i64
}

/// One filter column of an index: its type and, for arrays, the elements a row may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterSpec {
    /// The column's type.
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// Array columns: the most distinct elements a row's array may hold (1 to
    /// [`MAX_ARRAY_SLOTS`]); 0 for scalar columns.
    #[serde(default)]
    pub slots: u16,
}

impl FilterSpec {
    /// A scalar column of type `ty`, or an array column with [`DEFAULT_ARRAY_SLOTS`].
    pub fn new(ty: ColumnType) -> Self {
        Self { ty, slots: if ty.is_array() { DEFAULT_ARRAY_SLOTS } else { 0 } }
    }

    /// Words of this column in an encoded row.
    pub fn words(self) -> usize {
        if self.ty.is_array() {
            1 + 2 * usize::from(self.slots)
        } else {
            2
        }
    }

    /// The column type a segment stores this column as (texts as their keys).
    pub fn stored_type(self) -> ColumnType {
        match self.ty {
            ColumnType::Text => ColumnType::Int8,
            ColumnType::TextArray => ColumnType::IntArray,
            other => other,
        }
    }
}

/// Why filter values could not be encoded, or a schema not formed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RowError {
    /// More than [`MAX_ROW_COLUMNS`] columns.
    #[error("an index can have at most {MAX_ROW_COLUMNS} filter columns, not {0}")]
    TooManyColumns(usize),
    /// An array column's slots outside 1 to [`MAX_ARRAY_SLOTS`], or slots on a scalar column.
    #[error("filter column {column}: {slots} array slots is outside 1 to {MAX_ARRAY_SLOTS}")]
    BadSlots {
        /// Column index.
        column: usize,
        /// The slots asked for.
        slots: u16,
    },
    /// A row with another number of values than the schema has columns.
    #[error("a row has {found} filter values, the index {expected} filter columns")]
    ValueCount {
        /// Columns of the schema.
        expected: usize,
        /// Values given.
        found: usize,
    },
    /// A value of the wrong kind for its column.
    #[error("filter column {column} of type {ty:?} cannot hold this value")]
    WrongKind {
        /// Column index.
        column: usize,
        /// The column's type.
        ty: ColumnType,
    },
    /// An array with more distinct elements than its column keeps.
    #[error(
        "an array of {elements} distinct elements exceeds the {slots} that filter column {column} of this index keeps"
    )]
    ArrayTooLong {
        /// Column index.
        column: usize,
        /// Distinct non-NULL elements of the array.
        elements: usize,
        /// The column's slots.
        slots: u16,
    },
    /// Encoded words of another length than [`FilterSchema::row_words`].
    #[error("an encoded filter row has {found} words, expected {expected}")]
    RowWords {
        /// Words per row.
        expected: usize,
        /// Words given.
        found: usize,
    },
}

/// One value of a row's filter column, as the extension reads it from a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue<'a> {
    /// SQL NULL.
    Null,
    /// An integer (int2, int4, int8) or timestamp (microseconds).
    Int(i64),
    /// A text's bytes.
    Text(&'a [u8]),
    /// An integer array (`None`: a NULL element).
    IntArray(Vec<Option<i64>>),
    /// A text array (`None`: a NULL element).
    TextArray(Vec<Option<&'a [u8]>>),
}

/// The filter columns of an index, in order (a fixed-size value, so that index configurations
/// stay `Copy` and fit shared memory).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FilterSchema {
    len: u8,
    specs: [FilterSpec; MAX_ROW_COLUMNS],
}

impl Default for FilterSchema {
    fn default() -> Self {
        Self { len: 0, specs: [FilterSpec { ty: ColumnType::Int8, slots: 0 }; MAX_ROW_COLUMNS] }
    }
}

impl std::fmt::Debug for FilterSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.columns()).finish()
    }
}

impl Serialize for FilterSchema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.columns().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FilterSchema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let specs = Vec::<FilterSpec>::deserialize(deserializer)?;
        Self::new(&specs).map_err(serde::de::Error::custom)
    }
}

impl FilterSchema {
    /// The schema of `specs`, checked: at most [`MAX_ROW_COLUMNS`] columns, array slots 1 to
    /// [`MAX_ARRAY_SLOTS`], none on scalars.
    pub fn new(specs: &[FilterSpec]) -> Result<Self, RowError> {
        if specs.len() > MAX_ROW_COLUMNS {
            return Err(RowError::TooManyColumns(specs.len()));
        }
        let mut schema = Self::default();
        for (column, spec) in specs.iter().enumerate() {
            let valid = if spec.ty.is_array() { (1..=MAX_ARRAY_SLOTS).contains(&spec.slots) } else { spec.slots == 0 };
            if !valid {
                return Err(RowError::BadSlots { column, slots: spec.slots });
            }
            schema.specs[column] = *spec;
        }
        schema.len = specs.len() as u8;
        Ok(schema)
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[FilterSpec] {
        &self.specs[..usize::from(self.len)]
    }

    /// Whether the index has no filter columns.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Words of an encoded row: 0 without filter columns.
    pub fn row_words(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            1 + self.columns().iter().map(|s| s.words()).sum::<usize>()
        }
    }

    /// Appends the encoding of `values` (one per column) to `out`; on error `out` is unchanged.
    pub fn encode_row(&self, values: &[FilterValue<'_>], out: &mut Vec<u32>) -> Result<(), RowError> {
        if values.len() != self.columns().len() {
            return Err(RowError::ValueCount { expected: self.columns().len(), found: values.len() });
        }
        let start = out.len();
        let result = self.encode_into(values, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_into(&self, values: &[FilterValue<'_>], out: &mut Vec<u32>) -> Result<(), RowError> {
        if self.is_empty() {
            return Ok(());
        }
        let nulls_at = out.len();
        out.push(0);
        for (column, (spec, value)) in self.columns().iter().zip(values).enumerate() {
            let wrong = || RowError::WrongKind { column, ty: spec.ty };
            if *value == FilterValue::Null {
                out[nulls_at] |= 1 << column;
                out.extend(std::iter::repeat_n(0, spec.words()));
                continue;
            }
            let keys = match (spec.ty, value) {
                (ColumnType::Int4, FilterValue::Int(v)) if i32::try_from(*v).is_ok() => vec![*v],
                (ColumnType::Int8 | ColumnType::Timestamp, FilterValue::Int(v)) => vec![*v],
                (ColumnType::Text, FilterValue::Text(bytes)) => vec![text_key(bytes)],
                (ColumnType::IntArray, FilterValue::IntArray(elements)) => elements.iter().flatten().copied().collect(),
                (ColumnType::TextArray, FilterValue::TextArray(elements)) => {
                    elements.iter().flatten().map(|b| text_key(b)).collect()
                }
                _ => return Err(wrong()),
            };
            if spec.ty.is_array() {
                let mut keys = keys;
                keys.sort_unstable();
                keys.dedup();
                if keys.len() > usize::from(spec.slots) {
                    return Err(RowError::ArrayTooLong { column, elements: keys.len(), slots: spec.slots });
                }
                out.push(keys.len() as u32);
                for slot in 0..usize::from(spec.slots) {
                    push_key(out, keys.get(slot).copied().unwrap_or(0));
                }
            } else {
                push_key(out, keys[0]);
            }
        }
        Ok(())
    }

    /// The keys of every column of an encoded row: `None` for NULL, one key for scalars, the
    /// distinct increasing element keys for arrays.
    pub fn decode_row(&self, words: &[u32]) -> Result<Vec<Option<Vec<i64>>>, RowError> {
        self.check_words(words)?;
        Ok((0..self.columns().len()).map(|c| self.column_keys(words, c).map(Keys::to_vec)).collect())
    }

    fn check_words(&self, words: &[u32]) -> Result<(), RowError> {
        if words.len() == self.row_words() {
            Ok(())
        } else {
            Err(RowError::RowWords { expected: self.row_words(), found: words.len() })
        }
    }

    /// Column `column`'s keys in `words` (a row of this schema), read in place; `None` for NULL.
    fn column_keys<'w>(&self, words: &'w [u32], column: usize) -> Option<Keys<'w>> {
        if words[0] & (1 << column) != 0 {
            return None;
        }
        let offset = 1 + self.columns()[..column].iter().map(|s| s.words()).sum::<usize>();
        let spec = self.columns()[column];
        let (start, count) = if spec.ty.is_array() { (offset + 1, words[offset] as usize) } else { (offset, 1) };
        Some(Keys { words: &words[start..start + 2 * count] })
    }

    /// Whether `predicate` (in storage form, [`FilterSchema::storage_predicate`]) is TRUE for the
    /// row `words` encodes, under SQL's three-valued logic.
    ///
    /// Guarantees: the same answer as evaluating the predicate on a segment built from this row
    /// alone ([`FilterSchema::build_columns`] then [`FilterColumns::evaluate`]); tested so.
    pub fn row_matches(&self, predicate: &Predicate, words: &[u32]) -> Result<bool, FilterError> {
        self.check_words(words).map_err(|e| FilterError::Corrupt(e.to_string()))?;
        Ok(self.row_truth(predicate, words)? == Some(true))
    }

    /// `Some(true)` TRUE, `Some(false)` FALSE, `None` UNKNOWN.
    fn row_truth(&self, predicate: &Predicate, words: &[u32]) -> Result<Option<bool>, FilterError> {
        let keys_of = |column: usize, op: &'static str| -> Result<Option<Keys<'_>>, FilterError> {
            let spec = *self.columns().get(column).ok_or(FilterError::UnknownColumn(column))?;
            let ok = match op {
                "IN" => !spec.ty.is_array(),
                "range" => spec.ty.is_ordered_scalar(),
                _ => spec.ty.is_array(),
            };
            if !ok {
                return Err(FilterError::TypeMismatch { column, ty: spec.ty, op });
            }
            Ok(self.column_keys(words, column))
        };
        let literal_keys =
            |column: usize, values: &[Literal], op: &'static str| -> Result<(Vec<i64>, bool), FilterError> {
                let spec = self.columns()[column];
                let mut keys = Vec::with_capacity(values.len());
                let mut has_null = false;
                for value in values {
                    match value {
                        Literal::Null => has_null = true,
                        Literal::Int(v) => keys.push(*v),
                        Literal::Text(t) if spec.stored_type() != spec.ty => keys.push(text_key(t.as_bytes())),
                        Literal::Text(_) => return Err(FilterError::TypeMismatch { column, ty: spec.ty, op }),
                    }
                }
                Ok((keys, has_null))
            };
        Ok(match predicate {
            Predicate::Eq { column, value } => {
                self.row_truth(&Predicate::In { column: *column, values: vec![value.clone()] }, words)?
            }
            Predicate::In { column, values } => {
                let row = keys_of(*column, "IN")?;
                let (keys, has_null) = literal_keys(*column, values, "IN")?;
                match row {
                    None => None,
                    Some(row) if keys.contains(&row.get(0)) => Some(true),
                    Some(_) if has_null => None,
                    Some(_) => Some(false),
                }
            }
            Predicate::Range { column, lower, upper } => {
                keys_of(*column, "range")?.map(|row| in_range(row.get(0), *lower, *upper))
            }
            Predicate::Overlaps { column, values } => {
                let row = keys_of(*column, "&&")?;
                let (keys, _) = literal_keys(*column, values, "&&")?;
                row.map(|row| keys.iter().any(|&k| row.contains(k)))
            }
            Predicate::Contains { column, values } => {
                let row = keys_of(*column, "@>")?;
                let (keys, has_null) = literal_keys(*column, values, "@>")?;
                row.map(|row| !has_null && keys.iter().all(|&k| row.contains(k)))
            }
            Predicate::And(parts) => {
                let mut acc = Some(true);
                for part in parts {
                    acc = match (acc, self.row_truth(part, words)?) {
                        (Some(false), _) | (_, Some(false)) => Some(false),
                        (Some(true), Some(true)) => Some(true),
                        _ => None,
                    };
                }
                acc
            }
            Predicate::Or(parts) => {
                let mut acc = Some(false);
                for part in parts {
                    acc = match (acc, self.row_truth(part, words)?) {
                        (Some(true), _) | (_, Some(true)) => Some(true),
                        (Some(false), Some(false)) => Some(false),
                        _ => None,
                    };
                }
                acc
            }
            Predicate::Not(inner) => self.row_truth(inner, words)?.map(|t| !t),
        })
    }

    /// `predicate` with every text literal on a text or text-array column replaced by its
    /// [`text_key`], the form segments built by [`FilterSchema::build_columns`] evaluate.
    pub fn storage_predicate(&self, predicate: &Predicate) -> Predicate {
        let hashed = |column: usize| self.columns().get(column).is_some_and(|s| s.stored_type() != s.ty);
        let keyed = |column: usize, values: &[Literal]| -> Vec<Literal> {
            values
                .iter()
                .map(|v| match v {
                    Literal::Text(t) if hashed(column) => Literal::Int(text_key(t.as_bytes())),
                    other => other.clone(),
                })
                .collect()
        };
        match predicate {
            Predicate::Eq { column, value } => {
                Predicate::Eq { column: *column, value: keyed(*column, std::slice::from_ref(value)).remove(0) }
            }
            Predicate::In { column, values } => Predicate::In { column: *column, values: keyed(*column, values) },
            Predicate::Overlaps { column, values } => {
                Predicate::Overlaps { column: *column, values: keyed(*column, values) }
            }
            Predicate::Contains { column, values } => {
                Predicate::Contains { column: *column, values: keyed(*column, values) }
            }
            Predicate::Range { .. } => predicate.clone(),
            Predicate::And(parts) => Predicate::And(parts.iter().map(|p| self.storage_predicate(p)).collect()),
            Predicate::Or(parts) => Predicate::Or(parts.iter().map(|p| self.storage_predicate(p)).collect()),
            Predicate::Not(inner) => Predicate::Not(Box::new(self.storage_predicate(inner))),
        }
    }

    /// The FILTER columns of a segment of `rows` rows whose encoded rows are `payload`
    /// (`rows × row_words` words, row-major).
    pub fn build_columns(&self, rows: usize, payload: &[u32]) -> Result<FilterColumns, FilterError> {
        let width = self.row_words();
        if payload.len() != rows * width {
            return Err(FilterError::RowCount { expected: rows, actual: payload.len() / width.max(1) });
        }
        let values: Vec<ColumnValues> = self
            .columns()
            .iter()
            .enumerate()
            .map(|(c, spec)| {
                let keys = payload.chunks_exact(width).map(|row| self.column_keys(row, c));
                match spec.stored_type() {
                    ColumnType::Int4 => ColumnValues::Int4(keys.map(|k| k.map(|k| k.get(0) as i32)).collect()),
                    ColumnType::Int8 => ColumnValues::Int8(keys.map(|k| k.map(|k| k.get(0))).collect()),
                    ColumnType::Timestamp => ColumnValues::Timestamp(keys.map(|k| k.map(|k| k.get(0))).collect()),
                    _ => ColumnValues::IntArray(keys.map(|k| k.map(|k| k.iter().map(Some).collect())).collect()),
                }
            })
            .collect();
        FilterColumns::build(rows, &values)
    }

    /// Appends to `out` the encoded row `row` of a segment whose filter columns `columns` were
    /// built by [`FilterSchema::build_columns`] (a merge carrying rows over).
    pub fn encode_segment_rows(&self, columns: &FilterColumns, out: &mut Vec<u32>) -> Result<(), FilterError> {
        if columns.columns().len() != self.columns().len()
            || columns.columns().iter().zip(self.columns()).any(|(c, s)| c.column_type() != s.stored_type())
        {
            return Err(FilterError::Corrupt("filter columns differ from the index's".into()));
        }
        let per_column: Vec<Vec<Option<Vec<i64>>>> =
            columns.columns().iter().map(super::FilterColumn::keys_by_row).collect();
        #[allow(clippy::needless_range_loop)] // one row across every column's list
        for row in 0..columns.rows() {
            let start = out.len();
            out.push(0);
            for (c, spec) in self.columns().iter().enumerate() {
                match &per_column[c][row] {
                    None => {
                        out[start] |= 1 << c;
                        out.extend(std::iter::repeat_n(0, spec.words()));
                    }
                    Some(keys) if spec.ty.is_array() => {
                        if keys.len() > usize::from(spec.slots) {
                            return Err(FilterError::Corrupt(format!(
                                "a segment row holds {} elements in filter column {c}, more than its {} slots",
                                keys.len(),
                                spec.slots
                            )));
                        }
                        out.push(keys.len() as u32);
                        for slot in 0..usize::from(spec.slots) {
                            push_key(out, keys.get(slot).copied().unwrap_or(0));
                        }
                    }
                    Some(keys) => push_key(out, keys[0]),
                }
            }
        }
        Ok(())
    }
}

fn push_key(out: &mut Vec<u32>, key: i64) {
    let bits = key as u64;
    out.push(bits as u32);
    out.push((bits >> 32) as u32);
}

/// The keys of one column of an encoded row, read in place (a slab row is only 4-byte aligned,
/// so keys are assembled from their two words rather than reinterpreted).
#[derive(Clone, Copy)]
struct Keys<'w> {
    words: &'w [u32],
}

impl<'w> Keys<'w> {
    fn len(self) -> usize {
        self.words.len() / 2
    }

    fn get(self, i: usize) -> i64 {
        (u64::from(self.words[2 * i]) | (u64::from(self.words[2 * i + 1]) << 32)) as i64
    }

    fn iter(self) -> impl Iterator<Item = i64> + use<'w> {
        (0..self.len()).map(move |i| self.get(i))
    }

    fn to_vec(self) -> Vec<i64> {
        self.iter().collect()
    }

    /// Whether `key` is among the keys (arrays keep them increasing).
    fn contains(self, key: i64) -> bool {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid).cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }
}

impl super::FilterColumn {
    /// The keys of every row, in row order: `None` for a NULL row, one key for scalar columns, the
    /// distinct increasing keys for arrays (dictionary ids for text columns).
    pub fn keys_by_row(&self) -> Vec<Option<Vec<i64>>> {
        let mut out: Vec<Option<Vec<i64>>> = vec![Some(Vec::new()); self.rows];
        for row in self.nulls.rows() {
            out[row as usize] = None;
        }
        match &self.body {
            ColumnBody::Postings { keys, postings, .. } => {
                for (key, posting) in keys.iter().zip(postings) {
                    for row in posting.rows() {
                        if let Some(row_keys) = &mut out[row as usize] {
                            row_keys.push(*key);
                        }
                    }
                }
            }
            ColumnBody::Blocks { values, .. } => {
                for (row, keys) in out.iter_mut().enumerate() {
                    if let Some(keys) = keys {
                        keys.push(values[row]);
                    }
                }
            }
        }
        out
    }
}
