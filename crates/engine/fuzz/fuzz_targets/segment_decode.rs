//! Fuzzes the segment decoder: any byte string either fails to open with a typed error or opens
//! into a segment that can be searched without panicking.
//!
//! Two inputs per run: the raw bytes as a file, and the bytes cut into sections under the tags a
//! real segment uses and wrapped in a valid container (correct checksums), so that the META,
//! IDS, VECTORS and every kind's section validators see arbitrary contents too.
//!
//! The structured form is `strata_engine::segment::structured` (one selector byte for the kind,
//! the 64-byte META section, then a little-endian `u16` length and that many bytes for IDS,
//! VECTORS and each of the kind's sections). The seeds in `seeds/segment_decode` hold every kind
//! in both forms (`cargo xtask fuzz seeds` writes them).
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none segment_decode seeds/segment_decode`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::bitset::RowPredicate;
use strata_engine::quant::pool_size;
use strata_engine::segment::{structured, SearchParams, Segment};

fn search(bytes: &[u8]) {
    if let Ok(segment) = Segment::from_bytes(bytes) {
        let query = vec![0.5f32; segment.meta().dims as usize];
        let k = 10;
        for params in [SearchParams::default(), SearchParams { ef_search: 1, probes: 1, oversample: 1.0 }] {
            let results = segment.search(&query, k, &params, RowPredicate::default());
            // A segment without vectors answers with its reranking pool, `⌈oversample · k⌉`
            // candidates by estimated distance; the others with the `k` nearest.
            let limit = if segment.stores_vectors() { k } else { pool_size(k, params.oversample) };
            assert!(results.len() <= limit, "{} results for k = {k} (at most {limit})", results.len());
            for neighbor in &results {
                assert!(neighbor.row < segment.len() as u64, "row {} of {}", neighbor.row, segment.len());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    search(data);
    if let Some(file) = structured::decode(data) {
        search(&file);
    }
});
