//! Selectivity estimates from a segment's own column statistics, without evaluating postings.
//!
//! Every estimate carries bounds that are guaranteed: `lower ≤ true count ≤ upper` (tested
//! against evaluation). Leaves over postings are exact (prefix sums of posting sizes), and so are
//! leaves over block-encoded columns (binary search in their rows' value order);
//! `&&` / `@>` are bounded by their postings' sizes. Combinations keep both the TRUE and the
//! FALSE counts (for `NOT`) and use the Fréchet bounds (`AND`: `max(0, a + b − n) … min(a, b)`),
//! with independence for the point estimate.

use std::ops::Bound;

use super::columns::{ColumnBody, FilterColumn};
use super::predicate::{check_op, column, key_span, keys, Predicate};
use super::FilterError;

/// An estimated number of rows with guaranteed bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Count {
    /// No fewer rows than this.
    pub lower: usize,
    /// No more rows than this.
    pub upper: usize,
    /// The point estimate, within `[lower, upper]`.
    pub estimate: f64,
}

impl Count {
    fn exact(n: usize) -> Self {
        Self { lower: n, upper: n, estimate: n as f64 }
    }

    fn new(lower: usize, upper: usize, estimate: f64) -> Self {
        Self { lower, upper, estimate: estimate.clamp(lower as f64, upper as f64) }
    }

    /// Whether the bounds meet (the count is known exactly).
    pub fn is_exact(&self) -> bool {
        self.lower == self.upper
    }
}

/// Estimated rows where a predicate is TRUE (the allow-set's size) and FALSE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selectivity {
    /// Rows where it is TRUE.
    pub true_rows: Count,
    /// Rows where it is FALSE.
    pub false_rows: Count,
    /// Rows in the segment.
    pub rows: usize,
}

impl Selectivity {
    /// The estimated fraction of rows accepted (0 for an empty segment).
    pub fn fraction(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            self.true_rows.estimate / self.rows as f64
        }
    }
}

fn leaf(c: &FilterColumn, t: Count, false_is_rest: bool) -> Selectivity {
    let non_null = c.rows - c.null_count;
    let f = if false_is_rest {
        Count::new(non_null - t.upper, non_null - t.lower, non_null as f64 - t.estimate)
    } else {
        Count::exact(0)
    };
    Selectivity { true_rows: t, false_rows: f, rows: c.rows }
}

/// Rows of a scalar column whose value is one of `keys` (when given) or within the bounds.
#[allow(clippy::single_match_else)]
fn scalar_count(c: &FilterColumn, keys: Option<&[i64]>, lower: Bound<i64>, upper: Bound<i64>) -> Count {
    match &c.body {
        ColumnBody::Postings { keys: all, prefix, .. } => match keys {
            Some(keys) => Count::exact(
                keys.iter()
                    .filter_map(|k| all.binary_search(k).ok())
                    .map(|i| (prefix[i + 1] - prefix[i]) as usize)
                    .sum(),
            ),
            None => {
                let span = key_span(all, lower, upper);
                Count::exact((prefix[span.end] - prefix[span.start]) as usize)
            }
        },
        ColumnBody::Blocks { values, order, .. } => Count::exact(match keys {
            Some(keys) => keys
                .iter()
                .map(|&k| super::columns::order_span(values, order, Bound::Included(k), Bound::Included(k)).len())
                .sum(),
            None => super::columns::order_span(values, order, lower, upper).len(),
        }),
    }
}

