//! The FILTER section's bytes: golden bytes, round trips, corruption, and its place in a segment.

use super::*;
use crate::metric::Metric;
use crate::segment::{build_segment, BuildOptions, IndexKind, Segment, SegmentError};
use crate::store::ElementKind;

fn small() -> FilterColumns {
    FilterColumns::build(
        3,
        &[
            ColumnValues::Int4(vec![Some(7), None, Some(7)]),
            ColumnValues::Text(vec![Some("b".into()), Some("a".into()), None]),
            ColumnValues::IntArray(vec![Some(vec![Some(1), None]), None, Some(vec![])]),
        ],
    )
    .unwrap()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").expect("writing to a String cannot fail");
        s
    })
}

/// Pins the layout documented in the module docs; changing it needs a new version.
#[test]
fn golden_bytes() {
    let bytes = small().encode();
    let expected = concat!(
        "01000000",
        "03000000",
        "03000000",
        "CRC_PLACEHOLDER",
        // int4 (1 distinct value > 3 / 8: blocks): type 0, body 1; L = 65; NULLs = bitmap {1};
        // distinct 1; values 7, 0 (NULL), 7; one block: min 7, max 7, 2 non-NULL
        "00010000",
        "41000000",
        "01",
        "01000000",
        "0200000000000000",
        "0100000000000000",
        "0700000000000000",
        "0000000000000000",
        "0700000000000000",
        "0700000000000000",
        "0700000000000000",
        "02000000",
        // text: type 3; NULLs {2}; D = 2: "a", "b"; K = 2: keys 0, 1; postings {1}, {0}
        "03000000",
        "49000000",
        "01",
        "01000000",
        "0400000000000000",
        "02000000",
        "01000000",
        "61",
        "01000000",
        "62",
        "02000000",
        "0000000000000000",
        "0100000000000000",
        "01",
        "01000000",
        "0200000000000000",
        "01",
        "01000000",
        "0100000000000000",
        // int[]: type 4; NULLs {1}; K = 1: key 1; posting {0}
        "04000000",
        "26000000",
        "01",
        "01000000",
        "0200000000000000",
        "01000000",
        "0100000000000000",
        "01",
        "01000000",
        "0100000000000000",
    );
    let crc = crc32fast::hash(&bytes[16..]).to_le_bytes();
    assert_eq!(hex(&bytes), expected.replace("CRC_PLACEHOLDER", &hex(&crc)));
    assert_eq!(FilterColumns::decode(&bytes, 3).unwrap(), small());
}

#[test]
fn corruption_is_a_typed_error_never_a_panic() {
    let bytes = small().encode();
    // Any flipped bit: the CRC or a header check catches it.
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        assert!(FilterColumns::decode(&bad, 3).is_err(), "byte {at}");
    }
    // Truncations and extensions.
    for len in 0..bytes.len() {
        assert!(FilterColumns::decode(&bytes[..len], 3).is_err(), "length {len}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(FilterColumns::decode(&longer, 3).is_err());
    assert_eq!(FilterColumns::decode(&bytes, 4), Err(FilterError::RowCount { expected: 4, actual: 3 }));
    // Structural damage behind a valid CRC: still a typed error (or a valid, different section).
    for at in 16..bytes.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let crc = crc32fast::hash(&bad[16..]);
            bad[12..16].copy_from_slice(&crc.to_le_bytes());
            if let Ok(columns) = FilterColumns::decode(&bad, 3) {
                // Whatever decodes must evaluate without panicking.
                for c in 0..columns.columns().len() {
                    let _ = columns.allowed(&Predicate::Eq { column: c, value: Literal::Int(7) });
                }
            }
        }
    }
    let mut version = bytes.clone();
    version[0] = 2;
    assert_eq!(FilterColumns::decode(&version, 3), Err(FilterError::UnsupportedVersion(2)));
}

fn options(kind: IndexKind) -> BuildOptions {
    BuildOptions {
        kind,
        metric: Metric::L2,
        element: ElementKind::F32,
        seed: 1,
        threads: 1,
        store_vectors: true,
        cancel: crate::cancel::Cancel::default(),
    }
}

/// Segments with the section open with their columns; older segments without it still open.
#[test]
fn the_section_in_a_segment_file() {
    let vectors: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let mut built = build_segment(&options(IndexKind::Flat), vec![10, 11, 12], vectors, 2).unwrap();
    let old = Segment::from_bytes(&built.to_bytes()).unwrap();
    assert!(old.filter_columns().is_none());
    assert!(built.set_filter_columns(&FilterColumns::build(2, &[]).unwrap()).is_err());
    built.set_filter_columns(&small()).unwrap();
    let file = built.to_bytes();
    let segment = Segment::from_bytes(&file).unwrap();
    assert_eq!(segment.filter_columns(), Some(&small()));
    // A damaged section inside a valid container (checksums recomputed) is a typed error.
    let mut section = small().encode();
    section[20] = 9; // the first column's type byte
    let crc = crc32fast::hash(&section[16..]);
    section[12..16].copy_from_slice(&crc.to_le_bytes());
    let sections = built.sections();
    let refs: Vec<(u32, &[u8])> = sections
        .iter()
        .map(|(tag, bytes)| (*tag, if *tag == TAG_FILTER { section.as_slice() } else { bytes.as_ref() }))
        .collect();
    let damaged = crate::format::encode(&refs).unwrap();
    assert!(matches!(Segment::from_bytes(&damaged), Err(SegmentError::Filter(FilterError::Corrupt(_)))));
}
