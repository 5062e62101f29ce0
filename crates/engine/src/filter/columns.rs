//! Filter columns of a segment: the values of the columns a query may filter on, in the
//! segment's row order, encoded for predicate evaluation without touching vectors.
//!
//! # Encodings, chosen per column by cardinality
//!
//! - **Postings** (every text, int array and text array column, and scalar integer or timestamp
//!   columns with at most `rows / 8` distinct values): the sorted distinct keys (integers, or
//!   dictionary ids of texts / array elements) and, per key, the rows holding it. `=` and `IN`
//!   read exactly the matching rows, a range reads the postings of the keys in range (found by
//!   binary search), and every count is exact (a prefix sum of posting sizes).
//! - **Blocks** (integer or timestamp columns with more than `rows / 8` distinct values:
//!   timestamps, identifiers, measures): the values in row order plus, per block of
//!   [`BLOCK_ROWS`] rows, the minimum, maximum and count of non-NULL values. With nearly one
//!   row per value, postings would cost a key (8 bytes) and a posting header per row on top of
//!   the row id, and a wide range would union thousands of one-row lists; row-order values cost
//!   8 bytes per row. When the column is built or read, its non-NULL rows are also ordered by
//!   value in memory (4 bytes per row, not stored), so `=`, `IN` and ranges find their rows by
//!   binary search and count them exactly, however the values are ordered in the segment (a
//!   random timestamp or a unique key as much as an append-ordered one).
//!
//! Each posting (and the NULL rows of every column) is itself stored as a sorted `u32` row list
//! when that is smaller than a bitmap (`count · 32 < rows`), as a bitmap over the segment's rows
//! otherwise — the rule roaring bitmaps apply per 64 Ki container, applied here per posting.
//! A hand-written structure rather than the `roaring` crate: postings are a few lines of code,
//! segments are immutable (no updates to support), and the byte layout stays ours to document
//! and validate section by section like every other segment section.
//!
//! # NULLs
//!
//! A NULL scalar or a NULL array is in the column's NULL rows and in no posting. NULL elements
//! inside an array are dropped: PostgreSQL's `&&` and `@>` never find a NULL element equal to
//! anything, so they cannot contribute to a match.

use crate::bitset::Bitset;

use super::FilterError;

/// Rows per block of a [`ColumnBody::Blocks`] column.
pub const BLOCK_ROWS: usize = 1024;

/// A scalar column switches from postings to blocks above `rows / DISTINCT_RATIO` distinct values.
pub const DISTINCT_RATIO: usize = 8;

/// The SQL type a filter column holds (the code is its byte in the encoded section; the name, in
/// snake case, its name in manifests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ColumnType {
    /// `int4`, stored as `i64`.
    Int4 = 0,
    /// `int8`.
    Int8 = 1,
    /// `timestamp` / `timestamptz` as `i64` microseconds.
    Timestamp = 2,
    /// `text` (compared by bytes for `=`).
    Text = 3,
    /// `int4[]` / `int8[]`, elements as `i64`.
    IntArray = 4,
    /// `text[]`.
    TextArray = 5,
}

impl ColumnType {
    /// Every type, in code order.
    pub const ALL: [ColumnType; 6] = [
        ColumnType::Int4,
        ColumnType::Int8,
        ColumnType::Timestamp,
        ColumnType::Text,
        ColumnType::IntArray,
        ColumnType::TextArray,
    ];

    /// Whether values are integers ordered as `i64` (ranges allowed).
    pub fn is_ordered_scalar(self) -> bool {
        matches!(self, Self::Int4 | Self::Int8 | Self::Timestamp)
    }

    /// Whether values are arrays (`&&`, `@>`).
    pub fn is_array(self) -> bool {
        matches!(self, Self::IntArray | Self::TextArray)
    }

    /// Whether keys are dictionary ids of texts.
    pub fn has_dictionary(self) -> bool {
        matches!(self, Self::Text | Self::TextArray)
    }
}

