//! Text segments: round trip through bytes, corruption detection, merges.

mod common;

use common::corpus;
use proptest::prelude::*;
use strata_engine::bitset::Bitset;
use strata_engine::format::{SegmentBytes, SegmentFile};
use strata_text::postings::{Postings, END};
use strata_text::{
    build_segment, merge_segments, search, Bm25Params, Bm25Query, Memtable, Source, TextError, TextSegment,
};

fn memtable(rows: &[common::Row]) -> Memtable {
    let mut m = Memtable::new();
    for r in rows {
        m.insert(r.id, &r.doc).unwrap();
    }
    m
}

fn postings_of(p: Option<impl Postings>) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    if let Some(mut p) = p {
        while p.row() != END {
            out.push((p.row(), p.tf()));
            p.next();
        }
    }
    out
}

#[test]
fn round_trip_keeps_rows_lengths_and_postings() {
    let rows = corpus(3, 700, 60, 2.0, 25);
    let m = memtable(&rows);
    let built = m.to_segment().unwrap();
    let seg = TextSegment::from_bytes(&built.to_bytes()).unwrap();
    assert_eq!(seg.rows() as usize, rows.len());
    assert_eq!(seg.ids(), m.ids());
    assert_eq!(seg.doc_lens(), m.doc_lens());
    assert_eq!(seg.stats(), m.stats());
    assert_eq!(seg.term_count(), m.term_count() as u64);
    for (lexeme, _, _) in m.postings_lists() {
        assert_eq!(postings_of(seg.postings(lexeme)), postings_of(m.postings(lexeme)), "{lexeme}");
        // Block metadata equals the memtable's.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        seg.postings(lexeme).unwrap().for_each_block(&mut |x| a.push(x));
        m.postings(lexeme).unwrap().for_each_block(&mut |x| b.push(x));
        assert_eq!(a, b, "{lexeme}");
    }
    assert!(seg.postings("missing").is_none());
    // Built directly from documents: the same bytes.
    assert_eq!(build_segment(rows.iter().map(|r| (r.id, &r.doc))).unwrap().to_bytes(), built.to_bytes());
    // Seek lands on the first posting at or after the target.
    let all = postings_of(m.postings("t0"));
    for target in [0, 1, 127, 128, 129, 300, 699, 700] {
        let want = all.iter().find(|p| p.0 >= target).map_or(END, |p| p.0);
        assert_eq!(seg.postings("t0").unwrap().seek(target), want, "seek {target}");
    }
}

#[test]
fn empty_segment_opens() {
    let seg = Memtable::new().to_segment().unwrap().open().unwrap();
    assert_eq!(seg.rows(), 0);
    let sources = [Source::segment(&seg, None).unwrap()];
    let q = Bm25Query::prepare(&sources, ["a"], Bm25Params::default());
    assert!(search(&sources, &q, 10).hits.is_empty());
}

