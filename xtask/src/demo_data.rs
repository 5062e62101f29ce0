//! The demo sample in `data/demo`: the first 10,000 rows of shared/data's pypi-minilm-100k with
//! their texts, plus a few held-out queries, small enough to live in the repository.
//!
//! Files (all little-endian):
//! - `items.jsonl` — `{"id": i, "text": …}` for rows `0..10000`;
//! - `embeddings.f16` — 10,000 × 384 IEEE half floats, row-major, no header;
//! - `queries.jsonl` and `queries.f16` — the same for the first held-out queries.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use half::f16;

use crate::{repo_root, Options, Result};

/// Rows in the demo sample.
pub const DEMO_ROWS: usize = 10_000;
/// Held-out queries in the demo sample.
pub const DEMO_QUERIES: usize = 8;
/// Dimensions of the MiniLM embeddings.
pub const DIMENSIONS: usize = 384;

/// Reads the first `rows` vectors of an `.fvecs` file.
pub fn read_fvecs(path: &Path, rows: usize) -> Result<Vec<Vec<f32>>> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::with_capacity(rows);
    let mut at = 0;
    while out.len() < rows && at + 4 <= bytes.len() {
        let dims = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let end = at + 4 + dims * 4;
        if end > bytes.len() {
            return Err(format!("{}: truncated row {}", path.display(), out.len()));
        }
        out.push(
            bytes[at + 4..end].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect(),
        );
        at = end;
    }
    Ok(out)
}

fn copy_lines(from: &Path, to: &Path, rows: usize) -> Result {
    let file = fs::File::open(from).map_err(|e| format!("{}: {e}", from.display()))?;
    let mut text = String::new();
    for line in BufReader::new(file).lines().take(rows) {
        text.push_str(&line.map_err(|e| format!("{}: {e}", from.display()))?);
        text.push('\n');
    }
    fs::write(to, text).map_err(|e| format!("{}: {e}", to.display()))
}

fn write_f16(path: &Path, rows: &[Vec<f32>]) -> Result {
    let bytes: Vec<u8> = rows.iter().flat_map(|row| row.iter().flat_map(|&x| f16::from_f32(x).to_le_bytes())).collect();
    fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Regenerates `data/demo` from `--from` (default `../shared/data/pypi-minilm-100k`).
pub fn generate(options: &Options) -> Result {
    let from = options.from.clone().unwrap_or_else(|| repo_root().join("../shared/data/pypi-minilm-100k"));
    let out = demo_dir();
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    copy_lines(&from.join("base_texts.jsonl"), &out.join("items.jsonl"), DEMO_ROWS)?;
    copy_lines(&from.join("query_texts.jsonl"), &out.join("queries.jsonl"), DEMO_QUERIES)?;
    write_f16(&out.join("embeddings.f16"), &read_fvecs(&from.join("base.fvecs"), DEMO_ROWS)?)?;
    write_f16(&out.join("queries.f16"), &read_fvecs(&from.join("query.fvecs"), DEMO_QUERIES)?)?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `data/demo` in the repository.
pub fn demo_dir() -> PathBuf {
    repo_root().join("data/demo")
}

/// Reads an `.f16` file of `DIMENSIONS`-wide rows as `f32` rows.
pub fn read_f16_rows(path: &Path) -> Result<Vec<Vec<f32>>> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() % (2 * DIMENSIONS) != 0 {
        return Err(format!("{}: size is not a whole number of {DIMENSIONS}-d rows", path.display()));
    }
    Ok(bytes
        .chunks_exact(2 * DIMENSIONS)
        .map(|row| row.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect())
        .collect())
}

/// Reads `{"id": …, "text": …}` lines and returns the texts in file order.
pub fn read_texts(path: &Path) -> Result<Vec<String>> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("{}: {e}: {line}", path.display()))?;
            value["text"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: line without \"text\": {line}", path.display()))
        })
        .collect()
}
