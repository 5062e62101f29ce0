//! Fuzzes the text segment decoder (strata-text): any byte string either fails to open with a
//! typed error or opens into a segment whose every posting list iterates (rows of the segment, in
//! increasing order, at most the list's length: a damaged block ends its cursor), and which
//! answers a BM25 query with at most `k` hits, best first, each a row of the segment with a
//! finite score.
//!
//! Two inputs per run: the raw bytes as a file, and the bytes cut into the seven sections of a
//! text segment (META, IDS, LENS, TERMS, TERMINFO, SKIPS, POSTINGS, in that order: each a
//! little-endian `u16` length, `0xFFFF` = left out, then that many bytes; a short input gives
//! short sections) wrapped in a valid container (correct checksums), so that the section
//! validators see arbitrary contents too. The seeds in `seeds/text_segment` hold real segments
//! in both forms (`cargo xtask fuzz seeds` writes them).
//!
//! Smoke run (stable toolchain, no cargo-fuzz): `cargo xtask fuzz --seconds 50`. With cargo-fuzz:
//! `cd crates/engine/fuzz && cargo fuzz run -s none text_segment seeds/text_segment`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_text::postings::{Postings, END};
use strata_text::segment::layout::{TAG_IDS, TAG_LENS, TAG_META, TAG_POSTINGS, TAG_SKIPS, TAG_TERMINFO, TAG_TERMS};
use strata_text::{search, search_exhaustive, Bm25Params, Bm25Query, Source, TextSegment};

/// The sections of the structured form, in order.
const TAGS: [u32; 7] = [TAG_META, TAG_IDS, TAG_LENS, TAG_TERMS, TAG_TERMINFO, TAG_SKIPS, TAG_POSTINGS];

/// A section length that leaves the section out.
const OMITTED: u16 = 0xFFFF;

/// The segment file the structured input describes (see the module docs).
fn structured(data: &[u8]) -> Option<Vec<u8>> {
    let mut sections = Vec::new();
    let mut rest = data;
    for tag in TAGS {
        let len = if rest.len() >= 2 {
            let n = u16::from_le_bytes([rest[0], rest[1]]);
            rest = &rest[2..];
            if n == OMITTED {
                continue;
            }
            usize::from(n)
        } else {
            0
        };
        let take = len.min(rest.len());
        sections.push((tag, &rest[..take]));
        rest = &rest[take..];
    }
    strata_engine::format::encode(&sections).ok()
}

fn check(bytes: &[u8]) {
    let Ok(segment) = TextSegment::from_bytes(bytes) else { return };
    let rows = segment.rows();
    assert_eq!(segment.ids().len(), rows as usize);
    assert_eq!(segment.doc_lens().len(), rows as usize);
    let mut lexemes = Vec::new();
    segment.for_each_term(|lexeme, mut postings| {
        let (len, mut seen, mut previous) = (postings.len(), 0u32, None);
        let mut row = postings.row();
        while row != END {
            assert!(row < rows, "posting of row {row} in a segment of {rows}");
            assert!(previous.is_none_or(|p| row > p), "postings out of order");
            previous = Some(row);
            seen += 1;
            row = postings.next();
        }
        // A damaged block ends its cursor early (blocks are decoded as they are reached).
        assert!(seen <= len, "a list of {len} postings iterated {seen}");
        if lexemes.len() < 4 {
            lexemes.push(String::from_utf8_lossy(lexeme).into_owned());
        }
    });
    let source = Source::segment(&segment, None).expect("no deletion bitmap");
    let query = Bm25Query::prepare(&[source], &lexemes, Bm25Params::default());
    for result in [search(&[source], &query, 10), search_exhaustive(&[source], &query, 10)] {
        assert!(result.hits.len() <= 10);
        for pair in result.hits.windows(2) {
            assert!(pair[0].score >= pair[1].score, "hits not best first");
        }
        for hit in &result.hits {
            assert!(hit.row < rows && hit.id == segment.id(hit.row) && hit.score.is_finite());
        }
    }
}

/// Lets panics raised inside the `fst` crate unwind. A text segment's dictionary is decoded node by
/// node under `catch_unwind` when the segment opens (`strata_text::segment`'s dictionary check),
/// because `fst` panics on some damaged automata whose CRC-32C was made to match, which this
/// target finds; libFuzzer's hook would abort on those panics before the check catches them.
/// Every other panic still aborts, and one from `fst` that no check catches aborts in
/// libFuzzer's own `catch_unwind` around each input.
fn let_fst_panics_unwind() {
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.location().is_some_and(|at| at.file().contains("/fst-0.4")) {
            abort(info);
        }
    }));
}

fuzz_target!(init: let_fst_panics_unwind(), |data: &[u8]| {
    check(data);
    if let Some(file) = structured(data) {
        check(&file);
    }
});