/// Estimates `predicate` over `columns` (each of `rows` rows).
pub(super) fn estimate(
    columns: &[FilterColumn],
    rows: usize,
    predicate: &Predicate,
) -> Result<Selectivity, FilterError> {
    let n = rows as f64;
    match predicate {
        Predicate::Eq { column: index, value } => {
            estimate(columns, rows, &Predicate::In { column: *index, values: vec![value.clone()] })
        }
        Predicate::In { column: index, values } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "IN")?;
            let k = keys(c, *index, values, "IN")?;
            Ok(leaf(c, scalar_count(c, Some(&k.keys), Bound::Unbounded, Bound::Unbounded), !k.has_null))
        }
        Predicate::Range { column: index, lower, upper } => {
            let c = column(columns, *index)?;
            check_op(c, *index, "range")?;
            Ok(leaf(c, scalar_count(c, None, *lower, *upper), true))
        }
        Predicate::Overlaps { column: index, values } | Predicate::Contains { column: index, values } => {
            let all = matches!(predicate, Predicate::Contains { .. });
            let c = column(columns, *index)?;
            check_op(c, *index, if all { "@>" } else { "&&" })?;
            let k = keys(c, *index, values, if all { "@>" } else { "&&" })?;
            let non_null = c.rows - c.null_count;
            let ColumnBody::Postings { keys: known, prefix, .. } = &c.body else {
                unreachable!("array columns are always stored as postings")
            };
            let counts: Vec<usize> = k
                .keys
                .iter()
                .map(|key| known.binary_search(key).map_or(0, |i| (prefix[i + 1] - prefix[i]) as usize))
                .collect();
            let t = if all {
                if k.has_null || k.missing {
                    Count::exact(0)
                } else if counts.is_empty() {
                    Count::exact(non_null)
                } else {
                    let min = counts.iter().copied().min().unwrap_or(0);
                    let sum: usize = counts.iter().sum();
                    let lower = sum.saturating_sub((counts.len() - 1) * non_null);
                    let est = counts.iter().fold(non_null as f64, |acc, &c| acc * c as f64 / non_null.max(1) as f64);
                    Count::new(lower, min, est)
                }
            } else if counts.len() <= 1 {
                Count::exact(counts.first().copied().unwrap_or(0))
            } else {
                let max = counts.iter().copied().max().unwrap_or(0);
                let sum: usize = counts.iter().sum();
                let miss = counts.iter().fold(1.0, |acc, &c| acc * (1.0 - c as f64 / non_null.max(1) as f64));
                Count::new(max, sum.min(non_null), non_null as f64 * (1.0 - miss))
            };
            Ok(leaf(c, t, true))
        }
        Predicate::And(parts) | Predicate::Or(parts) => {
            let and = matches!(predicate, Predicate::And(_));
            let mut acc = if and {
                Selectivity { true_rows: Count::exact(rows), false_rows: Count::exact(0), rows }
            } else {
                Selectivity { true_rows: Count::exact(0), false_rows: Count::exact(rows), rows }
            };
            for part in parts {
                let s = estimate(columns, rows, part)?;
                let (t, f) = if and {
                    (both(acc.true_rows, s.true_rows, rows, n), either(acc.false_rows, s.false_rows, rows, n))
                } else {
                    (either(acc.true_rows, s.true_rows, rows, n), both(acc.false_rows, s.false_rows, rows, n))
                };
                acc.true_rows = t;
                acc.false_rows = f;
            }
            Ok(acc)
        }
        Predicate::Not(inner) => {
            let s = estimate(columns, rows, inner)?;
            Ok(Selectivity { true_rows: s.false_rows, false_rows: s.true_rows, rows })
        }
    }
}

/// Rows in both sets (Fréchet bounds; independence estimate).
fn both(a: Count, b: Count, rows: usize, n: f64) -> Count {
    let est = if rows == 0 { 0.0 } else { a.estimate * b.estimate / n };
    Count::new((a.lower + b.lower).saturating_sub(rows), a.upper.min(b.upper), est)
}

/// Rows in either set.
fn either(a: Count, b: Count, rows: usize, n: f64) -> Count {
    let est = if rows == 0 { 0.0 } else { a.estimate + b.estimate - a.estimate * b.estimate / n };
    Count::new(a.lower.max(b.lower), (a.upper + b.upper).min(rows), est)
}
