//! The two layer searches HNSW is made of, generic over how links are read (atomics while
//! building, plain slices when searching a finished graph).

use std::cmp::Reverse;

use super::prefetch::{visit_prefetched, PREFETCH_AHEAD};
use super::scratch::{Cand, SearchScratch};

/// Distances from the node being searched for (or inserted) to graph nodes.
pub(crate) trait Target {
    /// Distance to node `id`.
    fn distance(&self, id: u32) -> f32;
    /// Hints that `distance(id)` follows soon.
    fn prefetch(&self, _id: u32) {}
}

/// Read access to neighbour lists.
pub(crate) trait Links {
    /// Calls `f` with every neighbour of `node` on `layer` (which the node must have).
    fn for_each_neighbor(&self, node: u32, layer: usize, f: impl FnMut(u32));
    /// Hints that `node`'s list on `layer` will be read soon.
    fn prefetch_links(&self, _node: u32, _layer: usize) {}
}

/// Greedy descent on one layer from `entry`: moves to the nearest neighbour while that gets
/// nearer. Returns the local minimum reached.
#[inline]
pub(crate) fn greedy<L: Links>(links: &L, layer: usize, target: &impl Target, entry: Cand) -> Cand {
    let mut current = entry;
    loop {
        let mut best = current;
        links.for_each_neighbor(current.id, layer, |n| {
            let c = Cand::new(n, target.distance(n));
            if c < best {
                best = c;
            }
        });
        if best == current {
            return current;
        }
        current = best;
    }
}

/// One upper layer of a descent from `current` over a graph of `rows` rows: greedy, or with
/// `upper_list` ([`super::GraphPolicy::upper_list`]) a search with a list of
/// [`super::UPPER_LIST`]; returns the nearest node reached.
#[inline]
pub(crate) fn descend<L: Links>(
    links: &L,
    layer: usize,
    target: &impl Target,
    current: Cand,
    upper_list: bool,
    rows: usize,
    scratch: &mut SearchScratch,
) -> Cand {
    if !upper_list {
        return greedy(links, layer, target, current);
    }
    scratch.begin(rows);
    search_layer(links, layer, target, &|_| true, current, super::UPPER_LIST, scratch);
    scratch.drain_sorted();
    scratch.sorted.first().copied().unwrap_or(current)
}

/// Best-first search of one layer from `entry` (HNSW's SEARCH-LAYER), keeping the `ef` nearest
/// nodes that `accept` admits in `scratch.top`. Rejected nodes are still expanded (they route),
/// and while fewer than `ef` accepted nodes are known the search does not stop early, so when
/// `scratch.top` ends with fewer than `ef` nodes it holds every accepted node reachable from
/// `entry`.
///
/// `scratch.begin` must have been called for this search (this marks `entry` visited).
#[inline]
pub(crate) fn search_layer<L: Links>(
    links: &L,
    layer: usize,
    target: &impl Target,
    accept: &impl Fn(u32) -> bool,
    entry: Cand,
    ef: usize,
    scratch: &mut SearchScratch,
) {
    let ef = ef.max(1);
    let SearchScratch { visited, candidates, top, .. } = scratch;
    visited.visit(entry.id);
    candidates.push(Reverse(entry));
    if accept(entry.id) {
        top.push(entry);
    }
    // The key a node must beat to enter the full result set (`i32::MAX` while it is not full).
    let mut bound = full_bound(top, ef);
    // Unvisited neighbours of the node being expanded (lists hold at most 2 · 128 slots).
    let mut fresh = [0u32; 256];
    while let Some(Reverse(current)) = candidates.pop() {
        if current.key > bound {
            break;
        }
        // The next node to expand is most likely the current runner-up.
        if let Some(Reverse(next)) = candidates.peek() {
            links.prefetch_links(next.id, layer);
        }
        links.for_each_neighbor(current.id, layer, |n| visited.prefetch(n));
        let mut count = 0;
        links.for_each_neighbor(current.id, layer, |n| {
            if count < fresh.len() && visited.visit(n) {
                fresh[count] = n;
                count += 1;
            }
        });
        visit_prefetched(
            &fresh[..count],
            PREFETCH_AHEAD,
            |n| target.prefetch(n),
            |n| {
                let c = Cand::new(n, target.distance(n));
                if top.len() < ef || c.key < bound {
                    candidates.push(Reverse(c));
                    if accept(n) {
                        top.push(c);
                        if top.len() > ef {
                            top.pop();
                        }
                        bound = full_bound(top, ef);
                    }
                }
            },
        );
    }
}

#[inline]
fn full_bound(top: &std::collections::BinaryHeap<Cand>, ef: usize) -> i32 {
    if top.len() >= ef {
        top.peek().map_or(i32::MAX, |c| c.key)
    } else {
        i32::MAX
    }
}
