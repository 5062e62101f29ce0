//! Typed predicates over filter columns, evaluated under SQL's three-valued logic into the set
//! of rows where they are TRUE (an allow-set), without touching vectors.
//!
//! Evaluation keeps two sets per sub-predicate, the rows where it is TRUE and those where it is
//! FALSE (the rest are UNKNOWN): `AND` intersects the TRUE sets and unites the FALSE sets, `OR`
//! the converse, `NOT` swaps them. That is Kleene's logic, which is SQL's, so `NOT` is exact
//! with NULLs: `NOT (x = 1)` never accepts a row where `x` is NULL.

use std::ops::Bound;

use super::columns::{order_span, ColumnBody, FilterColumn, Posting};
use super::FilterError;
use crate::bitset::Bitset;

/// A literal operand (`Null` is SQL NULL).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Literal {
    /// NULL.
    Null,
    /// An integer or timestamp (microseconds).
    Int(i64),
    /// A text.
    Text(String),
}

/// A predicate over the filter columns (by index) of a segment (serialisable: pg_strata's
/// planner hook hands an index an `OR` of conditions as JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Predicate {
    /// `column = value` (int, timestamp or text column).
    Eq {
        /// Column index.
        column: usize,
        /// The value.
        value: Literal,
    },
    /// `column IN (values…)` (int, timestamp or text column).
    In {
        /// Column index.
        column: usize,
        /// The list.
        values: Vec<Literal>,
    },
    /// `lower <op> column <op> upper` on an int or timestamp column (`Unbounded` = no bound).
    Range {
        /// Column index.
        column: usize,
        /// The lower bound.
        lower: Bound<i64>,
        /// The upper bound.
        upper: Bound<i64>,
    },
    /// `column && ARRAY[values…]` (array column).
    Overlaps {
        /// Column index.
        column: usize,
        /// The array operand's elements.
        values: Vec<Literal>,
    },
    /// `column @> ARRAY[values…]` (array column).
    Contains {
        /// Column index.
        column: usize,
        /// The array operand's elements.
        values: Vec<Literal>,
    },
    /// Every sub-predicate (TRUE for an empty list).
    And(Vec<Predicate>),
    /// Any sub-predicate (FALSE for an empty list).
    Or(Vec<Predicate>),
    /// Negation (TRUE where the operand is FALSE; UNKNOWN stays UNKNOWN).
    Not(Box<Predicate>),
}

/// Rows where a predicate is TRUE and where it is FALSE (disjoint); others are UNKNOWN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truth {
    /// Rows where the predicate is TRUE: the allow-set.
    pub true_rows: Bitset,
    /// Rows where the predicate is FALSE.
    pub false_rows: Bitset,
}

/// What a leaf's literals mean for one column: its keys, and whether a NULL or an unknown text
/// was among them.
#[allow(clippy::struct_field_names)]
pub(super) struct Keys {
    pub keys: Vec<i64>,
    pub has_null: bool,
    /// Some literal has no key (a text no row holds): matches nothing.
    pub missing: bool,
}

pub(super) fn column(columns: &[FilterColumn], index: usize) -> Result<&FilterColumn, FilterError> {
    columns.get(index).ok_or(FilterError::UnknownColumn(index))
}

/// Type-checks `values` against `column` and maps them to keys.
pub(super) fn keys(
    column: &FilterColumn,
    index: usize,
    values: &[Literal],
    op: &'static str,
) -> Result<Keys, FilterError> {
    let mut out = Keys { keys: Vec::new(), has_null: false, missing: false };
    for value in values {
        match (value, column.ty.has_dictionary()) {
            (Literal::Null, _) => out.has_null = true,
            (Literal::Int(v), false) => out.keys.push(*v),
            (Literal::Text(t), true) => match column.text_key(t) {
                Some(key) => out.keys.push(key),
                None => out.missing = true,
            },
            _ => return Err(FilterError::TypeMismatch { column: index, ty: column.ty, op }),
        }
    }
    out.keys.sort_unstable();
    out.keys.dedup();
    Ok(out)
}

/// Checks that `op` applies to `column`'s type.
pub(super) fn check_op(column: &FilterColumn, index: usize, op: &'static str) -> Result<(), FilterError> {
    let ok = match op {
        "=" | "IN" => !column.ty.is_array(),
        "range" => column.ty.is_ordered_scalar(),
        _ => column.ty.is_array(),
    };
    if ok {
        Ok(())
    } else {
        Err(FilterError::TypeMismatch { column: index, ty: column.ty, op })
    }
}

/// Whether `v` lies within the bounds.
pub(super) fn in_range(v: i64, lower: Bound<i64>, upper: Bound<i64>) -> bool {
    (match lower {
        Bound::Included(l) => v >= l,
        Bound::Excluded(l) => v > l,
        Bound::Unbounded => true,
    }) && (match upper {
        Bound::Included(u) => v <= u,
        Bound::Excluded(u) => v < u,
        Bound::Unbounded => true,
    })
}

/// The index range of `keys` (sorted) within the bounds.
pub(super) fn key_span(keys: &[i64], lower: Bound<i64>, upper: Bound<i64>) -> std::ops::Range<usize> {
    let start = match lower {
        Bound::Included(l) => keys.partition_point(|&k| k < l),
        Bound::Excluded(l) => keys.partition_point(|&k| k <= l),
        Bound::Unbounded => 0,
    };
    let end = match upper {
        Bound::Included(u) => keys.partition_point(|&k| k <= u),
        Bound::Excluded(u) => keys.partition_point(|&k| k < u),
        Bound::Unbounded => keys.len(),
    };
    start..end.max(start)
}

