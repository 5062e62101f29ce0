//! A graph search that a later call continues with a longer list instead of starting over.
//!
//! An ordered index scan behind a selective WHERE clause asks a segment for deeper and deeper
//! lists (the executor drops the rows the filter rejects). Searching from scratch each time
//! repeats the whole walk; a [`ResumableSearch`] keeps it: the visited nodes, the *frontier*
//! (every visited node not expanded yet, including those a list of the earlier length had no
//! room for) and every accepted node found. Continuing with a list of `ef' > ef` expands the
//! frontier nearest first until its nearest node is farther than the `ef'`-th accepted node
//! found, exactly the stopping rule of a search with list `ef'`; the nodes it expands are those
//! a fresh search with `ef'` would expand from the same state. pgvector's iterative index scans
//! keep their candidate queue across batches in the same way.
//!
//! With traversal codes the walk ranks nodes by estimates and the rows a call returns get their
//! exact distances from the store; each row's exact distance is computed once per state.
//!
//! A list of [`1 / SCAN_FRACTION`](SCAN_FRACTION) of the graph's nodes or more is not walked:
//! a walk that long visits most of the graph's nodes in random order, each with its links. The
//! state then measures every node once, in row order, and later calls only take their list from
//! those (a fresh search scans exactly from a sixteenth of the nodes on, `list_covers_the_graph`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::codes::CodedTarget;
use super::layer::{descend, Links, Target};
use super::prefetch::{visit_prefetched, PREFETCH_AHEAD};
use super::scratch::{Cand, SearchScratch};
use super::view::HnswView;
use super::ABSENT_LEVEL;
use crate::row_hash::RowMap;
use crate::store::{Query, VectorStore};
use crate::topk::{Neighbor, TopK};

/// A list at least this fraction of a graph's nodes (`ef · SCAN_FRACTION ≥ nodes`) measures every
/// node instead of walking.
pub const SCAN_FRACTION: usize = 8;

/// How many rows ahead of the one being measured exactly a continued search prefetches.
const EXACT_PREFETCH_AHEAD: usize = 4;

/// The state of one query's search of one graph, kept between calls of
/// [`HnswView::search_resumed`]. Memory: a bit per row of the graph, plus 8 bytes per visited
/// node and per accepted node found (and 8 per row given an exact distance).
///
/// Guarantees: a state is only ever continued with the query, graph and acceptance test it was
/// started with (the caller's promise); a state made for a graph of another size starts over.
#[derive(Debug, Default)]
pub struct ResumableSearch {
    /// Rows of the graph the state belongs to (0: not started).
    rows: usize,
    visited: Vec<u64>,
    /// Visited nodes not expanded yet that were within the list's bound when found, nearest
    /// first.
    frontier: BinaryHeap<Reverse<Cand>>,
    /// Visited nodes not expanded yet that were beyond the bound of the list of their call (a
    /// search with that list would never expand them): the next, longer list considers them.
    beyond: Vec<Cand>,
    /// Accepted nodes found, by walk distance (estimates with codes), in no order.
    found: Vec<Cand>,
    /// Exact distances computed so far (walks on codes only).
    exact: RowMap<u32, f32>,
    /// Distances computed, estimates and exact ones, over every call.
    computed: usize,
    /// Every node was measured (`found` holds every accepted node): nothing is left to walk.
    complete: bool,
}

impl ResumableSearch {
    /// A state that has searched nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Distances computed over every call so far (estimates and exact distances).
    pub fn distances(&self) -> usize {
        self.computed
    }

    /// Marks `id` visited; returns whether it was not visited before.
    fn visit(&mut self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        let fresh = self.visited[word] & bit == 0;
        self.visited[word] |= bit;
        fresh
    }

    /// Starts over on a graph of `rows` rows.
    fn reset(&mut self, rows: usize) {
        self.rows = rows;
        self.visited.clear();
        self.visited.resize(rows.div_ceil(64), 0);
        self.frontier.clear();
        self.beyond.clear();
        self.found.clear();
        self.exact.clear();
        self.complete = false;
    }

