//! Rows the executor found dead to every transaction, remembered by the process that found them
//! so that its later searches leave them out: PostgreSQL's `kill_prior_tuple` hint, which btree
//! turns into `LP_DEAD` marks on its pages.
//!
//! Why: until VACUUM reaches a table, its deleted rows stay in the index. A graph search keeps
//! the `ef` nearest rows it accepts; dead ones among them push live ones out, and the executor
//! then reads deeper into the list, where the search is less exact. In the sliding-window runbook
//! (100k MiniLM rows, window 50k, 5 % of it deleted per step, autovacuum now and then) recall@10
//! at `ef_search` 100 fell from 0.980 to 0.966 between VACUUMs; with a VACUUM after every step it
//! stayed within 0.006 of its start.
//!
//! How:
//! - each round of a scan says which segment row every TID it listed came from
//!   ([`RowOrigins`], built by `scan::round`);
//! - the executor tells the access method when the tuple it returned last is dead to every
//!   transaction; the glue passes that on ([`DeadRowReports::report_dead`]);
//! - when the scan ends or restarts, [`DeadRowReports::apply`] marks those rows in their open
//!   segments' [`DeadRowHints`]; later searches of those segments in this process skip them, as
//!   they skip rows VACUUM deleted ([`crate::segment_set::OpenSegment::skipped_rows`]);
//! - hints cover only the rows the executor met, the top of each list. The dead rows further
//!   down still take places in a graph search's candidate list, so each segment also keeps the
//!   fraction of its returned rows that were dead ([`DeadRowHints::dead_fraction`]), and its
//!   searches grow their candidate list to keep as many live rows ([`live_ef`]). Measured on
//!   the runbook above: hints alone left the drop at 0.016 (each merge starts a segment without
//!   hints, and a third of its rows may be dead);
//! - a segment a merge just wrote has neither hints nor observations, so the scan also takes a
//!   prior from the table's statistics ([`crate::scan::round::dead_prior`]) and grows each
//!   list by the larger of the two.
//!
//! Guarantees:
//! - only rows reported dead are skipped, and only in the open segment they were listed from.
//!   PostgreSQL reports a tuple only once it is dead to every snapshot, present and future, and
//!   never on a standby, so skipping it changes no result a transaction can see;
//! - hints are per segment row, not per TID: a TID reused by the heap after VACUUM names a new row
//!   (in a memtable, then another segment), never a hinted one;
//! - hints belong to one open segment, one deletion generation: a segment reopened after VACUUM
//!   starts without them (VACUUM's own bitmap then holds the rows it removed);
//! - hints live in the process's memory only: nothing is written, nothing survives the process,
//!   and losing them costs only speed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use strata_engine::bitset::Bitset;
use strata_engine::row_hash::RowSet;
use strata_engine::topk::Neighbor;

use crate::segment_set::OpenSegment;

/// The rows of one open segment reported dead in this process, kept together with its deletion
/// bitmap as the one set of rows its searches skip; and how many of the rows it returned lately
/// turned out dead.
#[derive(Debug, Default)]
pub struct DeadRowHints {
    /// `None` until a row is hinted; then the segment's deleted rows and its hinted rows.
    skipped: RwLock<Option<Arc<Bitset>>>,
    /// Rows returned and found dead, decayed by [`OBSERVED_DECAY`] per observation.
    observed: Mutex<(f64, f64)>,
}

/// The weight an observation keeps at the next one (about the last 30 scans count).
pub const OBSERVED_DECAY: f64 = 0.97;

/// The largest dead fraction [`DeadRowHints::dead_fraction`] reports: candidate lists grow at
/// most fivefold.
pub const MAX_DEAD_FRACTION: f64 = 0.8;

/// Rows returned (decayed) before the observed fraction counts in full: a few returned rows
/// say little.
const CONFIDENT_RETURNS: f64 = 50.0;

/// A search's candidate list of `ef` grown so that, when a fraction `dead` of the rows it
/// finds are dead, it still holds about `ef` live ones: `⌈ef / (1 − dead)⌉`, `dead` clamped to
/// `0..=MAX_DEAD_FRACTION`.
pub fn live_ef(ef: usize, dead: f64) -> usize {
    let dead = if dead.is_nan() { 0.0 } else { dead.clamp(0.0, MAX_DEAD_FRACTION) };
    if dead == 0.0 {
        return ef;
    }
    // (The small allowance keeps exact quotients, 100 / 0.2, from rounding up past them.)
    (ef as f64 / (1.0 - dead) - 1e-9).ceil() as usize
}