/// The TRUE rows of a scalar leaf: rows whose value is one of `keys` or in the bounds.
fn scalar_rows(column: &FilterColumn, keys: Option<&[i64]>, lower: Bound<i64>, upper: Bound<i64>) -> Bitset {
    let mut out = Bitset::new(column.rows);
    match &column.body {
        ColumnBody::Postings { keys: all, postings, .. } => match keys {
            Some(keys) => {
                for key in keys {
                    if let Ok(i) = all.binary_search(key) {
                        postings[i].add_to(&mut out);
                    }
                }
            }
            None => postings[key_span(all, lower, upper)].iter().for_each(|p| p.add_to(&mut out)),
        },
        ColumnBody::Blocks { values, order, .. } => {
            let mut add = |span: std::ops::Range<usize>| {
                for &row in &order[span] {
                    out.insert(row as usize);
                }
            };
            match keys {
                Some(keys) => {
                    for &k in keys {
                        add(order_span(values, order, Bound::Included(k), Bound::Included(k)));
                    }
                }
                None => add(order_span(values, order, lower, upper)),
            }
        }
    }
    out
}

/// The rows holding each of `keys` (array column), united or intersected.
fn array_rows(column: &FilterColumn, keys: &[i64], all: bool) -> Bitset {
    let ColumnBody::Postings { keys: known, postings, .. } = &column.body else {
        unreachable!("array columns are always stored as postings")
    };
    let posting = |key: &i64| known.binary_search(key).ok().map(|i| &postings[i]);
    if all {
        let mut out = column.non_null();
        for key in keys {
            let mut rows = Bitset::new(column.rows);
            if let Some(p) = posting(key) {
                p.add_to(&mut rows);
            }
            intersect(&mut out, &rows);
        }
        out
    } else {
        let mut out = Bitset::new(column.rows);
        keys.iter().filter_map(posting).for_each(|p: &Posting| p.add_to(&mut out));
        out
    }
}

fn intersect(a: &mut Bitset, b: &Bitset) {
    let words: Vec<u64> = a.words().iter().zip(b.words()).map(|(x, y)| x & y).collect();
    *a = Bitset::from_words(words, a.len()).expect("same length");
}

fn minus(a: &Bitset, b: &Bitset) -> Bitset {
    let words: Vec<u64> = a.words().iter().zip(b.words()).map(|(x, y)| x & !y).collect();
    Bitset::from_words(words, a.len()).expect("same length")
}

/// Evaluates `predicate` over `columns` (each of `rows` rows).
pub(super) fn evaluate(columns: &[FilterColumn], rows: usize, predicate: &Predicate) -> Result<Truth, FilterError> {
    let leaf = |index: usize, true_rows: Bitset, false_is_rest: bool| -> Result<Truth, FilterError> {
        let c = column(columns, index)?;
        let false_rows = if false_is_rest { minus(&c.non_null(), &true_rows) } else { Bitset::new(rows) };
        Ok(Truth { true_rows, false_rows })
    };
    match predicate {
        Predicate::Eq { column: index, value } => {
            evaluate(columns, rows, &Predicate::In { column: *index, values: vec![value.clone()] })
        }
        Predicate::In { column: index, values } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "IN")?;
            let k = keys(c, *index, values, "IN")?;
            let t = scalar_rows(c, Some(&k.keys), Bound::Unbounded, Bound::Unbounded);
            // x IN (…, NULL) is UNKNOWN, never FALSE, where no listed value matches.
            leaf(*index, t, !k.has_null)
        }
        Predicate::Range { column: index, lower, upper } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "range")?;
            leaf(*index, scalar_rows(c, None, *lower, *upper), true)
        }
        Predicate::Overlaps { column: index, values } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "&&")?;
            let k = keys(c, *index, values, "&&")?;
            leaf(*index, array_rows(c, &k.keys, false), true)
        }
        Predicate::Contains { column: index, values } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "@>")?;
            let k = keys(c, *index, values, "@>")?;
            // A NULL element or a text no row holds can never be found: FALSE for every non-NULL array.
            let t = if k.has_null || k.missing { Bitset::new(rows) } else { array_rows(c, &k.keys, true) };
            leaf(*index, t, true)
        }
        Predicate::And(parts) => {
            let mut acc = Truth { true_rows: Bitset::full(rows), false_rows: Bitset::new(rows) };
            for part in parts {
                let t = evaluate(columns, rows, part)?;
                intersect(&mut acc.true_rows, &t.true_rows);
                acc.false_rows.union_with(&t.false_rows);
            }
            Ok(acc)
        }
        Predicate::Or(parts) => {
            let mut acc = Truth { true_rows: Bitset::new(rows), false_rows: Bitset::full(rows) };
            for part in parts {
                let t = evaluate(columns, rows, part)?;
                acc.true_rows.union_with(&t.true_rows);
                intersect(&mut acc.false_rows, &t.false_rows);
            }
            Ok(acc)
        }
        Predicate::Not(inner) => {
            let t = evaluate(columns, rows, inner)?;
            Ok(Truth { true_rows: t.false_rows, false_rows: t.true_rows })
        }
    }
}
