//! The waits of foreground work for the index service: a writer getting its index's active
//! memtable (pin it, or allocate and register one, or wait for a free slab and report an index
//! whose flushes keep failing), and recovery waiting for free slabs before it refills.
//!
//! The host (pg_strata) supplies the locks, the status pages, the wait itself (an interruptible
//! latch wait that also wakes the service) and the errors; the decisions and the time limits are
//! here, tested with a manual clock.

use std::time::Duration;

use crate::clock::Clock;
use crate::memtable::{Insert, MemtableLayout, SpanTooLong};
use crate::recovery::MemtableRow;
use crate::slabs::{DirectoryLock, SlabCounts, SlabInfo, SlabMemory, SlabState, Slabs, WriterPin};

/// How long a writer waits for a free memtable slab before it reports an index whose flushes keep
/// failing (while no flush fails, it waits on).
pub const STUCK_REPORT_AFTER: Duration = Duration::from_secs(5);

/// How long recovery waits, at most, for free slabs before it refills lost memtables.
pub const FREE_SLABS_WAIT: Duration = Duration::from_secs(10);

/// What [`allocate_registered`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocated {
    /// The index has an ACTIVE memtable now (this call's, or another writer's).
    Ready,
    /// No slab is free.
    NoFreeSlab,
    /// The index already has as many memtables waiting for their flush (SEALED or FLUSHING) as
    /// the backlog limit allows, and none of their flushes fails: its writers wait for the
    /// service to catch up (a write stall, as an LSM tree's level-0 limit), so that a query's
    /// memtable work stays bounded and one index's ingest cannot take every slab from the others.
    /// (An index whose flushes fail is not stalled: its writers use free memtable memory while
    /// it lasts, and a stuck index is reported as before.)
    Backlogged,
}

/// Allocates a memtable for index `index` unless it has an active one: a free slab is taken
/// (ALLOCATING, invisible to writers) with the SegmentID `next_id` hands out under the directory
/// lock, `register` records it (pg_strata: in the status pages), and only then it becomes the
/// index's ACTIVE memtable. So every memtable a writer can find is registered, and when
/// `register` unwinds the slab is freed. `layout` is asked only when a slab is taken. The caller
/// holds the index's metadata lock (which serialises allocations).
///
/// Nothing is taken while the index has `max_waiting` or more memtables waiting for their flush
/// and none of them fails to flush ([`Allocated::Backlogged`]; `max_waiting` 0: no limit). Since
/// allocations are serialised and each one's memtable is sealed before the next allocation, an
/// index holds at most `max_waiting + 1` unflushed memtables written by its writers (crash
/// recovery's refills come on top).
pub fn allocate_registered<M: SlabMemory + ?Sized, L: DirectoryLock + ?Sized>(
    slabs: Slabs<'_, M, L>,
    index: usize,
    max_waiting: usize,
    layout: impl FnOnce() -> MemtableLayout,
    next_id: impl FnOnce() -> u64,
    register: impl FnOnce(u64),
) -> Allocated {
    if slabs.has_active(index) {
        return Allocated::Ready;
    }
    if slabs.flush_backlog(index).is_stalled_at(max_waiting) {
        return Allocated::Backlogged;
    }
    // Dropped (the slab freed) if registering fails.
    let Ok(allocation) = slabs.allocate(index, layout(), next_id) else {
        return Allocated::NoFreeSlab;
    };
    register(allocation.segment_id());
    allocation.activate();
    Allocated::Ready
}

/// Inserts row `(tid, row)` — a vector index's stored-form vector and filter words, a text
/// index's [`SpanRow`](crate::recovery::SpanRow) — into an index's active memtable: `pin_active` pins it (allocating one
/// when there is none, see [`active_memtable`]), the row is appended, and `record` gets the
/// memtable's SegmentID while the pin is still held (pg_strata appends the TID to the memtable's
/// status list), so the memtable is not flushed before its row's TID is recorded. A full
/// memtable is unpinned and `seal`ed (`(slab, SegmentID)`), and the next active one is tried:
/// the row lands in exactly one memtable. An error, before anything is appended, when the row
/// is too long for any memtable of the index (a span row only).
pub fn insert<'r, M, P, R>(
    pin_active: impl FnMut() -> P,
    tid: u64,
    row: &R,
    record: impl FnOnce(u64),
    seal: impl FnMut(usize, u64),
) -> Result<(), SpanTooLong>
where
    M: SlabMemory + ?Sized + 'r,
    P: std::ops::Deref<Target = WriterPin<'r, M>>,
    R: MemtableRow + ?Sized,
{
    insert_until_done(pin_active, |pinned| row.append_written(pinned, tid), record, seal)
}

