//! Exhaustive scoring, term at a time: every live row holding a query lexeme is scored.

use super::{SearchStats, TopK};
use crate::postings::{Postings, END};
use crate::source::Source;
use crate::stats::Bm25Query;

/// Scores every live row of one source that holds a query term into `top`; returns the blocks
/// decoded. `cursors` are `(term index, cursor)` in term order, so each row's contributions are
/// added in term order starting from 0, as [`super::sum_in_term_order`] adds them.
pub(super) fn score_source<P: Postings>(
    cursors: Vec<(usize, P)>,
    lens: &[u32],
    source: &Source<'_>,
    query: &Bm25Query,
    top: &mut TopK,
    stats: &mut SearchStats,
) -> u64 {
    let mut acc = vec![0.0f64; lens.len()];
    let mut touched = vec![false; lens.len()];
    let mut decoded = 0;
    for (term, mut cursor) in cursors {
        let scorer = query.scorer(term);
        let mut row = cursor.row();
        while row != END {
            acc[row as usize] += scorer.score(cursor.tf(), lens[row as usize]);
            touched[row as usize] = true;
            row = cursor.next();
        }
        decoded += u64::from(cursor.blocks_decoded());
    }
    for (row, score) in acc.into_iter().enumerate() {
        if touched[row] && !source.is_deleted(row as u32) {
            stats.docs_scored += 1;
            top.push(source.id(row as u32), row as u32, score);
        }
    }
    decoded
}
