//! Writing text segments: from documents, from a memtable, or by merging segments.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bitpacking::{BitPacker, BitPacker4x};
use strata_engine::bitset::Bitset;

use super::layout::{
    Meta, Skip, TermInfo, TAG_IDS, TAG_LENS, TAG_META, TAG_POSTINGS, TAG_SKIPS, TAG_TERMINFO, TAG_TERMS,
};
use super::TextSegment;
use crate::document::Document;
use crate::error::TextError;
use crate::memtable::Memtable;
use crate::postings::{write_vint, BlockMax, Postings, BLOCK_LEN, END};

/// A built text segment, not yet written: its sections in file order.
///
/// Guarantees: [`BuiltTextSegment::to_bytes`] (or the sections laid out by
/// `strata_engine::format`) opens with [`TextSegment::from_bytes`] as a segment with the same
/// rows, ids, lengths and postings.
#[derive(Debug, Clone)]
pub struct BuiltTextSegment {
    sections: Vec<(u32, Vec<u8>)>,
    rows: u32,
}

impl BuiltTextSegment {
    /// The sections `(tag, bytes)` in file order.
    pub fn sections(&self) -> Vec<(u32, Cow<'_, [u8]>)> {
        self.sections.iter().map(|(tag, bytes)| (*tag, Cow::Borrowed(bytes.as_slice()))).collect()
    }

    /// Rows in the segment.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// The whole segment file (container and sections).
    pub fn to_bytes(&self) -> Vec<u8> {
        let sections: Vec<(u32, &[u8])> = self.sections.iter().map(|(t, b)| (*t, b.as_slice())).collect();
        strata_engine::format::encode(&sections).expect("seven distinct section tags")
    }

    /// Opens the built segment from an in-memory copy of its file.
    pub fn open(&self) -> Result<TextSegment, TextError> {
        TextSegment::from_bytes(&self.to_bytes())
    }
}

/// Encodes a segment of `ids` / `lens` rows whose postings `terms` yields in lexeme byte order,
/// each as `(lexeme, rows ascending, term frequencies)`.
fn encode<'t>(
    ids: &[u64],
    lens: &[u32],
    terms: impl Iterator<Item = (&'t [u8], &'t [u32], &'t [u32])>,
) -> Result<BuiltTextSegment, TextError> {
    let rows = u32::try_from(ids.len()).ok().filter(|&r| r < END).ok_or(TextError::TooLarge("segment rows"))?;
    let packer = BitPacker4x::new();
    let mut dict = fst::MapBuilder::memory();
    let (mut infos, mut skips, mut postings) = (Vec::new(), Vec::new(), Vec::new());
    let (mut term_count, mut posting_count, mut blocks) = (0u64, 0u64, 0u64);
    let mut packed = vec![0u8; 4 * BLOCK_LEN];
    let mut minus_one = [0u32; BLOCK_LEN];
    for (lexeme, term_rows, tfs) in terms {
        dict.insert(lexeme, term_count)?;
        let start = postings.len();
        let first_block = u32::try_from(blocks).map_err(|_| TextError::TooLarge("posting blocks"))?;
        let mut initial = 0u32;
        for (chunk_rows, chunk_tfs) in term_rows.chunks(BLOCK_LEN).zip(tfs.chunks(BLOCK_LEN)) {
            let offset = u32::try_from(postings.len() - start).map_err(|_| TextError::TooLarge("a term's postings"))?;
            let mut block = BlockMax::new(chunk_rows[0], chunk_tfs[0], lens[chunk_rows[0] as usize]);
            for (&row, &tf) in chunk_rows.iter().zip(chunk_tfs).skip(1) {
                block.add(row, tf, lens[row as usize]);
            }
            let mut skip = Skip::new(&block, offset, 0, 0);
            if chunk_rows.len() == BLOCK_LEN {
                for (m, &tf) in minus_one.iter_mut().zip(chunk_tfs) {
                    *m = tf - 1;
                }
                skip.row_bits = packer.num_bits_sorted(initial, chunk_rows);
                skip.tf_bits = packer.num_bits(&minus_one);
                let n = packer.compress_sorted(initial, chunk_rows, &mut packed, skip.row_bits);
                postings.extend_from_slice(&packed[..n]);
                let n = packer.compress(&minus_one, &mut packed, skip.tf_bits);
                postings.extend_from_slice(&packed[..n]);
            } else {
                let mut previous = initial;
                for &row in chunk_rows {
                    write_vint(&mut postings, row - previous);
                    previous = row;
                }
                for &tf in chunk_tfs {
                    write_vint(&mut postings, tf - 1);
                }
            }
            initial = skip.last_row;
            skip.write(&mut skips);
            blocks += 1;
        }
        let df = u32::try_from(term_rows.len()).map_err(|_| TextError::TooLarge("document frequency"))?;
        TermInfo { df, first_block, offset: start as u64, len: (postings.len() - start) as u64 }.write(&mut infos);
        term_count += 1;
        posting_count += u64::from(df);
    }
    let total_len = lens.iter().map(|&l| u64::from(l)).sum();
    let meta = Meta { rows, total_len, terms: term_count, postings: posting_count, blocks };
    let sections = vec![
        (TAG_META, meta.encode()),
        (TAG_IDS, ids.iter().flat_map(|id| id.to_le_bytes()).collect()),
        (TAG_LENS, lens.iter().flat_map(|l| l.to_le_bytes()).collect()),
        (TAG_TERMS, dict.into_inner()?),
        (TAG_TERMINFO, infos),
        (TAG_SKIPS, skips),
        (TAG_POSTINGS, postings),
    ];
    Ok(BuiltTextSegment { sections, rows })
}

