//! Block-Max WAND equals exhaustive scoring (ids and scores bit for bit) and both equal a
//! reference BM25 written from the formula, on random corpora split over several segments and
//! memtables, with deletions and merges.

mod common;

use std::collections::BTreeSet;

use common::{assert_matches_reference, corpus_with, reference, Row};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_engine::bitset::Bitset;
use strata_text::{
    build_segment, merge_segments, search, search_exhaustive, Bm25Params, Bm25Query, Memtable, Source, TextSegment,
};

/// An index state: segments and memtables with their deletion bitmaps.
struct Index {
    segments: Vec<(TextSegment, Option<Bitset>)>,
    memtables: Vec<(Memtable, Option<Bitset>)>,
}

impl Index {
    fn sources(&self) -> Vec<Source<'_>> {
        let mut out: Vec<Source<'_>> =
            self.segments.iter().map(|(s, d)| Source::segment(s, d.as_ref()).unwrap()).collect();
        out.extend(self.memtables.iter().map(|(m, d)| Source::memtable(m, d.as_ref()).unwrap()));
        out
    }
}

fn deletions(rng: &mut ChaCha8Rng, rows: usize, rate: f64, deleted: &mut BTreeSet<u64>, ids: &[u64]) -> Option<Bitset> {
    if rate == 0.0 || rows == 0 {
        return None;
    }
    let mut bits = Bitset::new(rows);
    for (row, id) in ids.iter().enumerate() {
        if rng.gen_bool(rate) {
            bits.insert(row);
            deleted.insert(*id);
        }
    }
    Some(bits)
}

/// Splits `rows` into `parts` chunks: segments (built directly or flushed from a memtable),
/// memtables, and one merge of the first two segments; deletes about `rate` of the rows.
fn index(rows: &[Row], parts: usize, rate: f64, seed: u64) -> (Index, BTreeSet<u64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut deleted = BTreeSet::new();
    let mut index = Index { segments: Vec::new(), memtables: Vec::new() };
    let chunk = rows.len().div_ceil(parts.max(1)).max(1);
    for (i, part) in rows.chunks(chunk).enumerate() {
        let ids: Vec<u64> = part.iter().map(|r| r.id).collect();
        match i % 3 {
            0 => {
                let seg = build_segment(part.iter().map(|r| (r.id, &r.doc))).unwrap().open().unwrap();
                let del = deletions(&mut rng, part.len(), rate, &mut deleted, &ids);
                index.segments.push((seg, del));
            }
            1 => {
                let mut m = Memtable::new();
                for r in part {
                    m.insert(r.id, &r.doc).unwrap();
                }
                let seg = m.to_segment().unwrap().open().unwrap();
                let del = deletions(&mut rng, part.len(), rate, &mut deleted, &ids);
                index.segments.push((seg, del));
            }
            _ => {
                let mut m = Memtable::new();
                for r in part {
                    m.insert(r.id, &r.doc).unwrap();
                }
                let del = deletions(&mut rng, part.len(), rate, &mut deleted, &ids);
                index.memtables.push((m, del));
            }
        }
    }
    // Merge the first two segments (their deletions applied); deleted rows vanish from the merge.
    if index.segments.len() >= 2 && rng.gen_bool(0.5) {
        let b = index.segments.remove(1);
        let a = index.segments.remove(0);
        let merged = merge_segments(&[(&a.0, a.1.as_ref()), (&b.0, b.1.as_ref())]).unwrap().open().unwrap();
        index.segments.insert(0, (merged, None));
    }
    (index, deleted)
}

/// Checks one query; returns the BMW search's block skips.
fn check(rows: &[Row], index: &Index, deleted: &BTreeSet<u64>, query: &[&str], k: usize, params: Bm25Params) -> u64 {
    let sources = index.sources();
    let prepared = Bm25Query::prepare(&sources, query.iter().copied(), params);
    let bmw = search(&sources, &prepared, k);
    let exhaustive = search_exhaustive(&sources, &prepared, k);
    let pairs = |r: &strata_text::SearchResult| r.hits.iter().map(|h| (h.id, h.score)).collect::<Vec<_>>();
    assert_eq!(pairs(&bmw), pairs(&exhaustive), "BMW equals exhaustive, bit for bit");
    assert!(bmw.stats.docs_scored <= exhaustive.stats.docs_scored);
    let live: Vec<&Row> = rows.iter().filter(|r| !deleted.contains(&r.id)).collect();
    let all = reference(&live, query, params.k1(), params.b());
    assert_matches_reference(&pairs(&bmw), &all, k);
    // Global statistics are exact: N, Σdl and each df over the live rows.
    let stats = prepared.stats();
    assert_eq!(stats.docs, live.len() as u64);
    assert_eq!(stats.total_len, live.iter().map(|r| u64::from(r.doc.length())).sum::<u64>());
    for term in prepared.terms() {
        let df = live.iter().filter(|r| r.doc.terms().iter().any(|(t, _)| *t == term.lexeme)).count() as u64;
        assert_eq!(term.df, df, "df of {}", term.lexeme);
    }
    bmw.stats.block_skips
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn bmw_equals_exhaustive_and_reference(
        seed in any::<u64>(),
        n in 0usize..900,
        vocab in 1usize..300,
        skew in 1.0f64..4.0,
        max_len in 1usize..40,
        parts in 1usize..6,
        clustered in any::<bool>(),
        rate in prop_oneof![Just(0.0), 0.0f64..0.5],
        k in 1usize..25,
        query_len in 1usize..6,
        k1 in prop_oneof![Just(1.2), 0.0f64..3.0],
        b in prop_oneof![Just(0.75), 0.0f64..=1.0],
    ) {
        let rows = corpus_with(seed, n, vocab, skew, max_len, clustered);
        let (index, deleted) = index(&rows, parts, rate, seed ^ 1);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 2);
        let mut owned: Vec<String> = (0..query_len)
            .map(|_| format!("t{}", ((vocab as f64) * rng.gen::<f64>().powf(skew)) as usize % vocab))
            .collect();
        if rng.gen_bool(0.2) {
            owned.push("absent".into());
        }
        let query: Vec<&str> = owned.iter().map(String::as_str).collect();
        check(&rows, &index, &deleted, &query, k, Bm25Params::new(k1, b).unwrap());
    }
}

