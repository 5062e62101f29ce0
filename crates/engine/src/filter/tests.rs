//! Predicates and estimates against a naive row-by-row evaluator over the raw values.

use std::ops::Bound;

use proptest::prelude::*;

use super::*;

/// SQL's three-valued result of `predicate` on row `row` of the raw `values`.
pub(super) fn naive(values: &[ColumnValues], row: usize, predicate: &Predicate) -> Option<bool> {
    let lit_int = |l: &Literal| match l {
        Literal::Int(v) => Some(*v),
        _ => None,
    };
    let scalar = |c: usize| -> Option<Literal> {
        match &values[c] {
            ColumnValues::Int4(v) => v[row].map(|x| Literal::Int(i64::from(x))),
            ColumnValues::Int8(v) | ColumnValues::Timestamp(v) => v[row].map(Literal::Int),
            ColumnValues::Text(v) => v[row].clone().map(Literal::Text),
            _ => unreachable!(),
        }
    };
    let array = |c: usize| -> Option<Vec<Literal>> {
        match &values[c] {
            ColumnValues::IntArray(v) => {
                v[row].as_ref().map(|a| a.iter().map(|x| x.map_or(Literal::Null, Literal::Int)).collect())
            }
            ColumnValues::TextArray(v) => {
                v[row].as_ref().map(|a| a.iter().map(|x| x.clone().map_or(Literal::Null, Literal::Text)).collect())
            }
            _ => unreachable!(),
        }
    };
    match predicate {
        Predicate::Eq { column, value } => {
            naive(values, row, &Predicate::In { column: *column, values: vec![value.clone()] })
        }
        Predicate::In { column, values: list } => {
            let x = scalar(*column)?;
            if list.contains(&x) {
                Some(true)
            } else if list.contains(&Literal::Null) {
                None
            } else {
                Some(false)
            }
        }
        Predicate::Range { column, lower, upper } => {
            let x = lit_int(&scalar(*column)?).unwrap();
            Some(predicate::in_range(x, *lower, *upper))
        }
        Predicate::Overlaps { column, values: list } => {
            let a = array(*column)?;
            Some(a.iter().any(|e| *e != Literal::Null && list.contains(e)))
        }
        Predicate::Contains { column, values: list } => {
            let a = array(*column)?;
            Some(list.iter().all(|e| *e != Literal::Null && a.contains(e)))
        }
        Predicate::And(parts) => parts
            .iter()
            .try_fold(Some(true), |acc, p| match (acc, naive(values, row, p)) {
                (_, Some(false)) | (Some(false), _) => Err(()),
                (Some(true), Some(true)) => Ok(Some(true)),
                _ => Ok(None),
            })
            .unwrap_or(Some(false)),
        Predicate::Or(parts) => parts
            .iter()
            .try_fold(Some(false), |acc, p| match (acc, naive(values, row, p)) {
                (_, Some(true)) | (Some(true), _) => Err(()),
                (Some(false), Some(false)) => Ok(Some(false)),
                _ => Ok(None),
            })
            .unwrap_or(Some(true)),
        Predicate::Not(inner) => naive(values, row, inner).map(|b| !b),
    }
}

const WORDS: [&str; 5] = ["", "a", "b", "ab", "é"];

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl proptest::strategy::Strategy<Value = T> + 'static,
) -> impl proptest::strategy::Strategy<Value = Option<T>> {
    prop_oneof![1 => Just(None), 5 => s.prop_map(Some)]
}

fn word() -> impl proptest::strategy::Strategy<Value = String> {
    (0..WORDS.len()).prop_map(|i| WORDS[i].to_owned())
}

