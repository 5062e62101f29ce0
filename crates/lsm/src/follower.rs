//! A follower: a node that derives its index from the replayed membership log
//! ([`crate::membership`]) and its own heap — a streaming standby, or a primary that opened files
//! inherited from another node. The primary's segment files are never shipped.
//!
//! One [`pass`] brings the node up to date with the log as it reads it now: the catalog first,
//! then only the lists that can change what the node holds ([`membership::lists_needed`]), the
//! steps of [`membership::absorb`] executed in order, and the groups' generations recorded in the
//! manifest. Rows appended to open groups go into ABSORBING memtables (row `i` = list position
//! `i`); settled groups are sealed for the flusher, or built from the heap into a segment when the
//! node never held them; VACUUM's removals are applied by position (memtables) or by the union of
//! each segment's groups' lists (segments). An open group that finds no free slab is left for the
//! next pass ([`Pass::NeedsSlab`]) while the other steps run — among them the seals that let the
//! flusher free slabs.
//!
//! The host (pg_strata) supplies the status pages ([`PageStore`]), the slabs, the index's files
//! and a [`FollowerHost`] for the rest (heap rows, builds, the published generation); it holds
//! the index's manifest lock around a pass. The model test (`follower/model.rs`) runs primary
//! histories against a follower and checks after every pass that the follower's index holds
//! exactly the primary's listed rows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use strata_engine::segment::Segment;

use crate::clock::Clock;
use crate::files::{FileError, IndexFiles};
use crate::manifest::{IndexConfig, Manifest};
use crate::membership::{self, Derived, GroupState, GroupView, NodeMemtable, Step};
use crate::memtable::{Insert, MemtableLayout};
use crate::recovery::{HeapRows, MemtableRow};
use crate::segment_set::SegmentSet;
use crate::segment_type::SegmentType;
use crate::slabs::{DirectoryLock, NoFreeSlab, SlabMemory, SlabState, Slabs};
use crate::status::pages::{self, PageStore};
use crate::status::StatusError;
use crate::vacuum::vacuum_segments;
use crate::vector::VectorRows;

#[cfg(all(test, feature = "shuttle"))]
mod model;
#[cfg(all(test, feature = "shuttle"))]
mod words;

/// The first id a follower gives its own segments (flushes, merges): far above any id the
/// primary hands out to groups, whose segments the follower builds under the group's id.
pub const LOCAL_IDS: u64 = 1 << 62;

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Every step ran: the node holds what the log said when the pass read it.
    Complete,
    /// An open group found no free memtable slab; every other step ran. Retry once the flusher
    /// has freed slabs.
    NeedsSlab,
}

/// Why a pass failed. The steps executed before the failure stay done; the groups' generations
/// are not recorded, so the next pass repeats the rest.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The status pages could not be read.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// An open group's list is longer than a memtable slab of this node holds.
    #[error("a memtable of the primary does not fit in this node's memtable slabs")]
    MemtableTooLarge,
    /// Building, publishing or trimming a segment failed (the host decides about an unsynced
    /// manifest, [`FileError::is_unsynced_manifest`]).
    #[error(transparent)]
    Segments(FileError),
    /// Recording the groups' generations in the manifest failed.
    #[error(transparent)]
    Generations(FileError),
}

/// A segment type a follower derives: built from heap rows of its [`FollowedSegment::Row`] kind
/// (vector segments from `Vec<f32>` rows, text segments from span rows).
pub trait FollowedSegment: SegmentType<Config = IndexConfig> {
    /// The memtable row a heap source gives for an index of this type.
    type Row: MemtableRow;

    /// No rows yet, to build a segment from.
    fn no_rows() -> Self::Rows;

    /// Appends heap row `(tid, row)` (`dims`: the index's vector dimensions, where a row holds a
    /// vector and then filter words); an error when the row does not decode.
    fn push_row(rows: &mut Self::Rows, dims: usize, tid: u64, row: Self::Row) -> Result<(), FileError>;

    /// Whether `rows` holds no row.
    fn is_empty(rows: &Self::Rows) -> bool;
}

