//! Filter-aware layer-0 traversal for selective filters (ACORN-1 style: Patel et al.,
//! "ACORN: Performant and Predicate-Agnostic Search Over Vector Embeddings and Structured Data",
//! SIGMOD 2024), on the ordinary HNSW graph.
//!
//! The ordinary filtered search ([`super::layer::search_layer`]) computes the distance of every
//! neighbour it meets, accepted or not, because rejected nodes still route; at selectivity `s`
//! about `1 / s` distances are spent per accepted candidate. This traversal computes distances
//! to accepted nodes only: when expanding a node, each accepted neighbour is a candidate, and each
//! rejected neighbour is looked through — its own neighbours that are accepted become candidates
//! (two hops), with no distance computed for the rejected node. Reading neighbour lists is cheap
//! next to a 384-dimension distance, so the search walks the subgraph the filter induces, made
//! denser by the two-hop expansion.

use std::cmp::Reverse;

use super::layer::{Links, Target};
use super::scratch::{Cand, SearchScratch};

/// Best-first search of layer 0 from `entry` over the nodes `accept` admits, expanding through
/// rejected neighbours to their neighbours, keeping the `ef` nearest accepted nodes in
/// `scratch.top`. `entry` itself may be rejected (it only routes). Returns the number of
/// distances computed.
///
/// `scratch.begin` must have been called for this search.
pub(crate) fn search_layer_two_hop<L: Links>(
    links: &L,
    target: &impl Target,
    accept: &impl Fn(u32) -> bool,
    entry: Cand,
    ef: usize,
    scratch: &mut SearchScratch,
) -> usize {
    let ef = ef.max(1);
    let SearchScratch { visited, candidates, top, .. } = scratch;
    visited.visit(entry.id);
    candidates.push(Reverse(entry));
    if accept(entry.id) {
        top.push(entry);
    }
    let mut bound = i32::MAX;
    let mut computed = 0usize;
    let mut offer = |n: u32,
                     candidates: &mut std::collections::BinaryHeap<Reverse<Cand>>,
                     top: &mut std::collections::BinaryHeap<Cand>,
                     bound: &mut i32| {
        let c = Cand::new(n, target.distance(n));
        computed += 1;
        if top.len() < ef || c.key < *bound {
            candidates.push(Reverse(c));
            top.push(c);
            if top.len() > ef {
                top.pop();
            }
            if top.len() >= ef {
                *bound = top.peek().map_or(i32::MAX, |c| c.key);
            }
        }
    };
    while let Some(Reverse(current)) = candidates.pop() {
        if current.key > bound {
            break;
        }
        links.for_each_neighbor(current.id, 0, |n| {
            if !visited.visit(n) {
                return;
            }
            if accept(n) {
                offer(n, candidates, top, &mut bound);
            } else {
                links.for_each_neighbor(n, 0, |m| {
                    if accept(m) && visited.visit(m) {
                        offer(m, candidates, top, &mut bound);
                    }
                });
            }
        });
    }
    computed
}
