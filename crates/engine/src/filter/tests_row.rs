//! Encoded filter rows against the naive evaluator and against segments built from them.

use proptest::prelude::*;

use super::row::{text_key, FilterSchema, FilterSpec, FilterValue, RowError, MAX_ARRAY_SLOTS, MAX_ROW_COLUMNS};
use super::tests::{naive, predicate, table};
use super::{ColumnType, ColumnValues, Literal, Predicate};

/// The schema of `tests::table`'s five columns (its arrays hold at most 3 elements).
fn schema() -> FilterSchema {
    FilterSchema::new(&[
        FilterSpec::new(ColumnType::Int4),
        FilterSpec::new(ColumnType::Int8),
        FilterSpec::new(ColumnType::Text),
        FilterSpec { ty: ColumnType::IntArray, slots: 3 },
        FilterSpec { ty: ColumnType::TextArray, slots: 3 },
    ])
    .unwrap()
}

/// Row `row` of the table as the extension would hand it over.
fn row_values(values: &[ColumnValues], row: usize) -> Vec<FilterValue<'_>> {
    values
        .iter()
        .map(|column| match column {
            ColumnValues::Int4(v) => v[row].map_or(FilterValue::Null, |x| FilterValue::Int(i64::from(x))),
            ColumnValues::Int8(v) | ColumnValues::Timestamp(v) => v[row].map_or(FilterValue::Null, FilterValue::Int),
            ColumnValues::Text(v) => v[row].as_ref().map_or(FilterValue::Null, |t| FilterValue::Text(t.as_bytes())),
            ColumnValues::IntArray(v) => v[row].clone().map_or(FilterValue::Null, FilterValue::IntArray),
            ColumnValues::TextArray(v) => v[row].as_ref().map_or(FilterValue::Null, |a| {
                FilterValue::TextArray(a.iter().map(|e| e.as_ref().map(String::as_bytes)).collect())
            }),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A predicate in storage form is TRUE for an encoded row exactly when the naive evaluator
    /// says TRUE on the raw values, both row by row and on a segment's columns built from the
    /// rows; the columns give the encoded rows back.
    #[test]
    fn encoded_rows_evaluate_as_the_raw_values(
        (rows, values) in (0usize..100).prop_flat_map(|rows| (Just(rows), table(rows))),
        preds in prop::collection::vec(predicate(), 1..6),
    ) {
        let schema = schema();
        let mut payload = Vec::new();
        for row in 0..rows {
            schema.encode_row(&row_values(&values, row), &mut payload).unwrap();
        }
        prop_assert_eq!(payload.len(), rows * schema.row_words());
        let columns = schema.build_columns(rows, &payload).unwrap();
        let mut again = Vec::new();
        schema.encode_segment_rows(&columns, &mut again).unwrap();
        prop_assert_eq!(&again, &payload);
        for p in &preds {
            let stored = schema.storage_predicate(p);
            let allowed = columns.allowed(&stored).unwrap();
            for (row, words) in payload.chunks_exact(schema.row_words().max(1)).enumerate().take(rows) {
                let expected = naive(&values, row, p) == Some(true);
                prop_assert_eq!(schema.row_matches(&stored, words).unwrap(), expected, "row {} of {:?}", row, p);
                prop_assert_eq!(allowed.contains(row), expected, "segment row {} of {:?}", row, p);
            }
        }
    }
}

#[test]
fn rows_decode_to_their_keys() {
    let schema = schema();
    let mut words = Vec::new();
    let values = vec![
        FilterValue::Int(-7),
        FilterValue::Null,
        FilterValue::Text(b"tenant"),
        FilterValue::IntArray(vec![Some(5), None, Some(-1), Some(5)]),
        FilterValue::TextArray(vec![]),
    ];
    schema.encode_row(&values, &mut words).unwrap();
    assert_eq!(words.len(), 1 + 2 + 2 + 2 + 7 + 7);
    assert_eq!(words[0], 0b10, "column 1 is NULL");
    assert_eq!(
        schema.decode_row(&words).unwrap(),
        vec![Some(vec![-7]), None, Some(vec![text_key(b"tenant")]), Some(vec![-1, 5]), Some(vec![])]
    );
}

/// Text keys are stored in segment files: they must never change.
#[test]
fn text_keys_are_stable() {
    assert_eq!(text_key(b""), text_key(b""));
    assert_ne!(text_key(b"a"), text_key(b"b"));
    assert_eq!(text_key(b"tenant"), 0xac8e_4dac_dfdd_2c1f_u64 as i64, "{:#x}", text_key(b"tenant") as u64);
}

#[test]
fn bad_rows_and_schemas_are_refused() {
    let schema = schema();
    let mut words = vec![42];
    let too_long = FilterValue::IntArray(vec![Some(1), Some(2), Some(3), Some(4)]);
    let row = [FilterValue::Null, FilterValue::Null, FilterValue::Null, too_long, FilterValue::Null];
    assert_eq!(schema.encode_row(&row, &mut words), Err(RowError::ArrayTooLong { column: 3, elements: 4, slots: 3 }));
    assert_eq!(words, vec![42], "a refused row leaves the buffer as it was");
    let wrong = [FilterValue::Text(b"x"), FilterValue::Null, FilterValue::Null, FilterValue::Null, FilterValue::Null];
    assert_eq!(schema.encode_row(&wrong, &mut words), Err(RowError::WrongKind { column: 0, ty: ColumnType::Int4 }));
    let big = [FilterValue::Int(1 << 40), FilterValue::Null, FilterValue::Null, FilterValue::Null, FilterValue::Null];
    assert!(schema.encode_row(&big, &mut words).is_err(), "int4 columns hold int4 values");
    assert_eq!(
        schema.encode_row(&[FilterValue::Null], &mut words),
        Err(RowError::ValueCount { expected: 5, found: 1 })
    );
    assert!(schema.row_matches(&Predicate::And(vec![]), &[0]).is_err());
    assert_eq!(
        FilterSchema::new(&[FilterSpec::new(ColumnType::Int4); MAX_ROW_COLUMNS + 1]),
        Err(RowError::TooManyColumns(MAX_ROW_COLUMNS + 1))
    );
    for slots in [0, MAX_ARRAY_SLOTS + 1] {
        let spec = FilterSpec { ty: ColumnType::IntArray, slots };
        assert_eq!(FilterSchema::new(&[spec]), Err(RowError::BadSlots { column: 0, slots }));
    }
    let scalar_with_slots = FilterSpec { ty: ColumnType::Int8, slots: 2 };
    assert_eq!(FilterSchema::new(&[scalar_with_slots]), Err(RowError::BadSlots { column: 0, slots: 2 }));
    let empty = FilterSchema::default();
    assert_eq!((empty.row_words(), empty.is_empty()), (0, true));
    let mut none = Vec::new();
    empty.encode_row(&[], &mut none).unwrap();
    assert!(none.is_empty());
}

#[test]
fn schemas_serialize_as_lists() {
    let schema = schema();
    let json = serde_json::to_string(&schema).unwrap();
    assert!(json.starts_with("[{\"type\":\"int4\",\"slots\":0}"), "{json}");
    let back: FilterSchema = serde_json::from_str(&json).unwrap();
    assert_eq!(back, schema);
    assert!(serde_json::from_str::<FilterSchema>("[{\"type\":\"int_array\",\"slots\":0}]").is_err());
    let text = Predicate::Eq { column: 2, value: Literal::Text("x".into()) };
    assert_eq!(schema.storage_predicate(&text), Predicate::Eq { column: 2, value: Literal::Int(text_key(b"x")) });
}
