//! Operations on an index's status pages (the paper's §5.2–5.3, kept as the membership log of
//! [`crate::membership`]) over a [`PageStore`]: which pages are locked in which order, what one
//! atomic change writes, and how the catalog, the lists and the free list are linked. The byte
//! layout of each page is the parent module's; pg_strata's store is the index relation's
//! buffers, changed through GenericXLog (`pg_strata/src/access/status.rs`).
//!
//! Lock order: the metadata page (block 0) → the catalog pages (block 1, then its chain) → list
//! pages. The metadata page's exclusive lock serialises registering groups, allocating and
//! freeing pages, settling, and recovery; callers take it first and pass it in.
//!
//! What the pages guarantee (each change below is one atomic record of at most
//! [`MAX_PAGES_PER_CHANGE`] pages):
//! - a group is registered (and `max_memtable_id` raised) before any TID is appended to it
//!   ([`register`]), so a committed row's group is always known after a crash; a full catalog
//!   gets another page in the same change;
//! - a TID is appended ([`append`], [`append_many`]) to the tail page of its group's list; a full
//!   tail gets a successor page, taken from the free list or added to the relation, in the same
//!   change that links it;
//! - [`settle`] marks flushed groups settled and makes that durable before returning; lists are
//!   never released, so the log says which TIDs every segment holds, on every copy of the database;
//! - [`remove_dead`] zeroes removed TIDs in place, then bumps each touched group's `vacuum_gen`
//!   (the order [`crate::membership::absorb`] relies on), then drops settled groups with no TID
//!   left, their pages going to the free list.
//!
//! Lists and the catalog chain are walked with a bound: a chain that leaves the relation or is
//! longer than it is reported as [`StatusError::BadList`] instead of looping.

use std::collections::{BTreeMap, HashSet};

use super::{
    array_capacity, array_entries, array_push, array_remove, array_update, format, list_append, list_capacity,
    list_remove_where, list_tids, next, read_meta, set_next, write_meta, ArrayEntry, Meta, PageKind, StatusError,
    ARRAY_BLOCK, META_BLOCK, NO_BLOCK,
};
use crate::membership::{GroupState, GroupView};
use crate::recovery::{Status, StatusMemtable};

/// The most pages one atomic change may touch (PostgreSQL's `MAX_GENERIC_XLOG_PAGES`). No
/// operation here changes more: the largest, a TID on a new page, writes the new page, the old
/// tail, the metadata page and the array page.
pub const MAX_PAGES_PER_CHANGE: usize = 4;

/// Checks the preconditions of one [`PageStore::change`] that every store asserts: at most
/// [`MAX_PAGES_PER_CHANGE`] pages (one WAL record), each locked exclusively, no block twice.
/// `pages` gives each page's block and whether its lock is exclusive.
///
/// # Panics
/// When one does not hold: an operation here is wrong, and PostgreSQL could not log the change
/// as one record.
pub fn check_change(pages: &[(u32, bool)]) {
    assert!(pages.iter().all(|&(_, exclusive)| exclusive), "a status page changed without its exclusive lock");
    let distinct = pages.iter().enumerate().all(|(i, (block, _))| pages[..i].iter().all(|(other, _)| other != block));
    assert!(
        distinct && pages.len() <= MAX_PAGES_PER_CHANGE,
        "a WAL record of {} pages or with a page twice",
        pages.len()
    );
}

/// The pages of one index's status, as its storage provides them. pg_strata's implementation is
/// the index relation's main fork: pinned, content-locked buffers, changed through GenericXLog.
pub trait PageStore {
    /// A locked page; its lock (and pin) is released when it is dropped.
    type Page;

    /// Locks block `block` (shared, or exclusive for changes), which must exist.
    fn lock(&self, block: u32, exclusive: bool) -> Self::Page;

    /// Adds a page at the end of the relation, locked exclusively. Its contents are undefined
    /// until a change initialises it (`fresh` in [`PageStore::change`]).
    fn extend(&self) -> Self::Page;

    /// The block number of `page`.
    fn block(&self, page: &Self::Page) -> u32;

    /// A view of a page image (pg_strata: a plain slice of the buffer).
    type Image<'a>: std::ops::Deref<Target = [u8]>
    where
        Self: 'a;

    /// The image of locked page `page`, with every finished change applied. Views are dropped
    /// before the next [`PageStore::change`].
    fn bytes<'a>(&'a self, page: &'a Self::Page) -> Self::Image<'a>;

