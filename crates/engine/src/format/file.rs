//! Reading and writing segment files (see the module docs of [`crate::format`] for the layout).

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::{
    align_up, FormatError, FORMAT_VERSION, HEADER_BYTES, MAGIC, MAX_SECTIONS, SECTION_ALIGN, TABLE_ENTRY_BYTES,
};

/// One section-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    tag: u32,
    offset: u64,
    len: u64,
    crc: u32,
}

/// The bytes of a segment file: memory-mapped, or owned (8-byte aligned) for tests and builds.
#[derive(Debug)]
pub enum SegmentBytes {
    /// A read-only mapping of an immutable segment file.
    Mapped(memmap2::Mmap),
    /// Bytes in memory, stored in `u64` words so that the base is 8-byte aligned; `len` bytes valid.
    Owned {
        /// Backing words.
        words: Vec<u64>,
        /// Valid bytes.
        len: usize,
    },
}

impl SegmentBytes {
    /// Copies `bytes` into aligned owned storage.
    pub fn copy_from(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Self::Owned { words, len: bytes.len() }
    }

    /// The file's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Owned { words, len } => &bytemuck::cast_slice::<u64, u8>(words)[..*len],
        }
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Lays out the header and section table for `sections` (tag, length, checksum known).
fn layout(sections: &[(u32, &[u8])]) -> Result<(Vec<u8>, Vec<Entry>, u64), FormatError> {
    if sections.len() > MAX_SECTIONS {
        return Err(FormatError::Corrupt(format!("{} sections exceed the limit of {MAX_SECTIONS}", sections.len())));
    }
    let mut entries = Vec::with_capacity(sections.len());
    let mut offset = align_up((HEADER_BYTES + sections.len() * TABLE_ENTRY_BYTES) as u64);
    for (index, &(tag, bytes)) in sections.iter().enumerate() {
        if sections[..index].iter().any(|&(t, _)| t == tag) {
            return Err(FormatError::DuplicateSection(tag));
        }
        entries.push(Entry { tag, offset, len: bytes.len() as u64, crc: crc32fast::hash(bytes) });
        offset = align_up(offset + bytes.len() as u64);
    }
    let file_len = entries.last().map_or(offset, |e| e.offset + e.len);
    let mut table = Vec::with_capacity(entries.len() * TABLE_ENTRY_BYTES);
    for entry in &entries {
        table.extend_from_slice(&entry.tag.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend_from_slice(&entry.offset.to_le_bytes());
        table.extend_from_slice(&entry.len.to_le_bytes());
        table.extend_from_slice(&entry.crc.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
    }
    let mut head = Vec::with_capacity(HEADER_BYTES + table.len());
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    head.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    head.extend_from_slice(&file_len.to_le_bytes());
    head.extend_from_slice(&(HEADER_BYTES as u64).to_le_bytes());
    head.extend_from_slice(&crc32fast::hash(&table).to_le_bytes());
    head.resize(60, 0);
    let header_crc = crc32fast::hash(&head[..60]);
    head.extend_from_slice(&header_crc.to_le_bytes());
    head.extend_from_slice(&table);
    Ok((head, entries, file_len))
}

/// A planned segment file: header, section table and where each section goes. Made by
/// [`FileLayout::new`], which checks the section list; [`FileLayout::write_to`] then streams the
/// file without copying the sections.
pub struct FileLayout<'a> {
    head: Vec<u8>,
    entries: Vec<Entry>,
    sections: &'a [(u32, &'a [u8])],
    len: u64,
}

impl<'a> FileLayout<'a> {
    /// Plans the file holding `sections` in order; fails on duplicate tags or too many sections.
    pub fn new(sections: &'a [(u32, &'a [u8])]) -> Result<Self, FormatError> {
        let (head, entries, len) = layout(sections)?;
        Ok(Self { head, entries, sections, len })
    }

    /// The file's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty (never: every file has a header).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the whole file to `out`: exactly the bytes [`encode`] returns.
    pub fn write_to(&self, out: &mut dyn Write) -> std::io::Result<()> {
        out.write_all(&self.head)?;
        let mut written = self.head.len() as u64;
        let zeros = [0u8; SECTION_ALIGN];
        for (entry, &(_, bytes)) in self.entries.iter().zip(self.sections) {
            let mut pad = (entry.offset - written) as usize;
            while pad > 0 {
                let step = pad.min(SECTION_ALIGN);
                out.write_all(&zeros[..step])?;
                pad -= step;
            }
            out.write_all(bytes)?;
            written = entry.offset + entry.len;
        }
        let mut tail = (self.len - written) as usize;
        while tail > 0 {
            let step = tail.min(SECTION_ALIGN);
            out.write_all(&zeros[..step])?;
            tail -= step;
        }
        Ok(())
    }
}

/// Encodes a whole segment file in memory (tests, fuzzing, small files): the bytes
/// [`FileLayout::write_to`] streams.
pub fn encode(sections: &[(u32, &[u8])]) -> Result<Vec<u8>, FormatError> {
    let layout = FileLayout::new(sections)?;
    let mut out = Vec::with_capacity(layout.len() as usize);
    layout.write_to(&mut out).expect("writing to a Vec cannot fail");
    Ok(out)
}

/// An opened, validated segment file.
#[derive(Debug)]
pub struct SegmentFile {
    bytes: SegmentBytes,
    entries: Vec<Entry>,
}

