//! The filter a WHERE clause hands an index scan: PostgreSQL's scan keys on the filter columns,
//! as the extension reads them, made into one [`Predicate`] (their conjunction).
//!
//! Strategy numbers are those of pg_strata's filter operator classes (`sql/am.sql`):
//! 1 `<`, 2 `<=`, 3 `=`, 4 `>=`, 5 `>` (integers, timestamps; texts `=` only), 6 `&&`, 7 `@>`
//! (arrays). Texts arrive as their [`text_key`](strata_engine::filter::row::text_key)s.
//!
//! Every scan that filters asks the executor to recheck its rows against the original
//! clauses (pg_strata sets `xs_recheck`), so a key this module cannot translate (an operator
//! applied where the index has no use for it) is left out of the predicate rather than
//! refused: the filter then admits more rows, never fewer, and the recheck removes them.

use std::ops::Bound;

use strata_engine::filter::{FilterSchema, Literal, Predicate};

/// A filter operator class's operator, by strategy number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum FilterOp {
    /// `<`.
    Less = 1,
    /// `<=`.
    LessEqual = 2,
    /// `=`.
    Equal = 3,
    /// `>=`.
    GreaterEqual = 4,
    /// `>`.
    Greater = 5,
    /// `&&` (arrays overlap).
    Overlaps = 6,
    /// `@>` (the column's array contains the argument's elements).
    Contains = 7,
}

impl FilterOp {
    /// Every operator, in strategy order.
    pub const ALL: [Self; 7] =
        [Self::Less, Self::LessEqual, Self::Equal, Self::GreaterEqual, Self::Greater, Self::Overlaps, Self::Contains];

    /// The operator of strategy number `strategy`, if it is one.
    pub fn from_strategy(strategy: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|op| *op as u16 == strategy)
    }

    /// The range `column <op> value` admits (comparison operators only).
    fn range(self, value: i64) -> Option<(Bound<i64>, Bound<i64>)> {
        Some(match self {
            Self::Less => (Bound::Unbounded, Bound::Excluded(value)),
            Self::LessEqual => (Bound::Unbounded, Bound::Included(value)),
            Self::GreaterEqual => (Bound::Included(value), Bound::Unbounded),
            Self::Greater => (Bound::Excluded(value), Bound::Unbounded),
            Self::Equal | Self::Overlaps | Self::Contains => return None,
        })
    }
}

/// The strategy number of the marker operator `<?>` on the vector column, whose argument is a
/// whole predicate as JSON ([`decode_predicate`]): pg_strata's planner hook hands the index an
/// `OR` of filter-column conditions that way (PostgreSQL has no scan key for an `OR`).
pub const PREDICATE_STRATEGY: u16 = 8;

/// The JSON argument of a marker key holding `predicate` ([`decode_predicate`] reads it back).
pub fn encode_predicate(predicate: &Predicate) -> String {
    serde_json::to_string(predicate).expect("predicates serialise")
}

/// The predicate a marker key's JSON argument holds, when it is one over `schema`'s columns with
/// operators their types take; `None` otherwise (the key is then left out, as any unusable key).
/// The predicate must hold no `NOT`: a text matched by its hash may be a different text, so only
/// predicates that can only widen under such a match are accepted.
pub fn decode_predicate(json: &str, schema: &FilterSchema) -> Option<Predicate> {
    let predicate: Predicate = serde_json::from_str(json).ok()?;
    fits(&predicate, schema).then_some(predicate)
}

/// Whether every leaf of `predicate` names a column of `schema` with an operator its type takes,
/// and no `NOT` appears.
pub fn fits(predicate: &Predicate, schema: &FilterSchema) -> bool {
    let column = |c: usize, array: bool, ordered: bool| {
        schema.columns().get(c).is_some_and(|s| s.ty.is_array() == array && (!ordered || s.ty.is_ordered_scalar()))
    };
    match predicate {
        Predicate::Eq { column: c, .. } | Predicate::In { column: c, .. } => column(*c, false, false),
        Predicate::Range { column: c, .. } => column(*c, false, true),
        Predicate::Overlaps { column: c, .. } | Predicate::Contains { column: c, .. } => column(*c, true, false),
        Predicate::And(parts) | Predicate::Or(parts) => parts.iter().all(|p| fits(p, schema)),
        Predicate::Not(_) => false,
    }
}

/// A scan key's argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyArgument {
    /// The argument is NULL: the comparison is never TRUE.
    Null,
    /// One value (`column = 5`).
    Value(Literal),
    /// `column <op> ANY(array)`: any of these values (NULL elements included as [`Literal::Null`]).
    AnyOf(Vec<Literal>),
    /// An array operand of `&&` / `@>` (its elements).
    Array(Vec<Literal>),
}