impl FollowedSegment for Segment {
    type Row = Vec<f32>;

    fn no_rows() -> VectorRows {
        VectorRows::default()
    }

    fn push_row(rows: &mut VectorRows, dims: usize, tid: u64, row: Vec<f32>) -> Result<(), FileError> {
        rows.push_row(dims, tid, &row);
        Ok(())
    }

    fn is_empty(rows: &VectorRows) -> bool {
        rows.ids.is_empty()
    }
}

/// What a pass needs from its host besides the pages, slabs and files: the heap (rows by TID,
/// from the supertrait, read only after [`FollowerHost::before_writes`]), builds of segments of
/// type `T`, and the publication of manifest generations.
pub trait FollowerHost<T: FollowedSegment>: HeapRows<Row = T::Row> {
    /// The index's open segments at the manifest generation published now (the caller holds the
    /// manifest lock, so that is the manifest's).
    fn segments(&mut self) -> Arc<SegmentSet<T>>;
    /// The layout of a new memtable of the index (asked only when a slab is taken).
    fn memtable_layout(&mut self) -> MemtableLayout;
    /// The floor of the `next_id` of every manifest written (ids handed out from shared memory).
    fn next_id_floor(&self) -> u64;
    /// Makes `manifest`'s generation the one scans read (pg_strata: under the directory lock).
    fn publish_generation(&self, manifest: &Manifest);
    /// The groups the log lists as open (the merge policy leaves their segments alone).
    fn open_groups(&mut self, open: &[u64]);
    /// Called once, before the first change of a pass that changes anything (pg_strata: raises
    /// the standby's minimum recovery point to the replay position, and opens the heap).
    fn before_writes(&mut self);
    /// Builds a segment of `rows` (pg_strata: vector segments on a helper thread that checks for
    /// interrupts).
    fn build(&mut self, rows: T::Rows) -> Result<T::Built, FileError>;
    /// The pass sealed memtables for the flusher (pg_strata: wakes the index service).
    fn wake_flusher(&mut self);
}

/// Where a pass works: the index's status pages, the slabs (the index's in directory slot
/// `index`) and its files, of segment type `T`.
pub struct Follower<'a, S, M: ?Sized, L: ?Sized, T> {
    /// The status pages.
    pub pages: &'a S,
    /// The slabs of the shared region.
    pub slabs: Slabs<'a, M, L>,
    /// The index's directory slot.
    pub index: usize,
    /// The index's files.
    pub files: &'a IndexFiles<T>,
    /// The index's vector dimensions (a heap row, as [`HeapRows::fetch`] gives it, holds the
    /// vector and then the filter words).
    pub dims: usize,
}

