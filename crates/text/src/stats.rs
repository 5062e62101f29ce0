//! Global collection statistics and queries prepared against them.
//!
//! BM25 needs `N`, `avgdl` and each query lexeme's `df` over the *live* rows of the whole
//! index. [`Bm25Query::prepare`] sums them over every [`Source`] (memtables and segments), each
//! contributing its rows minus its deleted rows; a lexeme's `df` in a source with deletions is
//! corrected exactly by counting the deleted rows in its postings ([`Source::live_df`]).

use crate::document::Document;
use crate::error::TextError;
use crate::scoring::{idf, Bm25Params, TermScorer};
use crate::source::Source;

/// Live rows and their total length, for one source or summed over many.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectionStats {
    /// Rows `N`.
    pub docs: u64,
    /// Sum of the rows' lengths `dl`.
    pub total_len: u64,
}

impl CollectionStats {
    /// `total_len / docs`, or 0 with no rows.
    pub fn avgdl(&self) -> f64 {
        if self.docs == 0 {
            0.0
        } else {
            self.total_len as f64 / self.docs as f64
        }
    }

    /// Adds `other`'s rows.
    pub fn add(&mut self, other: CollectionStats) {
        self.docs += other.docs;
        self.total_len += other.total_len;
    }
}

/// One distinct query lexeme with its global document frequency and IDF.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerm {
    /// The lexeme.
    pub lexeme: String,
    /// Live rows holding it, over every source.
    pub df: u64,
    /// `ln(1 + (N − df + 0.5) / (df + 0.5))`.
    pub idf: f64,
}

/// A query prepared against global statistics: what every source is scored with.
///
/// Guarantees: its terms are the distinct lexemes of the query in byte order (the order their
/// contributions are summed in, by every search), and every source scored with it uses the
/// same `N`, `avgdl` and IDFs, so scores do not depend on which segment or memtable a row is in.
#[derive(Debug, Clone)]
pub struct Bm25Query {
    terms: Vec<QueryTerm>,
    scorers: Vec<TermScorer>,
    stats: CollectionStats,
    params: Bm25Params,
}

/// The distinct lexemes of `lexemes`, in byte order.
pub fn distinct_lexemes<S: AsRef<str>>(lexemes: impl IntoIterator<Item = S>) -> Vec<String> {
    let mut out: Vec<String> = lexemes.into_iter().map(|s| s.as_ref().to_owned()).filter(|s| !s.is_empty()).collect();
    out.sort_unstable();
    out.dedup();
    out
}