crate::try_from_code!(ColumnType, "filter column type");

/// One column's values for every row of a segment, as the builder receives them (`None` is
/// SQL NULL; inside arrays, `None` is a NULL element).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnValues {
    /// `int4` values.
    Int4(Vec<Option<i32>>),
    /// `int8` values.
    Int8(Vec<Option<i64>>),
    /// Timestamps as `i64` microseconds.
    Timestamp(Vec<Option<i64>>),
    /// Texts.
    Text(Vec<Option<String>>),
    /// Integer arrays.
    IntArray(Vec<Option<Vec<Option<i64>>>>),
    /// Text arrays.
    TextArray(Vec<Option<Vec<Option<String>>>>),
}

impl ColumnValues {
    /// The column's type.
    pub fn column_type(&self) -> ColumnType {
        match self {
            Self::Int4(_) => ColumnType::Int4,
            Self::Int8(_) => ColumnType::Int8,
            Self::Timestamp(_) => ColumnType::Timestamp,
            Self::Text(_) => ColumnType::Text,
            Self::IntArray(_) => ColumnType::IntArray,
            Self::TextArray(_) => ColumnType::TextArray,
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        match self {
            Self::Int4(v) => v.len(),
            Self::Int8(v) | Self::Timestamp(v) => v.len(),
            Self::Text(v) => v.len(),
            Self::IntArray(v) => v.len(),
            Self::TextArray(v) => v.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A set of rows of a segment: a sorted list or a bitmap, whichever is smaller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posting {
    /// Strictly increasing row offsets.
    List(Vec<u32>),
    /// A bitmap over the segment's rows.
    Bitmap(Bitset),
}

impl Posting {
    /// The smaller form for `rows` (strictly increasing, each `< rows`) of a segment of `total` rows.
    pub fn from_sorted(rows: Vec<u32>, total: usize) -> Self {
        if rows.len() * 32 < total {
            Self::List(rows)
        } else {
            let mut set = Bitset::new(total);
            for &row in &rows {
                set.insert(row as usize);
            }
            Self::Bitmap(set)
        }
    }

    /// The number of rows held.
    pub fn count(&self) -> usize {
        match self {
            Self::List(rows) => rows.len(),
            Self::Bitmap(set) => set.count(),
        }
    }

    /// Adds every row held to `out`.
    pub fn add_to(&self, out: &mut Bitset) {
        match self {
            Self::List(rows) => rows.iter().for_each(|&row| out.insert(row as usize)),
            Self::Bitmap(set) => out.union_with(set),
        }
    }

    /// The rows held, increasing.
    pub fn rows(&self) -> Vec<u32> {
        match self {
            Self::List(rows) => rows.clone(),
            Self::Bitmap(set) => set.iter().map(|r| r as u32).collect(),
        }
    }
}

/// Statistics of one block of a [`ColumnBody::Blocks`] column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStats {
    /// The smallest non-NULL value (`i64::MAX` when the block has none).
    pub min: i64,
    /// The largest non-NULL value (`i64::MIN` when the block has none).
    pub max: i64,
    /// Non-NULL rows in the block.
    pub non_null: u32,
}

/// How a column's non-NULL values are stored (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnBody {
    /// Sorted distinct keys, each with the rows holding it.
    Postings {
        /// Strictly increasing keys (integers, or dictionary ids).
        keys: Vec<i64>,
        /// Rows per key, parallel to `keys`; each non-empty.
        postings: Vec<Posting>,
        /// `prefix[i]` = rows in `postings[..i]` (derived on decode; `keys.len() + 1` entries).
        prefix: Vec<u64>,
    },
    /// Values in row order with per-block statistics.
    Blocks {
        /// One value per row (0 for NULL rows).
        values: Vec<i64>,
        /// Statistics per [`BLOCK_ROWS`] rows.
        blocks: Vec<BlockStats>,
        /// Distinct non-NULL values in the column.
        distinct: u64,
        /// The non-NULL rows ordered by `(value, row)`: derived from `values` when the column is
        /// built or read (not stored), so that `=`, `IN` and ranges find their rows by binary
        /// search, and count them exactly, whatever the order of the values in the segment.
        order: Vec<u32>,
    },
}

/// One encoded filter column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterColumn {
    pub(crate) ty: ColumnType,
    pub(crate) rows: usize,
    /// Sorted distinct texts (text and text-array columns; empty otherwise): key `i` is `dict[i]`.
    pub(crate) dict: Vec<String>,
    /// Rows where the column is NULL.
    pub(crate) nulls: Posting,
    pub(crate) null_count: usize,
    pub(crate) body: ColumnBody,
}

impl FilterColumn {
    /// Encodes `values` (one per row of the segment, in row order).
    ///
    /// Guarantees: the column answers every predicate exactly as the raw values would under SQL
    /// semantics (tested against a naive evaluator); the encoding is a pure function of the
    /// values (same values, same bytes).
    pub fn encode(values: &ColumnValues) -> Result<Self, FilterError> {
        let rows = values.len();
        if u32::try_from(rows).is_err() {
            return Err(FilterError::TooManyRows(rows));
        }
        let ty = values.column_type();
        let mut dict = Vec::new();
        // Each row's keys (None = NULL row).
        let keyed: Vec<Option<Vec<i64>>> = match values {
            ColumnValues::Int4(v) => v.iter().map(|x| x.map(|x| vec![i64::from(x)])).collect(),
            ColumnValues::Int8(v) | ColumnValues::Timestamp(v) => v.iter().map(|x| x.map(|x| vec![x])).collect(),
            ColumnValues::Text(v) => {
                dict = sorted_dict(v.iter().flatten());
                v.iter().map(|x| x.as_ref().map(|s| vec![dict_id(&dict, s)])).collect()
            }
            ColumnValues::IntArray(v) => {
                v.iter().map(|a| a.as_ref().map(|a| dedup(a.iter().flatten().copied().collect()))).collect()
            }
            ColumnValues::TextArray(v) => {
                dict = sorted_dict(v.iter().flatten().flatten().flatten());
                v.iter()
                    .map(|a| a.as_ref().map(|a| dedup(a.iter().flatten().map(|s| dict_id(&dict, s)).collect())))
                    .collect()
            }
        };
        let null_rows: Vec<u32> = (0..rows).filter(|&r| keyed[r].is_none()).map(|r| r as u32).collect();
        let null_count = null_rows.len();
        let nulls = Posting::from_sorted(null_rows, rows);
        let mut by_key: std::collections::BTreeMap<i64, Vec<u32>> = std::collections::BTreeMap::new();
        for (row, keys) in keyed.iter().enumerate() {
            for &key in keys.iter().flatten() {
                by_key.entry(key).or_default().push(row as u32);
            }
        }
        let blocks = ty.is_ordered_scalar() && by_key.len() > rows / DISTINCT_RATIO;
        let body = if blocks {
            let values: Vec<i64> = keyed.iter().map(|k| k.as_ref().map_or(0, |k| k[0])).collect();
            let blocks = block_stats(&values, &nulls, rows);
            let order = value_order(&values, &nulls, rows);
            ColumnBody::Blocks { values, blocks, distinct: by_key.len() as u64, order }
        } else {
            let keys: Vec<i64> = by_key.keys().copied().collect();
            let postings: Vec<Posting> = by_key.into_values().map(|r| Posting::from_sorted(r, rows)).collect();
            let prefix = prefix_counts(&postings);
            ColumnBody::Postings { keys, postings, prefix }
        };
        Ok(Self { ty, rows, dict, nulls, null_count, body })
    }