/// One scan key on a filter column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterKey {
    /// The filter column (0 = the index's second column).
    pub column: usize,
    /// The operator.
    pub op: FilterOp,
    /// Its argument.
    pub argument: KeyArgument,
}

/// The predicate a scan with `keys` (ANDed) admits rows by, over filter columns `schema`:
/// TRUE only where every key is TRUE, never narrower than the keys. Keys the index cannot use
/// (wrong column, operator or argument) are left out (see the module docs).
pub fn predicate(keys: &[FilterKey], schema: &FilterSchema) -> Predicate {
    Predicate::And(merge_ranges(keys.iter().filter_map(|key| key_predicate(key, schema)).collect()))
}

/// `parts` (a conjunction) with the ranges on one column merged into one (`a >= x AND a < y`
/// arrive as two keys; one range finds its rows once instead of two half-open ranges each
/// finding most of the rows).
fn merge_ranges(parts: Vec<Predicate>) -> Vec<Predicate> {
    let mut out: Vec<Predicate> = Vec::with_capacity(parts.len());
    for part in parts {
        if let Predicate::Range { column, lower, upper } = part {
            let existing = out.iter_mut().find_map(|p| match p {
                Predicate::Range { column: c, lower: l, upper: u } if *c == column => Some((l, u)),
                _ => None,
            });
            if let Some((l, u)) = existing {
                *l = tighter_lower(*l, lower);
                *u = tighter_upper(*u, upper);
                continue;
            }
            out.push(Predicate::Range { column, lower, upper });
        } else {
            out.push(part);
        }
    }
    out
}