    /// Walks until the frontier's nearest node is farther than the `ef`-th accepted node found
    /// (or the frontier is empty), starting at the graph's entry point on the first call; returns
    /// the `ef` nearest accepted nodes found, nearest first by walk distance.
    fn walk(
        &mut self,
        view: &HnswView<'_>,
        target: &impl Target,
        accept: &impl Fn(u32) -> bool,
        ef: usize,
        scratch: &mut SearchScratch,
    ) -> Vec<Cand> {
        if self.rows != view.rows || self.visited.is_empty() {
            self.reset(view.rows);
            let mut current = Cand::new(view.entry_point, target.distance(view.entry_point));
            for layer in (1..=usize::from(view.max_level)).rev() {
                current = descend(view, layer, target, current, view.upper_list, view.rows, scratch);
            }
            self.visit(current.id);
            self.frontier.push(Reverse(current));
            if accept(current.id) {
                self.found.push(current);
            }
        }
        let ef = ef.max(1);
        if !self.complete && ef.saturating_mul(SCAN_FRACTION) >= view.node_count() {
            self.measure_every_node(view, target, accept);
        }
        if self.complete {
            return self.nearest_found(ef, accept);
        }
        // What a shorter list left beyond its bound may be within this one's.
        self.frontier.extend(self.beyond.drain(..).map(Reverse));
        // The `ef` nearest accepted nodes found so far, farthest on top: the bound a node must
        // beat to matter to a list of `ef`.
        let mut top: BinaryHeap<Cand> = self.nearest_found(ef, accept).into();
        let bound = |top: &BinaryHeap<Cand>| {
            if top.len() >= ef {
                top.peek().map_or(i32::MAX, |c| c.key)
            } else {
                i32::MAX
            }
        };
        let mut fresh = Vec::with_capacity(256);
        while let Some(&Reverse(current)) = self.frontier.peek() {
            if current.key > bound(&top) {
                break;
            }
            self.frontier.pop();
            // The next node to expand is most likely the current runner-up: its links are
            // read from memory while this node's neighbours are measured.
            if let Some(&Reverse(next)) = self.frontier.peek() {
                view.prefetch_links(next.id, 0);
            }
            fresh.clear();
            view.for_each_neighbor(current.id, 0, |n| fresh.push(n));
            fresh.retain(|&n| (n as usize) < self.rows && self.visit(n));
            visit_prefetched(
                &fresh,
                PREFETCH_AHEAD,
                |n| target.prefetch(n),
                |n| {
                    let c = Cand::new(n, target.distance(n));
                    self.computed += 1;
                    if top.len() < ef || c.key < bound(&top) {
                        self.frontier.push(Reverse(c));
                        if accept(n) {
                            self.found.push(c);
                            top.push(c);
                            if top.len() > ef {
                                top.pop();
                            }
                        }
                    } else {
                        // Beyond the bound, which only falls during this call: a longer list's.
                        self.beyond.push(c);
                        if accept(n) {
                            self.found.push(c);
                        }
                    }
                },
            );
        }
        top.into_sorted_vec()
    }

    /// Measures every node of the graph in row order; `found` becomes every accepted node.
    fn measure_every_node(&mut self, view: &HnswView<'_>, target: &impl Target, accept: &impl Fn(u32) -> bool) {
        self.found.clear();
        self.frontier.clear();
        self.beyond.clear();
        for (row, &level) in view.levels.iter().enumerate().take(view.rows) {
            if level != ABSENT_LEVEL && accept(row as u32) {
                if let Some(&level_ahead) = view.levels.get(row + 8) {
                    if level_ahead != ABSENT_LEVEL {
                        target.prefetch(row as u32 + 8);
                    }
                }
                self.found.push(Cand::new(row as u32, target.distance(row as u32)));
                self.computed += 1;
            }
        }
        self.complete = true;
    }

    /// The `ef` nearest nodes found that `accept` (still) admits, nearest first by walk
    /// distance.
    fn nearest_found(&self, ef: usize, accept: &impl Fn(u32) -> bool) -> Vec<Cand> {
        let mut nearest: Vec<Cand> = self.found.iter().copied().filter(|c| accept(c.id)).collect();
        if nearest.len() > ef {
            nearest.select_nth_unstable(ef - 1);
            nearest.truncate(ef);
        }
        nearest.sort_unstable();
        nearest
    }
}

/// Distances from a query to stored rows (a walk without codes is exact).
struct ExactTarget<'a, 's> {
    store: &'a VectorStore<'s>,
    query: &'a Query,
}

impl Target for ExactTarget<'_, '_> {
    #[inline]
    fn distance(&self, id: u32) -> f32 {
        self.store.distance(self.query, id as usize)
    }

    #[inline]
    fn prefetch(&self, id: u32) {
        self.store.prefetch(id as usize);
    }
}

impl HnswView<'_> {
    /// Continues `state`'s search (or starts it) for the `k` nearest rows to `query` that
    /// `accept` admits, with a list of `max(ef, k)`: the `k` nearest by exact distance among the
    /// list's nodes, nearest first, as a fresh graph search with that list returns them. Fewer
    /// than `k` when fewer accepted nodes are reachable (the caller falls back to a scan).
    #[allow(clippy::too_many_arguments)] // the fresh search's inputs plus the state it resumes
    pub(crate) fn search_resumed(
        &self,
        state: &mut ResumableSearch,
        scratch: &mut SearchScratch,
        store: &VectorStore<'_>,
        query: &Query,
        k: usize,
        ef: usize,
        accept: &impl Fn(u32) -> bool,
    ) -> Vec<Neighbor> {
        let ef = ef.max(k).max(1);
        let coded = self.codes.as_ref().and_then(|codes| Some((codes, codes.prepare(query)?)));
        let Some((codes, coded_query)) = coded else {
            return state
                .walk(self, &ExactTarget { store, query }, accept, ef, scratch)
                .iter()
                .take(k)
                .map(|c| Neighbor::new(u64::from(c.id), c.distance()))
                .collect();
        };
        let target = CodedTarget { codes, query: &coded_query, computed: std::cell::Cell::new(0) };
        let nearest = state.walk(self, &target, accept, ef, scratch);
        // Rows without an exact distance yet, their rows prefetched a few ahead of the one
        // being measured (prefetching a long list at once stalls on the outstanding reads).
        let missing: Vec<u32> = nearest.iter().map(|c| c.id).filter(|id| !state.exact.contains_key(id)).collect();
        visit_prefetched(
            &missing,
            EXACT_PREFETCH_AHEAD,
            |id| store.prefetch(id as usize),
            |id| {
                state.exact.insert(id, store.distance(query, id as usize));
            },
        );
        state.computed += missing.len();
        let mut top = TopK::new(k);
        for c in &nearest {
            top.push(Neighbor::new(u64::from(c.id), state.exact[&c.id]));
        }
        top.into_sorted()
    }
}
