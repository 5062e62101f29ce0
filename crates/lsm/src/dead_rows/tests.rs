use strata_engine::metric::Metric;
use strata_engine::segment::{IndexKind, SearchParams, Segment};
use strata_engine::store::ElementKind;
use strata_engine::topk::TopK;

use super::*;
use crate::directory::memory::MemoryDirectory;
use crate::manifest::IndexConfig;
use crate::scan::round::search_segment;
use crate::scan::ScanQuery;
use crate::segment_type::{BuildWork, SegmentType};
use crate::vacuum::vacuum_segments;
use crate::vector::{OpenVectorSegment, VectorFiles, VectorRows, VectorSegmentSet};

fn vector_of(tid: u64) -> [f32; 2] {
    [(tid % 17) as f32 + tid as f32 / 1000.0, (tid % 5) as f32]
}

fn config(kind: IndexKind) -> IndexConfig {
    IndexConfig {
        dims: 2,
        metric: Metric::L2,
        element: ElementKind::F32,
        kind: kind.into(),
        memtable_rows: 8,
        rerank_from_heap: false,
        filters: strata_engine::filter::FilterSchema::default(),
    }
}

/// An index of `kind` with one segment per list of TIDs.
fn index(kind: IndexKind, segments: &[Vec<u64>]) -> VectorFiles {
    let config = config(kind);
    let files = VectorFiles::new(Arc::new(MemoryDirectory::new()));
    let manifest = files.create(config).unwrap();
    for (n, tids) in segments.iter().enumerate() {
        let rows = VectorRows {
            ids: tids.clone(),
            vectors: tids.iter().flat_map(|&t| vector_of(t)).collect::<Vec<f32>>().into(),
            filters: Vec::new(),
        };
        let built = Segment::build(&files, &config, rows, &BuildWork::new(1)).unwrap();
        files.publish_segment(&built, manifest.next_id + n as u64, Vec::new(), 0, |_| {}).unwrap();
    }
    files
}

fn scan_query(values: [f32; 2]) -> ScanQuery {
    ScanQuery::l2_for_tests(&values)
}

/// One segment's `depth` nearest rows as TIDs, with their origins.
fn search(open: &Arc<OpenVectorSegment>, query: &ScanQuery, depth: usize) -> (Vec<u64>, RowOrigins<Segment>) {
    let (rows, _) = search_segment(open, query, depth, &SearchParams::default(), 0.0);
    let (list, origins) = RowOrigins::from_rows(open, rows, |row| open.segment.id(row));
    (list.iter().map(|n| n.row).collect(), origins)
}

/// The `depth` nearest of `tids` by exact distance.
fn nearest(tids: impl IntoIterator<Item = u64>, query: &ScanQuery, depth: usize) -> Vec<u64> {
    let mut top = TopK::new(depth);
    for tid in tids {
        top.push(Neighbor::new(tid, query.prepared.distance_f32(&vector_of(tid))));
    }
    top.into_sorted().into_iter().map(|n| n.row).collect()
}

/// Rows reported dead by a scan are skipped by every later search of that open segment, and
/// only they: the flat segment's lists stay the exact top-k of the other rows.
#[test]
fn rows_reported_dead_are_skipped_by_later_searches_and_only_they() {
    let files = index(IndexKind::Flat, &[(100..160).collect()]);
    let set = VectorSegmentSet::open(&files, None).unwrap();
    let open = &set.segments[0];
    let query = scan_query([4.0, 1.0]);
    let (first, origins) = search(open, &query, 10);
    assert_eq!(first, nearest(100..160, &query, 10));

    let mut reports = DeadRowReports::new();
    reports.record([origins]);
    reports.report_dead(first[0]);
    reports.report_dead(first[3]);
    reports.report_dead(first[3]);
    reports.report_dead(7); // not listed by any segment (a memtable row): left alone
    assert_eq!(reports.apply(), 2);
    assert_eq!(open.hints.count(open.deleted.as_ref()), 2);
    assert_eq!(open.live_rows(), 60, "hints do not change VACUUM's counts");

    let (second, origins) = search(open, &query, 10);
    let dead = [first[0], first[3]];
    assert_eq!(second, nearest((100..160).filter(|t| !dead.contains(t)), &query, 10));
    // Applied reports are forgotten; reporting hinted rows again hints nothing new.
    assert_eq!(reports.apply(), 0);
    reports.record([origins]);
    reports.report_dead(second[1]);
    let mut again = DeadRowReports::new();
    let (_, origins) = search(open, &query, 20);
    again.record([origins]);
    again.report_dead(first[0]);
    assert_eq!(again.apply(), 0, "a hinted row is never listed again");
    assert_eq!(reports.apply(), 1);
    assert_eq!(open.hints.count(open.deleted.as_ref()), 3);
}

