//! Test helpers: random corpora and a reference BM25 scorer written straight from the issue's
//! formula, independent of the crate's scoring code.

#![allow(dead_code)]

pub mod slabs;

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_text::Document;

/// A corpus row: id and its lexemes with term frequencies.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: u64,
    pub doc: Document,
}

/// `n` documents over a vocabulary of `vocab` lexemes `t0, t1, …`; lexeme `i` is drawn with a
/// probability that falls as `i` grows (power `skew`), and occasionally repeated many times, so
/// term frequencies are skewed too. Lengths 0..=`max_len` tokens, a third up to 8 × that.
pub fn corpus(seed: u64, n: usize, vocab: usize, skew: f64, max_len: usize) -> Vec<Row> {
    corpus_with(seed, n, vocab, skew, max_len, false)
}

/// [`corpus`], optionally `clustered`: runs of 300 consecutive rows alternate between strong
/// rows (as in [`corpus`]) and weak ones (4–8 × longer, mostly filler lexemes, each vocabulary
/// lexeme at most once), so posting blocks differ widely in their largest `tf` and smallest
/// `dl` and block-max pruning has whole blocks to skip.
pub fn corpus_with(seed: u64, n: usize, vocab: usize, skew: f64, max_len: usize, clustered: bool) -> Vec<Row> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let weak = clustered && (i / 300) % 2 == 1;
            // Without clustering a third of the rows are much longer.
            let len = if weak {
                rng.gen_range(max_len * 4..=max_len * 8)
            } else if !clustered && rng.gen_bool(0.3) {
                rng.gen_range(0..=max_len * 8)
            } else {
                rng.gen_range(0..=max_len)
            };
            let mut tokens: Vec<String> = Vec::with_capacity(len);
            for _ in 0..len {
                let u: f64 = rng.gen();
                let term = format!("t{}", ((vocab as f64) * u.powf(skew)) as usize % vocab);
                if weak {
                    let filler = format!("f{}", rng.gen_range(0..5000));
                    tokens.push(if rng.gen_bool(0.05) && !tokens.contains(&term) { term } else { filler });
                    continue;
                }
                let repeat = if rng.gen_bool(0.05) { rng.gen_range(2..12) } else { 1 };
                for _ in 0..repeat {
                    tokens.push(term.clone());
                }
            }
            // Ids are sparse and not in row order, like heap TIDs across segments.
            let id = (i as u64).wrapping_mul(0x9E37_79B9) % 1_000_003 + 1;
            Row { id, doc: Document::from_tokens(&tokens).unwrap() }
        })
        .collect()
}

/// Reference BM25 over `live` rows: returns `(id, score)` for every live row holding a query
/// lexeme, best first (score descending, id ascending).
pub fn reference(live: &[&Row], query: &[&str], k1: f64, b: f64) -> Vec<(u64, f64)> {
    let n = live.len() as f64;
    let total: f64 = live.iter().map(|r| f64::from(r.doc.length())).sum();
    let avgdl = if live.is_empty() { 1.0 } else { total / n };
    let distinct: BTreeSet<&str> = query.iter().copied().filter(|q| !q.is_empty()).collect();
    let tf =
        |row: &Row, lexeme: &str| -> u32 { row.doc.terms().iter().find(|(t, _)| t == lexeme).map_or(0, |(_, f)| *f) };
    let mut idfs = BTreeMap::new();
    for &q in &distinct {
        let df = live.iter().filter(|r| tf(r, q) > 0).count() as f64;
        idfs.insert(q, (1.0 + (n - df + 0.5) / (df + 0.5)).ln());
    }
    let mut out = Vec::new();
    for row in live {
        let dl = f64::from(row.doc.length());
        let mut score = 0.0;
        let mut matched = false;
        for &q in &distinct {
            let f = f64::from(tf(row, q));
            if f > 0.0 {
                matched = true;
                score += idfs[q] * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * dl / avgdl));
            }
        }
        if matched {
            out.push((row.id, score));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// Relative closeness.
pub fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * a.abs().max(b.abs()).max(1e-12)
}

/// Checks `got` (best first) against the reference ranking `all` (every matching live row,
/// best first) for top `k`: same length; each hit's score equals the reference's for that id
/// within `1e-5` relative; position by position the scores agree; and any id on which the two
/// rankings differ sits among near-equal scores (a reference computed in another summation
/// order may break such near-ties differently).
pub fn assert_matches_reference(got: &[(u64, f64)], all: &[(u64, f64)], k: usize) {
    let want = &all[..k.min(all.len())];
    assert_eq!(got.len(), want.len(), "hit count: got {got:?}, want {want:?}");
    let by_id: BTreeMap<u64, f64> = all.iter().copied().collect();
    for (i, (&(id, score), &(want_id, want_score))) in got.iter().zip(want).enumerate() {
        let reference = by_id.get(&id).copied().unwrap_or_else(|| panic!("hit {id} is not a live matching row"));
        assert!(close(score, reference, 1e-5), "id {id}: score {score}, reference {reference}");
        assert!(close(score, want_score, 1e-5), "rank {i}: score {score}, reference {want_score}");
        if id != want_id {
            assert!(close(reference, want_score, 1e-9), "rank {i}: id {id} vs {want_id} with different scores");
        }
    }
}

/// The configuration of a text index at BM25's usual parameters (k1 = 1.2, b = 0.75).
pub fn text_config() -> strata_lsm::manifest::IndexConfig {
    strata_lsm::manifest::IndexConfig::from_bm25_options(&strata_lsm::text_options::Bm25Options::default())
        .expect("the defaults are valid")
}
