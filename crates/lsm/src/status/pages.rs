//! Operations on an index's status pages (the paper's §5.2–5.3) over a [`PageStore`]: which pages
//! are locked in which order, what one atomic change writes, and how lists and the free list are
//! linked. The byte layout of each page is the parent module's; pg_strata's store is the index
//! relation's buffers, changed through GenericXLog (`pg_strata/src/index/status.rs`).
//!
//! Lock order: the metadata page (block 0) → the memtable array page (block 1) → list pages.
//! The metadata page's exclusive lock serialises registering memtables, allocating and freeing
//! list pages, and recovery; callers take it first and pass it in.
//!
//! What the pages guarantee (each change below is one atomic record of at most
//! [`MAX_PAGES_PER_CHANGE`] pages):
//! - a memtable is registered (and `max_memtable_id` raised) before any TID is appended to it
//!   ([`register`]), so a committed row's memtable is always known after a crash;
//! - a TID is appended ([`append`]) to the tail page of its memtable's list; a full tail gets a
//!   successor page, taken from the free list or added to the relation, in the same change that
//!   links it;
//! - [`release`] splices a released memtable's whole list (head … tail) onto the free list and
//!   makes the changes durable before returning, so nothing relies on a release a crash undoes;
//! - removed TIDs ([`remove_dead`]) are zeroed in place and never read back ([`read`]).
//!
//! Lists are walked from the array entry's head to its tail; a list that leaves the relation or
//! is longer than it is reported as [`StatusError::BadList`] instead of looping.

use std::collections::HashSet;

use super::{
    array_capacity, array_entries, array_push, array_remove, array_update, format, list_append, list_remove_where,
    list_tids, next, read_meta, set_next, write_meta, ArrayEntry, Meta, PageKind, StatusError, ARRAY_BLOCK, META_BLOCK,
    NO_BLOCK,
};
use crate::recovery::{Status, StatusMemtable};

/// The most pages one atomic change may touch (PostgreSQL's `MAX_GENERIC_XLOG_PAGES`). No
/// operation here changes more: the largest, a TID on a new page, writes the new page, the old
/// tail, the metadata page and the array page.
pub const MAX_PAGES_PER_CHANGE: usize = 4;

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

/// Outcome of [`append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The TID is in the memtable's list.
    Done,
    /// The memtable's list was already released: its rows (this one included) are in a
    /// published segment, so nothing needs recording.
    Released,
}

/// What [`read`] found: the metadata and, per listed memtable, its TIDs (removed ones left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The metadata page.
    pub meta: Meta,
    /// The listed memtables with their TIDs, in array order, as crash recovery takes them.
    pub status: Status,
    /// List pages read.
    pub pages: usize,
}

/// The metadata contents of the locked metadata page `meta`.
pub fn meta<S: PageStore>(store: &S, meta: &S::Page) -> Result<Meta, StatusError> {
    read_meta(&store.bytes(meta))
}

fn entries<S: PageStore>(store: &S, array: &S::Page) -> Result<Vec<ArrayEntry>, StatusError> {
    array_entries(&store.bytes(array))
}

fn entry<S: PageStore>(store: &S, array: &S::Page, id: u64) -> Result<Option<ArrayEntry>, StatusError> {
    Ok(entries(store, array)?.into_iter().find(|e| e.id == id))
}

/// The ids of the memtables the array page lists. The caller holds no array page lock.
pub fn listed<S: PageStore>(store: &S) -> Result<Vec<u64>, StatusError> {
    let array = store.lock(ARRAY_BLOCK, false);
    Ok(entries(store, &array)?.into_iter().map(|e| e.id).collect())
}

/// Whether the array page can register one more memtable. The caller holds no array page lock;
/// holding the metadata page exclusively keeps the answer true until it registers.
pub fn array_has_room<S: PageStore>(store: &S) -> Result<bool, StatusError> {
    let array = store.lock(ARRAY_BLOCK, false);
    let capacity = array_capacity(&store.bytes(&array));
    Ok(entries(store, &array)?.len() < capacity)
}