impl<S: PageStore, M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized, T: FollowedSegment> Follower<'_, S, M, L, T> {
    /// What the node holds: the segments and generations of `set`, and its slabs of this index
    /// (see [`Derived::of_node`]).
    pub fn held(&self, set: &SegmentSet<T>) -> Derived {
        let shape = <T::Row as MemtableRow>::SHAPE;
        let memtables = self.slabs.infos().into_iter().filter(|info| info.index == self.index).filter_map(|info| {
            let held = match info.state {
                SlabState::Absorbing => NodeMemtable::Absorbing(self.slabs.memtable(info.slab).position_tids(shape)),
                SlabState::Sealed | SlabState::Flushing | SlabState::Recovering => NodeMemtable::Settled,
                _ => return None,
            };
            Some((info.segment_id, held))
        });
        Derived::of_node(set.segments.iter().map(|s| s.entry.covers.as_slice()), memtables, &set.group_generations)
    }

    /// One pass (see the module docs). The caller holds the index's manifest lock and no status
    /// page lock.
    pub fn pass(&self, host: &mut impl FollowerHost<T>) -> Result<Pass, FollowError> {
        // The catalog first, then only the lists that can change what this node holds: a pass
        // costs the catalog and the open groups' lists, not the index.
        let mut views = pages::read_catalog(self.pages)?;
        let set = host.segments();
        let derived = self.held(&set);
        let needed = membership::lists_needed(&views, &derived, set.segments.iter().map(|s| s.entry.covers.as_slice()));
        let mut lists = pages::read_lists(self.pages, &needed)?;
        for view in &mut views {
            if let Some(tids) = lists.remove(&view.id) {
                view.tids = tids;
            }
        }
        // A memtable group is compared with its list on every pass; an empty deletion is no work.
        let steps: Vec<Step> = membership::absorb(&views, &derived)
            .into_iter()
            .filter(|step| !matches!(step, Step::DeleteRows { positions, .. } if positions.is_empty()))
            .collect();
        let open: Vec<u64> = views.iter().filter(|v| v.state == GroupState::Open).map(|v| v.id).collect();
        host.open_groups(&open);
        if steps.is_empty() {
            return Ok(Pass::Complete);
        }
        host.before_writes();
        let mut generations = set.group_generations.clone();
        let mut sealed_any = false;
        let mut pass = Pass::Complete;
        for step in &steps {
            // A step that finds no slab does nothing; the others still run, so that a settled
            // group listed after it is sealed and the flusher can free a slab for it.
            match self.execute(host, &views, step, &mut generations)? {
                Some(sealed) => sealed_any |= sealed,
                None => pass = Pass::NeedsSlab,
            }
        }
        if generations != set.group_generations {
            self.files
                .update_manifest(
                    |m| m.group_generations = generations,
                    host.next_id_floor(),
                    |m| host.publish_generation(m),
                )
                .map_err(FollowError::Generations)?;
        }
        if sealed_any {
            host.wake_flusher();
        }
        Ok(pass)
    }

    /// Executes one step, recording settled groups' generations in `generations`; returns whether
    /// it handed memtables to the flusher, or `None` when an open group found no free memtable
    /// slab (nothing of the step was done).
    fn execute(
        &self,
        host: &mut impl FollowerHost<T>,
        log: &[GroupView],
        step: &Step,
        generations: &mut BTreeMap<u64, u64>,
    ) -> Result<Option<bool>, FollowError> {
        let (slabs, index) = (self.slabs, self.index);
        let shape = <T::Row as MemtableRow>::SHAPE;
        match step {
            Step::Forget { group } => {
                if let Some(memtable) = slabs.absorbing(index, *group) {
                    memtable.memtable().delete_where(|_| true);
                    slabs.seal_absorbed(&memtable);
                }
                self.trim(host, log, *group, &BTreeSet::new())?;
                generations.remove(group);
            }
            Step::DeleteRows { group, positions, .. } => {
                if let Some(memtable) = slabs.absorbing(index, *group) {
                    memtable.memtable().delete_positions(shape, positions);
                }
            }
            Step::Trim { group, keep, vacuum_gen } => {
                self.trim(host, log, *group, &keep.iter().copied().collect())?;
                generations.insert(*group, *vacuum_gen);
            }
            Step::Append { group, from, tids, .. } => {
                let memtable = match slabs.absorbing(index, *group) {
                    Some(memtable) => memtable,
                    None => match slabs.take_for_absorb(index, host.memtable_layout(), *group) {
                        Ok(memtable) => memtable,
                        Err(NoFreeSlab) => return Ok(None),
                    },
                };
                debug_assert_eq!(memtable.memtable().position_slots(shape).len(), *from);
                for (offset, &tid) in tids.iter().enumerate() {
                    let row = if tid == 0 { None } else { host.fetch(tid) };
                    let fetched = row.is_some();
                    let mut inserted = match row {
                        Some(row) => row.append_absorbed(&memtable, tid),
                        None => memtable.insert_placeholder(),
                    };
                    if inserted == Insert::Full && fetched && !self.still_listed(*group, from + offset, tid)? {
                        // Replay removed the TID from this position after the lists were read
                        // (VACUUM), and the tuple now at it is another, possibly longer, row:
                        // the position holds a placeholder, as the next pass would make it.
                        inserted = memtable.insert_placeholder();
                    }
                    if inserted == Insert::Full {
                        return Err(FollowError::MemtableTooLarge);
                    }
                }
            }
            Step::Seal { group, vacuum_gen } => {
                if let Some(memtable) = slabs.absorbing(index, *group) {
                    slabs.seal_absorbed(&memtable);
                }
                generations.insert(*group, *vacuum_gen);
                return Ok(Some(true));
            }
            Step::Build { group, tids, vacuum_gen } => {
                self.build_group(host, *group, tids)?;
                generations.insert(*group, *vacuum_gen);
            }
        }
        Ok(Some(false))
    }

    /// Whether the status pages, read again now, still list `tid` at `position` of `group`'s
    /// list (replay may have moved on since the pass read the lists).
    fn still_listed(&self, group: u64, position: usize, tid: u64) -> Result<bool, FollowError> {
        let lists = pages::read_lists(self.pages, &BTreeSet::from([group]))?;
        Ok(lists.get(&group).and_then(|list| list.get(position)) == Some(&tid))
    }

    /// Builds settled group `group` from the heap rows of `tids` into a segment covering it,
    /// published under the group's id (the primary's flush of it used the same id; the node's own
    /// segments take ids from [`LOCAL_IDS`] on, so none collides). A group whose rows are all gone
    /// gets no segment; VACUUM will drop it from the log.
    fn build_group(&self, host: &mut impl FollowerHost<T>, group: u64, tids: &[u64]) -> Result<(), FollowError> {
        let mut rows = T::no_rows();
        for &tid in tids {
            if let Some(row) = host.fetch(tid) {
                T::push_row(&mut rows, self.dims, tid, row).map_err(FollowError::Segments)?;
            }
        }
        if T::is_empty(&rows) {
            return Ok(());
        }
        let built = host.build(rows).map_err(FollowError::Segments)?;
        self.files
            .publish_segment(&built, group, vec![group], host.next_id_floor(), |m| host.publish_generation(m))
            .map_err(FollowError::Segments)?;
        Ok(())
    }

    /// Restricts the rows of `group` to `keep`: in its sealed or flushing memtables by TID
    /// (settled groups list each TID once), and in every segment covering it to
    /// [`membership::segment_keep`] of the groups that segment covers.
    fn trim(
        &self,
        host: &mut impl FollowerHost<T>,
        log: &[GroupView],
        group: u64,
        keep: &BTreeSet<u64>,
    ) -> Result<(), FollowError> {
        for info in self.slabs.infos() {
            if info.index == self.index && info.segment_id == group && info.state.awaits_flush() {
                self.slabs.memtable(info.slab).delete_where(|tid| !keep.contains(&tid));
            }
        }
        let set = host.segments();
        let host = &*host;
        for open in set.segments.iter().filter(|s| s.entry.covers.contains(&group)) {
            let union = membership::segment_keep(&open.entry.covers, log);
            let single = SegmentSet {
                generation: set.generation,
                segments: vec![open.clone()],
                group_generations: BTreeMap::new(),
            };
            vacuum_segments(
                self.files,
                &single,
                &mut |tid| !union.contains(&tid),
                || host.next_id_floor(),
                |m| host.publish_generation(m),
            )
            .map_err(FollowError::Segments)?;
        }
        Ok(())
    }

    /// Ends the derivation (promotion): seals every ABSORBING memtable of the index for the
    /// flusher (their groups are settled once flushed, as on any primary); returns how many.
    pub fn seal_absorbing(&self) -> usize {
        let mut sealed = 0;
        for info in self.slabs.infos() {
            if info.index == self.index && info.state == SlabState::Absorbing {
                if let Some(memtable) = self.slabs.absorbing(self.index, info.segment_id) {
                    self.slabs.seal_absorbed(&memtable);
                    sealed += 1;
                }
            }
        }
        sealed
    }
}