/// Hints belong to the open segment: a set reopened at a new manifest generation keeps the
/// unchanged segment (and its hints); a segment whose deletion bitmap VACUUM changed is reopened
/// without hints, skipping exactly what VACUUM deleted.
#[test]
fn hints_stay_with_their_open_segment() {
    let files = index(IndexKind::Flat, &[(0..40).collect(), (40..80).collect()]);
    let set = VectorSegmentSet::open(&files, None).unwrap();
    let query = scan_query([3.0, 2.0]);
    let mut reports = DeadRowReports::new();
    for open in &set.segments {
        let (list, origins) = search(open, &query, 3);
        reports.record([origins]);
        reports.report_dead(list[0]);
    }
    assert_eq!(reports.apply(), 2);
    let hinted: Vec<u64> = set
        .segments
        .iter()
        .map(|o| o.segment.id(o.hints.skipped(None).bitset().unwrap().iter().next().unwrap()))
        .collect();

    // VACUUM deletes one row of the first segment only.
    let vacuumed_tid = nearest(0..40, &query, 5)[4];
    vacuum_segments(&files, &set, &mut |tid| tid == vacuumed_tid, || 0, |_| {}).unwrap();
    let next = VectorSegmentSet::open(&files, Some(&set)).unwrap();
    assert!(Arc::ptr_eq(&next.segments[1], &set.segments[1]), "an unchanged segment is reused");
    assert_eq!(next.segments[1].hints.count(next.segments[1].deleted.as_ref()), 1);
    let (second, _) = search(&next.segments[1], &query, 5);
    assert_eq!(second, nearest((40..80).filter(|&t| t != hinted[1]), &query, 5));

    let reopened = &next.segments[0];
    assert_eq!(reopened.hints.count(reopened.deleted.as_ref()), 0);
    let (first, _) = search(reopened, &query, 5);
    assert_eq!(first, nearest((0..40).filter(|&t| t != vacuumed_tid), &query, 5));
    assert!(first.contains(&hinted[0]), "the reopened segment has no hints");
}

/// Graph and quantized segments skip hinted rows too, and a search that took its skipped set
/// before a hint keeps it.
#[test]
fn every_kind_skips_hinted_rows() {
    let tids: Vec<u64> = (1000..1400).collect();
    for kind in [IndexKind::Hnsw { m: 8, ef_construction: 32 }, IndexKind::Ivf { lists: 4, bits: 4 }] {
        let files = index(kind, std::slice::from_ref(&tids));
        let set = VectorSegmentSet::open(&files, None).unwrap();
        let open = &set.segments[0];
        let query = scan_query([9.0, 3.0]);
        let (first, origins) = search(open, &query, 10);
        let taken = open.skipped_rows();
        assert!(taken.bitset().is_none());
        let mut reports = DeadRowReports::new();
        reports.record([origins]);
        for &tid in &first[..5] {
            reports.report_dead(tid);
        }
        assert_eq!(reports.apply(), 5, "{kind:?}");
        assert!(taken.bitset().is_none(), "a search keeps the set it took");
        let (second, _) = search(open, &query, 10);
        assert!(second.iter().all(|t| !first[..5].contains(t)), "{kind:?}: {second:?}");
        assert_eq!(second.len(), 10);
    }
}

/// Hints ignore rows past the segment's end.
#[test]
fn rows_out_of_range_are_ignored() {
    let hints = DeadRowHints::default();
    assert_eq!(hints.hint(None, 10, &[3, 10, 11, 3]), 1);
    assert_eq!(hints.count(None), 1);
    let mut deleted = Bitset::new(10);
    deleted.insert(4);
    let with_deleted = DeadRowHints::default();
    assert_eq!(with_deleted.hint(Some(&deleted), 10, &[4, 5]), 1, "a deleted row is skipped already");
    assert_eq!(with_deleted.count(Some(&deleted)), 1);
    let skipped = with_deleted.skipped(Some(&deleted));
    let rows: Vec<usize> = skipped.bitset().unwrap().iter().collect();
    assert_eq!(rows, vec![4, 5]);
}

/// The dead fraction is what the executor found among the rows a segment returned (each row
/// once per scan, however many rounds listed it), trusted in full after enough returns, and it
/// grows candidate lists by `1 / (1 − fraction)`, at most fivefold.
#[test]
fn the_dead_fraction_follows_what_scans_returned() {
    let files = index(IndexKind::Flat, &[(0..100).collect()]);
    let set = VectorSegmentSet::open(&files, None).unwrap();
    let open = &set.segments[0];
    assert!(open.hints.dead_fraction().abs() < f64::EPSILON);
    for round in 0..40 {
        let query = scan_query([(round % 17) as f32, (round % 5) as f32]);
        let mut reports = DeadRowReports::new();
        // Two rounds list the same rows: counted once.
        for _ in 0..2 {
            let (_, origins) = search(open, &query, 8);
            reports.record([origins]);
        }
        let (list, _) = search(open, &query, 4);
        for (i, &tid) in list.iter().enumerate() {
            if i == 0 {
                reports.report_dead(tid);
            } else {
                reports.report_returned(tid);
            }
        }
        reports.report_returned(10_000); // a memtable row: no segment's
        reports.apply();
    }
    // One in four returned rows dead, at full confidence after 160 returns (decayed: ~110).
    let fraction = open.hints.dead_fraction();
    assert!((fraction - 0.25).abs() < 0.01, "{fraction}");
    assert_eq!(live_ef(100, fraction), 134);
    assert_eq!(live_ef(100, 0.0), 100);
    assert_eq!(live_ef(100, 0.99), 500, "at most fivefold");
    assert_eq!(live_ef(100, f64::NAN), 100);

    let fresh = DeadRowHints::default();
    fresh.observe(5, 5);
    assert!((fresh.dead_fraction() - 0.1).abs() < 1e-9, "5 returns count a tenth");
    fresh.observe(0, 3);
    assert!((fresh.dead_fraction() - 0.1).abs() < 1e-9, "no returns, no observation");
}