/// Registers memtable `id` with an empty list and raises `max_memtable_id` to it, in one change;
/// nothing when it is already registered. `meta` is the exclusively locked metadata page;
/// [`StatusError::ArrayFull`] when the array page has no room.
pub fn register<S: PageStore>(store: &S, meta_page: &S::Page, id: u64) -> Result<(), StatusError> {
    let array = store.lock(ARRAY_BLOCK, true);
    let entries = entries(store, &array)?;
    if entries.iter().any(|e| e.id == id) {
        return Ok(());
    }
    if entries.len() >= array_capacity(&store.bytes(&array)) {
        return Err(StatusError::ArrayFull);
    }
    let mut contents = meta(store, meta_page)?;
    contents.max_memtable_id = contents.max_memtable_id.max(id);
    store.change(&[(meta_page, false), (&array, false)], &mut |pages| {
        write_meta(pages[0], &contents);
        let pushed = array_push(pages[1], &ArrayEntry { id, head: NO_BLOCK, tail: NO_BLOCK });
        debug_assert!(pushed);
    });
    Ok(())
}

/// Whether a LIST page has room for one more TID.
fn has_room(page: &[u8]) -> bool {
    super::lower(page) + 8 <= super::special(page)
}

/// Appends `tid` to the tail page `tail`, which has room.
fn append_here<S: PageStore>(store: &S, tail: &S::Page, tid: u64) {
    store.change(&[(tail, false)], &mut |pages| {
        let appended = list_append(pages[0], tid);
        debug_assert!(appended);
    });
}

/// Appends heap TID `tid` to the list of memtable `id`. The caller holds no status page lock.
///
/// The fast path locks the array page shared and the tail page exclusively; a memtable being
/// registered right now (its allocator holds the metadata page until the entry exists) is waited
/// for once, by taking the metadata page shared; a full or missing tail goes to the slow path,
/// under the metadata page, which links a page from the free list (or a new one).
pub fn append<S: PageStore>(store: &S, id: u64, tid: u64) -> Result<Appended, StatusError> {
    let mut waited = false;
    loop {
        let array = store.lock(ARRAY_BLOCK, false);
        let Some(entry) = entry(store, &array, id)? else {
            if waited {
                return Ok(Appended::Released);
            }
            drop(array);
            drop(store.lock(META_BLOCK, false));
            waited = true;
            continue;
        };
        if entry.tail != NO_BLOCK {
            let tail = store.lock(entry.tail, true);
            if has_room(&store.bytes(&tail)) {
                append_here(store, &tail, tid);
                return Ok(Appended::Done);
            }
        }
        drop(array);
        return append_on_new_page(store, id, tid);
    }
}

/// The slow path of [`append`]: the memtable has no list page yet or its tail is full.
fn append_on_new_page<S: PageStore>(store: &S, id: u64, tid: u64) -> Result<Appended, StatusError> {
    let meta_page = store.lock(META_BLOCK, true);
    let array = store.lock(ARRAY_BLOCK, true);
    let Some(mut entry) = entry(store, &array, id)? else {
        return Ok(Appended::Released);
    };
    let tail = (entry.tail != NO_BLOCK).then(|| store.lock(entry.tail, true));
    if let Some(tail) = tail.as_ref().filter(|t| has_room(&store.bytes(t))) {
        // Another backend added a page meanwhile.
        append_here(store, tail, tid);
        return Ok(Appended::Done);
    }
    let mut contents = meta(store, &meta_page)?;
    let fresh = match contents.free_head {
        NO_BLOCK => store.extend(),
        free => {
            let page = store.lock(free, true);
            contents.free_head = next(&store.bytes(&page));
            page
        }
    };
    let fresh_block = store.block(&fresh);
    if tail.is_none() {
        entry.head = fresh_block;
    }
    entry.tail = fresh_block;
    let mut pages = vec![(&fresh, true), (&meta_page, false), (&array, false)];
    pages.extend(tail.as_ref().map(|t| (t, false)));
    store.change(&pages, &mut |images| {
        format(images[0], PageKind::List);
        let appended = list_append(images[0], tid);
        debug_assert!(appended);
        write_meta(images[1], &contents);
        let updated = array_update(images[2], &entry);
        debug_assert!(updated);
        if let Some(old_tail) = images.get_mut(3) {
            set_next(old_tail, fresh_block);
        }
    });
    Ok(Appended::Done)
}

