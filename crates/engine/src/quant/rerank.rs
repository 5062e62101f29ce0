//! The certified rerank: exact distances of quantized candidates in the order of their lower
//! bounds ([`super::Certainty`]), until no candidate left can be nearer than the `k`-th.

use super::codes::prefetch_row;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// Candidates a certified rerank keeps from its first pass, per candidate the pool would
/// rerank ([`certified_rerank`]), and at least [`FIRST_PASS_MIN`]: only those whose bounds
/// require it are reranked, so a larger first pass costs heap pushes, not distances, and spares
/// second passes (a second scan of every code). At 100,000 MiniLM rows a top 10 reranks 17
/// candidates (median; at most 33 in 300 queries); a larger first pass cost more in heap
/// updates than it saved.
const FIRST_PASS_FACTOR: usize = 4;
/// The fewest candidates a certified rerank's first pass keeps.
const FIRST_PASS_MIN: usize = 128;

/// The `k` nearest candidates by exact distance, reranked in the order of their lower bounds
/// until no candidate left can be nearer than the `k`-th: `visit` offers every accepted
/// candidate (each row once) with [`Offers::offer`], or passes over one whose bound
/// [`Offers::takes_from`] says cannot be taken; it is called once or twice.
///
/// The first pass keeps the `FIRST_PASS_FACTOR · pool` (at least `FIRST_PASS_MIN`) candidates
/// with the least lower bounds; they are reranked in bound order until the next bound reaches
/// the `k`-th exact distance found. Only when they run out first (more candidates exist, all
/// with bounds at least the last kept one) does a second pass rerank every other candidate
/// whose bound is below the `k`-th distance, nearest bound first. So the result is the exact
/// top `k` of the candidates whenever the bounds hold.
pub(crate) fn certified_rerank(
    store: &VectorStore<'_>,
    query: &Query,
    k: usize,
    pool: usize,
    mut visit: impl FnMut(&mut Offers),
) -> Vec<Neighbor> {
    let capacity = pool.max(k).saturating_mul(FIRST_PASS_FACTOR).max(FIRST_PASS_MIN);
    let mut offers = Offers::First { kept: TopK::new(capacity) };
    visit(&mut offers);
    let Offers::First { kept } = offers else { unreachable!("the first pass") };
    let kept = kept.into_sorted();
    let mut best = TopK::new(k);
    let reranked = rerank_while_below(store, query, &kept, &mut best);
    if reranked < kept.len() || kept.len() < capacity {
        // Stopped at a bound no better than the k-th distance, or every candidate was kept (a
        // pass leaves candidates out only once it keeps `capacity`).
        return best.into_sorted();
    }
    let mut offers = Offers::Second {
        kept: kept.iter().map(|n| n.row).collect(),
        limit: if best.is_full() { best.threshold() } else { f32::INFINITY },
        more: Vec::new(),
    };
    visit(&mut offers);
    let Offers::Second { mut more, .. } = offers else { unreachable!("the second pass") };
    more.sort_unstable_by(Neighbor::order);
    rerank_while_below(store, query, &more, &mut best);
    best.into_sorted()
}

/// What one pass of [`certified_rerank`] keeps of the candidates offered to it.
pub(crate) enum Offers {
    /// The first pass: the least lower bounds.
    First {
        /// The candidates kept, by lower bound.
        kept: TopK,
    },
    /// The second pass: every candidate not kept before whose bound is below `limit`.
    Second {
        /// Rows the first pass kept.
        kept: std::collections::HashSet<u64>,
        /// The `k`-th exact distance after the first pass.
        limit: f32,
        /// The candidates to rerank.
        more: Vec<Neighbor>,
    },
}

impl Offers {
    /// Whether a candidate whose bound is at least `floor` may still be taken (a cheap test
    /// before the bound itself is computed).
    #[inline]
    pub(crate) fn takes_from(&self, floor: f32) -> bool {
        match self {
            Self::First { kept, .. } => !kept.is_full() || floor < kept.threshold(),
            Self::Second { limit, .. } => floor < *limit,
        }
    }

    /// Offers row `row` whose distance is at least `bound`.
    #[inline]
    pub(crate) fn offer(&mut self, row: usize, bound: f32) {
        match self {
            Self::First { kept } => {
                if !kept.is_full() || bound < kept.threshold() {
                    kept.push(Neighbor::new(row as u64, bound));
                }
            }
            Self::Second { kept, limit, more } => {
                if bound < *limit && !kept.contains(&(row as u64)) {
                    more.push(Neighbor::new(row as u64, bound));
                }
            }
        }
    }
}

/// Reranks `candidates` (sorted by lower bound) into `best` until the next bound is at least
/// the `k`-th distance `best` holds; returns how many were reranked.
fn rerank_while_below(store: &VectorStore<'_>, query: &Query, candidates: &[Neighbor], best: &mut TopK) -> usize {
    for (i, candidate) in candidates.iter().enumerate() {
        if best.is_full() && candidate.distance >= best.threshold() {
            return i;
        }
        if let Some(next) = candidates.get(i + 1) {
            prefetch_row(store, next.row as usize);
        }
        best.push(Neighbor::new(candidate.row, store.distance(query, candidate.row as usize)));
    }
    candidates.len()
}
