//! Fuzzes the manifest parser (strata-lsm): any byte string either fails with a typed error or
//! parses into a manifest that passed validation (known format, valid configuration, distinct
//! segment ids below `next_id`, no segment with more deleted rows than rows, row counts whose sum
//! fits in `u64`) and that writes and reads back to the same manifest.
//!
//! The seeds in `seeds/manifest` are manifests of every index kind (`cargo xtask fuzz seeds`).
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none manifest seeds/manifest`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_lsm::manifest::{IndexConfig, Manifest};

fuzz_target!(|data: &[u8]| {
    let Ok(manifest) = Manifest::<IndexConfig>::from_json(data) else { return };
    let mut ids: Vec<u64> = manifest.segments.iter().map(|s| s.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), manifest.segments.len(), "duplicate segment ids passed validation");
    for segment in &manifest.segments {
        assert!(segment.id < manifest.next_id && segment.deleted <= segment.rows, "{segment:?} passed validation");
    }
    let total = manifest.segments.iter().try_fold(0u64, |sum, s| sum.checked_add(s.rows));
    assert!(total.is_some(), "row counts that overflow passed validation");
    assert!(manifest.live_rows() <= total.unwrap_or(u64::MAX), "more live rows than rows");
    let written = manifest.to_json();
    let again = Manifest::<IndexConfig>::from_json(&written).expect("a written manifest reads back");
    assert_eq!(again, manifest, "the manifest changed through to_json and from_json");
});