impl Bm25Query {
    /// Prepares `lexemes` (duplicates count once) against the live rows of `sources`: `N` and
    /// `avgdl` over all of them, each lexeme's `df` summed exactly over them.
    pub fn prepare<S: AsRef<str>>(
        sources: &[Source<'_>],
        lexemes: impl IntoIterator<Item = S>,
        params: Bm25Params,
    ) -> Self {
        let mut stats = CollectionStats::default();
        for source in sources {
            stats.add(source.live_stats());
        }
        let lexemes = distinct_lexemes(lexemes);
        let dfs: Vec<u64> = lexemes.iter().map(|l| sources.iter().map(|s| s.live_df(l)).sum()).collect();
        Self::build(lexemes, &dfs, stats, params)
    }

    /// Prepares `lexemes` with statistics gathered elsewhere (e.g. cached per segment by the
    /// glue): `dfs[i]` is the global live `df` of `lexemes[i]`. Duplicate lexemes count once
    /// (their first `df` is used).
    pub fn with_stats(
        lexemes: &[&str],
        dfs: &[u64],
        stats: CollectionStats,
        params: Bm25Params,
    ) -> Result<Self, TextError> {
        if lexemes.len() != dfs.len() {
            return Err(TextError::Corrupt(format!(
                "{} lexemes with {} document frequencies",
                lexemes.len(),
                dfs.len()
            )));
        }
        let mut pairs: Vec<(&str, u64)> =
            lexemes.iter().copied().zip(dfs.iter().copied()).filter(|p| !p.0.is_empty()).collect();
        pairs.sort_by(|a, b| a.0.cmp(b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        let lexemes = pairs.iter().map(|p| p.0.to_owned()).collect();
        let dfs: Vec<u64> = pairs.iter().map(|p| p.1).collect();
        Ok(Self::build(lexemes, &dfs, stats, params))
    }

    fn build(lexemes: Vec<String>, dfs: &[u64], stats: CollectionStats, params: Bm25Params) -> Self {
        let avgdl = stats.avgdl();
        let terms: Vec<QueryTerm> = lexemes
            .into_iter()
            .zip(dfs)
            .map(|(lexeme, &df)| QueryTerm { lexeme, df, idf: idf(stats.docs, df) })
            .collect();
        let scorers = terms.iter().map(|t| TermScorer::new(t.idf, params, avgdl)).collect();
        Self { terms, scorers, stats, params }
    }

    /// The distinct lexemes with their global `df` and IDF, in summation order.
    pub fn terms(&self) -> &[QueryTerm] {
        &self.terms
    }

    /// Global live rows and total length.
    pub fn stats(&self) -> CollectionStats {
        self.stats
    }

    /// The BM25 parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// The scorer of term `index` (panics when out of range).
    pub fn scorer(&self, index: usize) -> &TermScorer {
        &self.scorers[index]
    }

    /// The BM25 score of `document` under this query (0 when it holds no query lexeme), its
    /// terms' contributions summed in [`Bm25Query::terms`]' order, as every search sums them: a
    /// row scored here and found by a search get the same `f64`.
    pub fn score_document(&self, document: &Document) -> f64 {
        let terms = document.terms();
        let mut total = 0.0;
        for (i, term) in self.terms.iter().enumerate() {
            if let Ok(at) = terms.binary_search_by(|(lexeme, _)| lexeme.as_str().cmp(&term.lexeme)) {
                total += self.scorers[i].score(terms[at].1, document.length());
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BM25 written out from its formula, term by term, for one document.
    fn by_formula(stats: CollectionStats, dfs: &[(&str, u64)], doc: &[(&str, u32)], k1: f64, b: f64) -> f64 {
        let dl: u32 = doc.iter().map(|t| t.1).sum();
        let avgdl = stats.total_len as f64 / stats.docs as f64;
        let n = stats.docs as f64;
        let mut sorted = dfs.to_vec();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        sorted
            .iter()
            .filter_map(|(lexeme, df)| {
                let tf = f64::from(doc.iter().find(|t| t.0 == *lexeme)?.1);
                let df = *df as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                Some(idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * f64::from(dl) / avgdl)))
            })
            .sum()
    }

    #[test]
    fn a_document_scores_by_the_formula_and_only_on_query_lexemes() {
        let stats = CollectionStats { docs: 1000, total_len: 7300 };
        let params = Bm25Params::new(1.2, 0.75).unwrap();
        let dfs = [("vector", 40), ("index", 300), ("replic", 3)];
        let (lexemes, counts): (Vec<&str>, Vec<u64>) = dfs.iter().copied().unzip();
        let query = Bm25Query::with_stats(&lexemes, &counts, stats, params).unwrap();
        let terms = [("index", 2), ("postgr", 5), ("replic", 1), ("vector", 3)];
        let document = Document::new(terms.iter().map(|&(l, tf)| (l, tf))).unwrap();
        let expected = by_formula(stats, &dfs, &terms, 1.2, 0.75);
        let got = query.score_document(&document);
        assert!((got - expected).abs() <= 1e-12 * expected, "{got} vs {expected}");
        let unrelated = Document::new([("postgr", 4u32), ("wal", 1)]).unwrap();
        assert!(query.score_document(&unrelated).abs() < f64::MIN_POSITIVE, "no query lexeme, no score");
    }
}
