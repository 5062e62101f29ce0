//! The structured fuzz-input form of a segment file: the sections a real segment uses, each with
//! a length the input chooses, so that a fuzzer that mutates the form feeds arbitrary contents to
//! the META, IDS, VECTORS and every kind's section validators behind a valid container (correct
//! checksums), instead of stopping at the container checks as raw file bytes mostly do.
//!
//! Layout:
//!
//! ```text
//! 1 byte      selector: the kind, selector % 4 = flat, quantized flat, IVF, HNSW (KIND_TAGS)
//! 64 bytes    the META section
//! then, for IDS, VECTORS and each of the kind's section tags in KIND_TAGS order:
//!   u16 (LE)  length; OMITTED (0xFFFF) = the section is left out of the file
//!   length    the section's bytes
//! ```
//!
//! [`decode`] is what the `segment_decode` fuzz target runs on every input; [`encode`] writes a
//! built segment in this form (the seeds under `crates/engine/fuzz/seeds`, written by
//! `cargo xtask fuzz seeds`). Changing the layout or [`KIND_TAGS`] invalidates those seeds.

use thiserror::Error;

use super::meta::META_BYTES;
use super::{BuiltSegment, IndexKind, TAG_IDS, TAG_META, TAG_VECTORS};
use crate::hnsw::{
    TAG_CODES, TAG_CODE_NORMS, TAG_CODE_RANGES, TAG_HEADER, TAG_LAYER0, TAG_LEVELS, TAG_UPPER, TAG_UPPER_OFFSETS,
};
use crate::ivf::{
    TAG_IVF_BIT_CENTROIDS, TAG_IVF_BIT_HEADER, TAG_IVF_CENTER, TAG_IVF_CENTROIDS, TAG_IVF_CODES, TAG_IVF_ERRORS,
    TAG_IVF_FACTORS, TAG_IVF_HEADER, TAG_IVF_IDS, TAG_IVF_OFFSETS,
};
use crate::quant::{TAG_QFLAT_CENTER, TAG_QFLAT_CODES, TAG_QFLAT_ERRORS, TAG_QFLAT_FACTORS, TAG_QFLAT_HEADER};

/// The kind-specific section tags, in the order the form holds them, by selector: flat,
/// quantized flat, IVF, HNSW (the META `kind` byte's numbering). IVF lists both its quantized
/// sections and those of IVF over packed bit rows (appended last, so that forms written before
/// them decode as before).
pub const KIND_TAGS: [&[u32]; 4] = [
    &[],
    &[TAG_QFLAT_HEADER, TAG_QFLAT_CENTER, TAG_QFLAT_FACTORS, TAG_QFLAT_CODES, TAG_QFLAT_ERRORS],
    &[
        TAG_IVF_HEADER,
        TAG_IVF_CENTER,
        TAG_IVF_CENTROIDS,
        TAG_IVF_OFFSETS,
        TAG_IVF_IDS,
        TAG_IVF_FACTORS,
        TAG_IVF_CODES,
        TAG_IVF_ERRORS,
        TAG_IVF_BIT_HEADER,
        TAG_IVF_BIT_CENTROIDS,
    ],
    &[TAG_HEADER, TAG_LEVELS, TAG_LAYER0, TAG_UPPER_OFFSETS, TAG_UPPER, TAG_CODE_RANGES, TAG_CODES, TAG_CODE_NORMS],
];

/// A section length that leaves the section out of the file.
pub const OMITTED: u16 = 0xFFFF;

/// The selector byte [`encode`] writes for `kind` (its index in [`KIND_TAGS`]).
pub fn selector(kind: IndexKind) -> u8 {
    kind.code() as u8
}

/// Why a segment has no structured form.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A section of `len` bytes does not fit a `u16` length other than [`OMITTED`].
    #[error("section {tag:#x} is {len} bytes, too long for the structured form (at most 65534)")]
    TooLong {
        /// The section's tag.
        tag: u32,
        /// Its length in bytes.
        len: usize,
    },
    /// The segment has a section that its kind's [`KIND_TAGS`] entry does not list.
    #[error("section {0:#x} is not in KIND_TAGS for the segment's kind")]
    Unlisted(u32),
}