/// The stricter of two lower bounds.
fn tighter_lower(a: Bound<i64>, b: Bound<i64>) -> Bound<i64> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// The stricter of two upper bounds.
fn tighter_upper(a: Bound<i64>, b: Bound<i64>) -> Bound<i64> {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// Never TRUE.
fn never() -> Predicate {
    Predicate::Or(Vec::new())
}

/// The predicate of one key (see [`predicate`]); `None` for a key the index cannot use.
pub fn key_predicate(key: &FilterKey, schema: &FilterSchema) -> Option<Predicate> {
    let spec = schema.columns().get(key.column)?;
    let column = key.column;
    if key.argument == KeyArgument::Null {
        return Some(never());
    }
    match (key.op, &key.argument) {
        (FilterOp::Overlaps, KeyArgument::Array(values)) if spec.ty.is_array() => {
            Some(Predicate::Overlaps { column, values: values.clone() })
        }
        (FilterOp::Contains, KeyArgument::Array(values)) if spec.ty.is_array() => {
            Some(Predicate::Contains { column, values: values.clone() })
        }
        (FilterOp::Equal, KeyArgument::Value(value)) if !spec.ty.is_array() => {
            Some(Predicate::Eq { column, value: value.clone() })
        }
        (FilterOp::Equal, KeyArgument::AnyOf(values)) if !spec.ty.is_array() => {
            Some(Predicate::In { column, values: values.clone() })
        }
        (op, KeyArgument::Value(Literal::Int(value))) if spec.ty.is_ordered_scalar() => {
            let (lower, upper) = op.range(*value)?;
            Some(Predicate::Range { column, lower, upper })
        }
        (op, KeyArgument::AnyOf(values)) if spec.ty.is_ordered_scalar() && op.range(0).is_some() => {
            // `x < ANY(…)`: TRUE where it holds for some non-NULL element.
            let ranges = values
                .iter()
                .filter_map(|v| match v {
                    Literal::Int(v) => op.range(*v),
                    _ => None,
                })
                .map(|(lower, upper)| Predicate::Range { column, lower, upper })
                .collect();
            Some(Predicate::Or(ranges))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use strata_engine::filter::{ColumnType, FilterSpec};

    use super::*;

    fn schema() -> FilterSchema {
        FilterSchema::new(&[
            FilterSpec::new(ColumnType::Int8),
            FilterSpec::new(ColumnType::Text),
            FilterSpec::new(ColumnType::IntArray),
        ])
        .unwrap()
    }

    fn key(column: usize, op: FilterOp, argument: KeyArgument) -> FilterKey {
        FilterKey { column, op, argument }
    }

    #[test]
    fn strategies_are_the_sql_numbers() {
        for (n, op) in (1..=7).zip(FilterOp::ALL) {
            assert_eq!(FilterOp::from_strategy(n), Some(op));
        }
        assert_eq!(FilterOp::from_strategy(0), None);
        assert_eq!(FilterOp::from_strategy(8), None);
    }

    #[test]
    fn keys_become_one_conjunction() {
        let int = |v| Literal::Int(v);
        let keys = [
            key(0, FilterOp::GreaterEqual, KeyArgument::Value(int(10))),
            key(0, FilterOp::Less, KeyArgument::Value(int(20))),
            key(1, FilterOp::Equal, KeyArgument::Value(int(77))),
            key(2, FilterOp::Overlaps, KeyArgument::Array(vec![int(1), int(2)])),
            key(2, FilterOp::Contains, KeyArgument::Array(vec![int(3)])),
            key(0, FilterOp::Equal, KeyArgument::AnyOf(vec![int(11), Literal::Null])),
            key(0, FilterOp::Greater, KeyArgument::AnyOf(vec![int(5), Literal::Null, int(3)])),
        ];
        assert_eq!(
            predicate(&keys, &schema()),
            Predicate::And(vec![
                Predicate::Range { column: 0, lower: Bound::Included(10), upper: Bound::Excluded(20) },
                Predicate::Eq { column: 1, value: int(77) },
                Predicate::Overlaps { column: 2, values: vec![int(1), int(2)] },
                Predicate::Contains { column: 2, values: vec![int(3)] },
                Predicate::In { column: 0, values: vec![int(11), Literal::Null] },
                Predicate::Or(vec![
                    Predicate::Range { column: 0, lower: Bound::Excluded(5), upper: Bound::Unbounded },
                    Predicate::Range { column: 0, lower: Bound::Excluded(3), upper: Bound::Unbounded },
                ]),
            ])
        );
    }

    /// Ranges on one column merge into one, keeping the stricter bound of each side.
    #[test]
    fn ranges_on_a_column_merge() {
        let key = |op, v| FilterKey { column: 0, op, argument: KeyArgument::Value(Literal::Int(v)) };
        let merged = predicate(
            &[
                key(FilterOp::Greater, 5),
                key(FilterOp::GreaterEqual, 5),
                key(FilterOp::LessEqual, 9),
                key(FilterOp::Less, 9),
                key(FilterOp::GreaterEqual, 3),
            ],
            &schema(),
        );
        assert_eq!(
            merged,
            Predicate::And(vec![Predicate::Range { column: 0, lower: Bound::Excluded(5), upper: Bound::Excluded(9) }])
        );
        let merged = predicate(
            &[key(FilterOp::GreaterEqual, 6), key(FilterOp::Greater, 5), key(FilterOp::LessEqual, 2)],
            &schema(),
        );
        assert_eq!(
            merged,
            Predicate::And(vec![Predicate::Range { column: 0, lower: Bound::Included(6), upper: Bound::Included(2) }])
        );
    }

    /// Marker keys carry whole predicates; ill-formed ones, or ones that do not fit the index's
    /// columns, are refused.
    #[test]
    fn marker_predicates_round_trip_and_are_checked() {
        let or = Predicate::Or(vec![
            Predicate::Eq { column: 0, value: Literal::Int(1) },
            Predicate::And(vec![
                Predicate::Eq { column: 1, value: Literal::Int(77) },
                Predicate::Range { column: 0, lower: Bound::Excluded(3), upper: Bound::Unbounded },
            ]),
            Predicate::Contains { column: 2, values: vec![Literal::Int(4), Literal::Null] },
        ]);
        let json = encode_predicate(&or);
        assert_eq!(decode_predicate(&json, &schema()), Some(or));
        assert_eq!(decode_predicate("not json", &schema()), None);
        for bad in [
            Predicate::Eq { column: 9, value: Literal::Int(1) },
            Predicate::Range { column: 1, lower: Bound::Unbounded, upper: Bound::Unbounded },
            Predicate::Overlaps { column: 0, values: vec![] },
            Predicate::Eq { column: 2, value: Literal::Int(1) },
            Predicate::Not(Box::new(Predicate::Eq { column: 0, value: Literal::Int(1) })),
        ] {
            let json = serde_json::to_string(&Predicate::Or(vec![bad.clone()])).unwrap();
            assert_eq!(decode_predicate(&json, &schema()), None, "{bad:?}");
        }
    }

    /// A NULL argument admits nothing; keys the index has no use for admit everything (the
    /// executor's recheck applies them).
    #[test]
    fn null_arguments_and_unusable_keys() {
        let null = predicate(&[key(0, FilterOp::Equal, KeyArgument::Null)], &schema());
        assert_eq!(null, Predicate::And(vec![Predicate::Or(vec![])]));
        let unusable = [
            key(5, FilterOp::Equal, KeyArgument::Value(Literal::Int(1))),
            key(1, FilterOp::Less, KeyArgument::Value(Literal::Int(1))),
            key(0, FilterOp::Overlaps, KeyArgument::Array(vec![])),
            key(2, FilterOp::Equal, KeyArgument::Value(Literal::Int(1))),
            key(2, FilterOp::Overlaps, KeyArgument::AnyOf(vec![])),
        ];
        assert_eq!(predicate(&unusable, &schema()), Predicate::And(vec![]));
    }
}