/// An inverted index being collected: lexeme → (rows ascending, term frequencies).
type Inverted = BTreeMap<Vec<u8>, (Vec<u32>, Vec<u32>)>;

fn encode_inverted(ids: &[u64], lens: &[u32], inverted: &Inverted) -> Result<BuiltTextSegment, TextError> {
    encode(ids, lens, inverted.iter().map(|(t, (r, f))| (t.as_slice(), r.as_slice(), f.as_slice())))
}

/// Builds a segment whose row `i` is the `i`-th of `rows` (`(id, document)`).
pub fn build_segment<'d>(rows: impl IntoIterator<Item = (u64, &'d Document)>) -> Result<BuiltTextSegment, TextError> {
    let (mut ids, mut lens, mut inverted) = (Vec::new(), Vec::new(), Inverted::new());
    for (row, (id, doc)) in rows.into_iter().enumerate() {
        let row = u32::try_from(row).map_err(|_| TextError::TooLarge("segment rows"))?;
        for (term, tf) in doc.terms() {
            let entry = inverted.entry(term.as_bytes().to_vec()).or_default();
            entry.0.push(row);
            entry.1.push(*tf);
        }
        ids.push(id);
        lens.push(doc.length());
    }
    encode_inverted(&ids, &lens, &inverted)
}

impl Memtable {
    /// Builds the segment holding this memtable's rows, in row order (row `i` of the segment is
    /// row `i` of the memtable, with the same id and postings).
    pub fn to_segment(&self) -> Result<BuiltTextSegment, TextError> {
        let mut lists: Vec<(&str, &[u32], &[u32])> = self.postings_lists().collect();
        lists.sort_unstable_by(|a, b| a.0.cmp(b.0));
        encode(self.ids(), self.doc_lens(), lists.into_iter().map(|(t, r, f)| (t.as_bytes(), r, f)))
    }
}

/// Merges `inputs` (each a segment and the rows deleted from it) into one segment holding every
/// live row once, inputs in order and rows in order within each, with its id, length and
/// postings; deleted rows are dropped.
pub fn merge_segments(inputs: &[(&TextSegment, Option<&Bitset>)]) -> Result<BuiltTextSegment, TextError> {
    let (mut ids, mut lens, mut inverted) = (Vec::new(), Vec::new(), Inverted::new());
    for &(segment, deleted) in inputs {
        if let Some(d) = deleted.filter(|d| d.len() != segment.rows() as usize) {
            return Err(TextError::DeletionLength { bitmap: d.len(), rows: segment.rows() as usize });
        }
        // New row numbers of the live rows (END for deleted ones).
        let mut remap = Vec::with_capacity(segment.rows() as usize);
        for row in 0..segment.rows() {
            if deleted.is_some_and(|d| d.contains(row as usize)) {
                remap.push(END);
            } else {
                let new =
                    u32::try_from(ids.len()).ok().filter(|&r| r < END).ok_or(TextError::TooLarge("segment rows"))?;
                remap.push(new);
                ids.push(segment.id(row));
                lens.push(segment.doc_len(row));
            }
        }
        segment.for_each_term(|lexeme, mut postings| {
            let (mut rows, mut tfs) = (Vec::new(), Vec::new());
            let mut row = postings.row();
            while row != END {
                let new = remap[row as usize];
                if new != END {
                    rows.push(new);
                    tfs.push(postings.tf());
                }
                row = postings.next();
            }
            if !rows.is_empty() {
                let list = inverted.entry(lexeme.to_vec()).or_default();
                list.0.extend_from_slice(&rows);
                list.1.extend_from_slice(&tfs);
            }
        });
    }
    encode_inverted(&ids, &lens, &inverted)
}
