//! BM25, pinned to the issue's formula:
//!
//! ```text
//! IDF(t)      = ln(1 + (N − df + 0.5) / (df + 0.5))
//! score(q, d) = Σ over distinct query lexemes t of
//!               IDF(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))
//! ```
//!
//! with `tf` the lexeme's occurrences in the document, `dl` the document's length, and `N`,
//! `avgdl`, `df` over the live rows of every source (memtables and segments together).
//!
//! Every function here evaluates the formula in one fixed order of `f64` operations, so a
//! document scored twice (by Block-Max WAND and by exhaustive scoring) gets bit-identical scores.

use crate::error::TextError;

/// BM25's free parameters.
///
/// Guarantees: a value made by [`Bm25Params::new`] has a finite `k1 ≥ 0` and `b` in `[0, 1]`, so
/// every score is finite and ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    k1: f64,
    b: f64,
}

impl Default for Bm25Params {
    /// `k1 = 1.2`, `b = 0.75` (pg_textsearch's and the issue's defaults).
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// Checked parameters: `k1` finite and ≥ 0, `b` in `[0, 1]`.
    pub fn new(k1: f64, b: f64) -> Result<Self, TextError> {
        if !(k1.is_finite() && k1 >= 0.0 && (0.0..=1.0).contains(&b)) {
            return Err(TextError::InvalidParams { k1, b });
        }
        Ok(Self { k1, b })
    }

    /// Term-frequency saturation `k1`.
    pub fn k1(&self) -> f64 {
        self.k1
    }

    /// Length normalisation `b`.
    pub fn b(&self) -> f64 {
        self.b
    }
}

/// `ln(1 + (N − df + 0.5) / (df + 0.5))`: positive whenever `df ≤ N`.
pub fn idf(docs: u64, df: u64) -> f64 {
    let (n, df) = (docs as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One query term's scorer: BM25 with the term's IDF and the collection's `avgdl` fixed.
///
/// Guarantees: [`TermScorer::score`] is non-decreasing in `tf`, non-increasing in `dl` (each
/// `f64` operation is monotone in its arguments), so [`TermScorer::bound`] of a block's largest
/// `tf` and smallest `dl` bounds every score in the block, for whatever `avgdl` and IDF the
/// query runs with (block metadata holds no precomputed score).
#[derive(Debug, Clone, Copy)]
pub struct TermScorer {
    idf: f64,
    k1: f64,
    b: f64,
    avgdl: f64,
}

impl TermScorer {
    /// The scorer of a term with IDF `idf` under `params` in a collection of average length
    /// `avgdl` (a non-positive `avgdl`, i.e. an empty collection, is taken as 1).
    pub fn new(idf: f64, params: Bm25Params, avgdl: f64) -> Self {
        let avgdl = if avgdl > 0.0 { avgdl } else { 1.0 };
        Self { idf, k1: params.k1, b: params.b, avgdl }
    }

    /// `IDF · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`.
    #[inline]
    pub fn score(&self, tf: u32, dl: u32) -> f64 {
        let tf = f64::from(tf);
        let norm = self.k1 * (1.0 - self.b + self.b * f64::from(dl) / self.avgdl);
        self.idf * tf * (self.k1 + 1.0) / (tf + norm)
    }

    /// An upper bound of [`TermScorer::score`] over documents with `tf ≤ max_tf` and
    /// `dl ≥ min_dl`: the score itself, widened by a relative `1e-9` so that rounding (sums of
    /// bounds added in another order than the scores) can never make a bound smaller than a
    /// score it covers.
    #[inline]
    pub fn bound(&self, max_tf: u32, min_dl: u32) -> f64 {
        self.score(max_tf, min_dl) * (1.0 + BOUND_SLACK)
    }

    /// An upper bound of every score in a block: the largest [`TermScorer::bound`] of its
    /// points (each posting is dominated by one of them).
    #[inline]
    pub fn block_bound(&self, block: &crate::postings::BlockMax) -> f64 {
        block.points().iter().fold(0.0, |best, &(tf, dl)| best.max(self.bound(tf, dl)))
    }
}

/// Relative widening of every upper bound (see [`TermScorer::bound`]).
pub(crate) const BOUND_SLACK: f64 = 1e-9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_by_hand() {
        // N = 10, df = 2: ln(1 + 8.5 / 2.5) = ln(4.4).
        assert!((idf(10, 2) - 4.4f64.ln()).abs() < 1e-12);
        let s = TermScorer::new(idf(10, 2), Bm25Params::default(), 5.0);
        // tf = 3, dl = 10: 3 · 2.2 / (3 + 1.2 · (0.25 + 0.75 · 2)) = 6.6 / 5.1.
        assert!((s.score(3, 10) - 4.4f64.ln() * 6.6 / 5.1).abs() < 1e-12);
        assert!(s.bound(3, 10) >= s.score(3, 10));
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Bm25Params::new(1.2, 0.75).is_ok());
        assert!(Bm25Params::new(0.0, 1.0).is_ok());
        assert!(Bm25Params::new(-1.0, 0.5).is_err());
        assert!(Bm25Params::new(1.0, 1.5).is_err());
        assert!(Bm25Params::new(f64::NAN, 0.5).is_err());
    }

    #[test]
    fn monotone() {
        let s = TermScorer::new(2.0, Bm25Params::default(), 7.3);
        for tf in 1..200 {
            for dl in [tf, tf + 1, tf * 3, 10_000] {
                assert!(s.score(tf + 1, dl) >= s.score(tf, dl));
                assert!(s.score(tf, dl + 1) <= s.score(tf, dl));
            }
        }
    }
}
