//! Fuzzes the segment decoder: any byte string either fails to open with a typed error or opens
//! into a segment that can be searched without panicking.
//!
//! Run: `cargo install cargo-fuzz && cd crates/engine/fuzz && cargo fuzz run segment_decode`
//! (seed the corpus with files from `$PGDATA/pg_strata/*/` for faster coverage).

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::bitset::RowPredicate;
use strata_engine::segment::{SearchParams, Segment};

fuzz_target!(|data: &[u8]| {
    if let Ok(segment) = Segment::from_bytes(data) {
        let dims = segment.meta().dims as usize;
        let query = vec![0.5f32; dims];
        let results = segment.search(&query, 10, &SearchParams::default(), RowPredicate::default());
        assert!(results.len() <= 10);
    }
});
