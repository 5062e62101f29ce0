//! Fuzzes the segment decoder: any byte string either fails to open with a typed error or opens
//! into a segment that can be searched without panicking.
//!
//! Two inputs per run: the raw bytes as a file, and the bytes cut into sections under the tags a
//! real segment uses and wrapped in a valid container (correct checksums), so that the META,
//! IDS, VECTORS and every kind's section validators see arbitrary contents too.
//!
//! The structured form: one selector byte (the kind: `selector % 4` = flat, quantized flat, IVF,
//! HNSW), the 64-byte META section, then for IDS, VECTORS and each of the kind's tags in turn a
//! little-endian `u16` length and that many bytes (`0xFFFF`: the section is left out, as VECTORS
//! is in an IVF segment without vectors). The seeds in `seeds/segment_decode` hold every kind in
//! both forms (`cargo xtask fuzz seeds` writes them).
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none segment_decode seeds/segment_decode`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::bitset::RowPredicate;
use strata_engine::format::encode;
use strata_engine::quant::pool_size;
use strata_engine::segment::{SearchParams, Segment, TAG_IDS, TAG_META, TAG_VECTORS};

const KIND_TAGS: [&[u32]; 4] = [
    &[],
    &[0x5146_0001, 0x5146_0002, 0x5146_0003, 0x5146_0004],
    &[0x4956_0001, 0x4956_0002, 0x4956_0003, 0x4956_0004, 0x4956_0005, 0x4956_0006, 0x4956_0007],
    &[0x484E_0001, 0x484E_0002, 0x484E_0003, 0x484E_0004, 0x484E_0005],
];

/// A section length that leaves the section out of the file.
const OMITTED: u16 = 0xFFFF;

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
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut tags = vec![TAG_META, TAG_IDS, TAG_VECTORS];
    tags.extend_from_slice(KIND_TAGS[usize::from(selector) % KIND_TAGS.len()]);
    let mut sections = Vec::new();
    let mut remaining = rest;
    for (index, &tag) in tags.iter().enumerate() {
        // Section lengths come from the input: two bytes each, the META section 64 bytes.
        let len = if index == 0 {
            64
        } else if remaining.len() >= 2 {
            let n = u16::from_le_bytes([remaining[0], remaining[1]]);
            remaining = &remaining[2..];
            if n == OMITTED {
                continue;
            }
            usize::from(n)
        } else {
            0
        };
        let take = len.min(remaining.len());
        sections.push((tag, &remaining[..take]));
        remaining = &remaining[take..];
    }
    if let Ok(file) = encode(&sections) {
        search(&file);
    }
});
