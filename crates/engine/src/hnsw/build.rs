//! Parallel HNSW construction.
//!
//! Levels are drawn up front from a seeded ChaCha RNG in insertion order, so the layout of the
//! link arrays (and with one thread, the whole graph) is a function of the seed and the rows.
//! Link lists live in flat arrays of `AtomicU32` slots laid out exactly like the stored form:
//! searches read them without locks (every value ever written is a valid node id or
//! [`NO_NODE`], so a concurrently rewritten list is at worst a mix of old and new neighbours),
//! and writers serialise per node on a `Mutex<()>`. The layer-0 slots live in a
//! [`SpillBuffer`] (in memory, or in a spill file for a build over spilled rows) viewed as
//! atomics while the build runs, which then becomes the graph's layer-0 array as it is; the upper
//! layers' atomics are unwrapped in place into plain `u32` arrays. Nothing of the build's locking
//! survives. With traversal codes ([`GraphBuildSupport::codes`]) insertions walk on estimates.

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::layer::{descend, search_layer, Links, Target};
use super::nibble_codes::{NibbleCodes, NibbleTarget};
use super::policy::GraphPolicy;
use super::prefetch::prefetch_row;
use super::scratch::{key, Cand, SearchScratch};
use super::{HnswError, HnswGraph, HnswParams, HnswView, ABSENT_LEVEL, MAX_LEVEL, NO_NODE};
use crate::kernels;
use crate::metric::Metric;
use crate::spill::SpillBuffer;
use crate::store::{Elements, Query, VectorStore};

/// What a graph build may use besides the rows (the default: neither).
#[derive(Debug, Clone, Copy, Default)]
pub struct GraphBuildSupport<'a> {
    /// Whether insertions walk the graph on code estimates, as a search does: the build then
    /// makes 4-bit walk codes of the rows (`nibble_codes`, `16 · ⌈dims / 32⌉` bytes a row, freed
    /// when the graph is done) and computes exact distances only for the `ef_construction` rows
    /// each walk keeps, before choosing neighbours on exact distances. Rows without codes (not
    /// dense `f32`, or L1/Hamming/Jaccard) walk on the rows all the same. Measured on MiniLM
    /// rows (m 16, ef_construction 64, two threads), walking on 8-bit codes against the rows:
    /// 100,000 × 384 in 9.4 s instead of 13.9 s, recall@10 equal within 0.003 at ef_search
    /// 32–100; one 1,000,000-row segment in 97 s instead of 209–278 s, recall@10 at ef_search
    /// 100 0.922 against 0.919. The 4-bit codes took another 8–15 % off (`nibble_codes`).
    pub walk_codes: bool,
    /// A directory for the layer-0 link array (`8 · m` bytes a row, the bulk of the build's
    /// memory): it lives in an unnamed file there, through the page cache ([`crate::spill`]).
    pub spill_dir: Option<&'a Path>,
    /// How the graph links its nodes and descends its upper layers ([`GraphPolicy::for_rows`]).
    pub policy: GraphPolicy,
}

/// Distances between stored rows, computed with the dispatched kernels on the rows in place.
/// Equal, bit for bit, to [`VectorStore::distance_between`] (without its allocations).
#[derive(Clone, Copy)]
pub(crate) struct RowDistance<'s> {
    elements: Elements<'s>,
    dims: usize,
    metric: Metric,
}

impl<'s> RowDistance<'s> {
    pub fn new(store: &VectorStore<'s>) -> Self {
        Self { elements: store.elements(), dims: store.dims(), metric: store.metric() }
    }

    /// Prefetch hint for row `row`.
    #[inline]
    pub fn prefetch(&self, row: u32) {
        self.elements.prefetch(row as usize, self.dims);
    }