    /// The number of blocks in the relation.
    fn blocks(&self) -> u32;

    /// Changes `pages` (each locked exclusively, distinct, at most [`MAX_PAGES_PER_CHANGE`]) as
    /// one atomic record: `edit` gets their images in the same order and after a crash either
    /// all of its changes are there or none. A page marked `true` is reinitialised first (an
    /// empty page with an [`OPAQUE_BYTES`](super::OPAQUE_BYTES) special area, as PostgreSQL's
    /// `PageInit` makes it) and logged whole. Returns the record's end position for
    /// [`PageStore::make_durable`].
    fn change(&self, pages: &[(&Self::Page, bool)], edit: &mut dyn FnMut(&mut [&mut [u8]])) -> u64;

    /// Makes every change up to `position` durable (flushes the WAL).
    fn make_durable(&self, position: u64);
}

/// What [`read`] found: the metadata and, per open group, its TIDs (removed ones left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The metadata page.
    pub meta: Meta,
    /// The open (unsettled) groups with their TIDs, in catalog order, as crash recovery takes them.
    pub status: Status,
    /// List pages read.
    pub pages: usize,
}

/// The metadata contents of the locked metadata page `meta`.
pub fn meta<S: PageStore>(store: &S, meta: &S::Page) -> Result<Meta, StatusError> {
    read_meta(&store.bytes(meta))
}

/// The catalog pages, locked in chain order, and their entries with the index of their page.
struct Catalog<P> {
    pages: Vec<P>,
    entries: Vec<(usize, ArrayEntry)>,
}

impl<P> Catalog<P> {
    fn find(&self, id: u64) -> Option<(usize, ArrayEntry)> {
        self.entries.iter().find(|(_, e)| e.id == id).copied()
    }

    /// Locks `block`, a list or free page that a link of group `memtable`'s entry or list
    /// (0: the free list) names, while this catalog is held. A damaged link that names a page
    /// the caller may hold already, the metadata page or a catalog page, or no page of the
    /// relation, is [`StatusError::BadList`] before any lock is taken: locking a held page again
    /// would wait for itself forever in PostgreSQL.
    fn lock_linked<S: PageStore<Page = P>>(
        &self,
        store: &S,
        block: u32,
        exclusive: bool,
        memtable: u64,
    ) -> Result<P, StatusError> {
        if refused_link(store, &self.pages, block) {
            return Err(StatusError::BadList { memtable });
        }
        Ok(store.lock(block, exclusive))
    }
}

/// Whether a link to `block` must not be followed while `held` (catalog pages) are locked: it
/// names no page of the relation, the metadata page, or a page held already (locking it again
/// would wait for itself forever in PostgreSQL).
fn refused_link<S: PageStore>(store: &S, held: &[S::Page], block: u32) -> bool {
    block >= store.blocks() || block == META_BLOCK || held.iter().any(|page| store.block(page) == block)
}

/// Locks the catalog pages (shared, or exclusively for changes) from block 1 along its chain.
/// A chain that leaves the relation or comes back to the metadata page or a page of its own is
/// [`StatusError::BadList`], found before the page is locked (it is held already).
fn catalog<S: PageStore>(store: &S, exclusive: bool) -> Result<Catalog<S::Page>, StatusError> {
    let (mut pages, mut entries) = (Vec::new(), Vec::new());
    let mut block = ARRAY_BLOCK;
    while block != NO_BLOCK {
        if refused_link(store, &pages, block) {
            return Err(StatusError::BadList { memtable: 0 });
        }
        let page = store.lock(block, exclusive);
        let following = {
            let image = store.bytes(&page);
            entries.extend(array_entries(&image, block)?.into_iter().map(|e| (pages.len(), e)));
            next(&image)
        };
        pages.push(page);
        block = following;
    }
    Ok(Catalog { pages, entries })
}

/// The ids of the open groups. The caller holds no catalog page lock.
pub fn listed<S: PageStore>(store: &S) -> Result<Vec<u64>, StatusError> {
    let catalog = catalog(store, false)?;
    Ok(catalog.entries.iter().filter(|(_, e)| e.state == GroupState::Open).map(|(_, e)| e.id).collect())
}

/// Takes a page for new contents: the free list's first, or a new one at the end of the
/// relation. `contents` is the metadata, whose free list head this updates; `catalog` is held.
fn take_page<S: PageStore>(store: &S, catalog: &Catalog<S::Page>, contents: &mut Meta) -> Result<S::Page, StatusError> {
    match contents.free_head {
        NO_BLOCK => Ok(store.extend()),
        free => {
            let page = catalog.lock_linked(store, free, true, 0)?;
            contents.free_head = next(&store.bytes(&page));
            Ok(page)
        }
    }
}

