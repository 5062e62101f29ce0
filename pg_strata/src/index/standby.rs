//! A standby's index, derived from the membership log that WAL replay restores (docs/ARCHITECTURE.md,
//! "Replication"). The primary's segment files are never shipped: the standby builds its own from
//! its own heap. Before every scan on a standby, [`absorb`] brings the index up to date with the
//! replayed status pages through [`strata_lsm::membership::absorb`]: rows appended to open groups
//! go into ABSORBING memtables (row `i` = list position `i`), settled groups are sealed or rebuilt
//! from the heap and flushed by the index service, and VACUUM's removals are applied by position
//! (memtables) or by each segment's groups' lists (segments).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use pgrx::bgworkers::BackgroundWorker;
use pgrx::{pg_sys, PgSqlErrorCode};
use strata_lsm::membership::{self, Derived, GroupView, NodeMemtable, Step};
use strata_lsm::memtable::Insert;
use strata_lsm::recovery::HeapRows;
use strata_lsm::segment_set::SegmentSet;
use strata_lsm::slabs::{NoFreeSlab, SlabState};
use strata_lsm::vacuum::vacuum_segments;
use strata_lsm::vector::{VectorFiles, VectorSegmentSet};

use super::publish::{self, raise};
use super::recovery::Table;
use super::segments::segment_set;
use super::state::{self, IndexHandle};
use super::status;
use crate::fmgr::error;
use crate::shmem;

/// The first id a standby gives its own segments (merges): far above any id the primary hands
/// out to groups, which the standby's segments of those groups keep.
pub const LOCAL_IDS: u64 = 1 << 62;

