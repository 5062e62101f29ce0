//! Model tests of [`super::pages`]: random sequences of registrations, appends, settles and
//! VACUUMs on an in-memory page store, compared after every step with a map of group id →
//! (state, generation, list). Small pages make lists span many pages, the catalog grow a chain
//! and dropped groups' pages come back; the store checks what PostgreSQL would enforce (at most four distinct, exclusively
//! locked pages per change, no page locked twice, metadata → array → list lock order).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use proptest::prelude::*;

use super::pages::{self, check_change, PageStore};
use super::{array_entries, list_capacity, next, page_init, read_meta, StatusError, ARRAY_BLOCK, META_BLOCK, NO_BLOCK};
use crate::membership::GroupState;

/// Bytes per page: 28 TIDs per list page, 9 groups per catalog page.
const PAGE: usize = 256;

/// Blocks locked now, and whether exclusively.
type Locks = Rc<RefCell<BTreeMap<u32, bool>>>;

/// A page locked in a [`MemoryStore`].
pub(crate) struct MemoryPage {
    block: u32,
    exclusive: bool,
    locks: Locks,
}

impl Drop for MemoryPage {
    fn drop(&mut self) {
        self.locks.borrow_mut().remove(&self.block);
    }
}

/// The text search configuration the model's index was created with: every change of the
/// metadata page keeps it.
const TEXT_CONFIG: u32 = 3748;

/// An index relation in memory: page images, the lock table, and the change log's positions.
pub(crate) struct MemoryStore {
    pages: RefCell<Vec<Vec<u8>>>,
    locks: Locks,
    /// Changes made (the last one's position).
    changes: Cell<u64>,
    /// Position made durable.
    durable: Cell<u64>,
}

impl MemoryStore {
    /// A new index's first two pages, as `pg_strata` writes them at CREATE INDEX (of a bm25
    /// index tokenising with configuration [`TEXT_CONFIG`]).
    pub(crate) fn new() -> Self {
        let (mut meta, mut array) = (vec![0; PAGE], vec![0; PAGE]);
        page_init(&mut meta);
        page_init(&mut array);
        pages::format_new_page(&mut meta, META_BLOCK, 0, TEXT_CONFIG);
        pages::format_new_page(&mut array, ARRAY_BLOCK, 0, 0);
        Self {
            pages: RefCell::new(vec![meta, array]),
            locks: Rc::default(),
            changes: Cell::new(0),
            durable: Cell::new(0),
        }
    }

    fn image(&self, block: u32) -> Vec<u8> {
        self.pages.borrow()[block as usize].clone()
    }
}

impl PageStore for MemoryStore {
    type Page = MemoryPage;

    fn lock(&self, block: u32, exclusive: bool) -> MemoryPage {
        assert!((block as usize) < self.pages.borrow().len(), "block {block} does not exist");
        let mut locks = self.locks.borrow_mut();
        assert!(!locks.contains_key(&block), "block {block} locked twice (a self-deadlock in PostgreSQL)");
        match block {
            META_BLOCK => assert!(locks.is_empty(), "metadata page locked after {locks:?}"),
            ARRAY_BLOCK => assert!(locks.keys().all(|&b| b == META_BLOCK), "array page locked after {locks:?}"),
            _ => {}
        }
        locks.insert(block, exclusive);
        MemoryPage { block, exclusive, locks: Rc::clone(&self.locks) }
    }

    fn extend(&self) -> MemoryPage {
        let block = {
            let mut pages = self.pages.borrow_mut();
            // Garbage, so that a page used without being initialised shows up.
            pages.push(vec![0xA5; PAGE]);
            pages.len() as u32 - 1
        };
        self.lock(block, true)
    }

    fn block(&self, page: &MemoryPage) -> u32 {
        page.block
    }

    type Image<'a> = std::cell::Ref<'a, [u8]>;

    fn bytes<'a>(&'a self, page: &'a MemoryPage) -> Self::Image<'a> {
        std::cell::Ref::map(self.pages.borrow(), |pages| pages[page.block as usize].as_slice())
    }

    fn blocks(&self) -> u32 {
        self.pages.borrow().len() as u32
    }

    fn change(&self, pages: &[(&MemoryPage, bool)], edit: &mut dyn FnMut(&mut [&mut [u8]])) -> u64 {
        assert!(!pages.is_empty(), "a change of no page");
        check_change(&pages.iter().map(|(p, _)| (p.block, p.exclusive)).collect::<Vec<_>>());
        let mut images: Vec<Vec<u8>> = pages
            .iter()
            .map(|(p, fresh)| {
                let mut image = self.image(p.block);
                if *fresh {
                    page_init(&mut image);
                }
                image
            })
            .collect();
        let mut views: Vec<&mut [u8]> = images.iter_mut().map(Vec::as_mut_slice).collect();
        edit(&mut views);
        let mut stored = self.pages.borrow_mut();
        for ((page, _), image) in pages.iter().zip(images) {
            stored[page.block as usize] = image;
        }
        self.changes.set(self.changes.get() + 1);
        self.changes.get()
    }