/// Registers group `id`, open, with an empty list and raises `max_memtable_id` to it, in one
/// change; nothing when it is already registered. `meta_page` is the exclusively locked
/// metadata page. A full catalog gets another page, linked in the same change.
pub fn register<S: PageStore>(store: &S, meta_page: &S::Page, id: u64) -> Result<(), StatusError> {
    let catalog = catalog(store, true)?;
    if catalog.find(id).is_some() {
        return Ok(());
    }
    let mut contents = meta(store, meta_page)?;
    contents.max_memtable_id = contents.max_memtable_id.max(id);
    let entry = ArrayEntry { id, head: NO_BLOCK, tail: NO_BLOCK, vacuum_gen: 0, state: GroupState::Open };
    let roomy = catalog.pages.iter().position(|page| {
        let image = store.bytes(page);
        (super::lower(&image) - super::PAGE_HEADER_BYTES) / super::ARRAY_ENTRY_BYTES < array_capacity(&image)
    });
    if let Some(index) = roomy {
        store.change(&[(meta_page, false), (&catalog.pages[index], false)], &mut |pages| {
            write_meta(pages[0], &contents);
            let pushed = array_push(pages[1], &entry);
            debug_assert!(pushed);
        });
    } else {
        let fresh = take_page(store, &catalog, &mut contents)?;
        let fresh_block = store.block(&fresh);
        let last = catalog.pages.last().expect("block 1 is always in the catalog");
        store.change(&[(&fresh, true), (meta_page, false), (last, false)], &mut |pages| {
            format(pages[0], PageKind::Array);
            let pushed = array_push(pages[0], &entry);
            debug_assert!(pushed);
            write_meta(pages[1], &contents);
            set_next(pages[2], fresh_block);
        });
    }
    Ok(())
}

/// Appends as many of `tids` as fit to the tail page `tail`; returns how many.
fn append_here<S: PageStore>(store: &S, tail: &S::Page, tids: &[u64]) -> usize {
    let room = {
        let image = store.bytes(tail);
        (super::special(&image) - super::lower(&image)) / 8
    };
    let count = room.min(tids.len());
    if count > 0 {
        store.change(&[(tail, false)], &mut |pages| {
            for &tid in &tids[..count] {
                let appended = list_append(pages[0], tid);
                debug_assert!(appended);
            }
        });
    }
    count
}

/// Appends heap TID `tid` to the list of open group `id`. The caller holds no status page lock.
///
/// The fast path locks the catalog shared and the tail page exclusively; a group being
/// registered right now (its allocator holds the metadata page until the entry exists) is waited
/// for once, by taking the metadata page shared; a full or missing tail goes to the slow path,
/// under the metadata page, which links a page from the free list (or a new one). A group not in
/// the catalog is [`StatusError::NoSuchGroup`]: groups leave it only when settled and empty.
pub fn append<S: PageStore>(store: &S, id: u64, tid: u64) -> Result<(), StatusError> {
    let mut waited = false;
    loop {
        let catalog = catalog(store, false)?;
        let Some((_, entry)) = catalog.find(id) else {
            if waited {
                return Err(StatusError::NoSuchGroup { group: id });
            }
            drop(catalog);
            drop(store.lock(META_BLOCK, false));
            waited = true;
            continue;
        };
        if entry.tail != NO_BLOCK {
            let tail = catalog.lock_linked(store, entry.tail, true, id)?;
            if append_here(store, &tail, &[tid]) == 1 {
                return Ok(());
            }
        }
        drop(catalog);
        let meta_page = store.lock(META_BLOCK, true);
        return append_on_new_pages(store, &meta_page, id, &[tid]);
    }
}

/// Appends `tids` to the list of group `id` in as few changes as the pages allow (CREATE INDEX
/// writes a chunk's TIDs this way). `meta_page` is the exclusively locked metadata page.
pub fn append_many<S: PageStore>(store: &S, meta_page: &S::Page, id: u64, tids: &[u64]) -> Result<(), StatusError> {
    append_on_new_pages(store, meta_page, id, tids)
}