/// The rows a search of one segment must skip, as [`DeadRowHints::skipped`] returns them.
#[derive(Debug)]
pub enum SkippedRows<'a> {
    /// No row is hinted: the deletion bitmap alone (`None`: nothing deleted).
    Deleted(Option<&'a Bitset>),
    /// Deleted and hinted rows together.
    Hinted(Arc<Bitset>),
}

impl SkippedRows<'_> {
    /// The bitset of rows to skip (`None`: none), for a search's predicate.
    pub fn bitset(&self) -> Option<&Bitset> {
        match self {
            Self::Deleted(deleted) => *deleted,
            Self::Hinted(rows) => Some(rows),
        }
    }
}

impl DeadRowHints {
    /// The rows to skip: `deleted` (the segment's deletion bitmap), and the hinted rows once
    /// there are any.
    pub fn skipped<'a>(&self, deleted: Option<&'a Bitset>) -> SkippedRows<'a> {
        match &*self.skipped.read().unwrap_or_else(PoisonError::into_inner) {
            Some(rows) => SkippedRows::Hinted(Arc::clone(rows)),
            None => SkippedRows::Deleted(deleted),
        }
    }

    /// Marks `rows` (segment rows below `len`, the segment's row count; others are ignored) dead
    /// in a segment whose deletion bitmap is `deleted`; returns how many were not skipped
    /// before. Searches that already took their [`SkippedRows`] keep the set they took.
    pub fn hint(&self, deleted: Option<&Bitset>, len: usize, rows: &[usize]) -> usize {
        let mut skipped = self.skipped.write().unwrap_or_else(PoisonError::into_inner);
        let fresh: Vec<usize> = {
            let current = skipped.as_deref().or(deleted);
            let mut seen = HashSet::new();
            rows.iter()
                .copied()
                .filter(|&row| row < len && !current.is_some_and(|c| c.contains(row)) && seen.insert(row))
                .collect()
        };
        if fresh.is_empty() {
            return 0;
        }
        let mut next = skipped.as_deref().or(deleted).cloned().unwrap_or_else(|| Bitset::new(len));
        for &row in &fresh {
            next.insert(row);
        }
        *skipped = Some(Arc::new(next));
        fresh.len()
    }

    /// Records that a scan returned `returned` rows of this segment, `dead` of which the executor
    /// found dead.
    pub fn observe(&self, returned: usize, dead: usize) {
        if returned == 0 {
            return;
        }
        let mut observed = self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        observed.0 = observed.0 * OBSERVED_DECAY + returned as f64;
        observed.1 = observed.1 * OBSERVED_DECAY + dead.min(returned) as f64;
    }

    /// The fraction of recently returned rows that were dead and not skipped (0 before any
    /// observation; with few returns, scaled down by how few), at most [`MAX_DEAD_FRACTION`].
    ///
    /// Unhinted dead rows take places in a search's candidate list as much as where the executor
    /// met them: the scan grows this segment's list by [`live_ef`] so that it keeps about as
    /// many live rows as its `ef_search` asks for.
    pub fn dead_fraction(&self) -> f64 {
        let (returned, dead) = *self.observed.lock().unwrap_or_else(PoisonError::into_inner);
        if returned <= 0.0 {
            return 0.0;
        }
        let confidence = (returned / CONFIDENT_RETURNS).min(1.0);
        (dead / returned * confidence).min(MAX_DEAD_FRACTION)
    }

    /// Rows hinted and not deleted (for statistics and tests).
    pub fn count(&self, deleted: Option<&Bitset>) -> usize {
        let skipped = self.skipped.read().unwrap_or_else(PoisonError::into_inner);
        skipped.as_ref().map_or(0, |rows| rows.count() - deleted.map_or(0, Bitset::count))
    }
}

/// Where the rows of one segment's list in a round came from: the open segment and, for each
/// listed TID, its row there.
pub struct RowOrigins<S> {
    /// The open segment the list was searched in.
    pub segment: Arc<OpenSegment<S>>,
    /// `(TID, segment row)` of every row in the list.
    pub rows: Vec<(u64, usize)>,
}

