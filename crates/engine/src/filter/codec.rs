//! The FILTER section's bytes: writing [`FilterColumns`] and reading them back with every
//! invariant checked (see the [module docs](super) for the byte layout).

use super::columns::{
    block_stats, prefix_counts, BlockStats, ColumnBody, ColumnType, FilterColumn, Posting, BLOCK_ROWS, DISTINCT_RATIO,
};
use super::{FilterColumns, FilterError, FILTER_SECTION_VERSION, MAX_COLUMNS};
use crate::bitset::Bitset;

const FORM_LIST: u8 = 0;
const FORM_BITMAP: u8 = 1;
const BODY_POSTINGS: u8 = 0;
const BODY_BLOCKS: u8 = 1;

/// Encodes `columns` as the FILTER section's bytes.
pub(super) fn encode(columns: &FilterColumns) -> Vec<u8> {
    let mut body = Vec::new();
    for column in &columns.columns {
        let mut out = Vec::new();
        put_posting(&mut out, &column.nulls);
        if column.ty.has_dictionary() {
            out.extend_from_slice(&(column.dict.len() as u32).to_le_bytes());
            for text in &column.dict {
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        let code = match &column.body {
            ColumnBody::Postings { keys, postings, .. } => {
                out.extend_from_slice(&(keys.len() as u32).to_le_bytes());
                for k in keys {
                    out.extend_from_slice(&k.to_le_bytes());
                }
                for p in postings {
                    put_posting(&mut out, p);
                }
                BODY_POSTINGS
            }
            ColumnBody::Blocks { values, blocks, distinct, .. } => {
                out.extend_from_slice(&distinct.to_le_bytes());
                for v in values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for b in blocks {
                    out.extend_from_slice(&b.min.to_le_bytes());
                    out.extend_from_slice(&b.max.to_le_bytes());
                    out.extend_from_slice(&b.non_null.to_le_bytes());
                }
                BODY_BLOCKS
            }
        };
        body.extend_from_slice(&[column.ty as u8, code, 0, 0]);
        body.extend_from_slice(&(out.len() as u32).to_le_bytes());
        body.extend_from_slice(&out);
    }
    let mut bytes = Vec::with_capacity(16 + body.len());
    bytes.extend_from_slice(&FILTER_SECTION_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(columns.columns.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(columns.rows as u32).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

fn put_posting(out: &mut Vec<u8>, posting: &Posting) {
    match posting {
        Posting::List(rows) => {
            out.push(FORM_LIST);
            out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
            for r in rows {
                out.extend_from_slice(&r.to_le_bytes());
            }
        }
        Posting::Bitmap(set) => {
            out.push(FORM_BITMAP);
            out.extend_from_slice(&(set.count() as u32).to_le_bytes());
            for w in set.words() {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
    }
}

/// A bounds-checked little-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

fn corrupt(what: impl Into<String>) -> FilterError {
    FilterError::Corrupt(what.into())
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FilterError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| corrupt(format!("{n} bytes wanted at offset {}, past the end", self.at)))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, FilterError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, FilterError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, FilterError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn i64(&mut self) -> Result<i64, FilterError> {
        Ok(self.u64()? as i64)
    }

    /// A count of items of `size` bytes each that must fit in what is left.
    fn count(&mut self, size: usize) -> Result<usize, FilterError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(size) > self.bytes.len() - self.at {
            return Err(corrupt(format!("count {n} at offset {} exceeds the bytes left", self.at - 4)));
        }
        Ok(n)
    }

    fn posting(&mut self, rows: usize) -> Result<Posting, FilterError> {
        let form = self.u8()?;
        let count = self.u32()? as usize;
        let posting = match form {
            FORM_LIST => {
                if count.saturating_mul(4) > self.bytes.len() - self.at {
                    return Err(corrupt("row list longer than the section"));
                }
                let list: Vec<u32> = (0..count).map(|_| self.u32()).collect::<Result<_, _>>()?;
                if list.windows(2).any(|w| w[0] >= w[1]) || list.last().is_some_and(|&r| r as usize >= rows) {
                    return Err(corrupt("row list not strictly increasing below the row count"));
                }
                Posting::List(list)
            }
            FORM_BITMAP => {
                let words: Vec<u64> = (0..rows.div_ceil(64)).map(|_| self.u64()).collect::<Result<_, _>>()?;
                let set = Bitset::from_words(words.clone(), rows).expect("enough words");
                if set.words() != words.as_slice() {
                    return Err(corrupt("bitmap has bits set beyond the row count"));
                }
                if set.count() != count {
                    return Err(corrupt(format!("bitmap holds {} rows, header says {count}", set.count())));
                }
                Posting::Bitmap(set)
            }
            other => return Err(corrupt(format!("unknown posting form {other}"))),
        };
        if matches!(posting, Posting::List(_)) != (count * 32 < rows) {
            return Err(corrupt("posting not in its canonical form"));
        }
        Ok(posting)
    }
}

/// Decodes and validates a FILTER section for a segment of `rows` rows.
pub(super) fn decode(bytes: &[u8], rows: usize) -> Result<FilterColumns, FilterError> {
    let mut r = Reader { bytes, at: 0 };
    let version = r.u32()?;
    if version != FILTER_SECTION_VERSION {
        return Err(FilterError::UnsupportedVersion(version));
    }
    let count = r.u32()? as usize;
    let stored_rows = r.u32()? as usize;
    let stored = r.u32()?;
    let computed = crc32fast::hash(&bytes[16..]);
    if stored != computed {
        return Err(FilterError::ChecksumMismatch { stored, computed });
    }
    if count > MAX_COLUMNS {
        return Err(corrupt(format!("{count} columns exceed the limit of {MAX_COLUMNS}")));
    }
    if stored_rows != rows {
        return Err(FilterError::RowCount { expected: rows, actual: stored_rows });
    }
    let mut columns = Vec::with_capacity(count);
    for index in 0..count {
        let column = decode_column(&mut r, rows).map_err(|e| match e {
            FilterError::Corrupt(what) => corrupt(format!("column {index}: {what}")),
            other => other,
        })?;
        columns.push(column);
    }
    if r.at != bytes.len() {
        return Err(corrupt(format!("{} bytes after the last column", bytes.len() - r.at)));
    }
    Ok(FilterColumns { rows, columns })
}

fn decode_column(r: &mut Reader<'_>, rows: usize) -> Result<FilterColumn, FilterError> {
    let head = r.take(4)?;
    let ty = ColumnType::try_from(head[0]).map_err(|e| corrupt(e.to_string()))?;
    let code = head[1];
    if head[2..] != [0, 0] {
        return Err(corrupt("non-zero reserved bytes"));
    }
    let len = r.u32()? as usize;
    let start = r.at;
    let nulls = r.posting(rows)?;
    let null_count = nulls.count();
    let mut dict = Vec::new();
    if ty.has_dictionary() {
        let n = r.count(4)?;
        for _ in 0..n {
            let len = r.count(1)?;
            let text = std::str::from_utf8(r.take(len)?).map_err(|_| corrupt("dictionary text is not UTF-8"))?;
            if dict.last().is_some_and(|last: &String| last.as_str() >= text) {
                return Err(corrupt("dictionary not strictly increasing"));
            }
            dict.push(text.to_owned());
        }
    }
    let body = match code {
        BODY_POSTINGS => {
            let k = r.count(8)?;
            let keys: Vec<i64> = (0..k).map(|_| r.i64()).collect::<Result<_, _>>()?;
            if keys.windows(2).any(|w| w[0] >= w[1]) {
                return Err(corrupt("keys not strictly increasing"));
            }
            if ty.has_dictionary() && keys.iter().any(|&key| key < 0 || key as usize >= dict.len()) {
                return Err(corrupt("a key is not a dictionary id"));
            }
            let postings: Vec<Posting> = (0..k).map(|_| r.posting(rows)).collect::<Result<_, _>>()?;
            check_postings(ty, rows, &nulls, &postings)?;
            if ty.is_ordered_scalar() && k > rows / DISTINCT_RATIO {
                return Err(corrupt("a high-cardinality scalar column stored as postings"));
            }
            let prefix = prefix_counts(&postings);
            ColumnBody::Postings { keys, postings, prefix }
        }
        BODY_BLOCKS if ty.is_ordered_scalar() => {
            let distinct = r.u64()?;
            if rows.saturating_mul(8) > r.bytes.len() - r.at {
                return Err(corrupt("values longer than the section"));
            }
            let values: Vec<i64> = (0..rows).map(|_| r.i64()).collect::<Result<_, _>>()?;
            let blocks: Vec<BlockStats> = (0..rows.div_ceil(BLOCK_ROWS))
                .map(|_| Ok(BlockStats { min: r.i64()?, max: r.i64()?, non_null: r.u32()? }))
                .collect::<Result<_, FilterError>>()?;
            let mut null_set = Bitset::new(rows);
            nulls.add_to(&mut null_set);
            if null_set.iter().any(|row| values[row] != 0) {
                return Err(corrupt("a NULL row holds a value"));
            }
            if blocks != block_stats(&values, &nulls, rows) {
                return Err(corrupt("block statistics differ from the values"));
            }
            let mut seen: Vec<i64> = (0..rows).filter(|&row| !null_set.contains(row)).map(|row| values[row]).collect();
            seen.sort_unstable();
            seen.dedup();
            if distinct != seen.len() as u64 || seen.len() <= rows / DISTINCT_RATIO {
                return Err(corrupt("distinct count wrong, or a low-cardinality column stored as blocks"));
            }
            let order = super::columns::value_order(&values, &nulls, rows);
            ColumnBody::Blocks { values, blocks, distinct, order }
        }
        other => return Err(corrupt(format!("body code {other} invalid for {ty:?}"))),
    };
    if r.at - start != len {
        return Err(corrupt(format!("column is {} bytes, header says {len}", r.at - start)));
    }
    Ok(FilterColumn { ty, rows, dict, nulls, null_count, body })
}

/// Scalars: NULL rows and postings partition the rows. Arrays: NULL rows are in no posting.
/// Every posting is non-empty.
fn check_postings(ty: ColumnType, rows: usize, nulls: &Posting, postings: &[Posting]) -> Result<(), FilterError> {
    if postings.iter().any(|p| p.count() == 0) {
        return Err(corrupt("an empty posting"));
    }
    let mut null_set = Bitset::new(rows);
    nulls.add_to(&mut null_set);
    if ty.is_array() {
        for p in postings {
            if p.rows().iter().any(|&row| null_set.contains(row as usize)) {
                return Err(corrupt("a NULL array row holds elements"));
            }
        }
        return Ok(());
    }
    let mut seen = null_set;
    let mut total = seen.count();
    for p in postings {
        for row in p.rows() {
            if seen.contains(row as usize) {
                return Err(corrupt(format!("row {row} holds two values")));
            }
            seen.insert(row as usize);
            total += 1;
        }
    }
    if total != rows {
        return Err(corrupt(format!("{} rows hold no value and are not NULL", rows - total)));
    }
    Ok(())
}