    /// The column's type.
    pub fn column_type(&self) -> ColumnType {
        self.ty
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Rows where the column is NULL (exact).
    pub fn null_count(&self) -> usize {
        self.null_count
    }

    /// The encoded body.
    pub fn body(&self) -> &ColumnBody {
        &self.body
    }

    /// The dictionary id of `text`, if any row holds it (text and text-array columns).
    pub fn text_key(&self, text: &str) -> Option<i64> {
        self.dict.binary_search_by(|d| d.as_str().cmp(text)).ok().map(|i| i as i64)
    }

    /// The rows where the column is not NULL.
    pub fn non_null(&self) -> Bitset {
        let mut set = Bitset::full(self.rows);
        match &self.nulls {
            Posting::List(rows) => rows.iter().for_each(|&r| set.remove(r as usize)),
            Posting::Bitmap(nulls) => {
                for r in nulls.iter() {
                    set.remove(r);
                }
            }
        }
        set
    }
}

fn sorted_dict<'a>(texts: impl Iterator<Item = &'a String>) -> Vec<String> {
    let set: std::collections::BTreeSet<&String> = texts.collect();
    set.into_iter().cloned().collect()
}

fn dict_id(dict: &[String], text: &str) -> i64 {
    dict.binary_search_by(|d| d.as_str().cmp(text)).expect("the dictionary holds every text") as i64
}

fn dedup(mut keys: Vec<i64>) -> Vec<i64> {
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// `prefix[i]` = rows in `postings[..i]`.
pub(crate) fn prefix_counts(postings: &[Posting]) -> Vec<u64> {
    let mut prefix = Vec::with_capacity(postings.len() + 1);
    let mut total = 0u64;
    prefix.push(0);
    for posting in postings {
        total += posting.count() as u64;
        prefix.push(total);
    }
    prefix
}

/// The rows not in `nulls` ordered by `(values[row], row)`.
pub(crate) fn value_order(values: &[i64], nulls: &Posting, rows: usize) -> Vec<u32> {
    let mut null_set = Bitset::new(rows);
    nulls.add_to(&mut null_set);
    let mut order: Vec<u32> = (0..rows).filter(|&row| !null_set.contains(row)).map(|row| row as u32).collect();
    order.sort_unstable_by_key(|&row| (values[row as usize], row));
    order
}

/// The range of positions in `order` (rows ordered by `(values[row], row)`) whose values lie
/// within the bounds.
pub(crate) fn order_span(
    values: &[i64],
    order: &[u32],
    lower: std::ops::Bound<i64>,
    upper: std::ops::Bound<i64>,
) -> std::ops::Range<usize> {
    use std::ops::Bound;
    let value = |at: usize| values[order[at] as usize];
    let first = |below: &dyn Fn(i64) -> bool| {
        let (mut lo, mut hi) = (0, order.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(value(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let start = match lower {
        Bound::Included(l) => first(&|v| v < l),
        Bound::Excluded(l) => first(&|v| v <= l),
        Bound::Unbounded => 0,
    };
    let end = match upper {
        Bound::Included(u) => first(&|v| v <= u),
        Bound::Excluded(u) => first(&|v| v < u),
        Bound::Unbounded => order.len(),
    };
    start..end.max(start)
}

/// Statistics per block over `values`, skipping rows in `nulls`.
pub(crate) fn block_stats(values: &[i64], nulls: &Posting, rows: usize) -> Vec<BlockStats> {
    let mut null_set = Bitset::new(rows);
    nulls.add_to(&mut null_set);
    values
        .chunks(BLOCK_ROWS)
        .enumerate()
        .map(|(b, chunk)| {
            let mut stats = BlockStats { min: i64::MAX, max: i64::MIN, non_null: 0 };
            for (i, &v) in chunk.iter().enumerate() {
                if !null_set.contains(b * BLOCK_ROWS + i) {
                    stats.min = stats.min.min(v);
                    stats.max = stats.max.max(v);
                    stats.non_null += 1;
                }
            }
            stats
        })
        .collect()
}