impl<S> Clone for RowOrigins<S> {
    fn clone(&self) -> Self {
        Self { segment: Arc::clone(&self.segment), rows: self.rows.clone() }
    }
}

impl<S> std::fmt::Debug for RowOrigins<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowOrigins").field("segment", &self.segment.entry.id).field("rows", &self.rows).finish()
    }
}

impl<S> RowOrigins<S> {
    /// A segment list of `(segment row, distance)` as `(TID, distance)` (`tid_of` maps a row to
    /// its TID), and where each of its rows came from.
    pub fn from_rows(
        segment: &Arc<OpenSegment<S>>,
        list: Vec<Neighbor>,
        tid_of: impl Fn(usize) -> u64,
    ) -> (Vec<Neighbor>, Self) {
        let mut rows = Vec::with_capacity(list.len());
        let list = list
            .into_iter()
            .map(|n| {
                let row = n.row as usize;
                let tid = tid_of(row);
                rows.push((tid, row));
                Neighbor::new(tid, n.distance)
            })
            .collect();
        (list, Self { segment: Arc::clone(segment), rows })
    }
}

/// An open segment, the TIDs of the rows it listed that a scan reported, and those rows as
/// `(TID, segment row)`.
type ReportedRows<S> = (Arc<OpenSegment<S>>, RowSet, Vec<(u64, usize)>);

/// One scan's reports of dead rows, with the origins of the rows it listed, until they are
/// applied to the segments.
pub struct DeadRowReports<S> {
    origins: Vec<RowOrigins<S>>,
    returned: Vec<u64>,
    dead: Vec<u64>,
}

impl<S> Default for DeadRowReports<S> {
    fn default() -> Self {
        Self { origins: Vec::new(), returned: Vec::new(), dead: Vec::new() }
    }
}

impl<S> DeadRowReports<S> {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the origins of one round's segment lists.
    pub fn record(&mut self, origins: impl IntoIterator<Item = RowOrigins<S>>) {
        self.origins.extend(origins);
    }

    /// The scan returned the row `tid` to the executor.
    pub fn report_returned(&mut self, tid: u64) {
        self.returned.push(tid);
    }

    /// The executor found the row `tid`, returned by this scan, dead to every transaction.
    pub fn report_dead(&mut self, tid: u64) {
        self.dead.push(tid);
    }

    /// For each segment that listed rows of this scan: hints the reported rows it listed and
    /// records how many of its returned rows were dead ([`DeadRowHints::observe`]). Rows listed
    /// only by memtables are left alone (exact memtable scans lose no recall to dead rows, and
    /// slabs are reused). Forgets the origins and reports; returns how many rows were newly
    /// hinted.
    pub fn apply(&mut self) -> usize {
        let returned: RowSet = self.returned.drain(..).collect();
        let dead: RowSet = self.dead.drain(..).collect();
        let origins = std::mem::take(&mut self.origins);
        if returned.is_empty() && dead.is_empty() {
            return 0;
        }
        // Per segment, the rows it listed that the scan reported (returned or dead), one entry per
        // TID: deeper rounds list the same rows of a segment again. A scan lists many more rows
        // than it returns (a round's whole depth, the executor stopping at its LIMIT), so only the
        // reported ones are kept.
        let mut by_segment: Vec<ReportedRows<S>> = Vec::new();
        for origin in origins {
            let at = if let Some(at) = by_segment.iter().position(|(segment, ..)| Arc::ptr_eq(segment, &origin.segment))
            {
                at
            } else {
                by_segment.push((Arc::clone(&origin.segment), RowSet::default(), Vec::new()));
                by_segment.len() - 1
            };
            let (_, seen, reported) = &mut by_segment[at];
            for &(tid, row) in &origin.rows {
                if (returned.contains(&tid) || dead.contains(&tid)) && seen.insert(tid) {
                    reported.push((tid, row));
                }
            }
        }
        let mut hinted = 0;
        for (segment, _, reported) in by_segment {
            let dead_rows: Vec<usize> =
                reported.iter().filter(|(tid, _)| dead.contains(tid)).map(|&(_, row)| row).collect();
            segment.hints.observe(reported.len(), dead_rows.len());
            if !dead_rows.is_empty() {
                hinted += segment.hint_dead(&dead_rows);
            }
        }
        hinted
    }
}

#[cfg(test)]
mod tests;
