//! [`TextSegment`]: an immutable, memory-mappable text segment (byte layout in the crate docs),
//! and its writer ([`build_segment`], [`merge_segments`], [`BuiltTextSegment`]).

mod cursor;
mod dictionary;
pub mod layout;
mod write;

use fst::{IntoStreamer, Streamer};
use self_cell::self_cell;
use strata_engine::format::{SegmentBytes, SegmentFile};

pub use cursor::SegmentPostings;
pub use write::{build_segment, merge_segments, BuiltTextSegment};

use crate::error::TextError;
use crate::postings::BLOCK_LEN;
use crate::stats::CollectionStats;
use layout::{
    Meta, Skip, TermInfo, SKIP_BYTES, TAG_IDS, TAG_LENS, TAG_META, TAG_POSTINGS, TAG_SKIPS, TAG_TERMINFO, TAG_TERMS,
    TERMINFO_BYTES,
};

/// Borrowed views of a segment's sections, made once on open.
struct Views<'a> {
    meta: Meta,
    ids: &'a [u64],
    lens: &'a [u32],
    dict: fst::Map<&'a [u8]>,
    infos: &'a [u8],
    skips: &'a [u8],
    postings: &'a [u8],
}

self_cell!(
    struct SegmentCell {
        owner: SegmentFile,
        #[covariant]
        dependent: Views,
    }
);

/// An opened, validated text segment; searchable from many threads at once.
///
/// Guarantees: opening checks the container (and section checksums when the file was opened
/// with them), then every structural fact queries rely on — section sizes against META, the
/// term dictionary, each term's record, skip entries and block byte ranges, the document
/// lengths' sum — reading metadata only, never decoding a posting block. Row `i` carries id
/// [`TextSegment::ids`]`[i]`.
pub struct TextSegment {
    cell: SegmentCell,
}

impl std::fmt::Debug for TextSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextSegment").field("meta", &self.cell.borrow_dependent().meta).finish_non_exhaustive()
    }
}

fn cast<'a, T: bytemuck::Pod>(bytes: &'a [u8], what: &str, count: usize) -> Result<&'a [T], TextError> {
    let items: &[T] = bytemuck::try_cast_slice(bytes).map_err(|e| TextError::Corrupt(format!("{what}: {e}")))?;
    if items.len() != count {
        return Err(TextError::Corrupt(format!("{what} holds {} entries, expected {count}", items.len())));
    }
    Ok(items)
}

fn open_views(file: &SegmentFile) -> Result<Views<'_>, TextError> {
    let meta = Meta::decode(file.require(TAG_META)?)?;
    let rows = meta.rows as usize;
    let ids = cast::<u64>(file.require(TAG_IDS)?, "IDS", rows)?;
    let lens = cast::<u32>(file.require(TAG_LENS)?, "LENS", rows)?;
    if lens.iter().map(|&l| u64::from(l)).sum::<u64>() != meta.total_len {
        return Err(TextError::Corrupt("document lengths do not add up to META's total".into()));
    }
    let dict = fst::Map::new(file.require(TAG_TERMS)?)?;
    // The fst crate may panic on a damaged automaton, so its own CRC-32C is checked on every
    // open, even by readers that skip the container's section checksums (cost: one pass over
    // the dictionary, which is small next to the postings), and every node is decoded once
    // before anything else walks it (`dictionary`: damage whose checksum was made to match).
    dict.as_fst().verify()?;
    dictionary::validate_automaton(dict.as_fst())?;
    let terms = usize::try_from(meta.terms).map_err(|_| TextError::Corrupt("term count".into()))?;
    if dict.len() != terms {
        return Err(TextError::Corrupt(format!("dictionary holds {} terms, META {terms}", dict.len())));
    }
    let infos = file.require(TAG_TERMINFO)?;
    let skips = file.require(TAG_SKIPS)?;
    let postings = file.require(TAG_POSTINGS)?;
    let skip_bytes = meta.blocks.checked_mul(SKIP_BYTES as u64);
    if Some(infos.len()) != terms.checked_mul(TERMINFO_BYTES) || skip_bytes != Some(skips.len() as u64) {
        return Err(TextError::Corrupt("TERMINFO or SKIPS size disagrees with META".into()));
    }
    let views = Views { meta, ids, lens, dict, infos, skips, postings };
    validate_terms(&views)?;
    Ok(views)
}