/// Releases the lists of memtables `ids` (whose rows are in published segments): each leaves the
/// array page and its pages go to the front of the free list, one change per memtable; then the
/// changes are made durable, before anything relies on the release. `meta_page` is the
/// exclusively locked metadata page. Returns the ids still listed.
pub fn release<S: PageStore>(store: &S, meta_page: &S::Page, ids: &[u64]) -> Result<Vec<u64>, StatusError> {
    let array = store.lock(ARRAY_BLOCK, true);
    let mut last = None;
    for &id in ids {
        let Some(entry) = entry(store, &array, id)? else {
            continue;
        };
        let mut contents = meta(store, meta_page)?;
        let tail = (entry.tail != NO_BLOCK).then(|| store.lock(entry.tail, true));
        let old_free_head = contents.free_head;
        if tail.is_some() {
            contents.free_head = entry.head;
        }
        let mut pages = vec![(meta_page, false), (&array, false)];
        pages.extend(tail.as_ref().map(|t| (t, false)));
        last = Some(store.change(&pages, &mut |images| {
            write_meta(images[0], &contents);
            array_remove(images[1], id);
            if let Some(tail) = images.get_mut(2) {
                set_next(tail, old_free_head);
            }
        }));
    }
    if let Some(position) = last {
        store.make_durable(position);
    }
    Ok(entries(store, &array)?.into_iter().map(|e| e.id).collect())
}

/// Walks the list of `entry` from head to tail, calling `visit` with each page, locked
/// (exclusively when `exclusive`) and checked to be a LIST page. The caller holds the array page
/// (so the list cannot be released meanwhile).
fn walk<S: PageStore>(
    store: &S,
    entry: &ArrayEntry,
    exclusive: bool,
    mut visit: impl FnMut(&S::Page, Vec<u64>),
) -> Result<(), StatusError> {
    let blocks = store.blocks();
    let mut block = entry.head;
    let mut steps = 0;
    while block != NO_BLOCK {
        if block >= blocks || steps > blocks {
            return Err(StatusError::BadList { memtable: entry.id });
        }
        let page = store.lock(block, exclusive);
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

/// Everything the status pages hold, for crash recovery. `meta_page` is the locked metadata page.
pub fn read<S: PageStore>(store: &S, meta_page: &S::Page) -> Result<Contents, StatusError> {
    let meta = meta(store, meta_page)?;
    let array = store.lock(ARRAY_BLOCK, false);
    let mut memtables = Vec::new();
    let mut pages = 0;
    for entry in entries(store, &array)? {
        let mut tids = Vec::new();
        walk(store, &entry, false, |_, listed| {
            pages += 1;
            tids.extend(listed.into_iter().filter(|&t| t != 0));
        })?;
        memtables.push(StatusMemtable { id: entry.id, tids });
    }
    Ok(Contents { status: Status { max_memtable_id: meta.max_memtable_id, memtables }, meta, pages })
}

/// Removes (zeroes) the TIDs for which `dead` is true from every list, one change per page that
/// has any (VACUUM of memtable rows); returns how many were removed. `dead` is asked about each
/// listed TID before the change starts. The caller holds no status page lock.
pub fn remove_dead<S: PageStore>(store: &S, mut dead: impl FnMut(u64) -> bool) -> Result<u64, StatusError> {
    let array = store.lock(ARRAY_BLOCK, false);
    let mut removed = 0u64;
    for entry in entries(store, &array)? {
        walk(store, &entry, true, |page, tids| {
            let dead_here: HashSet<u64> = tids.into_iter().filter(|&t| t != 0 && dead(t)).collect();
            if dead_here.is_empty() {
                return;
            }
            store.change(&[(page, false)], &mut |images| {
                removed += list_remove_where(images[0], |t| dead_here.contains(&t)) as u64;
            });
        })?;
    }
    Ok(removed)
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
/// as the metadata page with `flags` and no memtable, block 1 as an empty array page.
pub fn format_new_page(page: &mut [u8], block: u32, flags: u32) {
    if block == META_BLOCK {
        format(page, PageKind::Meta);
        write_meta(page, &Meta { max_memtable_id: 0, free_head: NO_BLOCK, flags });
    } else {
        debug_assert_eq!(block, ARRAY_BLOCK, "a new index has two pages");
        format(page, PageKind::Array);
    }
}