#[test]
fn frequent_terms_over_many_blocks_prune() {
    // 3,000 rows of a tiny skewed vocabulary: lists of many blocks; BMW must skip work.
    let rows = corpus_with(7, 3000, 40, 2.5, 30, true);
    let (index, deleted) = index(&rows, 4, 0.1, 8);
    let mut skips = 0;
    for query in [vec!["t0", "t1"], vec!["t0", "t5", "t17"], vec!["t39", "t0"], vec!["t3"], vec!["t2", "t9"]] {
        for k in [1, 10, 50] {
            skips += check(&rows, &index, &deleted, &query, k, Bm25Params::default());
        }
    }
    assert!(skips > 0, "block-max skips happen");
    let sources = index.sources();
    let prepared = Bm25Query::prepare(&sources, ["t0", "t1", "t30"], Bm25Params::default());
    let bmw = search(&sources, &prepared, 10);
    let exhaustive = search_exhaustive(&sources, &prepared, 10);
    assert!(bmw.stats.docs_scored * 2 < exhaustive.stats.docs_scored, "{:?} vs {:?}", bmw.stats, exhaustive.stats);
}

#[test]
fn ties_break_on_the_smaller_id() {
    // Identical documents: equal scores; the smallest ids win, across sources.
    let doc = strata_text::Document::from_tokens(["a", "b"]).unwrap();
    let seg = build_segment((0..300u64).map(|i| (1000 - i, &doc))).unwrap().open().unwrap();
    let mut m = Memtable::new();
    for i in 0..300u64 {
        m.insert(2000 + i, &doc).unwrap();
        m.insert(i + 1, &doc).unwrap();
    }
    let sources = [Source::segment(&seg, None).unwrap(), Source::memtable(&m, None).unwrap()];
    let q = Bm25Query::prepare(&sources, ["a"], Bm25Params::default());
    for result in [search(&sources, &q, 5), search_exhaustive(&sources, &q, 5)] {
        let ids: Vec<u64> = result.hits.iter().map(|h| h.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    }
}

#[test]
fn a_block_skip_lands_on_the_next_block() {
    // "a" in rows 0..=256: row 0 strong, rows 1..=255 weak (block 1 is rows 128..=255, all
    // weak, so it is skipped), row 256 — the first row of block 2 — the best. "b" only in the
    // strong rows. A skip that overshot the block's end by one row would miss row 256.
    let weak = strata_text::Document::with_length([("a", 1)], 200).unwrap();
    let first = strata_text::Document::with_length([("a", 5), ("b", 1)], 8).unwrap();
    let best = strata_text::Document::new([("a", 6), ("b", 1)]).unwrap();
    let docs: Vec<&strata_text::Document> = (0..=256)
        .map(|row| {
            if row == 0 {
                &first
            } else if row == 256 {
                &best
            } else {
                &weak
            }
        })
        .collect();
    let seg = build_segment(docs.iter().enumerate().map(|(row, d)| (row as u64 + 1, *d))).unwrap().open().unwrap();
    let mut mem = Memtable::new();
    for (row, d) in docs.iter().enumerate() {
        mem.insert(row as u64 + 1, d).unwrap();
    }
    for source in [Source::segment(&seg, None).unwrap(), Source::memtable(&mem, None).unwrap()] {
        for query in [vec!["a"], vec!["a", "b"]] {
            let q = Bm25Query::prepare(&[source], &query, Bm25Params::default());
            let bmw = search(&[source], &q, 1);
            assert_eq!(bmw.hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![257]);
            assert_eq!(bmw.hits, search_exhaustive(&[source], &q, 1).hits);
            assert!(query.len() > 1 || bmw.stats.block_skips > 0, "{:?}", bmw.stats);
            assert!(bmw.stats.docs_scored < 200, "{:?}", bmw.stats);
        }
    }
}