/// Five columns over `rows` rows: low-cardinality int4, wide int8 (blocks when distinct enough),
/// text, int array, text array — all with NULLs.
pub(super) fn table(rows: usize) -> impl proptest::strategy::Strategy<Value = Vec<ColumnValues>> {
    (
        prop::collection::vec(opt(-3i32..4), rows),
        prop::collection::vec(opt(prop_oneof![-50i64..50, Just(i64::MIN), Just(i64::MAX)]), rows),
        prop::collection::vec(opt(word()), rows),
        prop::collection::vec(opt(prop::collection::vec(opt(0i64..6), 0..4)), rows),
        prop::collection::vec(opt(prop::collection::vec(opt(word()), 0..3)), rows),
    )
        .prop_map(|(a, b, c, d, e)| {
            vec![
                ColumnValues::Int4(a),
                ColumnValues::Int8(b),
                ColumnValues::Text(c),
                ColumnValues::IntArray(d),
                ColumnValues::TextArray(e),
            ]
        })
}

fn int_lit() -> impl proptest::strategy::Strategy<Value = Literal> {
    prop_oneof![1 => Just(Literal::Null), 6 => (-5i64..8).prop_map(Literal::Int)]
}

fn text_lit() -> impl proptest::strategy::Strategy<Value = Literal> {
    prop_oneof![1 => Just(Literal::Null), 6 => word().prop_map(Literal::Text), 1 => Just(Literal::Text("zz".into()))]
}

fn bound() -> impl proptest::strategy::Strategy<Value = Bound<i64>> {
    prop_oneof![Just(Bound::Unbounded), (-60i64..60).prop_map(Bound::Included), (-60i64..60).prop_map(Bound::Excluded)]
}

fn leaf() -> impl proptest::strategy::Strategy<Value = Predicate> {
    prop_oneof![
        (0usize..2, int_lit()).prop_map(|(column, value)| Predicate::Eq { column, value }),
        (0usize..2, prop::collection::vec(int_lit(), 0..4))
            .prop_map(|(column, values)| Predicate::In { column, values }),
        (0usize..2, bound(), bound()).prop_map(|(column, lower, upper)| Predicate::Range { column, lower, upper }),
        text_lit().prop_map(|value| Predicate::Eq { column: 2, value }),
        prop::collection::vec(int_lit(), 0..3).prop_map(|values| Predicate::Overlaps { column: 3, values }),
        prop::collection::vec(int_lit(), 0..3).prop_map(|values| Predicate::Contains { column: 3, values }),
        prop::collection::vec(text_lit(), 0..3).prop_map(|values| Predicate::Overlaps { column: 4, values }),
        prop::collection::vec(text_lit(), 0..3).prop_map(|values| Predicate::Contains { column: 4, values }),
    ]
}

pub(super) fn predicate() -> impl proptest::strategy::Strategy<Value = Predicate> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Predicate::And),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Predicate::Or),
            inner.prop_map(|p| Predicate::Not(Box::new(p))),
        ]
    })
}