/// Appends `tids` to group `id`: what fits on the current tail, then new pages, each filled and
/// linked in one change (new page, metadata, the group's catalog page, old tail).
fn append_on_new_pages<S: PageStore>(
    store: &S,
    meta_page: &S::Page,
    id: u64,
    mut tids: &[u64],
) -> Result<(), StatusError> {
    let catalog = catalog(store, true)?;
    let (index, mut entry) = catalog.find(id).ok_or(StatusError::NoSuchGroup { group: id })?;
    while !tids.is_empty() {
        let tail = (entry.tail != NO_BLOCK).then(|| catalog.lock_linked(store, entry.tail, true, id)).transpose()?;
        if let Some(tail) = tail.as_ref() {
            tids = &tids[append_here(store, tail, tids)..];
            if tids.is_empty() {
                break;
            }
        }
        let mut contents = meta(store, meta_page)?;
        let fresh = take_page(store, &catalog, &mut contents)?;
        let fresh_block = store.block(&fresh);
        if tail.is_none() {
            entry.head = fresh_block;
        }
        entry.tail = fresh_block;
        // Every status page has the same size and opaque area, so the metadata page's geometry
        // is a list page's.
        let here = list_capacity(&store.bytes(meta_page)).min(tids.len());
        let mut pages = vec![(&fresh, true), (meta_page, false), (&catalog.pages[index], false)];
        pages.extend(tail.as_ref().map(|t| (t, false)));
        store.change(&pages, &mut |images| {
            format(images[0], PageKind::List);
            for &tid in &tids[..here] {
                let appended = list_append(images[0], tid);
                debug_assert!(appended);
            }
            write_meta(images[1], &contents);
            let updated = array_update(images[2], &entry);
            debug_assert!(updated);
            if let Some(old_tail) = images.get_mut(3) {
                set_next(old_tail, fresh_block);
            }
        });
        tids = &tids[here..];
    }
    Ok(())
}

/// Settles groups `ids` (their rows are in published segments), one change per catalog page
/// touched, then makes the changes durable, before anything relies on them. `meta_page` is the
/// exclusively locked metadata page. Returns the ids of the groups still open.
pub fn settle<S: PageStore>(store: &S, meta_page: &S::Page, ids: &[u64]) -> Result<Vec<u64>, StatusError> {
    let _ = meta(store, meta_page)?;
    let catalog = catalog(store, true)?;
    let mut by_page: BTreeMap<usize, Vec<ArrayEntry>> = BTreeMap::new();
    for &(index, entry) in &catalog.entries {
        if entry.state == GroupState::Open && ids.contains(&entry.id) {
            by_page.entry(index).or_default().push(ArrayEntry { state: GroupState::Settled, ..entry });
        }
    }
    let mut last = None;
    for (index, entries) in &by_page {
        last = Some(store.change(&[(&catalog.pages[*index], false)], &mut |images| {
            for entry in entries {
                let updated = array_update(images[0], entry);
                debug_assert!(updated);
            }
        }));
    }
    if let Some(position) = last {
        store.make_durable(position);
    }
    Ok(catalog
        .entries
        .iter()
        .filter(|(_, e)| e.state == GroupState::Open && !ids.contains(&e.id))
        .map(|(_, e)| e.id)
        .collect())
}

/// Walks the list of `entry` from head to tail, calling `visit` with each page, locked
/// (exclusively when `exclusive`) and checked to be a LIST page. The caller holds `catalog`, the
/// group's among its pages (so the list cannot be freed meanwhile).
fn walk<S: PageStore>(
    store: &S,
    catalog: &Catalog<S::Page>,
    entry: &ArrayEntry,
    exclusive: bool,
    mut visit: impl FnMut(&S::Page, Vec<u64>),
) -> Result<(), StatusError> {
    let blocks = store.blocks();
    let mut block = entry.head;
    let mut steps = 0;
    while block != NO_BLOCK {
        if steps > blocks {
            return Err(StatusError::BadList { memtable: entry.id });
        }
        let page = catalog.lock_linked(store, block, exclusive, entry.id)?;
        let tids = list_tids(&store.bytes(&page), block)?;
        let following = next(&store.bytes(&page));
        visit(&page, tids);
        if block == entry.tail {
            break;
        }
        block = following;
        steps += 1;
    }
    Ok(())
}