/// Writes `segment` in the structured form: its kind's selector, its META section, then IDS,
/// VECTORS and its kind's sections in [`KIND_TAGS`] order, each absent one as [`OMITTED`].
///
/// Guarantees: [`decode`] of the result is a segment file with exactly `segment`'s sections
/// (same tags, same bytes; in the form's order, which need not be
/// [`BuiltSegment::to_bytes`]'s), so it opens wherever `segment.to_bytes()` does. Fails, rather
/// than writing a form that decodes differently, when a section is 65535 bytes or longer or is
/// not listed for the kind.
pub fn encode(segment: &BuiltSegment) -> Result<Vec<u8>, EncodeError> {
    let selector = selector(segment.meta().kind);
    let tags: Vec<u32> =
        [TAG_IDS, TAG_VECTORS].into_iter().chain(KIND_TAGS[usize::from(selector)].iter().copied()).collect();
    let sections = segment.sections();
    if let Some(&(tag, _)) = sections.iter().find(|(tag, _)| *tag != TAG_META && !tags.contains(tag)) {
        return Err(EncodeError::Unlisted(tag));
    }
    let section = |tag: u32| sections.iter().find(|(t, _)| *t == tag).map(|(_, bytes)| bytes.as_ref());
    let mut out = vec![selector];
    out.extend_from_slice(&segment.meta().encode());
    for tag in tags {
        match section(tag) {
            Some(bytes) => {
                let len = u16::try_from(bytes.len())
                    .ok()
                    .filter(|&len| len != OMITTED)
                    .ok_or(EncodeError::TooLong { tag, len: bytes.len() })?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(bytes);
            }
            None => out.extend_from_slice(&OMITTED.to_le_bytes()),
        }
    }
    Ok(out)
}