impl SegmentFile {
    /// Maps `path` read-only and validates it (with section checksums when `verify_sections`).
    pub fn open(path: &Path, verify_sections: bool) -> Result<Self, FormatError> {
        let file = File::open(path).map_err(|e| FormatError::io(path, e))?;
        let len = file.metadata().map_err(|e| FormatError::io(path, e))?.len();
        if len < HEADER_BYTES as u64 {
            return Err(FormatError::Truncated { actual: len, expected: HEADER_BYTES as u64 });
        }
        // SAFETY: segment files are immutable once renamed into place (they are written under a
        // temporary name and never opened for writing again), so the mapping's contents cannot
        // change underneath the `&[u8]` handed out. The map is read-only.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| FormatError::io(path, e))?;
        Self::from_bytes(SegmentBytes::Mapped(map), verify_sections)
    }

    /// Validates `bytes` as a segment file.
    pub fn from_bytes(bytes: SegmentBytes, verify_sections: bool) -> Result<Self, FormatError> {
        let entries = parse(bytes.as_bytes(), verify_sections)?;
        Ok(Self { bytes, entries })
    }

    /// The bytes of section `tag`, if present.
    pub fn section(&self, tag: u32) -> Option<&[u8]> {
        let entry = self.entries.iter().find(|e| e.tag == tag)?;
        Some(&self.bytes.as_bytes()[entry.offset as usize..(entry.offset + entry.len) as usize])
    }

    /// The bytes of section `tag`, or [`FormatError::MissingSection`].
    pub fn require(&self, tag: u32) -> Result<&[u8], FormatError> {
        self.section(tag).ok_or(FormatError::MissingSection(tag))
    }

    /// The section tags in file order.
    pub fn tags(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().map(|e| e.tag)
    }

    /// The file's size in bytes.
    pub fn byte_len(&self) -> usize {
        self.bytes.as_bytes().len()
    }
}

/// Validates the header and table of `bytes` (and section checksums when asked).
fn parse(bytes: &[u8], verify_sections: bool) -> Result<Vec<Entry>, FormatError> {
    let actual = bytes.len() as u64;
    if bytes.len() < HEADER_BYTES {
        return Err(FormatError::Truncated { actual, expected: HEADER_BYTES as u64 });
    }
    if bytes[..8] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    let header_crc = crc32fast::hash(&bytes[..60]);
    let stored = read_u32(bytes, 60);
    if header_crc != stored {
        return Err(FormatError::ChecksumMismatch { what: "header".into(), stored, computed: header_crc });
    }
    let version = read_u32(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(FormatError::UnsupportedVersion(version));
    }
    let count = read_u32(bytes, 12) as usize;
    let file_len = read_u64(bytes, 16);
    let table_offset = read_u64(bytes, 24);
    if count > MAX_SECTIONS {
        return Err(FormatError::Corrupt(format!("{count} sections exceed the limit of {MAX_SECTIONS}")));
    }
    if table_offset != HEADER_BYTES as u64 {
        return Err(FormatError::Corrupt(format!("section table at {table_offset}, expected {HEADER_BYTES}")));
    }
    if actual < file_len {
        return Err(FormatError::Truncated { actual, expected: file_len });
    }
    if actual > file_len {
        return Err(FormatError::Corrupt(format!(
            "{} bytes after the end of the file's last section",
            actual - file_len
        )));
    }
    let table_end = HEADER_BYTES + count * TABLE_ENTRY_BYTES;
    if bytes.len() < table_end {
        return Err(FormatError::Truncated { actual, expected: table_end as u64 });
    }
    let table = &bytes[HEADER_BYTES..table_end];
    let table_crc = crc32fast::hash(table);
    let stored = read_u32(bytes, 32);
    if table_crc != stored {
        return Err(FormatError::ChecksumMismatch { what: "section table".into(), stored, computed: table_crc });
    }
    let mut entries: Vec<Entry> = Vec::with_capacity(count);
    let mut previous_end = table_end as u64;
    for raw in table.chunks_exact(TABLE_ENTRY_BYTES) {
        let entry =
            Entry { tag: read_u32(raw, 0), offset: read_u64(raw, 8), len: read_u64(raw, 16), crc: read_u32(raw, 24) };
        let end = entry.offset.checked_add(entry.len).filter(|&end| end <= file_len);
        let Some(end) = end else {
            return Err(FormatError::Corrupt(format!("section {:#010x} extends past the end of the file", entry.tag)));
        };
        if !entry.offset.is_multiple_of(SECTION_ALIGN as u64) || entry.offset < previous_end {
            return Err(FormatError::Corrupt(format!(
                "section {:#010x} is misplaced at offset {}",
                entry.tag, entry.offset
            )));
        }
        if bytes[previous_end as usize..entry.offset as usize].iter().any(|&b| b != 0) {
            return Err(FormatError::Corrupt(format!("non-zero padding before section {:#010x}", entry.tag)));
        }
        if entries.iter().any(|e| e.tag == entry.tag) {
            return Err(FormatError::DuplicateSection(entry.tag));
        }
        if verify_sections {
            let computed = crc32fast::hash(&bytes[entry.offset as usize..end as usize]);
            if computed != entry.crc {
                return Err(FormatError::ChecksumMismatch {
                    what: format!("section {:#010x}", entry.tag),
                    stored: entry.crc,
                    computed,
                });
            }
        }
        previous_end = end;
        entries.push(entry);
    }
    if bytes[previous_end as usize..].iter().any(|&b| b != 0) {
        return Err(FormatError::Corrupt("non-zero padding after the last section".into()));
    }
    Ok(entries)
}