/// [`insert`] of a vector row (stored form, then filter words), which always fits.
pub fn insert_row<'r, M, P>(
    pin_active: impl FnMut() -> P,
    tid: u64,
    vector: &[f32],
    record: impl FnOnce(u64),
    seal: impl FnMut(usize, u64),
) where
    M: SlabMemory + ?Sized + 'r,
    P: std::ops::Deref<Target = WriterPin<'r, M>>,
{
    let inserted: Result<(), SpanTooLong> =
        insert_until_done(pin_active, |pinned| Ok(pinned.insert(tid, vector)), record, seal);
    inserted.expect("a fixed row always fits");
}

/// [`insert`] of span row `(tid, words)` ([`crate::memtable::spans`], e.g. a text document).
pub fn insert_span_row<'r, M, P>(
    pin_active: impl FnMut() -> P,
    tid: u64,
    words: &[u32],
    record: impl FnOnce(u64),
    seal: impl FnMut(usize, u64),
) -> Result<(), SpanTooLong>
where
    M: SlabMemory + ?Sized + 'r,
    P: std::ops::Deref<Target = WriterPin<'r, M>>,
{
    insert_until_done(pin_active, |pinned| pinned.insert_span(tid, words), record, seal)
}

fn insert_until_done<'r, M, P>(
    mut pin_active: impl FnMut() -> P,
    insert: impl Fn(&WriterPin<'r, M>) -> Result<Insert, SpanTooLong>,
    record: impl FnOnce(u64),
    mut seal: impl FnMut(usize, u64),
) -> Result<(), SpanTooLong>
where
    M: SlabMemory + ?Sized + 'r,
    P: std::ops::Deref<Target = WriterPin<'r, M>>,
{
    loop {
        let pinned = pin_active();
        match insert(&pinned)? {
            Insert::Done => {
                record(pinned.segment_id());
                return Ok(());
            }
            Insert::Full => {
                let (slab, segment_id) = (pinned.slab(), pinned.segment_id());
                drop(pinned);
                seal(slab, segment_id);
            }
        }
    }
}

/// What [`active_memtable`] needs from a writer.
pub trait MemtableWriter {
    /// A pinned memtable.
    type Pin;
    /// How a stuck index is reported.
    type Stuck;
    /// Pins the index's ACTIVE memtable, if it has one.
    fn pin_active(&mut self) -> Option<Self::Pin>;
    /// Allocates one ([`allocate_registered`] under the metadata lock).
    fn allocate(&mut self) -> Allocated;
    /// Some index whose memtables cannot be flushed, if there is one ([`failing_flush`]).
    fn stuck_index(&mut self) -> Option<Self::Stuck>;
    /// Waits a moment for the index service (pg_strata: wakes it, then an interruptible wait).
    fn pause(&mut self);
}

/// The index's active memtable, pinned: pins it, or allocates one and pins that, or — while every
/// slab is in use, or while the index's backlog is at its limit ([`Allocated::Backlogged`]) —
/// waits for the service. Once a wait for a free slab has taken longer than
/// [`STUCK_REPORT_AFTER`] by `clock` and some index's flushes fail, returns that index instead
/// (while none fails, the writer waits on: the service is just busy).
pub fn active_memtable<W: MemtableWriter>(writer: &mut W, clock: &impl Clock) -> Result<W::Pin, W::Stuck> {
    let started = clock.now();
    loop {
        if let Some(pinned) = writer.pin_active() {
            return Ok(pinned);
        }
        match writer.allocate() {
            Allocated::Ready => continue,
            Allocated::NoFreeSlab => {
                if clock.now().duration_since(started) > STUCK_REPORT_AFTER {
                    if let Some(stuck) = writer.stuck_index() {
                        return Err(stuck);
                    }
                }
            }
            // Ends when the service has flushed one, or when a flush of the index fails.
            Allocated::Backlogged => {}
        }
        writer.pause();
    }
}