/// The segment file that the structured input `data` describes, wrapped by
/// [`crate::format::encode`] (valid header, table and checksums); `None` when `data` is empty or
/// the container cannot be encoded.
///
/// Total on arbitrary bytes and never panics: the selector is taken modulo 4; a short input
/// gives short sections — the META section takes up to 64 of the remaining bytes, a length
/// reaching past the end takes what is left, and once fewer than two bytes remain every further
/// section is present and empty. Sections keep the form's order (META, IDS, VECTORS, then
/// [`KIND_TAGS`]). The file itself is not validated: opening it is the decoder under test.
pub fn decode(data: &[u8]) -> Option<Vec<u8>> {
    let (&selector, rest) = data.split_first()?;
    let tags = [TAG_META, TAG_IDS, TAG_VECTORS]
        .into_iter()
        .chain(KIND_TAGS[usize::from(selector) % KIND_TAGS.len()].iter().copied());
    let mut sections = Vec::new();
    let mut remaining = rest;
    for (index, tag) in tags.enumerate() {
        let len = if index == 0 {
            META_BYTES
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
    crate::format::encode(&sections).ok()
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::format::{SegmentBytes, SegmentFile};
    use crate::metric::Metric;
    use crate::segment::{build_segment, BuildOptions, Segment};
    use crate::store::ElementKind;

    fn options(kind: IndexKind, metric: Metric, element: ElementKind, store_vectors: bool) -> BuildOptions {
        BuildOptions {
            kind,
            metric,
            element,
            seed: 7,
            threads: 1,
            store_vectors,
            cancel: crate::cancel::Cancel::default(),
        }
    }

    /// A segment of 40 random vectors of 8 dimensions.
    fn build(kind: IndexKind, metric: Metric, element: ElementKind, store_vectors: bool) -> BuiltSegment {
        let (rows, dims) = (40, 8);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let vectors: Vec<f32> = (0..rows * dims).map(|_| rng.gen_range(-1.0f32..1.0)).collect();
        let ids = (0..rows as u64).map(|row| row * 3 + 1).collect();
        build_segment(&options(kind, metric, element, store_vectors), ids, vectors, dims).unwrap()
    }

    #[test]
    fn encode_then_decode_opens_with_the_same_sections() {
        let segments = [
            build(IndexKind::Flat, Metric::L2, ElementKind::F32, true),
            build(IndexKind::Flat, Metric::Cosine, ElementKind::F16, true),
            build(IndexKind::QuantizedFlat { bits: 2 }, Metric::InnerProduct, ElementKind::F32, true),
            build(IndexKind::Ivf { lists: 3, bits: 4 }, Metric::L2, ElementKind::F32, true),
            build(IndexKind::Ivf { lists: 2, bits: 1 }, Metric::Cosine, ElementKind::F32, false),
            // Random words as packed bit rows (their length words garbage too): IVF over bits.
            build(IndexKind::Ivf { lists: 3, bits: 0 }, Metric::Hamming, ElementKind::Bits, true),
            build(IndexKind::Hnsw { m: 4, ef_construction: 16 }, Metric::L2, ElementKind::F16, true),
        ];
        for built in &segments {
            let kind = built.meta().kind;
            let structured = encode(built).unwrap();
            assert_eq!(structured[0], selector(kind));
            let file = decode(&structured).expect("a valid container");
            let segment = Segment::from_bytes(&file).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(segment.len(), 40);
            assert_eq!(segment.stores_vectors(), built.meta().vectors_stored);
            let parsed = SegmentFile::from_bytes(SegmentBytes::copy_from(&file), true).unwrap();
            let sections = built.sections();
            assert_eq!(parsed.tags().count(), sections.len(), "{kind:?}");
            for (tag, bytes) in &sections {
                assert_eq!(parsed.section(*tag), Some(bytes.as_ref()), "{kind:?}: section {tag:#x}");
            }
        }
    }

    #[test]
    fn encode_refuses_what_decode_would_read_differently() {
        // 2048 f32 vectors of 8 dims: a 65536-byte VECTORS section.
        let options = options(IndexKind::Flat, Metric::L2, ElementKind::F32, true);
        let built = build_segment(&options, (0..2048).collect(), vec![0.5; 2048 * 8], 8).unwrap();
        assert_eq!(encode(&built), Err(EncodeError::TooLong { tag: TAG_VECTORS, len: 65536 }));
    }

    #[test]
    fn decode_is_total_on_short_and_odd_inputs() {
        assert_eq!(decode(&[]), None);
        let sections = |data: &[u8]| {
            let file = SegmentFile::from_bytes(SegmentBytes::copy_from(&decode(data).unwrap()), true).unwrap();
            file.tags().map(|tag| (tag, file.section(tag).unwrap().len())).collect::<Vec<_>>()
        };
        // Selector 4 is flat again; short META, then every section present and empty.
        assert_eq!(sections(&[4, 1, 2, 3]), [(TAG_META, 3), (TAG_IDS, 0), (TAG_VECTORS, 0)]);
        // META, IDS of 8 bytes, VECTORS left out, then a length past the end takes what is left.
        let mut data = vec![1];
        data.extend_from_slice(&[0; META_BYTES]);
        data.extend_from_slice(&8u16.to_le_bytes());
        data.extend_from_slice(&[9; 8]);
        data.extend_from_slice(&OMITTED.to_le_bytes());
        data.extend_from_slice(&100u16.to_le_bytes());
        data.extend_from_slice(&[7; 5]);
        let tags = &KIND_TAGS[1];
        assert_eq!(
            sections(&data),
            [
                (TAG_META, META_BYTES),
                (TAG_IDS, 8),
                (tags[0], 5),
                (tags[1], 0),
                (tags[2], 0),
                (tags[3], 0),
                (tags[4], 0)
            ]
        );
    }
}