/// Set once this process (an absorber) has received SIGTERM; pgrx's own flag resets when read.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process is an absorber worker (see the absorber module) asked to stop: its passes give up waiting for
/// memtable slabs then, so a shutdown stays bounded (a backend's wait is ended by PostgreSQL's
/// own interrupt handling instead).
pub fn stopping() -> bool {
    // SAFETY: reading a process-local pointer PostgreSQL sets in background workers.
    let in_worker = unsafe { !pg_sys::MyBgworkerEntry.is_null() };
    if in_worker && BackgroundWorker::sigterm_received() {
        STOPPING.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    STOPPING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether this server is a standby (or still replaying WAL).
pub fn in_recovery() -> bool {
    // SAFETY: a plain query of the startup process's state.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// What the node holds: the segments and generations of its current manifest (`set`), and its
/// slabs of this index (see [`Derived::of_node`]).
fn derived(handle: &IndexHandle, set: &VectorSegmentSet) -> Derived {
    let slabs = shmem::slabs();
    let memtables = slabs.infos().into_iter().filter(|info| info.index == handle.slot).filter_map(|info| {
        let held = match info.state {
            SlabState::Absorbing => NodeMemtable::Absorbing(slabs.memtable(info.slab).slot_tids()),
            SlabState::Sealed | SlabState::Flushing | SlabState::Recovering => NodeMemtable::Settled,
            _ => return None,
        };
        Some((info.segment_id, held))
    });
    Derived::of_node(set.segments.iter().map(|s| s.entry.covers.as_slice()), memtables, &set.group_generations)
}

/// Brings a standby's index up to date with the replayed membership log. Does nothing on a
/// primary. Serialised per index by the manifest lock (which the service's publications take too).
///
/// # Safety
/// `index` must be the open strata index of `handle`; the caller holds no status page lock and no
/// manifest lock.
pub unsafe fn absorb(index: pg_sys::Relation, handle: &IndexHandle) {
    if !in_recovery() {
        return;
    }
    // SAFETY: guaranteed by the caller.
    unsafe { absorb_waiting(index, handle, || false) };
}

/// One pass of [`absorb`] that does not wait for memtable slabs (the absorber worker's: an
/// index short of slabs must not hold up the other indexes of its database). Returns whether the
/// pass completed; one that did not has woken the index service and is repeated later.
///
/// # Safety
/// As for [`absorb`].
pub unsafe fn absorb_once(index: pg_sys::Relation, handle: &IndexHandle) -> bool {
    if !in_recovery() {
        return true;
    }
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    // SAFETY: guaranteed by the caller; the manifest lock is held.
    let complete = unsafe { absorb_locked(index, handle) } == Pass::Complete;
    if !complete {
        shmem::wake_service();
    }
    complete
}

/// How long a pass waits, in all, for memtable slabs the service is flushing.
const SLAB_WAIT: std::time::Duration = std::time::Duration::from_mins(1);

/// Passes until one completes: a pass that finds no free memtable slab for an open group stops
/// there (what it did stays done), and the next one starts after the service has had a moment to
/// flush — the lock released meanwhile, as a writer waiting for memory does on a primary. Errors
/// after [`SLAB_WAIT`]. `finished` is asked under the manifest lock before each pass (true: stop).
///
/// # Safety
/// As for [`absorb`].
unsafe fn absorb_waiting(index: pg_sys::Relation, handle: &IndexHandle, finished: impl Fn() -> bool) -> bool {
    let started = std::time::Instant::now();
    loop {
        let outcome = {
            let _manifest_lock = shmem::manifest_lock(handle.slot);
            if finished() {
                return false;
            }
            // SAFETY: guaranteed by the caller; the manifest lock is held.
            unsafe { absorb_locked(index, handle) }
        };
        if outcome == Pass::Complete {
            return true;
        }
        if stopping() {
            return false;
        }
        if started.elapsed() > SLAB_WAIT {
            error(
                PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                "pg_strata: no free memtable slab on this standby to follow the primary's inserts; raise \
                 strata.memtable_memory",
            );
        }
        shmem::wake_service();
        state::wait_a_moment();
    }
}

/// How a pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Every step ran.
    Complete,
    /// An open group found no free memtable slab; the steps before it ran.
    NeedsSlab,
}

/// One pass of [`absorb`]; the caller holds the index's manifest lock.
///
/// # Safety
/// As for [`absorb`].
unsafe fn absorb_locked(index: pg_sys::Relation, handle: &IndexHandle) -> Pass {
    // The catalog first, then only the lists that can change what this node holds (the groups
    // held in segments at an unchanged generation need none): a pass costs the catalog and the
    // open groups' lists, not the index.
    // SAFETY: guaranteed by the caller.
    let mut views = unsafe { status::read_catalog(index) };
    // The current manifest's segments, from this backend's cache (publications take the manifest
    // lock, which the caller holds, so the shared generation is the manifest's).
    let set = segment_set(handle, handle.shared().manifest_generation.load(Ordering::Acquire));
    let derived = derived(handle, &set);
    let needed = membership::lists_needed(&views, &derived, set.segments.iter().map(|s| s.entry.covers.as_slice()));
    // SAFETY: as above.
    let mut lists = unsafe { status::read_lists(index, &needed) };
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
    let open: Vec<u64> = views.iter().filter(|v| v.state == membership::GroupState::Open).map(|v| v.id).collect();
    handle.shared().listed.sync(&open);
    if steps.is_empty() {
        return Pass::Complete;
    }
    // WAL before data: what is written below reflects the log (and heap) replayed so far, so
    // after a crash no query may run before replay is back here. In recovery XLogFlush raises
    // minRecoveryPoint instead of flushing.
    // SAFETY: plain calls on the startup process's shared state.
    unsafe { pg_sys::XLogFlush(pg_sys::GetXLogReplayRecPtr(std::ptr::null_mut())) };
    let files = handle.files();
    let mut generations = set.group_generations.clone();
    // SAFETY: guaranteed by the caller; ended below in this transaction.
    let mut table = unsafe { Table::begin(index, handle) };
    let mut sealed_any = false;
    let mut pass = Pass::Complete;
    for step in &steps {
        let Some(sealed) = execute(handle, &files, &views, step, &mut table, &mut generations) else {
            pass = Pass::NeedsSlab;
            break;
        };
        sealed_any |= sealed;
    }
    table.end();
    if generations != set.group_generations {
        files
            .update_manifest(
                |m| m.group_generations = generations,
                publish::next_id_floor(handle),
                publish::generation_publisher(handle),
            )
            .unwrap_or_else(|e| raise(&e));
    }
    if sealed_any {
        shmem::wake_service();
    }
    pass
}

/// Executes one step; returns whether it handed memtables to the flusher, or `None` when an open
/// group found no free memtable slab (nothing of the step was done).
fn execute(
    handle: &IndexHandle,
    files: &VectorFiles,
    log: &[GroupView],
    step: &Step,
    table: &mut Table<'_>,
    generations: &mut BTreeMap<u64, u64>,
) -> Option<bool> {
    let slabs = shmem::slabs();
    match step {
        Step::Forget { group } => {
            if let Some(memtable) = slabs.absorbing(handle.slot, *group) {
                memtable.memtable().delete_where(|_| true);
                slabs.seal_absorbed(&memtable);
            }
            trim(handle, files, log, *group, &BTreeSet::new());
            generations.remove(group);
            Some(false)
        }
        Step::DeleteRows { group, positions, .. } => {
            if let Some(memtable) = slabs.absorbing(handle.slot, *group) {
                memtable.memtable().delete_slots(positions);
            }
            Some(false)
        }
        Step::Trim { group, keep, vacuum_gen } => {
            trim(handle, files, log, *group, &keep.iter().copied().collect());
            generations.insert(*group, *vacuum_gen);
            Some(false)
        }
        Step::Append { group, from, tids, .. } => {
            let memtable = if let Some(memtable) = slabs.absorbing(handle.slot, *group) {
                memtable
            } else {
                match slabs.take_for_absorb(handle.slot, state::memtable_layout(handle), *group) {
                    Ok(memtable) => memtable,
                    Err(NoFreeSlab) => return None,
                }
            };
            debug_assert_eq!(memtable.memtable().slot_tids().len(), *from);
            for &tid in tids {
                let row = if tid == 0 { None } else { table.fetch(tid) };
                let inserted = match row {
                    Some(vector) => memtable.insert(tid, &vector),
                    None => memtable.insert_placeholder(),
                };
                if inserted == Insert::Full {
                    error(
                        PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                        "pg_strata: a memtable of the primary does not fit in this standby's memtable slabs; set \
                         strata.memtable_slab_size at least as large as the primary's",
                    );
                }
            }
            Some(false)
        }
        Step::Seal { group, vacuum_gen } => {
            if let Some(memtable) = slabs.absorbing(handle.slot, *group) {
                slabs.seal_absorbed(&memtable);
            }
            generations.insert(*group, *vacuum_gen);
            Some(true)
        }
        Step::Build { group, tids, vacuum_gen } => {
            build_group(handle, *group, tids, table);
            generations.insert(*group, *vacuum_gen);
            Some(false)
        }
    }
}

/// Builds settled group `group` from the heap rows of `tids` into a segment covering it, published
/// under the group's id (the primary's flush of it used the same id; this node's own merges take
/// ids from [`LOCAL_IDS`] on, so none collides). A group whose rows are all gone gets no segment;
/// VACUUM will drop it from the log. The caller holds the manifest lock.
fn build_group(handle: &IndexHandle, group: u64, tids: &[u64], table: &mut Table<'_>) {
    let dims = handle.config.dims as usize;
    let (mut ids, mut vectors) = (Vec::with_capacity(tids.len()), Vec::with_capacity(tids.len() * dims));
    for &tid in tids {
        if let Some(vector) = table.fetch(tid) {
            ids.push(tid);
            vectors.extend_from_slice(&vector);
        }
    }
    if ids.is_empty() {
        return;
    }
    let threads = crate::gucs::BUILD_THREADS.get() as usize;
    let built = publish::build(handle, ids, vectors, threads, |_| state::wait_a_moment()).unwrap_or_else(|e| raise(&e));
    publish::publish_segment(handle, &built, group, vec![group], || {}).unwrap_or_else(|e| raise(&e));
}

/// Restricts the rows of `group` to `keep`: in its sealed or flushing memtables by TID (settled
/// groups list each TID once), and in every segment covering it to
/// [`membership::segment_keep`] of the groups that segment covers.
fn trim(handle: &IndexHandle, files: &VectorFiles, log: &[GroupView], group: u64, keep: &BTreeSet<u64>) {
    let slabs = shmem::slabs();
    for info in slabs.infos() {
        if info.index == handle.slot && info.segment_id == group && info.state.awaits_flush() {
            slabs.memtable(info.slab).delete_where(|tid| !keep.contains(&tid));
        }
    }
    let (_, generation) = state::snapshot(handle);
    let set = segment_set(handle, generation);
    for open in set.segments.iter().filter(|s| s.entry.covers.contains(&group)) {
        let union = membership::segment_keep(&open.entry.covers, log);
        let single =
            SegmentSet { generation: set.generation, segments: vec![open.clone()], group_generations: BTreeMap::new() };
        let trimmed = vacuum_segments(
            files,
            &single,
            &mut |tid| !union.contains(&tid),
            || publish::next_id_floor(handle),
            publish::generation_publisher(handle),
        );
        publish::panic_if_unsynced(trimmed).unwrap_or_else(|e| raise(&e));
    }
}

/// The first use on a standby of an index since the server started (instead of crash recovery,
/// which would refill open groups by TID and lose their positions): segments whose files are
/// missing leave the manifest — a base backup copies the directory while the primary writes it —
/// and the next [`absorb`] rebuilds their groups from the heap. Then the index is ready.
///
/// # Safety
/// `meta` is the index's exclusively locked metadata page; the caller holds no manifest lock.
pub unsafe fn open(handle: &IndexHandle, meta: &status::MetaLock) {
    let contents = meta.read();
    {
        let _manifest_lock = shmem::manifest_lock(handle.slot);
        let files = handle.files();
        let dir = handle.dir();
        let manifest = files.manifest().unwrap_or_else(|e| raise(&e));
        let present = |name: Option<String>| name.is_none_or(|name| dir.join(name).is_file());
        let missing: Vec<u64> = manifest
            .segments
            .iter()
            .filter(|s| !present(Some(s.file_name())) || !present(s.deletion_file_name()))
            .map(|s| s.id)
            .collect();
        if !missing.is_empty() {
            pgrx::log!("pg_strata: index {:?}: segments {missing:?} are missing here; rebuilding them", handle.key);
            files
                .update_manifest(
                    |m| m.segments.retain(|s| !missing.contains(&s.id)),
                    publish::next_id_floor(handle),
                    publish::generation_publisher(handle),
                )
                .unwrap_or_else(|e| raise(&e));
        }
    }
    let entry = handle.shared();
    entry.next_id.fetch_max(LOCAL_IDS.max(contents.meta.max_memtable_id + 1), Ordering::AcqRel);
    entry.derived.store(1, Ordering::Release);
    entry.ready.store(1, Ordering::Release);
}

/// Ends the derivation of an index that is no longer replaying (after promotion, or at the first
/// open of files inherited from another node once recovery ended): one last [`absorb`], then every
/// ABSORBING memtable is sealed for the service to flush (their groups are settled once flushed,
/// as on any primary), the node marker is written, and the index becomes an ordinary primary
/// index. Concurrent callers wait for the first on the manifest lock.
///
/// # Safety
/// `index` must be the open strata index of `handle`; no status page lock or manifest lock held.
pub unsafe fn finish(index: pg_sys::Relation, handle: &IndexHandle) {
    let derived = || handle.shared().derived.load(Ordering::Acquire) == 1;
    // SAFETY: guaranteed by the caller; no lock held. A concurrent caller that finished first
    // makes the remaining passes stop.
    if !unsafe { absorb_waiting(index, handle, || !derived()) } {
        return;
    }
    let _manifest_lock = shmem::manifest_lock(handle.slot);
    if !derived() {
        return;
    }
    let slabs = shmem::slabs();
    for info in slabs.infos() {
        if info.index == handle.slot && info.state == SlabState::Absorbing {
            if let Some(memtable) = slabs.absorbing(handle.slot, info.segment_id) {
                slabs.seal_absorbed(&memtable);
            }
        }
    }
    write_marker(handle);
    handle.shared().derived.store(0, Ordering::Release);
    shmem::wake_service();
    pgrx::log!("pg_strata: index {:?} is now maintained as on a primary", handle.key);
}

/// The file whose presence says an index directory's files were written on this node and kept
/// since: named like PostgreSQL's temporary files, so `pg_basebackup` does not copy it and
/// `pg_rewind` removes it. Without it, files came from another node (a base backup, a
/// point-in-time restore, a rewind) and the index is derived in full from the log.
const NODE_MARKER: &str = "pgsql_tmp_strata_node";

/// Whether `dir` holds files written on this node (see [`NODE_MARKER`]).
pub fn marker_present(dir: &std::path::Path) -> bool {
    dir.join(NODE_MARKER).is_file()
}

/// Writes the node marker into `dir` (not synced: losing it in a crash costs a full derivation,
/// never a wrong answer).
pub fn write_marker_in(dir: &std::path::Path) {
    if let Err(e) = std::fs::write(dir.join(NODE_MARKER), b"") {
        pgrx::warning!("pg_strata: cannot write {}: {e}", dir.join(NODE_MARKER).display());
    }
}

fn write_marker(handle: &IndexHandle) {
    write_marker_in(&handle.dir());
}