/// The ACTIVE memtable of another index than `own` that a writer of `own`, finding no free slab,
/// seals so that the index service flushes it and frees its slab: the fullest one. `None` while a
/// slab is free or on its way to being freed or taken (SEALED, FLUSHING, FLUSHED, RECOVERING,
/// ALLOCATING: the service or another writer moves it on by itself), or when no other index holds
/// an ACTIVE memtable.
///
/// Without it, a node with more indexes taking writes than slabs (a Citus worker holds one index
/// per shard) would keep every slab ACTIVE, with nothing sealed for the service to free, and a
/// writer of one more index would wait forever.
pub fn memtable_to_evict(infos: &[SlabInfo], own: usize) -> Option<SlabInfo> {
    let moving = |state: SlabState| {
        matches!(
            state,
            SlabState::Free
                | SlabState::Sealed
                | SlabState::Flushing
                | SlabState::Flushed
                | SlabState::Recovering
                | SlabState::Allocating
        )
    };
    if infos.iter().any(|info| moving(info.state)) {
        return None;
    }
    infos
        .iter()
        .filter(|info| info.state == SlabState::Active && info.index != own)
        .max_by_key(|info| (info.filled, std::cmp::Reverse(info.slab)))
        .copied()
}

/// The directory slot of an index holding sealed memtables whose flushes fail, if any (the first
/// such slab's).
pub fn failing_flush(infos: &[SlabInfo]) -> Option<usize> {
    infos.iter().find(|info| info.flush_is_failing()).map(|info| info.index)
}

/// How an index whose flushes fail is named in a writer's error: its name (`None` when it is in
/// another database, whose catalog a backend cannot read), its OID, and the failure episode's
/// attempts and last error when known.
pub fn describe_stuck(name: Option<&str>, relid: u32, last: Option<(u32, &str)>) -> String {
    let last = last.map(|(retries, e)| format!(" after {retries} attempts: {e}"));
    format!("\"{}\" (OID {relid}){}", name.unwrap_or("in another database"), last.unwrap_or_default())
}

/// Waits until at least `wanted` slabs are free or the index service has nothing left to flush
/// ([`SlabCounts::free_or_settled`] of `counts()`), or [`FREE_SLABS_WAIT`] has passed by
/// `clock`; `pause` waits a moment between looks.
pub fn wait_for_free_slabs(
    clock: &impl Clock,
    wanted: usize,
    mut counts: impl FnMut() -> SlabCounts,
    mut pause: impl FnMut(),
) {
    let deadline = clock.now() + FREE_SLABS_WAIT;
    while !counts().free_or_settled(wanted) && clock.now() <= deadline {
        pause();
    }
}