    fn make_durable(&self, position: u64) {
        assert!(position <= self.changes.get());
        self.durable.set(self.durable.get().max(position));
    }
}

/// The model: every group's state, generation and list (position by position, 0 = removed),
/// and the newest id registered.
#[derive(Default)]
struct Model {
    groups: BTreeMap<u64, (GroupState, u64, Vec<u64>)>,
    max_id: u64,
}

/// One step of a workload.
#[derive(Debug, Clone)]
enum Op {
    Register(u64),
    /// Appends `count` TIDs to open group `id`, one by one (`aminsert`) or at once (CREATE INDEX).
    Append {
        id: u64,
        count: usize,
        many: bool,
    },
    Settle(Vec<u64>),
    /// VACUUM removes the TIDs divisible by the modulus.
    RemoveDead(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u64..30).prop_map(Op::Register),
        6 => ((1u64..30), 1usize..70, any::<bool>()).prop_map(|(id, count, many)| Op::Append { id, count, many }),
        2 => proptest::collection::vec(1u64..30, 0..6).prop_map(Op::Settle),
        2 => (1u64..7).prop_map(Op::RemoveDead),
    ]
}

/// Checks the pages against the model, and that every page beyond block 0 is in the catalog
/// chain, on exactly one list, or on the free list (no page leaks, none is shared).
fn check(store: &MemoryStore, model: &Model) {
    let meta_page = store.lock(META_BLOCK, false);
    let contents = pages::read(store, &meta_page).unwrap();
    drop(meta_page);
    assert_eq!(contents.meta.max_memtable_id, model.max_id);
    assert_eq!(contents.meta.text_config, TEXT_CONFIG, "fixed at CREATE INDEX");
    let open: BTreeMap<u64, Vec<u64>> = model
        .groups
        .iter()
        .filter(|(_, (state, _, _))| *state == GroupState::Open)
        .map(|(&id, (_, _, tids))| (id, tids.iter().copied().filter(|&t| t != 0).collect()))
        .collect();
    let read: BTreeMap<u64, Vec<u64>> = contents.status.memtables.into_iter().map(|m| (m.id, m.tids)).collect();
    assert_eq!(read, open, "crash recovery reads the open groups");
    assert_eq!(pages::listed(store).unwrap().into_iter().collect::<BTreeSet<_>>(), open.keys().copied().collect());
    let groups: BTreeMap<u64, (GroupState, u64, Vec<u64>)> =
        pages::read_groups(store).unwrap().into_iter().map(|g| (g.id, (g.state, g.vacuum_gen, g.tids))).collect();
    assert_eq!(groups, model.groups, "the membership log");
    let catalog = pages::read_catalog(store).unwrap();
    let mut lists = pages::read_lists(store, &catalog.iter().map(|g| g.id).chain([u64::MAX]).collect()).unwrap();
    assert_eq!(lists.remove(&u64::MAX), Some(Vec::new()), "a group not in the catalog has an empty list");
    let split: BTreeMap<u64, (GroupState, u64, Vec<u64>)> =
        catalog.into_iter().map(|g| (g.id, (g.state, g.vacuum_gen, lists.remove(&g.id).unwrap()))).collect();
    assert_eq!(split, model.groups, "the catalog, then the lists");

    let mut owned = BTreeSet::new();
    let chain = |owned: &mut BTreeSet<u32>, mut block: u32, last: u32| {
        while block != NO_BLOCK {
            assert!(owned.insert(block), "block {block} on two lists");
            if block == last {
                break;
            }
            block = next(&store.image(block));
        }
    };
    let mut catalog_block = ARRAY_BLOCK;
    while catalog_block != NO_BLOCK {
        assert!(owned.insert(catalog_block), "catalog page {catalog_block} also on a list");
        let image = store.image(catalog_block);
        for entry in array_entries(&image, catalog_block).unwrap() {
            assert_eq!(entry.head == NO_BLOCK, entry.tail == NO_BLOCK);
            chain(&mut owned, entry.head, entry.tail);
        }
        catalog_block = next(&image);
    }
    chain(&mut owned, read_meta(&store.image(META_BLOCK)).unwrap().free_head, NO_BLOCK);
    assert_eq!(owned, (1..store.blocks()).collect::<BTreeSet<_>>(), "pages leaked");
    assert!(store.locks.borrow().is_empty(), "a lock outlived its operation");
}