    #[inline]
    pub fn between(&self, a: u32, b: u32) -> f32 {
        let (a, b, d) = (a as usize * self.dims, b as usize * self.dims, self.dims);
        match self.elements {
            Elements::F32(e) => {
                let (x, y) = (&e[a..a + d], &e[b..b + d]);
                match self.metric {
                    Metric::L2 => kernels::l2_squared(x, y),
                    Metric::InnerProduct => -kernels::dot(x, y),
                    Metric::Cosine => 1.0 - kernels::dot(x, y),
                    Metric::L1 | Metric::Hamming => kernels::l1(x, y),
                    Metric::Jaccard => crate::metric::jaccard_from(kernels::dot_and_norms(x, y)),
                }
            }
            Elements::Sparse(e) => crate::sparse_rows::distance_between(&e[a..a + d], &e[b..b + d], self.metric),
            Elements::Bits(e) => crate::bit_rows::distance_between(&e[a..a + d], &e[b..b + d], self.metric),
            Elements::F16(e) => {
                let (x, y) = (&e[a..a + d], &e[b..b + d]);
                match self.metric {
                    Metric::L2 => kernels::l2_squared_f16(x, y),
                    Metric::InnerProduct => -kernels::dot_f16(x, y),
                    // f16 rows are stored as given under cosine (`crate::store`).
                    Metric::Cosine => kernels::cosine_distance_f16(x, y),
                    Metric::L1 | Metric::Hamming => kernels::l1_f16(x, y),
                    Metric::Jaccard => crate::metric::jaccard_from(kernels::dot_and_norms_f16(x, y)),
                }
            }
        }
    }
}

/// Distances from node `q` (being inserted).
pub(super) struct NodeTarget<'a, 's> {
    pub(super) dist: &'a RowDistance<'s>,
    pub(super) q: u32,
}

impl Target for NodeTarget<'_, '_> {
    #[inline]
    fn distance(&self, id: u32) -> f32 {
        self.dist.between(self.q, id)
    }

    #[inline]
    fn prefetch(&self, id: u32) {
        self.dist.prefetch(id);
    }
}

/// HNSW's neighbour-selection heuristic (Algorithm 4 without extension, as in hnswlib): from
/// `candidates` sorted nearest first, keep a candidate when it is nearer to the base than to
/// every candidate kept so far, up to `m`. Fewer than `m` candidates are all kept. With `relax`
/// `α > 1` a candidate at a non-negative distance `d` is kept unless some kept one is nearer to
/// it than `d / α` ([`GraphPolicy::relax`]). With `fill_pruned` (Algorithm 4's
/// `keepPrunedConnections`, as pgvector builds), the candidates the heuristic passed over then
/// fill the list up to `m`, nearest first, after the chosen ones. Returns how many of `out` the
/// heuristic chose (the rest are fill).
pub(crate) fn select_neighbors(
    candidates: &[Cand],
    m: usize,
    pair: impl Fn(u32, u32) -> f32,
    fill_pruned: bool,
    relax: f32,
    out: &mut Vec<Cand>,
) -> usize {
    out.clear();
    if candidates.len() < m {
        out.extend_from_slice(candidates);
        return out.len();
    }
    for &c in candidates {
        if out.len() >= m {
            break;
        }
        let d = c.distance();
        let keep = if relax > 1.0 && d >= 0.0 {
            out.iter().all(|kept| relax * pair(kept.id, c.id) >= d)
        } else {
            out.iter().all(|kept| key(pair(kept.id, c.id)) >= c.key)
        };
        if keep {
            out.push(c);
        }
    }
    let chosen = out.len();
    if fill_pruned {
        // A list still short of `m` examined every candidate, so the rest are the passed-over
        // ones. The chosen are a subsequence of `candidates`: walk both to skip them.
        let mut next_chosen = 0;
        for &c in candidates {
            if out.len() >= m {
                break;
            }
            if next_chosen < chosen && out[next_chosen].id == c.id {
                next_chosen += 1;
            } else {
                out.push(c);
            }
        }
    }
    chosen
}

/// The entry point and maximum level of the graph being built.
struct Top {
    entry: u32,
    max_level: usize,
}

/// The graph under construction (link slots as atomics).
pub(super) struct Building<'s, 'l> {
    pub(super) dist: RowDistance<'s>,
    store: &'s VectorStore<'s>,
    codes: Option<NibbleCodes>,
    policy: GraphPolicy,
    m: usize,
    pub(super) ef_construction: usize,
    pub(super) rows: usize,
    pub(super) levels: Vec<u8>,
    layer0: &'l [AtomicU32],
    upper_offsets: Vec<u32>,
    upper: Vec<AtomicU32>,
    locks: Vec<Mutex<()>>,
    top: Mutex<Top>,
}