#[cfg(all(test, feature = "shuttle"))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::slabs::test_region::{TestLock, TestRegion};
    use crate::slabs::SlabState;

    fn layout() -> MemtableLayout {
        MemtableLayout::new(4, 2)
    }

    /// A writer of index `index` (0 unless set) over a test region, with a backlog limit of
    /// `max_waiting` (0: none); every pause moves the clock by 10 ms and may run the "service".
    struct Writer<'a> {
        index: usize,
        max_waiting: usize,
        slabs: Slabs<'a, TestRegion, TestLock>,
        clock: &'a ManualClock,
        next_id: u64,
        registered: Vec<u64>,
        pauses: usize,
        service: &'a dyn Fn(Slabs<'a, TestRegion, TestLock>, usize),
    }

    impl<'a> Writer<'a> {
        /// A writer of index 0 without a backlog limit, its SegmentIDs from 1.
        fn new(
            slabs: Slabs<'a, TestRegion, TestLock>,
            clock: &'a ManualClock,
            service: &'a dyn Fn(Slabs<'a, TestRegion, TestLock>, usize),
        ) -> Self {
            Self { index: 0, max_waiting: 0, slabs, clock, next_id: 0, registered: Vec::new(), pauses: 0, service }
        }
    }

    impl<'a> MemtableWriter for Writer<'a> {
        type Pin = WriterPin<'a, TestRegion>;
        type Stuck = usize;

        fn pin_active(&mut self) -> Option<Self::Pin> {
            self.slabs.pin_active(self.index)
        }

        fn allocate(&mut self) -> Allocated {
            let next_id = &mut self.next_id;
            let registered = &mut self.registered;
            allocate_registered(
                self.slabs,
                self.index,
                self.max_waiting,
                layout,
                || {
                    *next_id += 1;
                    *next_id
                },
                |id| registered.push(id),
            )
        }

        fn stuck_index(&mut self) -> Option<usize> {
            failing_flush(&self.slabs.infos())
        }

        fn pause(&mut self) {
            self.pauses += 1;
            self.clock.advance(Duration::from_millis(10));
            (self.service)(self.slabs, self.pauses);
        }
    }

    /// Fills the region's only slab with a sealed memtable of index 1 whose flush failed `failures`
    /// times.
    fn occupied(slabs: Slabs<'_, TestRegion, TestLock>, failures: u32) {
        let allocation = slabs.allocate(1, layout(), || 77).unwrap();
        let slab = allocation.slab();
        allocation.activate();
        slabs.seal_active(1);
        slabs.memtable(slab).header().record_flush_failures(failures);
    }

    /// Rows past a memtable's capacity seal it and land in the next one, each recorded once under
    /// its memtable's pin, and the full memtable is sealed once.
    #[test]
    fn inserts_past_the_capacity_seal_and_land_in_exactly_one_memtable() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(3, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let mut writer = Writer::new(slabs, &clock, &|_, _| {});
                let (mut recorded, mut sealed) = (Vec::new(), Vec::new());
                for tid in 1..=9u64 {
                    insert_row(
                        || {
                            let pin = active_memtable(&mut writer, &clock).expect("a free slab");
                            // Recorded while pinned: the memtable has a writer.
                            assert!(pin.memtable().header().writers() > 0);
                            Box::new(pin)
                        },
                        tid,
                        &[tid as f32, 0.0],
                        |id| recorded.push((id, tid)),
                        |slab, id| {
                            assert!(slabs.seal(0, slab, id));
                            sealed.push(id);
                        },
                    );
                }
                let expected: Vec<(u64, u64)> = (1..=9u64).map(|tid| ((tid - 1) / 4 + 1, tid)).collect();
                assert_eq!(recorded, expected, "four rows per memtable, each recorded once");
                assert_eq!(sealed, [1, 2], "each full memtable sealed once");
                assert_eq!(writer.registered, [1, 2, 3]);
                let held: usize = slabs.infos().iter().map(|info| info.filled).sum();
                assert_eq!(held, 9, "no row stored twice");
            },
            1,
        );
    }

    /// The generic insert of span rows (a text index's documents): each lands in exactly one
    /// memtable, recorded once under its pin; a full memtable is sealed once; a row too long for
    /// any memtable is refused before anything is appended or recorded.
    #[test]
    fn span_rows_land_in_exactly_one_memtable_and_too_long_ones_in_none() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(3, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let mut writer = Writer::new(slabs, &clock, &|_, _| {});
                let (mut recorded, mut sealed) = (Vec::new(), Vec::new());
                // 3 words and the head's count take 2 slots of 2 words: two rows per memtable of 4.
                for tid in 1..=5u64 {
                    let row = crate::recovery::SpanRow(vec![tid as u32; 3]);
                    let pin = || Box::new(active_memtable(&mut writer, &clock).expect("a free slab"));
                    insert(
                        pin,
                        tid,
                        &row,
                        |id| recorded.push((id, tid)),
                        |slab, id| {
                            assert!(slabs.seal(0, slab, id));
                            sealed.push(id);
                        },
                    )
                    .expect("fits");
                }
                assert_eq!(recorded, [(1, 1), (1, 2), (2, 3), (2, 4), (3, 5)], "two rows per memtable");
                assert_eq!(sealed, [1, 2], "each full memtable sealed once");
                let too_long = crate::recovery::SpanRow(vec![7; 8]);
                let pin = || Box::new(active_memtable(&mut writer, &clock).expect("a free slab"));
                let refused = insert(pin, 6, &too_long, |id| recorded.push((id, 6)), |_, id| sealed.push(id));
                assert_eq!(refused, Err(SpanTooLong { words: 8, max: 7 }));
                assert_eq!((recorded.len(), sealed.len()), (5, 2), "nothing recorded or sealed for it");
                let held: usize = slabs.infos().iter().map(|info| info.filled).sum();
                assert_eq!(held, 10, "five rows of two slots, none stored twice");
            },
            1,
        );
    }

    /// With a free slab the writer allocates, registers and pins at once; a second writer pins the
    /// same memtable.
    #[test]
    fn a_writer_allocates_registers_and_pins() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(1, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let mut writer = Writer { next_id: 4, ..Writer::new(slabs, &clock, &|_, _| {}) };
                let pin = active_memtable(&mut writer, &clock).unwrap();
                assert_eq!((pin.segment_id(), writer.registered.clone(), writer.pauses), (5, vec![5], 0));
                let again = active_memtable(&mut writer, &clock).unwrap();
                assert_eq!((again.slab(), writer.registered.len()), (pin.slab(), 1), "one memtable, registered once");
            },
            1,
        );
    }

    /// A writer without a free slab waits while no flush fails; once one fails it reports that
    /// index only after STUCK_REPORT_AFTER, not before.
    #[test]
    fn a_stuck_index_is_reported_after_the_limit_and_only_when_flushes_fail() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(1, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                occupied(slabs, 2);
                let mut writer = Writer::new(slabs, &clock, &|_, _| {});
                assert_eq!(active_memtable(&mut writer, &clock).err(), Some(1));
                assert_eq!(writer.pauses, 501, "reported at the first look past 5 s");
                assert!(writer.registered.is_empty());
            },
            1,
        );
    }

    /// While the slab's flush does not fail, the writer outwaits the limit and gets the slab once
    /// the service frees it.
    #[test]
    fn a_busy_service_is_waited_for() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(1, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                occupied(slabs, 0);
                let service = |slabs: Slabs<'_, TestRegion, TestLock>, pauses: usize| {
                    if pauses == 700 {
                        let memtable = slabs.begin_flush(0, 1, 77).unwrap();
                        slabs.finish_flush(&memtable);
                        slabs.free_unread();
                    }
                };
                let mut writer = Writer::new(slabs, &clock, &service);
                let pin = active_memtable(&mut writer, &clock).unwrap();
                assert_eq!((writer.pauses, pin.segment_id()), (700, 1));
                assert_eq!(slabs.info(0).state, SlabState::Active);
            },
            1,
        );
    }

    /// Recovery's wait ends when enough slabs are free, when nothing is left to flush, or at the
    /// limit.
    #[test]
    fn the_wait_for_free_slabs_ends_when_enough_are_free_or_at_the_limit() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(2, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let mut pauses = 0;
                wait_for_free_slabs(&clock, 2, || slabs.counts(), || pauses += 1);
                assert_eq!(pauses, 0, "two free slabs");
                occupied(slabs, 0);
                let started = clock.now();
                wait_for_free_slabs(&clock, 2, || slabs.counts(), || clock.advance(Duration::from_millis(10)));
                assert_eq!(clock.now().duration_since(started), FREE_SLABS_WAIT + Duration::from_millis(10));
                wait_for_free_slabs(&clock, 1, || slabs.counts(), || panic!("one slab is free"));
                let memtable = slabs.begin_flush(0, 1, 77).unwrap();
                slabs.finish_flush(&memtable);
                slabs.free_unread();
                wait_for_free_slabs(&clock, 3, || slabs.counts(), || panic!("nothing is left to flush"));
            },
            1,
        );
    }

    /// Fills memtables of `writer`'s index (capacity 4) until `sealed` of them are sealed.
    fn fill_and_seal(writer: &mut Writer<'_>, clock: &ManualClock, sealed: usize) {
        let slabs = writer.slabs;
        for _ in 0..sealed {
            let pin = active_memtable(writer, clock).expect("a slab");
            for tid in 0..4 {
                assert_eq!(pin.insert(tid, &[0.0, 0.0]), Insert::Done);
            }
            let (slab, id) = (pin.slab(), pin.segment_id());
            drop(pin);
            assert!(slabs.seal(writer.index, slab, id));
        }
    }

    /// At the backlog limit a writer waits although slabs are free, and allocates once the service
    /// has flushed one of its index's memtables; a writer of another index is not held up.
    #[test]
    fn a_backlogged_index_waits_for_its_flushes_and_others_do_not() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(4, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let service = |slabs: Slabs<'_, TestRegion, TestLock>, pauses: usize| {
                    if pauses == 30 {
                        let memtable = slabs.begin_flush(0, 0, 1).unwrap();
                        slabs.finish_flush(&memtable);
                    }
                };
                let mut writer = Writer { max_waiting: 2, ..Writer::new(slabs, &clock, &service) };
                fill_and_seal(&mut writer, &clock, 2);
                assert_eq!(slabs.flush_backlog(0).memtables, 2);
                assert_eq!(writer.pauses, 0, "no wait below the limit");
                let mut other =
                    Writer { index: 1, max_waiting: 2, next_id: 100, ..Writer::new(slabs, &clock, &|_, _| {}) };
                let pin = active_memtable(&mut other, &clock).unwrap();
                assert_eq!((other.pauses, pin.segment_id()), (0, 101), "another index allocates at once");
                drop(pin);
                let pin = active_memtable(&mut writer, &clock).unwrap();
                assert_eq!(writer.pauses, 30, "waited for the flush although a slab was free");
                assert_eq!((pin.segment_id(), slabs.flush_backlog(0).memtables), (3, 1));
            },
            1,
        );
    }

    /// A backlog whose flush fails stalls no longer: the writer takes a free slab (its rows stay
    /// searchable in memory), and once memory runs out the failing index is reported as before.
    #[test]
    fn a_failing_flush_ends_the_stall() {
        shuttle::check_random(
            || {
                let (region, lock, clock) = (TestRegion::new(2, 4, 2, 2), TestLock::default(), ManualClock::default());
                let slabs = Slabs::new(&region, &lock);
                let service = |slabs: Slabs<'_, TestRegion, TestLock>, pauses: usize| {
                    if pauses == 40 {
                        slabs.memtable(0).header().record_flush_failures(1);
                    }
                };
                let mut writer = Writer { max_waiting: 1, ..Writer::new(slabs, &clock, &service) };
                fill_and_seal(&mut writer, &clock, 1);
                fill_and_seal(&mut writer, &clock, 1);
                assert_eq!(writer.pauses, 40, "stalled until the flush failed, then took the free slab");
                assert_eq!(active_memtable(&mut writer, &clock).err(), Some(0), "no slab left: reported");
                assert_eq!(writer.pauses, 40 + 501);
            },
            1,
        );
    }

    #[test]
    fn a_stuck_index_is_described_with_its_last_error() {
        assert_eq!(describe_stuck(Some("items_idx"), 16384, None), "\"items_idx\" (OID 16384)");
        assert_eq!(
            describe_stuck(None, 7, Some((3, "No space left on device"))),
            "\"in another database\" (OID 7) after 3 attempts: No space left on device"
        );
        let failing = |state, failures| SlabInfo {
            slab: 0,
            state,
            index: 9,
            segment_id: 1,
            capacity: 4,
            filled: 0,
            written: 0,
            readers: 0,
            writers: 0,
            flush_failures: failures,
        };
        assert_eq!(failing_flush(&[failing(SlabState::Sealed, 0), failing(SlabState::Flushing, 1)]), Some(9));
        assert_eq!(failing_flush(&[failing(SlabState::Flushed, 3)]), None, "flushed at last");
    }

    #[test]
    fn a_writer_short_of_slabs_evicts_the_fullest_other_active_memtable() {
        let slab = |slab, state, index, filled| SlabInfo {
            slab,
            state,
            index,
            segment_id: 1,
            capacity: 100,
            filled,
            written: filled,
            readers: 0,
            writers: 0,
            flush_failures: 0,
        };
        let all_active =
            [slab(0, SlabState::Active, 1, 5), slab(1, SlabState::Active, 2, 50), slab(2, SlabState::Active, 3, 7)];
        assert_eq!(memtable_to_evict(&all_active, 1).map(|s| s.slab), Some(1));
        assert_eq!(memtable_to_evict(&all_active, 2).map(|s| s.slab), Some(2), "never its own index's");
        for pending in
            [SlabState::Free, SlabState::Sealed, SlabState::Flushing, SlabState::Flushed, SlabState::Allocating]
        {
            let mut infos = all_active.to_vec();
            infos.push(slab(3, pending, 4, 0));
            assert_eq!(memtable_to_evict(&infos, 9), None, "{pending:?} frees or takes a slab by itself");
        }
        assert_eq!(memtable_to_evict(&[slab(0, SlabState::Active, 1, 5)], 1), None, "only its own");
    }
}
