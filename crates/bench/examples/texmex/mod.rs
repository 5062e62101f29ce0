//! Reading texmex files (`.fvecs` / `.ivecs`: per row a little-endian `u32` dimension count,
//! then that many 32-bit words), shared by the measurement examples.

use std::path::Path;

/// The first `max` rows of a texmex file as (dims, row-major 32-bit words).
pub fn read_vecs(path: &Path, max: usize) -> (usize, Vec<[u8; 4]>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dims = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    let row = 4 + 4 * dims;
    let words = bytes
        .chunks_exact(row)
        .take(max)
        .flat_map(|r| r[4..].chunks_exact(4).map(|c| <[u8; 4]>::try_from(c).expect("4 bytes")))
        .collect();
    (dims, words)
}