/// The open groups and their TIDs, for crash recovery: bounded by the unflushed memtables, not by
/// the index size. `meta_page` is the locked metadata page.
pub fn read<S: PageStore>(store: &S, meta_page: &S::Page) -> Result<Contents, StatusError> {
    let meta = meta(store, meta_page)?;
    let catalog = catalog(store, false)?;
    let mut memtables = Vec::new();
    let mut pages = 0;
    for (_, entry) in catalog.entries.iter().filter(|(_, e)| e.state == GroupState::Open) {
        let mut tids = Vec::new();
        walk(store, &catalog, entry, false, |_, listed| {
            pages += 1;
            tids.extend(listed.into_iter().filter(|&t| t != 0));
        })?;
        memtables.push(StatusMemtable { id: entry.id, tids });
    }
    Ok(Contents { status: Status { max_memtable_id: meta.max_memtable_id, memtables }, meta, pages })
}

/// Every group with its whole list, position by position (0 = removed): what a node that derives
/// its index from the log reads. Each group's state and `vacuum_gen` are read before its pages,
/// as [`crate::membership::absorb`] requires. The caller holds no status page lock.
pub fn read_groups<S: PageStore>(store: &S) -> Result<Vec<GroupView>, StatusError> {
    let catalog = catalog(store, false)?;
    let mut groups = Vec::with_capacity(catalog.entries.len());
    for (_, entry) in &catalog.entries {
        let mut tids = Vec::new();
        walk(store, &catalog, entry, false, |_, listed| tids.extend(listed))?;
        groups.push(GroupView { id: entry.id, state: entry.state, vacuum_gen: u64::from(entry.vacuum_gen), tids });
    }
    Ok(groups)
}

/// The catalog's groups without their lists: each view's `tids` is empty. With [`read_lists`]
/// afterwards, this is [`read_groups`] for the groups a node needs (the catalog is read before the
/// lists, as [`crate::membership::absorb`] requires). The caller holds no status page lock.
pub fn read_catalog<S: PageStore>(store: &S) -> Result<Vec<GroupView>, StatusError> {
    let catalog = catalog(store, false)?;
    Ok(catalog
        .entries
        .iter()
        .map(|(_, e)| GroupView { id: e.id, state: e.state, vacuum_gen: u64::from(e.vacuum_gen), tids: Vec::new() })
        .collect())
}

/// The whole lists of groups `ids`, position by position; a group no longer in the catalog (it was
/// dropped, empty, since the caller read the catalog) has an empty list. The caller holds no
/// status page lock.
pub fn read_lists<S: PageStore>(
    store: &S,
    ids: &std::collections::BTreeSet<u64>,
) -> Result<BTreeMap<u64, Vec<u64>>, StatusError> {
    let catalog = catalog(store, false)?;
    let mut lists: BTreeMap<u64, Vec<u64>> = ids.iter().map(|&id| (id, Vec::new())).collect();
    for (_, entry) in catalog.entries.iter().filter(|(_, e)| ids.contains(&e.id)) {
        let tids = lists.get_mut(&entry.id).expect("every wanted id has a list");
        walk(store, &catalog, entry, false, |_, listed| tids.extend(listed))?;
    }
    Ok(lists)
}

/// What [`zero_dead`] did, for [`finish_vacuum`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zeroed {
    /// TIDs zeroed.
    pub removed: u64,
    /// Groups with a TID zeroed.
    touched: Vec<u64>,
    /// Settled groups with no TID left.
    emptied: Vec<u64>,
}

impl Zeroed {
    /// Whether [`finish_vacuum`] has anything to do.
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty() && self.emptied.is_empty()
    }
}

/// VACUUM's first step: zeroes the TIDs for which `dead` is true in every group's list, one
/// change per page that has any. `dead` is asked about each listed TID before the change starts.
/// Takes no metadata lock (VACUUM calls it under the index's manifest lock). The caller holds no
/// status page lock.
pub fn zero_dead<S: PageStore>(store: &S, mut dead: impl FnMut(u64) -> bool) -> Result<Zeroed, StatusError> {
    let mut zeroed = Zeroed::default();
    let catalog = catalog(store, false)?;
    for (_, entry) in &catalog.entries {
        let mut left = 0usize;
        let mut touched = false;
        walk(store, &catalog, entry, true, |page, tids| {
            let dead_here: HashSet<u64> = tids.iter().copied().filter(|&t| t != 0 && dead(t)).collect();
            left += tids.iter().filter(|&&t| t != 0).count() - dead_here.len();
            if dead_here.is_empty() {
                return;
            }
            store.change(&[(page, false)], &mut |images| {
                zeroed.removed += list_remove_where(images[0], |t| dead_here.contains(&t)) as u64;
            });
            touched = true;
        })?;
        if touched {
            zeroed.touched.push(entry.id);
        }
        if left == 0 && entry.state == GroupState::Settled {
            zeroed.emptied.push(entry.id);
        }
    }
    Ok(zeroed)
}

