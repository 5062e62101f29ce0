//! Block-Max WAND (Ding & Suel, SIGIR 2011) over one source, with bounds computed at query time
//! from each block's largest `tf` and smallest `dl` (so they hold for the global `avgdl` and IDF
//! of this query, whatever they are).
//!
//! Invariant: a row is skipped only when an upper bound of its score is strictly below the
//! current top-k threshold, so it could not enter (an equal score might, with a smaller id).
//! Bounds are widened by a relative 1e-9 ([`crate::scoring::TermScorer::bound`]), which covers
//! every rounding difference between a sum of bounds and a sum of scores.

use super::{sum_in_term_order, SearchStats, TopK};
use crate::postings::{Postings, END};
use crate::scoring::TermScorer;
use crate::source::Source;
use crate::stats::Bm25Query;

struct Term<'q, P> {
    index: usize,
    postings: P,
    scorer: &'q TermScorer,
    /// Bound of every score in the list.
    list_bound: f64,
    /// The last row of the block `block_max` last described, and that block's bound: targets
    /// never decrease, so a target at or before that row lies in the same block.
    block_last: u32,
    block_bound: f64,
}

impl<P: Postings> Term<'_, P> {
    /// The bound of the block holding the first posting ≥ `row` and that block's last row
    /// (`None` past the list's end).
    #[inline]
    fn block(&mut self, row: u32) -> Option<(f64, u32)> {
        if self.block_last == END || row > self.block_last {
            let block = self.postings.block_max(row)?;
            self.block_last = block.last_row;
            self.block_bound = self.scorer.block_bound(&block);
        }
        Some((self.block_bound, self.block_last))
    }
}

/// Whether a bound sum could still reach `threshold`.
#[inline]
fn may_enter(bound: f64, threshold: Option<f64>) -> bool {
    threshold.is_none_or(|t| bound >= t)
}

/// Scores the rows of one source that may enter `top`; returns the blocks decoded.
pub(super) fn score_source<P: Postings>(
    cursors: Vec<(usize, P)>,
    lens: &[u32],
    source: &Source<'_>,
    query: &Bm25Query,
    top: &mut TopK,
    stats: &mut SearchStats,
) -> u64 {
    let mut terms: Vec<Term<'_, P>> = cursors
        .into_iter()
        .map(|(index, postings)| {
            let scorer = query.scorer(index);
            let mut list_bound = 0.0f64;
            postings.for_each_block(&mut |b| list_bound = list_bound.max(scorer.block_bound(&b)));
            Term { index, postings, scorer, list_bound, block_last: END, block_bound: 0.0 }
        })
        .collect();
    let mut parts: Vec<(usize, f64)> = Vec::with_capacity(terms.len());
    // Term positions by current row (cursors hold decoded blocks: sort indices, not cursors).
    let mut order: Vec<usize> = (0..terms.len()).collect();
    loop {
        // Insertion sort: the order changes little between rounds.
        for i in 1..order.len() {
            let mut j = i;
            while j > 0 && terms[order[j - 1]].postings.row() > terms[order[j]].postings.row() {
                order.swap(j - 1, j);
                j -= 1;
            }
        }
        let threshold = top.threshold();
        // Pivot: the first term at which the lists' bounds, added up, may reach the threshold.
        let mut bound = 0.0;
        let mut pivot = None;
        for (i, &t) in order.iter().enumerate() {
            if terms[t].postings.row() == END {
                break;
            }
            bound += terms[t].list_bound;
            if may_enter(bound, threshold) {
                pivot = Some(i);
                break;
            }
        }
        let Some(mut pivot) = pivot else { break };
        let row = terms[order[pivot]].postings.row();
        while pivot + 1 < order.len() && terms[order[pivot + 1]].postings.row() == row {
            pivot += 1;
        }
        // Block-max check: the bounds of the blocks that hold `row` in the pivot's lists.
        if threshold.is_some() {
            let mut block_bound = 0.0;
            let mut next = END;
            for &t in &order[..=pivot] {
                if let Some((bound, last_row)) = terms[t].block(row) {
                    block_bound += bound;
                    next = next.min(last_row.saturating_add(1));
                }
            }
            if !may_enter(block_bound, threshold) {
                // No row before `next` can enter: rows in [row, next) are covered by these
                // blocks (lists past the pivot start at `next` or later), rows before `row` by
                // the lists before the pivot, whose bounds fell short.
                if let Some(&after) = order.get(pivot + 1) {
                    next = next.min(terms[after].postings.row());
                }
                for &t in &order[..=pivot] {
                    terms[t].postings.seek(next);
                }
                stats.block_skips += 1;
                continue;
            }
        }
        if terms[order[0]].postings.row() == row {
            // Every list up to the pivot is on `row`: score it.
            if !source.is_deleted(row) {
                let dl = lens[row as usize];
                parts.clear();
                parts.extend(order[..=pivot].iter().map(|&t| {
                    let term = &terms[t];
                    (term.index, term.scorer.score(term.postings.tf(), dl))
                }));
                stats.docs_scored += 1;
                top.push(source.id(row), row, sum_in_term_order(&mut parts));
            }
            for &t in &order[..=pivot] {
                terms[t].postings.next();
            }
        } else {
            // Rows before `row` cannot enter: move the lagging lists up to it.
            for &t in &order[..pivot] {
                terms[t].postings.seek(row);
            }
        }
    }
    terms.iter().map(|t| u64::from(t.postings.blocks_decoded())).sum()
}