impl Links for Building<'_, '_> {
    #[inline]
    fn for_each_neighbor(&self, node: u32, layer: usize, mut f: impl FnMut(u32)) {
        for slot in self.slots(node, layer) {
            let n = slot.load(Ordering::Relaxed);
            if n == NO_NODE {
                break;
            }
            f(n);
        }
    }

    #[inline]
    fn prefetch_links(&self, node: u32, layer: usize) {
        if layer == 0 {
            prefetch_row(self.layer0, node as usize * 2 * self.m, 2 * self.m);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere cannot leave a half-written list that is invalid: every slot always holds
    // a node id or NO_NODE. Keep going rather than propagate poison.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Building<'_, '_> {
    /// The entry point ([`NO_NODE`] while the graph is empty).
    pub(super) fn entry(&self) -> u32 {
        lock(&self.top).entry
    }

    /// The top layer of the graph.
    pub(super) fn max_level(&self) -> usize {
        lock(&self.top).max_level
    }

    #[inline]
    pub(super) fn slots(&self, node: u32, layer: usize) -> &[AtomicU32] {
        if layer == 0 {
            let start = node as usize * 2 * self.m;
            &self.layer0[start..start + 2 * self.m]
        } else {
            let start = self.upper_offsets[node as usize] as usize + (layer - 1) * self.m;
            &self.upper[start..start + self.m]
        }
    }

    /// Inserts node `q` (its level already assigned) into the graph.
    fn insert(&self, q: u32, scratch: &mut SearchScratch) {
        let level = usize::from(self.levels[q as usize]);
        let target = NodeTarget { dist: &self.dist, q };
        let guard = lock(&self.top);
        let (entry, max_level) = (guard.entry, guard.max_level);
        // A node that raises the maximum level holds the lock for its whole insertion (as hnswlib
        // does), so that concurrent insertions never see an entry point without links.
        let mut raising = if level > max_level {
            Some(guard)
        } else {
            drop(guard);
            None
        };

        // With codes, the walk ranks nodes by estimates (as a search does) and the nodes it
        // keeps get their exact distance before neighbours are chosen.
        let prepared = self.codes.as_ref().and_then(|codes| {
            let row = self.store.row_f32(q as usize);
            codes.prepare(&Query::new(&row, self.store.metric())).map(|query| (codes, query))
        });
        let coded = prepared.as_ref().map(|(codes, query)| NibbleTarget { codes, query });
        let mut current = match &coded {
            Some(coded) => Cand::new(entry, coded.distance(entry)),
            None => Cand::new(entry, target.distance(entry)),
        };
        for layer in (level + 1..=max_level).rev() {
            current = match &coded {
                Some(coded) => descend(self, layer, coded, current, self.policy.upper_list, self.rows, scratch),
                None => descend(self, layer, &target, current, self.policy.upper_list, self.rows, scratch),
            };
        }
        for layer in (0..=level.min(max_level)).rev() {
            scratch.begin(self.rows);
            match &coded {
                Some(coded) => search_layer(self, layer, coded, &|_| true, current, self.ef_construction, scratch),
                None => search_layer(self, layer, &target, &|_| true, current, self.ef_construction, scratch),
            }
            scratch.drain_sorted();
            scratch.sorted.retain(|c| c.id != q);
            if coded.is_some() {
                self.exact_distances(q, &mut scratch.sorted);
                scratch.sorted.sort_unstable();
            }
            let Some(&nearest) = scratch.sorted.first() else { continue };
            let mut selected = std::mem::take(&mut scratch.selected);
            // The new node's own list is filled with the candidates the heuristic passed over
            // (as pgvector does): on near-duplicate rows the heuristic alone leaves few links.
            // Only the chosen neighbours link back with a pruning of their full lists; the fill
            // links back where a list has room, so it costs no pruning. Measured on 1M MiniLM
            // rows (m 16, ef_construction 64, two threads, 1,000 held-out queries): recall@10
            // 0.9519 at a list of 200 against 0.9438, the list reaching 0.95 about 182 instead of
            // 245 (0.36 ms against 0.46 ms a search), build 105 s against 93 s; at 100k, 0.9456
            // at 64 against 0.9371. Linking the fill back with pruning too gained a little more
            // recall for another 10 % of build time.
            let relax = self.policy.relax;
            let chosen =
                select_neighbors(&scratch.sorted, self.m, |a, b| self.dist.between(a, b), true, relax, &mut selected);
            // Under full lists every neighbour links back with pruning, not only the chosen.
            let chosen = if self.policy.full_lists { selected.len() } else { chosen };
            {
                let _own = lock(&self.locks[q as usize]);
                let slots = self.slots(q, layer);
                for (i, slot) in slots.iter().enumerate() {
                    slot.store(selected.get(i).map_or(NO_NODE, |c| c.id), Ordering::Relaxed);
                }
            }
            for (i, &neighbor) in selected.iter().enumerate() {
                self.connect(neighbor.id, Cand::new(q, neighbor.distance()), layer, i < chosen, scratch);
            }
            scratch.selected = selected;
            current = nearest;
        }
        if let Some(top) = raising.as_mut() {
            top.entry = q;
            top.max_level = level;
        }
    }

    /// Gives every candidate its exact distance to row `base`. The rows are random reads, so
    /// each is prefetched a few candidates ahead of its distance.
    fn exact_distances(&self, base: u32, candidates: &mut [Cand]) {
        const AHEAD: usize = 4;
        for c in candidates.iter().take(AHEAD) {
            self.dist.prefetch(c.id);
        }
        for i in 0..candidates.len() {
            if let Some(later) = candidates.get(i + AHEAD) {
                self.dist.prefetch(later.id);
            }
            let id = candidates[i].id;
            candidates[i] = Cand::new(id, self.dist.between(base, id));
        }
    }

    /// Adds `new` to `node`'s list on `layer`. A full list is pruned with the heuristic when
    /// `prune_when_full` holds, and left as it is otherwise.
    fn connect(&self, node: u32, new: Cand, layer: usize, prune_when_full: bool, scratch: &mut SearchScratch) {
        let cap = if layer == 0 { 2 * self.m } else { self.m };
        let slots = self.slots(node, layer);
        let _guard = lock(&self.locks[node as usize]);
        let mut len = 0;
        for slot in slots {
            let n = slot.load(Ordering::Relaxed);
            if n == NO_NODE {
                break;
            }
            if n == new.id {
                return;
            }
            len += 1;
        }
        if len < cap {
            slots[len].store(new.id, Ordering::Relaxed);
            return;
        }
        if !prune_when_full {
            return;
        }
        let links = &mut scratch.links;
        links.clear();
        links.extend(slots.iter().map(|slot| Cand::new(slot.load(Ordering::Relaxed), 0.0)));
        self.exact_distances(node, links);
        links.push(new);
        links.sort_unstable();
        let policy = self.policy;
        select_neighbors(
            links,
            cap,
            |a, b| self.dist.between(a, b),
            policy.full_lists,
            policy.relax,
            &mut scratch.selected,
        );
        for (i, slot) in slots.iter().enumerate() {
            slot.store(scratch.selected.get(i).map_or(NO_NODE, |c| c.id), Ordering::Relaxed);
        }
    }
}

/// The rows to insert, in order, checked against the store.
fn insertion_order(rows: Option<&[usize]>, row_count: usize) -> Result<Vec<u32>, HnswError> {
    let Some(list) = rows else { return Ok((0..row_count as u32).collect()) };
    let mut seen = crate::bitset::Bitset::new(row_count);
    for &row in list {
        if row >= row_count {
            return Err(HnswError::RowOutOfRange { row, rows: row_count });
        }
        if seen.contains(row) {
            return Err(HnswError::DuplicateRow(row));
        }
        seen.insert(row);
    }
    Ok(list.iter().map(|&r| r as u32).collect())
}

/// Draws every node's level (`⌊−ln U / ln M⌋`, clamped to [`MAX_LEVEL`]) in insertion order
/// (rows of `base` keep theirs) and lays out the upper-layer offsets; returns `(levels, offsets)`.
fn assign_levels(
    order: &[u32],
    row_count: usize,
    params: &HnswParams,
    base: Option<&HnswView<'_>>,
) -> Result<(Vec<u8>, Vec<u32>), HnswError> {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let level_scale = 1.0 / (params.m as f64).ln();
    let mut levels = vec![ABSENT_LEVEL; row_count];
    if let Some(base) = base {
        levels[..base.rows()].copy_from_slice(&base.levels[..base.rows()]);
    }
    for &row in order {
        let uniform = 1.0 - rng.gen::<f64>(); // (0, 1]
        let level = (-uniform.ln() * level_scale).floor().min(f64::from(MAX_LEVEL));
        levels[row as usize] = level as u8;
    }
    let mut offsets = Vec::with_capacity(row_count + 1);
    let mut offset = 0u64;
    offsets.push(0u32);
    for &level in &levels {
        if level != ABSENT_LEVEL {
            offset += u64::from(level) * params.m as u64;
        }
        offsets.push(u32::try_from(offset).map_err(|_| HnswError::TooManyRows(row_count))?);
    }
    Ok((levels, offsets))
}

/// Builds the graph; see [`HnswGraph::build`] and, with `base`, [`HnswGraph::extend`].
pub(crate) fn build(
    store: &VectorStore<'_>,
    rows: Option<&[usize]>,
    params: &HnswParams,
    threads: usize,
    base: Option<&HnswView<'_>>,
    cancel: &crate::cancel::Cancel,
    support: GraphBuildSupport<'_>,
) -> Result<HnswGraph, HnswError> {
    params.validate()?;
    let m = params.m;
    let row_count = store.len();
    if row_count >= NO_NODE as usize {
        return Err(HnswError::TooManyRows(row_count));
    }
    let base_rows = base.map_or(0, HnswView::rows);
    if let Some(base) = base {
        if base.m != m || base_rows > row_count {
            return Err(HnswError::BaseMismatch { base_m: base.m, m, base_rows, rows: row_count });
        }
    }
    let order = match rows {
        Some(list) => insertion_order(Some(list), row_count)?,
        None => (base_rows as u32..row_count as u32).collect(),
    };
    if let Some(&row) = order.iter().find(|&&r| (r as usize) < base_rows) {
        return Err(HnswError::DuplicateRow(row as usize));
    }
    let (levels, upper_offsets) = assign_levels(&order, row_count, params, base)?;
    let upper_len = upper_offsets.last().map_or(0, |&o| o as usize);
    let spill_failed = |e: std::io::Error| HnswError::Spill { kind: e.kind(), message: e.to_string() };
    let codes =
        if support.walk_codes { NibbleCodes::encode(store, support.spill_dir).map_err(spill_failed)? } else { None };
    let mut layer0 = SpillBuffer::filled_words(row_count * 2 * m, NO_NODE, support.spill_dir).map_err(spill_failed)?;
    let building = Building {
        dist: RowDistance::new(store),
        store,
        codes,
        policy: support.policy,
        m,
        ef_construction: params.ef_construction,
        rows: row_count,
        layer0: layer0.atomic_words(),
        upper: (0..upper_len).map(|_| AtomicU32::new(NO_NODE)).collect(),
        upper_offsets,
        locks: (0..row_count).map(|_| Mutex::new(())).collect(),
        top: Mutex::new(Top { entry: NO_NODE, max_level: 0 }),
        levels,
    };

    let mut start = 0;
    match base.and_then(|b| b.entry_point().map(|entry| (b, entry))) {
        Some((base, entry)) => {
            // Keep the base graph's nodes and links; new rows are inserted into it.
            for node in 0..base_rows as u32 {
                let Some(level) = base.level(node as usize) else { continue };
                for layer in 0..=usize::from(level) {
                    for (slot, &value) in building.slots(node, layer).iter().zip(base.slots(node, layer)) {
                        slot.store(value, Ordering::Relaxed);
                    }
                }
            }
            *lock(&building.top) = Top { entry, max_level: usize::from(base.max_level()) };
        }
        None => {
            if let Some(&first) = order.first() {
                *lock(&building.top) = Top { entry: first, max_level: usize::from(building.levels[first as usize]) };
                start = 1;
            }
        }
    }
    if order.len() > start {
        let pool = crate::pool::JoinedPool::new(threads).map_err(|e| HnswError::ThreadPool(e.to_string()))?;
        // Each worker claims the next row to insert; with one thread rows go in order.
        let next = AtomicUsize::new(start);
        let work = || {
            let mut scratch = SearchScratch::new();
            while let Some(&row) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                if cancel.is_requested() {
                    break;
                }
                building.insert(row, &mut scratch);
            }
        };
        pool.scope(|scope| {
            for _ in 0..pool.current_num_threads() {
                scope.spawn(|_| work());
            }
        });
    }

    if cancel.is_requested() {
        return Err(HnswError::Cancelled);
    }
    building.link_unreachable(&mut SearchScratch::new(), cancel);
    if cancel.is_requested() {
        return Err(HnswError::Cancelled);
    }
    let Building { m, ef_construction, rows, levels, upper_offsets, upper, top, .. } = building;
    let top = top.into_inner().unwrap_or_else(PoisonError::into_inner);
    let nodes = order.len() + base.map_or(0, HnswView::node_count);
    // `into_iter().map().collect()` between types of one layout reuses the allocation.
    Ok(HnswGraph::from_parts(
        m,
        ef_construction,
        rows,
        nodes,
        top.entry,
        if nodes == 0 { 0 } else { top.max_level as u8 },
        levels,
        layer0,
        upper_offsets,
        upper.into_iter().map(AtomicU32::into_inner).collect(),
    )
    .with_upper_list(support.policy.upper_list))
}

#[cfg(test)]
mod selection_tests {
    use super::*;