/// Checks every term record and skip entry: contiguous, in range, sizes consistent with the
/// packed widths; so that cursors index without panicking.
fn validate_terms(v: &Views<'_>) -> Result<(), TextError> {
    let corrupt = |t: usize, what: &str| Err(TextError::Corrupt(format!("term {t}: {what}")));
    let (mut block, mut offset, mut postings) = (0usize, 0u64, 0u64);
    for t in 0..v.meta.terms as usize {
        let info = TermInfo::read(&v.infos[t * TERMINFO_BYTES..(t + 1) * TERMINFO_BYTES]);
        if info.df == 0 || info.df > v.meta.rows || info.first_block as usize != block || info.offset != offset {
            return corrupt(t, "record out of sequence");
        }
        let end = info.offset.checked_add(info.len).filter(|&e| e <= v.postings.len() as u64);
        let Some(end) = end else { return corrupt(t, "postings past the section's end") };
        let blocks = info.blocks();
        if (block + blocks) * SKIP_BYTES > v.skips.len() {
            return corrupt(t, "skip entries past the section's end");
        }
        let mut previous: Option<Skip> = None;
        for b in 0..blocks {
            let skip = Skip::read(&v.skips[(block + b) * SKIP_BYTES..(block + b + 1) * SKIP_BYTES]);
            let next = if b + 1 < blocks {
                u64::from(Skip::read(&v.skips[(block + b + 1) * SKIP_BYTES..]).offset)
            } else {
                info.len
            };
            let size = next.checked_sub(u64::from(skip.offset));
            let full = info.df as usize - b * BLOCK_LEN >= BLOCK_LEN;
            let fits = match size {
                Some(size) if full => {
                    skip.row_bits <= 32 && skip.tf_bits <= 32 && size == 16 * u64::from(skip.row_bits + skip.tf_bits)
                }
                Some(size) => skip.row_bits == 0 && skip.tf_bits == 0 && size > 0,
                None => false,
            };
            let ordered = previous.map_or(skip.offset == 0, |p| p.last_row < skip.last_row);
            let reserved = v.skips[(block + b) * SKIP_BYTES + 11];
            if !fits || !ordered || skip.last_row >= v.meta.rows || !skip.points_valid(reserved) {
                return corrupt(t, &format!("block {b} is inconsistent"));
            }
            previous = Some(skip);
        }
        block += blocks;
        offset = end;
        postings += u64::from(info.df);
    }
    if block as u64 != v.meta.blocks || offset != v.postings.len() as u64 || postings != v.meta.postings {
        return Err(TextError::Corrupt("term records do not cover SKIPS and POSTINGS exactly".into()));
    }
    Ok(())
}

impl TextSegment {
    /// Opens a validated container as a text segment.
    pub fn open(file: SegmentFile) -> Result<Self, TextError> {
        Ok(Self { cell: SegmentCell::try_new(file, open_views)? })
    }

    /// Copies `bytes` (a whole segment file) and opens them, verifying every section checksum:
    /// any flipped byte is reported as a [`TextError`], never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TextError> {
        Self::open(SegmentFile::from_bytes(SegmentBytes::copy_from(bytes), true)?)
    }

    fn views(&self) -> &Views<'_> {
        self.cell.borrow_dependent()
    }

    /// Rows.
    pub fn rows(&self) -> u32 {
        self.views().meta.rows
    }

    /// The caller's id of every row, in row order.
    pub fn ids(&self) -> &[u64] {
        self.views().ids
    }

    /// The id of `row` (panics when `row ≥ rows()`).
    pub fn id(&self, row: u32) -> u64 {
        self.views().ids[row as usize]
    }

    /// The length `dl` of every row, in row order.
    pub fn doc_lens(&self) -> &[u32] {
        self.views().lens
    }

    /// The length of `row` (panics when `row ≥ rows()`).
    pub fn doc_len(&self, row: u32) -> u32 {
        self.views().lens[row as usize]
    }

    /// Rows and total length, deleted rows included.
    pub fn stats(&self) -> CollectionStats {
        CollectionStats { docs: u64::from(self.rows()), total_len: self.views().meta.total_len }
    }

    /// Distinct lexemes.
    pub fn term_count(&self) -> u64 {
        self.views().meta.terms
    }

    /// The segment file's size in bytes.
    pub fn byte_len(&self) -> usize {
        self.cell.borrow_owner().byte_len()
    }

    /// Rows holding `lexeme`, deleted rows included.
    pub fn df(&self, lexeme: &str) -> u32 {
        self.term_info(lexeme).map_or(0, |i| i.df)
    }

    fn term_info(&self, lexeme: &str) -> Option<TermInfo> {
        let ordinal = self.views().dict.get(lexeme)?;
        (ordinal < self.views().meta.terms).then(|| self.info(ordinal as usize))
    }

    fn info(&self, ordinal: usize) -> TermInfo {
        TermInfo::read(&self.views().infos[ordinal * TERMINFO_BYTES..(ordinal + 1) * TERMINFO_BYTES])
    }

    fn cursor(&self, info: TermInfo) -> SegmentPostings<'_> {
        let v = self.views();
        let skips =
            &v.skips[info.first_block as usize * SKIP_BYTES..(info.first_block as usize + info.blocks()) * SKIP_BYTES];
        let data = &v.postings[info.offset as usize..(info.offset + info.len) as usize];
        SegmentPostings::new(skips, data, v.lens, info.df)
    }

    /// A cursor over `lexeme`'s postings, `None` when no row holds it.
    pub fn postings(&self, lexeme: &str) -> Option<SegmentPostings<'_>> {
        self.term_info(lexeme).map(|info| self.cursor(info))
    }

    /// Every lexeme (bytes, in order) with a cursor over its postings.
    pub fn for_each_term(&self, mut f: impl FnMut(&[u8], SegmentPostings<'_>)) {
        let mut stream = self.views().dict.into_stream();
        while let Some((lexeme, ordinal)) = stream.next() {
            if ordinal < self.views().meta.terms {
                f(lexeme, self.cursor(self.info(ordinal as usize)));
            }
        }
    }
}
