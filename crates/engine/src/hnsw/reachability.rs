//! The build's last pass: every node reachable on layer 0 from the entry point.
//!
//! Insertion of near-duplicate rows can leave nodes that no list links to: the copies inserted in
//! one batch link to each other and to older rows, while the heuristic keeps one copy in each
//! older list and prunes the rest. A search never finds such a node, at any
//! `ef_search` (measured with the concurrent build that preceded the batched one: 20 copies of one
//! row among 20,000 3-d rows, two build threads, cosine: 5 copies unreachable in two seeds of six,
//! so a query for that row returned 15 of them).
//! Lucene's HNSW builder connects such components as well.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::batch::Building;
use super::build::NodeTarget;
use super::layer::{greedy, search_layer, Links};
use super::scratch::{Cand, SearchScratch};
use super::{ABSENT_LEVEL, NO_NODE};

/// Passes at most: a link that takes the place of another in a full list may cut that node
/// off, which the next pass finds and links.
const PASSES: usize = 3;

impl Building<'_, '_> {
    /// Links every node of the graph that the entry point cannot reach on layer 0 from the
    /// nearest reachable node a search from the entry finds for it (into free room, else in
    /// place of that node's farthest link), until every node is reachable or [`PASSES`] ran.
    /// Returns the links made. Runs on one thread after the insertions; stops early (leaving
    /// the graph valid) once `cancel` is requested. Deterministic, as the insertion is.
    pub(super) fn link_unreachable(&self, scratch: &mut SearchScratch, cancel: &crate::cancel::Cancel) -> usize {
        let entry = self.entry;
        if entry == NO_NODE {
            return 0;
        }
        let mut linked = 0;
        for _ in 0..PASSES {
            let mut reached = vec![false; self.rows];
            self.reach_from(entry, &mut reached);
            let mut cut_off = false;
            for node in 0..self.rows as u32 {
                if self.levels[node as usize] == ABSENT_LEVEL || reached[node as usize] {
                    continue;
                }
                if cancel.is_requested() {
                    return linked;
                }
                cut_off = true;
                let Some(from) = self.nearest_reached(node, &reached, scratch) else { continue };
                self.link(from, node);
                linked += 1;
                self.reach_from(node, &mut reached);
            }
            if !cut_off {
                break;
            }
        }
        linked
    }

    /// Marks `reached` every node a breadth-first walk of layer 0 from `start` reaches through
    /// nodes not marked yet.
    fn reach_from(&self, start: u32, reached: &mut [bool]) {
        let mut queue = VecDeque::from([start]);
        reached[start as usize] = true;
        while let Some(node) = queue.pop_front() {
            self.for_each_neighbor(node, 0, |next| {
                if !reached[next as usize] {
                    reached[next as usize] = true;
                    queue.push_back(next);
                }
            });
        }
    }

    /// The reached node nearest to `node` that a search for it from the entry point finds.
    fn nearest_reached(&self, node: u32, reached: &[bool], scratch: &mut SearchScratch) -> Option<u32> {
        let target = NodeTarget { dist: &self.dist, q: node };
        let entry = self.entry;
        let mut current = Cand::new(entry, self.dist.between(node, entry));
        for layer in (1..=self.max_level).rev() {
            current = greedy(self, layer, &target, current);
        }
        scratch.begin(self.rows);
        let accept = |n: u32| n != node && reached[n as usize];
        search_layer(self, 0, &target, &accept, current, self.ef_construction, scratch);
        scratch.drain_sorted();
        scratch.sorted.first().map(|c| c.id)
    }

    /// Adds `node` to `from`'s layer-0 list: into free room, else in place of its farthest link.
    fn link(&self, from: u32, node: u32) {
        let slots = self.slots(from, 0);
        if let Some(free) = slots.iter().find(|s| s.load(Ordering::Relaxed) == NO_NODE) {
            free.store(node, Ordering::Relaxed);
            return;
        }
        let farthest = slots
            .iter()
            .map(|slot| (slot, self.dist.between(from, slot.load(Ordering::Relaxed))))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(slot, _)| slot)
            .expect("a full list has slots");
        farthest.store(node, Ordering::Relaxed);
    }
}