/// A follower's first open of an index (instead of crash recovery, which would refill open
/// groups by TID and lose their positions): the segments whose file or deletion bitmap is missing
/// leave the manifest — a base backup copies the directory while the primary writes it — and the
/// next [`Follower::pass`] rebuilds their groups from the heap. Returns the ids dropped (nothing
/// is written when none is missing). The caller holds the index's manifest lock.
pub fn drop_missing_segments<T: SegmentType<Config = IndexConfig>>(
    files: &IndexFiles<T>,
    next_id_floor: u64,
    publish: impl FnOnce(&Manifest),
) -> Result<Vec<u64>, FileError> {
    let manifest = files.manifest()?;
    let present = |name: Option<String>| name.is_none_or(|name| files.directory().exists(&name).unwrap_or(false));
    let missing: Vec<u64> = manifest
        .segments
        .iter()
        .filter(|s| !present(Some(s.file_name())) || !present(s.deletion_file_name()))
        .map(|s| s.id)
        .collect();
    if !missing.is_empty() {
        files.update_manifest(|m| m.segments.retain(|s| !missing.contains(&s.id)), next_id_floor, publish)?;
    }
    Ok(missing)
}

/// How long [`follow`] waits, in all, for memtable slabs the service is flushing.
pub const SLAB_WAIT: Duration = Duration::from_mins(1);