/// VACUUM's second step, after [`zero_dead`] (so after its zeroing, as
/// [`crate::membership::absorb`] requires): bumps the `vacuum_gen` of every group it touched,
/// one change per catalog page, then drops the settled groups it left with no TID (settled groups
/// gain none), their pages going to the free list. `meta_page` is the exclusively locked
/// metadata page.
pub fn finish_vacuum<S: PageStore>(store: &S, meta_page: &S::Page, zeroed: &Zeroed) -> Result<(), StatusError> {
    let catalog = catalog(store, true)?;
    for (index, page) in catalog.pages.iter().enumerate() {
        let bumped: Vec<ArrayEntry> = catalog
            .entries
            .iter()
            .filter(|(i, e)| *i == index && zeroed.touched.contains(&e.id))
            .map(|(_, e)| ArrayEntry { vacuum_gen: e.vacuum_gen.wrapping_add(1), ..*e })
            .collect();
        if !bumped.is_empty() {
            store.change(&[(page, false)], &mut |images| {
                for entry in &bumped {
                    let updated = array_update(images[0], entry);
                    debug_assert!(updated);
                }
            });
        }
    }
    for &(index, entry) in catalog.entries.iter().filter(|(_, e)| zeroed.emptied.contains(&e.id)) {
        drop_group(store, meta_page, &catalog, index, &entry)?;
    }
    Ok(())
}

/// VACUUM in one call: [`zero_dead`], then [`finish_vacuum`] under the metadata page. Returns how
/// many TIDs were removed. The caller holds no status page lock.
pub fn remove_dead<S: PageStore>(store: &S, dead: impl FnMut(u64) -> bool) -> Result<u64, StatusError> {
    let zeroed = zero_dead(store, dead)?;
    if !zeroed.is_empty() {
        let meta_page = store.lock(META_BLOCK, true);
        finish_vacuum(store, &meta_page, &zeroed)?;
    }
    Ok(zeroed.removed)
}

/// Removes settled group `entry` from its catalog page (`catalog`'s page `index`) and puts its
/// pages on the free list, in one change. The caller holds the metadata page and the catalog
/// exclusively; the group had no TID left (settled groups gain none).
fn drop_group<S: PageStore>(
    store: &S,
    meta_page: &S::Page,
    catalog: &Catalog<S::Page>,
    index: usize,
    entry: &ArrayEntry,
) -> Result<(), StatusError> {
    let mut contents = meta(store, meta_page)?;
    let page = &catalog.pages[index];
    let tail = (entry.tail != NO_BLOCK).then(|| catalog.lock_linked(store, entry.tail, true, entry.id)).transpose()?;
    let old_free_head = contents.free_head;
    if tail.is_some() {
        contents.free_head = entry.head;
    }
    let mut pages = vec![(meta_page, false), (page, false)];
    pages.extend(tail.as_ref().map(|t| (t, false)));
    store.change(&pages, &mut |images| {
        write_meta(images[0], &contents);
        array_remove(images[1], entry.id);
        if let Some(tail) = images.get_mut(2) {
            set_next(tail, old_free_head);
        }
    });
    Ok(())
}

/// Clears the metadata flags (after recovery handled an init-fork reset). `meta_page` is the
/// exclusively locked metadata page.
pub fn clear_flags<S: PageStore>(store: &S, meta_page: &S::Page) -> Result<(), StatusError> {
    let mut contents = meta(store, meta_page)?;
    contents.flags = 0;
    store.change(&[(meta_page, false)], &mut |images| write_meta(images[0], &contents));
    Ok(())
}

/// Formats block `block` (0 or 1) of a new index, already initialised as an empty page
/// (PostgreSQL's `PageInit` with an [`OPAQUE_BYTES`](super::OPAQUE_BYTES) special area): block 0
/// as the metadata page with `flags`, `text_config` and no memtable, block 1 as an empty array
/// page.
pub fn format_new_page(page: &mut [u8], block: u32, flags: u32, text_config: u32) {
    if block == META_BLOCK {
        format(page, PageKind::Meta);
        write_meta(page, &Meta { max_memtable_id: 0, free_head: NO_BLOCK, flags, text_config });
    } else {
        debug_assert_eq!(block, ARRAY_BLOCK, "a new index has two pages");
        format(page, PageKind::Array);
    }
}
