//! Maintenance policies as pure functions: which segments to merge, which to rebuild.
//!
//! [`choose`] looks only at segment statistics and returns at most one action; the caller (the
//! index service) executes it and calls again. Merging is tiered: segments are grouped by size
//! tier (powers of `size_ratio` of the memtable size), and a tier holding `merge_width` or more
//! segments is merged, smallest tier first. A segment whose deleted fraction reaches
//! `rebuild_deleted_fraction` is rebuilt without its deleted rows; rebuilds go before merges
//! because they shrink work for everything after.
//!
//! Every choice is made in the segments' canonical order, by [`SegmentStats::key`] (the oldest
//! group a segment covers), never by segment id or publication order, which differ between nodes:
//! two nodes holding segments of the same groups with the same statistics choose the same action,
//! with its inputs in the same order.

/// Statistics of one segment, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentStats {
    /// Segment id.
    pub id: u64,
    /// Its place in the canonical order: the smallest group (memtable or build chunk id) it
    /// covers, the same on every node that holds a segment of those groups.
    pub key: u64,
    /// Rows in the file.
    pub rows: u64,
    /// Rows deleted.
    pub deleted: u64,
}

impl SegmentStats {
    fn live(&self) -> u64 {
        self.rows - self.deleted.min(self.rows)
    }
}

/// Tuning of the policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Rows of a freshly flushed segment (the memtable size): tier 0 is below `base_rows · size_ratio`.
    pub base_rows: u64,
    /// Size ratio between tiers (> 1).
    pub size_ratio: f64,
    /// How many segments of one tier trigger a merge, and the most merged at once (≥ 2).
    pub merge_width: usize,
    /// No merge produces a segment larger than this many live rows.
    pub max_segment_rows: u64,
    /// Rebuild a segment once this fraction of its rows is deleted (0 < f ≤ 1).
    pub rebuild_deleted_fraction: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            base_rows: 10_000,
            size_ratio: 4.0,
            merge_width: 4,
            max_segment_rows: 10_000_000,
            rebuild_deleted_fraction: 0.2,
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Merge these segments (ids, oldest first) into one.
    Merge(Vec<u64>),
    /// Rebuild this segment without its deleted rows.
    Rebuild(u64),
}

fn tier(rows: u64, policy: &Policy) -> u32 {
    let mut tier = 0;
    let mut bound = policy.base_rows.max(1) as f64 * policy.size_ratio;
    while rows as f64 >= bound && tier < 64 {
        tier += 1;
        bound *= policy.size_ratio;
    }
    tier
}