/// [`follow`] found no free memtable slab for [`SLAB_WAIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no free memtable slab for {SLAB_WAIT:?}")]
pub struct SlabWaitExpired;

/// Passes until one completes: `pass` runs one (the host takes the manifest lock around it, and
/// returns `None` when the derivation is over meanwhile: `Ok(false)`); after a pass that needs a
/// slab, a follower that is `stopping` gives up (`Ok(false)`), one that has waited longer than
/// [`SLAB_WAIT`] by `clock` fails, and otherwise `pause` gives the service a moment to flush
/// (without the manifest lock, as a writer waiting for memory does on a primary). `Ok(true)`: a
/// pass completed.
pub fn follow(
    clock: &impl Clock,
    mut pass: impl FnMut() -> Option<Pass>,
    mut stopping: impl FnMut() -> bool,
    mut pause: impl FnMut(),
) -> Result<bool, SlabWaitExpired> {
    let started = clock.now();
    loop {
        match pass() {
            None => return Ok(false),
            Some(Pass::Complete) => return Ok(true),
            Some(Pass::NeedsSlab) => {}
        }
        if stopping() {
            return Ok(false);
        }
        if clock.now().duration_since(started) > SLAB_WAIT {
            return Err(SlabWaitExpired);
        }
        pause();
    }
}

/// The `next_id` a follower's index starts from: past the primary's groups (`max_memtable_id`
/// of the status pages) and at least [`LOCAL_IDS`].
pub fn first_local_id(max_memtable_id: u64) -> u64 {
    LOCAL_IDS.max(max_memtable_id + 1)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::clock::ManualClock;

    /// Waiting passes: a complete pass ends the wait, a finished derivation or a stop gives up,
    /// and passes that keep needing a slab fail once SLAB_WAIT has passed, not before.
    #[test]
    fn passes_are_repeated_until_one_completes_or_the_wait_ends() {
        let clock = ManualClock::default();
        let pause = || clock.advance(Duration::from_secs(1));
        let passes = Cell::new(0);
        let needs_slab_then = |last: Option<Pass>, after: u32| {
            let passes = &passes;
            move || {
                passes.set(passes.get() + 1);
                if passes.get() > after {
                    last
                } else {
                    Some(Pass::NeedsSlab)
                }
            }
        };
        assert_eq!(follow(&clock, needs_slab_then(Some(Pass::Complete), 3), || false, pause), Ok(true));
        assert_eq!(passes.replace(0), 4);
        assert_eq!(follow(&clock, needs_slab_then(None, 2), || false, pause), Ok(false));
        assert_eq!(passes.replace(0), 3);
        assert_eq!(follow(&clock, needs_slab_then(None, u32::MAX), || true, pause), Ok(false));
        assert_eq!(passes.replace(0), 1, "a stopping follower does not wait");
        assert_eq!(follow(&clock, needs_slab_then(None, u32::MAX), || false, pause), Err(SlabWaitExpired));
        assert_eq!(passes.replace(0), 62, "given up at the first look past a minute");
    }
}