fn check_count(count: Count, actual: usize, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(count.lower <= actual && actual <= count.upper, "{what}: {actual} outside {count:?}");
    prop_assert!(count.estimate >= count.lower as f64 && count.estimate <= count.upper as f64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Evaluation equals the naive evaluator row by row (TRUE and FALSE sets), estimates bound
    /// the actual counts, and the section round-trips through bytes.
    #[test]
    fn evaluation_matches_the_naive_evaluator(
        (rows, values) in (0usize..140).prop_flat_map(|rows| (Just(rows), table(rows))),
        preds in prop::collection::vec(predicate(), 1..6),
    ) {
        let columns = FilterColumns::build(rows, &values).unwrap();
        let decoded = FilterColumns::decode(&columns.encode(), rows).unwrap();
        prop_assert_eq!(&decoded, &columns);
        for p in &preds {
            let truth = columns.evaluate(p).unwrap();
            let estimate = columns.estimate(p).unwrap();
            let (mut t, mut f) = (0, 0);
            for row in 0..rows {
                let expected = naive(&values, row, p);
                prop_assert_eq!(truth.true_rows.contains(row), expected == Some(true), "row {} of {:?}", row, p);
                prop_assert_eq!(truth.false_rows.contains(row), expected == Some(false), "row {} of {:?}", row, p);
                t += usize::from(expected == Some(true));
                f += usize::from(expected == Some(false));
            }
            check_count(estimate.true_rows, t, "TRUE")?;
            check_count(estimate.false_rows, f, "FALSE")?;
        }
    }
}

/// A wide column of distinct timestamps uses blocks; its ranges evaluate and count exactly
/// wherever the bounds fall, and for values in any order; NULLs never match.
#[test]
fn block_columns_for_high_cardinality() {
    let rows = 5000;
    let ts: Vec<Option<i64>> = (0..rows).map(|r| if r % 10 == 3 { None } else { Some(1_000 * r as i64) }).collect();
    let columns =
        FilterColumns::build(rows, &[ColumnValues::Timestamp(ts.clone()), ColumnValues::Int4(vec![Some(1); rows])])
            .unwrap();
    assert!(matches!(columns.columns()[0].body(), columns::ColumnBody::Blocks { .. }));
    assert!(matches!(columns.columns()[1].body(), columns::ColumnBody::Postings { .. }));
    let count = |lower, upper| {
        let p = Predicate::Range { column: 0, lower, upper };
        let actual = columns.allowed(&p).unwrap().count();
        let expected = ts.iter().flatten().filter(|&&v| predicate::in_range(v, lower, upper)).count();
        assert_eq!(actual, expected);
        (actual, columns.estimate(&p).unwrap().true_rows)
    };
    for (lower, upper) in [
        (Bound::Included(0), Bound::Excluded(1_000 * 2048)),
        (Bound::Excluded(500_000), Bound::Included(3_333_333)),
        (Bound::Unbounded, Bound::Included(7_000)),
        (Bound::Excluded(4_999_000), Bound::Unbounded),
    ] {
        let (actual, est) = count(lower, upper);
        assert!(est.is_exact() && est.lower == actual, "{est:?} vs {actual}");
    }
    // The same values shuffled: no block can be skipped, the counts stay exact.
    let mut shuffled = ts.clone();
    let n = shuffled.len();
    for i in 0..n {
        shuffled.swap(i, (i * 7919 + 13) % n);
    }
    let columns = FilterColumns::build(rows, &[ColumnValues::Timestamp(shuffled.clone())]).unwrap();
    let p = Predicate::Range { column: 0, lower: Bound::Included(1_000_000), upper: Bound::Excluded(1_250_000) };
    let expected = shuffled.iter().flatten().filter(|&&v| (1_000_000..1_250_000).contains(&v)).count();
    assert_eq!(columns.allowed(&p).unwrap().count(), expected);
    assert!(columns.estimate(&p).unwrap().true_rows.is_exact());
    let one = Predicate::In { column: 0, values: vec![Literal::Int(2_000_000), Literal::Int(7), Literal::Int(4_000)] };
    assert_eq!(columns.allowed(&one).unwrap().count(), 2, "two of the listed values exist");
    // NULL rows never satisfy a range, and NOT keeps them out too.
    let all = Predicate::Range { column: 0, lower: Bound::Unbounded, upper: Bound::Unbounded };
    assert_eq!(columns.allowed(&all).unwrap().count(), rows - rows / 10);
    assert_eq!(columns.allowed(&Predicate::Not(Box::new(all))).unwrap().count(), 0);
}

#[test]
fn type_errors_and_unknown_columns() {
    let columns = FilterColumns::build(2, &[ColumnValues::Text(vec![Some("x".into()), None])]).unwrap();
    let bad = Predicate::Range { column: 0, lower: Bound::Unbounded, upper: Bound::Unbounded };
    assert!(matches!(columns.allowed(&bad), Err(FilterError::TypeMismatch { column: 0, .. })));
    let bad = Predicate::Eq { column: 0, value: Literal::Int(1) };
    assert!(matches!(columns.allowed(&bad), Err(FilterError::TypeMismatch { .. })));
    assert_eq!(columns.allowed(&Predicate::Eq { column: 1, value: Literal::Null }), Err(FilterError::UnknownColumn(1)));
    let bad_len = FilterColumns::build(3, &[ColumnValues::Int4(vec![Some(1)])]);
    assert_eq!(bad_len, Err(FilterError::RowCount { expected: 3, actual: 1 }));
}