    /// Points on a line around a base at 0: the candidates at 1, 1.1, 2 and −3 (distances 1,
    /// 1.1, 2, 3). The heuristic keeps 1, passes over 1.1 and 2 (each nearer to 1 than to the
    /// base) and keeps −3 (4 from 1, 3 from the base).
    fn line() -> (Vec<Cand>, impl Fn(u32, u32) -> f32) {
        let positions = [1.0f32, 1.1, 2.0, -3.0];
        let candidates = positions.iter().enumerate().map(|(i, p)| Cand::new(i as u32, p.abs())).collect();
        (candidates, move |a: u32, b: u32| (positions[a as usize] - positions[b as usize]).abs())
    }

    fn ids(out: &[Cand]) -> Vec<u32> {
        out.iter().map(|c| c.id).collect()
    }

    #[test]
    fn the_heuristic_alone_keeps_only_the_diverse_candidates() {
        let (candidates, pair) = line();
        let mut out = Vec::new();
        assert_eq!(select_neighbors(&candidates, 3, &pair, false, 1.0, &mut out), 2);
        assert_eq!(ids(&out), [0, 3]);
    }

    #[test]
    fn kept_pruned_connections_fill_the_list_nearest_first_after_the_chosen() {
        let (candidates, pair) = line();
        let mut out = Vec::new();
        assert_eq!(select_neighbors(&candidates, 3, &pair, true, 1.0, &mut out), 2);
        assert_eq!(ids(&out), [0, 3, 1], "one fill, the nearest passed over");
        assert_eq!(select_neighbors(&candidates, 4, &pair, true, 1.0, &mut out), 2);
        assert_eq!(ids(&out), [0, 3, 1, 2]);
        assert_eq!(select_neighbors(&candidates, 1, &pair, true, 1.0, &mut out), 1);
        assert_eq!(ids(&out), [0], "a full list takes no fill");
        assert_eq!(select_neighbors(&candidates[..2], 3, &pair, true, 1.0, &mut out), 2);
        assert_eq!(ids(&out), [0, 1], "fewer candidates than m are all kept");
    }

    /// A kept neighbour at (1, 0) and a candidate at (0.9, 1.8), 2.01 from the base and 1.80
    /// from the kept one: HNSW's test passes it over, a relaxation of 1.2 keeps it.
    #[test]
    fn relaxing_the_heuristic_keeps_a_candidate_only_a_little_nearer_to_a_kept_one() {
        let points = [(1.0f32, 0.0f32), (0.9, 1.8)];
        let norm = |(x, y): (f32, f32)| (x * x + y * y).sqrt();
        let candidates: Vec<Cand> = points.iter().enumerate().map(|(i, &p)| Cand::new(i as u32, norm(p))).collect();
        let pair = |a: u32, b: u32| {
            let (p, q) = (points[a as usize], points[b as usize]);
            norm((p.0 - q.0, p.1 - q.1))
        };
        let mut out = Vec::new();
        assert_eq!(select_neighbors(&candidates, 2, pair, false, 1.0, &mut out), 1);
        assert_eq!(select_neighbors(&candidates, 2, pair, false, 1.2, &mut out), 2);
    }
}