#[test]
fn every_flipped_byte_is_a_typed_error() {
    let rows = corpus(4, 200, 30, 2.0, 12);
    let bytes = memtable(&rows).to_segment().unwrap().to_bytes();
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x41;
        match TextSegment::from_bytes(&damaged) {
            Err(TextError::Format(_) | TextError::Corrupt(_) | TextError::UnsupportedVersion(_)) => {}
            Err(other) => panic!("byte {at}: unexpected error {other}"),
            Ok(_) => panic!("byte {at}: damage not detected"),
        }
    }
    assert!(TextSegment::from_bytes(&bytes[..bytes.len() - 1]).is_err(), "truncation");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Damage inside a section, re-wrapped in a container with valid checksums (what a reader
    /// that skips section checksums could see): opening fails with a typed error, or the
    /// segment opens and every search over it completes without panicking.
    #[test]
    fn damaged_sections_never_panic(section in 0usize..7, at in any::<usize>(), xor in 1u8..=255) {
        let rows = corpus(5, 300, 40, 2.0, 20);
        let built = memtable(&rows).to_segment().unwrap();
        let mut sections: Vec<(u32, Vec<u8>)> = built.sections().into_iter().map(|(t, b)| (t, b.into_owned())).collect();
        let target = &mut sections[section].1;
        if !target.is_empty() {
            let i = at % target.len();
            target[i] ^= xor;
        }
        let refs: Vec<(u32, &[u8])> = sections.iter().map(|(t, b)| (*t, b.as_slice())).collect();
        let bytes = strata_engine::format::encode(&refs).unwrap();
        let file = SegmentFile::from_bytes(SegmentBytes::copy_from(&bytes), true).unwrap();
        if let Ok(seg) = TextSegment::open(file) {
            let sources = [Source::segment(&seg, None).unwrap()];
            for query in [vec!["t0"], vec!["t1", "t2", "t7"], vec!["t30"]] {
                let q = Bm25Query::prepare(&sources, &query, Bm25Params::default());
                let _ = search(&sources, &q, 5);
                let _ = strata_text::search_exhaustive(&sources, &q, 5);
            }
        }
    }
}

#[test]
fn merged_segment_answers_like_its_parts() {
    let rows = corpus(6, 900, 80, 2.2, 30);
    let parts: Vec<TextSegment> = rows.chunks(300).map(|c| memtable(c).to_segment().unwrap().open().unwrap()).collect();
    let mut deleted: Vec<Bitset> = parts.iter().map(|p| Bitset::new(p.rows() as usize)).collect();
    for (i, d) in deleted.iter_mut().enumerate() {
        for row in (i..300).step_by(7) {
            d.insert(row);
        }
    }
    let inputs: Vec<(&TextSegment, Option<&Bitset>)> = parts.iter().zip(&deleted).map(|(p, d)| (p, Some(d))).collect();
    let merged = merge_segments(&inputs).unwrap().open().unwrap();
    let live: u64 = deleted.iter().map(|d| (d.len() - d.count()) as u64).sum();
    assert_eq!(u64::from(merged.rows()), live, "deleted rows are dropped");
    let part_sources: Vec<Source<'_>> = inputs.iter().map(|&(p, d)| Source::segment(p, d).unwrap()).collect();
    let merged_sources = [Source::segment(&merged, None).unwrap()];
    for query in [vec!["t0"], vec!["t1", "t4"], vec!["t2", "t9", "t40", "t0"], vec!["t79"]] {
        let a = Bm25Query::prepare(&part_sources, &query, Bm25Params::default());
        let b = Bm25Query::prepare(&merged_sources, &query, Bm25Params::default());
        assert_eq!(a.stats(), b.stats());
        assert_eq!(a.terms(), b.terms(), "df and IDF equal after the merge");
        let ids = |r: strata_text::SearchResult| r.hits.iter().map(|h| (h.id, h.score)).collect::<Vec<_>>();
        assert_eq!(ids(search(&part_sources, &a, 20)), ids(search(&merged_sources, &b, 20)), "{query:?}");
    }
    // Ids are preserved.
    let mut want: Vec<u64> = Vec::new();
    for (p, d) in parts.iter().zip(&deleted) {
        want.extend((0..p.rows()).filter(|&r| !d.contains(r as usize)).map(|r| p.id(r)));
    }
    assert_eq!(merged.ids(), want.as_slice());
}

#[test]
fn deletion_bitmaps_of_the_wrong_length_are_refused() {
    let rows = corpus(8, 50, 10, 1.5, 5);
    let seg = memtable(&rows).to_segment().unwrap().open().unwrap();
    let wrong = Bitset::new(49);
    assert!(matches!(Source::segment(&seg, Some(&wrong)), Err(TextError::DeletionLength { .. })));
    assert!(matches!(merge_segments(&[(&seg, Some(&wrong))]), Err(TextError::DeletionLength { .. })));
}