/// Applies `op` to the store and the model.
fn apply(store: &MemoryStore, model: &mut Model, op: &Op, next_tid: &mut u64) {
    match op {
        Op::Register(id) => {
            let meta_page = store.lock(META_BLOCK, true);
            assert_eq!(pages::register(store, &meta_page, *id), Ok(()));
            if !model.groups.contains_key(id) && *id > model.max_id {
                model.groups.insert(*id, (GroupState::Open, 0, Vec::new()));
                model.max_id = *id;
            } else if !model.groups.contains_key(id) {
                // An id at or below the newest one is registered too (recovery refills lost
                // memtables under their original ids).
                model.groups.insert(*id, (GroupState::Open, 0, Vec::new()));
            }
        }
        Op::Append { id, count, many } => {
            let Some((GroupState::Open, _, tids)) = model.groups.get_mut(id) else {
                if !model.groups.contains_key(id) {
                    assert_eq!(pages::append(store, *id, 1), Err(StatusError::NoSuchGroup { group: *id }));
                }
                return;
            };
            let new: Vec<u64> = (0..*count as u64).map(|i| *next_tid + 1 + i).collect();
            *next_tid += *count as u64;
            if *many {
                let meta_page = store.lock(META_BLOCK, true);
                pages::append_many(store, &meta_page, *id, &new).unwrap();
            } else {
                for &tid in &new {
                    pages::append(store, *id, tid).unwrap();
                }
            }
            tids.extend(new);
        }
        Op::Settle(ids) => {
            let meta_page = store.lock(META_BLOCK, true);
            let before = store.changes.get();
            let open = pages::settle(store, &meta_page, ids).unwrap();
            let mut settled = 0;
            for id in ids {
                if let Some((state @ GroupState::Open, _, _)) = model.groups.get_mut(id) {
                    *state = GroupState::Settled;
                    settled += 1;
                }
            }
            let expected: BTreeSet<u64> =
                model.groups.iter().filter(|(_, g)| g.0 == GroupState::Open).map(|(&id, _)| id).collect();
            assert_eq!(open.into_iter().collect::<BTreeSet<_>>(), expected);
            if settled > 0 {
                assert!(store.changes.get() > before);
                assert_eq!(store.durable.get(), store.changes.get(), "a settle returned before it was durable");
            }
        }
        Op::RemoveDead(modulus) => {
            let mut expected = 0;
            for (state, generation, tids) in model.groups.values_mut() {
                let mut touched = false;
                for tid in tids.iter_mut().filter(|t| **t != 0 && **t % modulus == 0) {
                    *tid = 0;
                    touched = true;
                    expected += 1;
                }
                if touched {
                    *generation += 1;
                }
                let _ = state;
            }
            model.groups.retain(|_, (state, _, tids)| *state == GroupState::Open || tids.iter().any(|&t| t != 0));
            assert_eq!(pages::remove_dead(store, |t| t % modulus == 0).unwrap(), expected);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The status pages always read back as the model, and no page is lost or shared.
    #[test]
    fn pages_follow_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store = MemoryStore::new();
        let mut model = Model::default();
        let mut next_tid = 0;
        for op in &ops {
            apply(&store, &mut model, op, &mut next_tid);
            check(&store, &model);
        }
    }
}

/// Dropped groups' pages are reused: filling, emptying and filling again does not grow the
/// relation.
#[test]
fn dropped_groups_pages_are_reused() {
    let store = MemoryStore::new();
    let mut model = Model::default();
    let mut next_tid = 0;
    let per_page = list_capacity(&store.image(ARRAY_BLOCK));
    apply(&store, &mut model, &Op::Register(1), &mut next_tid);
    apply(&store, &mut model, &Op::Append { id: 1, count: 3 * per_page + 1, many: true }, &mut next_tid);
    assert_eq!(store.blocks(), 2 + 4);
    apply(&store, &mut model, &Op::Settle(vec![1]), &mut next_tid);
    apply(&store, &mut model, &Op::RemoveDead(1), &mut next_tid);
    check(&store, &model);
    assert!(model.groups.is_empty());
    apply(&store, &mut model, &Op::Register(2), &mut next_tid);
    apply(&store, &mut model, &Op::Append { id: 2, count: 3 * per_page + 1, many: false }, &mut next_tid);
    check(&store, &model);
    assert_eq!(store.blocks(), 2 + 4, "the second list took the first one's pages");
}

/// A full catalog page gets a successor, and groups registered there work like the others.
#[test]
fn the_catalog_grows_a_chain() {
    let store = MemoryStore::new();
    let mut model = Model::default();
    let mut next_tid = 0;
    let per_page = super::array_capacity(&store.image(ARRAY_BLOCK)) as u64;
    for id in 1..=3 * per_page + 2 {
        apply(&store, &mut model, &Op::Register(id), &mut next_tid);
        apply(&store, &mut model, &Op::Append { id, count: 2, many: false }, &mut next_tid);
    }
    check(&store, &model);
    apply(&store, &mut model, &Op::Settle((1..=3 * per_page + 2).step_by(2).collect()), &mut next_tid);
    apply(&store, &mut model, &Op::RemoveDead(2), &mut next_tid);
    check(&store, &model);
}

/// A list whose links leave the relation or loop is an error, not a hang.
#[test]
fn malformed_lists_are_errors() {
    let store = MemoryStore::new();
    let mut model = Model::default();
    let mut next_tid = 0;
    apply(&store, &mut model, &Op::Register(7), &mut next_tid);
    let per_page = list_capacity(&store.image(ARRAY_BLOCK));
    apply(&store, &mut model, &Op::Append { id: 7, count: 2 * per_page, many: false }, &mut next_tid);
    // Point the first page back at itself: the walk never reaches the tail.
    let head = array_entries(&store.image(ARRAY_BLOCK), ARRAY_BLOCK).unwrap()[0].head;
    super::set_next(&mut store.pages.borrow_mut()[head as usize], head);
    let meta_page = store.lock(META_BLOCK, false);
    assert_eq!(pages::read(&store, &meta_page), Err(StatusError::BadList { memtable: 7 }));
    drop(meta_page);
    super::set_next(&mut store.pages.borrow_mut()[head as usize], 999);
    assert_eq!(pages::remove_dead(&store, |_| true), Err(StatusError::BadList { memtable: 7 }));
}

/// A link that names a page the caller holds already (the metadata page, a catalog page) is an
/// error found before that page is locked again: in PostgreSQL a second lock of a page its
/// backend holds waits for itself forever. The store panics on such a lock, so each call below
/// would panic without the checks.
#[test]
fn links_to_held_pages_are_errors_not_self_deadlocks() {
    let bad_list = |memtable| StatusError::BadList { memtable };
    // The catalog's chain comes back to its own first page, or goes to the metadata page.
    for back in [ARRAY_BLOCK, META_BLOCK] {
        let store = MemoryStore::new();
        super::set_next(&mut store.pages.borrow_mut()[ARRAY_BLOCK as usize], back);
        assert_eq!(pages::listed(&store), Err(bad_list(0)), "catalog chain back to {back}");
        let meta_page = store.lock(META_BLOCK, true);
        assert_eq!(pages::register(&store, &meta_page, 1), Err(bad_list(0)), "catalog chain back to {back}");
    }
    // A group's list (head and tail) names the catalog page or the metadata page.
    for held in [ARRAY_BLOCK, META_BLOCK] {
        let store = MemoryStore::new();
        let mut model = Model::default();
        let mut next_tid = 0;
        apply(&store, &mut model, &Op::Register(7), &mut next_tid);
        apply(&store, &mut model, &Op::Append { id: 7, count: 3, many: false }, &mut next_tid);
        let mut entry = array_entries(&store.image(ARRAY_BLOCK), ARRAY_BLOCK).unwrap()[0];
        (entry.head, entry.tail) = (held, held);
        assert!(super::array_update(&mut store.pages.borrow_mut()[ARRAY_BLOCK as usize], &entry));
        assert_eq!(pages::read_groups(&store).unwrap_err(), bad_list(7), "list at {held}");
        assert_eq!(pages::append(&store, 7, 99), Err(bad_list(7)), "list at {held}");
        assert_eq!(pages::remove_dead(&store, |_| true), Err(bad_list(7)), "list at {held}");
        let meta_page = store.lock(META_BLOCK, false);
        assert_eq!(pages::read(&store, &meta_page).unwrap_err(), bad_list(7), "list at {held}");
    }
    // The free list's head names the catalog page: a group's first page cannot come from it.
    let store = MemoryStore::new();
    let mut model = Model::default();
    apply(&store, &mut model, &Op::Register(7), &mut 0);
    let mut meta = read_meta(&store.image(META_BLOCK)).unwrap();
    meta.free_head = ARRAY_BLOCK;
    super::write_meta(&mut store.pages.borrow_mut()[META_BLOCK as usize], &meta);
    assert_eq!(pages::append(&store, 7, 1), Err(bad_list(0)));
}

#[test]
fn a_change_needs_exclusive_locks_distinct_pages_and_fits_one_record() {
    check_change(&[(0, true), (1, true), (5, true), (9, true)]);
    let refused = [vec![(0, false)], vec![(1, true), (3, true), (1, true)], (0..5).map(|b| (b, true)).collect()];
    for pages in refused {
        assert!(std::panic::catch_unwind(|| check_change(&pages)).is_err(), "{pages:?}");
    }
}
