//! Top-k search over several sources with global statistics: Block-Max WAND ([`search`]) and
//! exhaustive scoring ([`search_exhaustive`]), which return the same hits.
//!
//! Both score each source in turn into one shared top-k (so a later source starts with the
//! threshold the earlier ones reached), every document's score summed over the query's terms in
//! the same order from the same per-term values, hence bit-identical scores. Ties break on the
//! smaller id, so the result is a deterministic function of the live rows.

mod bmw;
mod exhaustive;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::memtable::{MemPostings, Memtable};
use crate::postings::Postings;
use crate::segment::{SegmentPostings, TextSegment};
use crate::source::{Source, SourceKind};
use crate::stats::Bm25Query;

/// One result: the caller's row id, its BM25 score, and where the row is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The row id (heap TID).
    pub id: u64,
    /// The BM25 score (≥ 0).
    pub score: f64,
    /// Index of its source in the `sources` searched.
    pub source: usize,
    /// Its row number in that source.
    pub row: u32,
}

/// What a search did, for benchmarks and EXPLAIN.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Documents whose full score was computed (live rows only).
    pub docs_scored: u64,
    /// Compressed posting blocks decoded.
    pub blocks_decoded: u64,
    /// Times Block-Max WAND moved past a pivot because the bounds of the blocks holding it fell
    /// short of the threshold (0 for exhaustive scoring).
    pub block_skips: u64,
}

/// Hits best first (score descending, then id ascending) with the work done.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchResult {
    /// At most `k` hits, best first.
    pub hits: Vec<Hit>,
    /// Work counters.
    pub stats: SearchStats,
}

/// The `k` best live rows of `sources` for `query` by Block-Max WAND: exactly the hits of
/// [`search_exhaustive`] (same ids, same scores, same order), usually scoring far fewer
/// documents. Rows that match no query lexeme are never returned.
pub fn search(sources: &[Source<'_>], query: &Bm25Query, k: usize) -> SearchResult {
    run(sources, query, k, false)
}

/// The `k` best live rows of `sources` for `query`, scoring every live row that holds a query
/// lexeme (term-at-a-time); the reference Block-Max WAND is checked against.
pub fn search_exhaustive(sources: &[Source<'_>], query: &Bm25Query, k: usize) -> SearchResult {
    run(sources, query, k, true)
}

fn run(sources: &[Source<'_>], query: &Bm25Query, k: usize, exhaustive: bool) -> SearchResult {
    let mut top = TopK::new(k);
    let mut stats = SearchStats::default();
    if k == 0 {
        return SearchResult::default();
    }
    for (index, source) in sources.iter().enumerate() {
        top.source = index;
        match source.kind {
            SourceKind::Segment(s) => scan(s, source, query, &mut top, &mut stats, exhaustive),
            SourceKind::Memtable(m) => scan(m, source, query, &mut top, &mut stats, exhaustive),
        }
    }
    SearchResult { hits: top.into_sorted(), stats }
}

fn scan<R: RowSource>(
    rows: &R,
    source: &Source<'_>,
    query: &Bm25Query,
    top: &mut TopK,
    stats: &mut SearchStats,
    exhaustive: bool,
) {
    let cursors: Vec<(usize, R::Cursor<'_>)> =
        query.terms().iter().enumerate().filter_map(|(i, t)| Some((i, rows.cursor(&t.lexeme)?))).collect();
    if cursors.is_empty() {
        return;
    }
    let lens = rows.lens();
    let decoded = if exhaustive {
        exhaustive::score_source(cursors, lens, source, query, top, stats)
    } else {
        bmw::score_source(cursors, lens, source, query, top, stats)
    };
    stats.blocks_decoded += decoded;
}

/// A source's rows as the search kernels see them (monomorphised per kind).
trait RowSource {
    type Cursor<'c>: Postings
    where
        Self: 'c;
    fn cursor(&self, lexeme: &str) -> Option<Self::Cursor<'_>>;
    fn lens(&self) -> &[u32];
}

impl RowSource for TextSegment {
    type Cursor<'c> = SegmentPostings<'c>;
    fn cursor(&self, lexeme: &str) -> Option<SegmentPostings<'_>> {
        self.postings(lexeme)
    }
    fn lens(&self) -> &[u32] {
        self.doc_lens()
    }
}

impl RowSource for Memtable {
    type Cursor<'c> = MemPostings<'c>;
    fn cursor(&self, lexeme: &str) -> Option<MemPostings<'_>> {
        self.postings(lexeme)
    }
    fn lens(&self) -> &[u32] {
        self.doc_lens()
    }
}

/// Whether `a` ranks before `b`: higher score, then smaller id.
#[inline]
fn better(a: &Hit, b: &Hit) -> bool {
    match a.score.total_cmp(&b.score) {
        Ordering::Greater => true,
        Ordering::Less => false,
        Ordering::Equal => a.id < b.id,
    }
}

/// Heap entry whose maximum is the worst hit.
struct Worst(Hit);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.score.total_cmp(&self.0.score).then(self.0.id.cmp(&other.0.id))
    }
}

/// The `k` best hits seen so far.
pub(crate) struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
    /// The source being scored (recorded in its hits).
    source: usize,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self { k, heap: BinaryHeap::with_capacity(k + 1), source: 0 }
    }

    /// The score a document must reach to enter (`None` while fewer than `k` are held): one
    /// scoring strictly less cannot enter; one scoring equal enters only with a smaller id.
    #[inline]
    pub(crate) fn threshold(&self) -> Option<f64> {
        (self.heap.len() >= self.k).then(|| self.heap.peek().map_or(f64::INFINITY, |w| w.0.score))
    }

    /// Offers row `row` (id `id`) of the current source with score `score`.
    #[inline]
    pub(crate) fn push(&mut self, id: u64, row: u32, score: f64) {
        let hit = Hit { id, score, source: self.source, row };
        if self.heap.len() < self.k {
            self.heap.push(Worst(hit));
        } else if self.heap.peek().is_some_and(|w| better(&hit, &w.0)) {
            self.heap.pop();
            self.heap.push(Worst(hit));
        }
    }

    fn into_sorted(self) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self.heap.into_iter().map(|w| w.0).collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits
    }
}

/// Sums `parts` (term index, contribution) in term order: the one summation order every
/// kernel uses.
#[inline]
pub(crate) fn sum_in_term_order(parts: &mut [(usize, f64)]) -> f64 {
    parts.sort_unstable_by_key(|p| p.0);
    let mut score = 0.0;
    for &(_, s) in parts.iter() {
        score += s;
    }
    score
}