/// The next maintenance action for `segments` (in any order: they are considered by
/// [`SegmentStats::key`]), if any. A merge lists its inputs in key order.
pub fn choose(segments: &[SegmentStats], policy: &Policy) -> Option<Action> {
    let mut segments = segments.to_vec();
    segments.sort_by_key(|s| (s.key, s.id));
    let worst = segments
        .iter()
        .filter(|s| s.rows > 0 && s.deleted as f64 >= policy.rebuild_deleted_fraction * s.rows as f64)
        .max_by(|a, b| {
            let fa = a.deleted as f64 / a.rows as f64;
            let fb = b.deleted as f64 / b.rows as f64;
            fa.total_cmp(&fb).then(b.key.cmp(&a.key))
        });
    if let Some(segment) = worst {
        return Some(Action::Rebuild(segment.id));
    }
    let width = policy.merge_width.max(2);
    let mut tiers: Vec<(u32, Vec<&SegmentStats>)> = Vec::new();
    for segment in &segments {
        let t = tier(segment.live(), policy);
        match tiers.iter_mut().find(|(tt, _)| *tt == t) {
            Some((_, members)) => members.push(segment),
            None => tiers.push((t, vec![segment])),
        }
    }
    tiers.sort_by_key(|(t, _)| *t);
    for (_, members) in tiers {
        if members.len() < width {
            continue;
        }
        let mut chosen = Vec::new();
        let mut rows = 0;
        for segment in members.iter().take(width) {
            if rows + segment.live() > policy.max_segment_rows {
                break;
            }
            rows += segment.live();
            chosen.push(segment.id);
        }
        if chosen.len() >= 2 {
            return Some(Action::Merge(chosen));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn seg(id: u64, rows: u64, deleted: u64) -> SegmentStats {
        SegmentStats { id, key: id, rows, deleted }
    }

    #[test]
    fn examples() {
        let policy = Policy::default();
        assert_eq!(choose(&[], &policy), None);
        let four_small: Vec<_> = (1..=4).map(|i| seg(i, 10_000, 0)).collect();
        assert_eq!(choose(&four_small, &policy), Some(Action::Merge(vec![1, 2, 3, 4])));
        assert_eq!(choose(&four_small[..3], &policy), None);
        let mut with_deletes = four_small.clone();
        with_deletes[2].deleted = 5_000;
        assert_eq!(choose(&with_deletes, &policy), Some(Action::Rebuild(3)));
        let mixed =
            vec![seg(1, 200_000, 0), seg(2, 10_000, 0), seg(3, 10_000, 0), seg(4, 10_000, 0), seg(5, 10_000, 0)];
        assert_eq!(choose(&mixed, &policy), Some(Action::Merge(vec![2, 3, 4, 5])));
    }

    proptest! {
        /// Two nodes list segments of the same groups in different orders and under different
        /// ids: the action is the same, naming the same groups in the same order.
        #[test]
        fn the_choice_depends_on_groups_not_ids_or_order(
            // Few sizes and fractions, so that ties (equal tiers, equal deleted fractions) are
            // common and must break the same way on both nodes.
            raw in prop::collection::vec((prop::sample::select(vec![500u64, 2_000, 4_000, 9_000, 40_000]), 0u64..30), 0..24),
            rotate in 0usize..24,
            id_base in 1u64..1_000,
        ) {
            let policy = Policy { base_rows: 2_000, ..Policy::default() };
            let mine: Vec<SegmentStats> = raw.iter().enumerate()
                .map(|(i, &(rows, pct))| SegmentStats { id: i as u64 + 1, key: 10 * i as u64, rows, deleted: rows * pct / 100 })
                .collect();
            let mut theirs: Vec<SegmentStats> = mine.iter()
                .map(|s| SegmentStats { id: 1_000_000 + id_base - 7 * (s.key / 10), ..*s })
                .collect();
            theirs.reverse();
            if !theirs.is_empty() {
                let by = rotate % theirs.len();
                theirs.rotate_left(by);
            }
            let key_of = |segments: &[SegmentStats], id: u64| segments.iter().find(|s| s.id == id).unwrap().key;
            let keys = |segments: &[SegmentStats], action: Option<Action>| match action {
                None => None,
                Some(Action::Rebuild(id)) => Some((true, vec![key_of(segments, id)])),
                Some(Action::Merge(ids)) => Some((false, ids.iter().map(|&id| key_of(segments, id)).collect())),
            };
            prop_assert_eq!(keys(&theirs, choose(&theirs, &policy)), keys(&mine, choose(&mine, &policy)));
        }

        #[test]
        fn actions_are_well_formed(raw in prop::collection::vec((1u64..2_000_000, 0u64..100), 0..30)) {
            let policy = Policy::default();
            let segments: Vec<SegmentStats> = raw.iter().enumerate()
                .map(|(i, &(rows, pct))| seg(i as u64 + 1, rows, rows * pct / 100)).collect();
            match choose(&segments, &policy) {
                None => {
                    // Nothing to do: no segment over the deletion threshold.
                    prop_assert!(segments.iter().all(|s| (s.deleted as f64) < policy.rebuild_deleted_fraction * s.rows as f64));
                }
                Some(Action::Rebuild(id)) => {
                    let s = segments.iter().find(|s| s.id == id).unwrap();
                    prop_assert!(s.deleted as f64 >= policy.rebuild_deleted_fraction * s.rows as f64);
                }
                Some(Action::Merge(ids)) => {
                    prop_assert!(ids.len() >= 2 && ids.len() <= policy.merge_width);
                    let mut unique = ids.clone();
                    unique.sort_unstable();
                    unique.dedup();
                    prop_assert_eq!(unique.len(), ids.len());
                    let live: u64 = ids.iter().map(|id| segments.iter().find(|s| s.id == *id).unwrap().live()).sum();
                    prop_assert!(live <= policy.max_segment_rows);
                }
            }
        }
    }
}
