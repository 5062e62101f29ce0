//! `cargo xtask generate`: rewrites the generated blocks of committed files, and checks them.
//!
//! A generated block is the text between a line holding `BEGIN GENERATED <name>` and the next
//! line holding `END GENERATED <name>` (in a comment of the file's language: `-- …` in SQL,
//! `<!-- … -->` in Markdown); everything outside the blocks is written by hand. The blocks:
//!
//! | file | block | from |
//! |---|---|---|
//! | `pg_strata/sql/types.sql` | `vector_type(vector)`, `vector_type(halfvec)` | the template `pg_strata/sql/vector_type.sql.in`, expanded with [`VECTOR_TYPES`]' parameters |
//! | `docs/ARCHITECTURE.md` | `line-budget` | [`crate::code_shape::budget_table`]: code lines per area (to the nearest 100) against their budgets |
//!
//! `cargo test -p xtask` fails when a committed block differs from what this command writes
//! (`every_generated_block_is_current`), naming the file and the command.

use std::path::PathBuf;

use crate::{repo_root, Result};

/// The template of the `vector` and `halfvec` SQL, relative to the repository.
const VECTOR_TYPE_TEMPLATE: &str = "pg_strata/sql/vector_type.sql.in";

/// The parameters of each type expanded from [`VECTOR_TYPE_TEMPLATE`]: placeholder → value.
pub const VECTOR_TYPES: [(&str, [(&str, &str); 5]); 2] = [
    (
        "vector",
        [
            ("@TYPE@", "vector"),
            // pgvector names the vector functions' symbols without a prefix.
            ("@PREFIX@", ""),
            ("@COMMENT@", "single-precision vector"),
            ("@NORM@", "vector_norm"),
            ("@REAL_CAST@", "IMPLICIT"),
        ],
    ),
    (
        "halfvec",
        [
            ("@TYPE@", "halfvec"),
            ("@PREFIX@", "halfvec_"),
            ("@COMMENT@", "half-precision vector"),
            ("@NORM@", "l2_norm"),
            ("@REAL_CAST@", "ASSIGNMENT"),
        ],
    ),
];

/// One generated block: the file it lives in (relative to the repository), its name, and its
/// content as this checkout generates it.
pub struct Block {
    /// The file, relative to the repository root.
    pub file: &'static str,
    /// The name after `BEGIN GENERATED` / `END GENERATED`.
    pub name: String,
    /// The lines between the markers (each ending in a newline).
    pub content: String,
}

/// The template's body: everything after its first blank line (the lines before describe it).
fn template_body(template: &str) -> Result<&str> {
    template.split_once("\n\n").map(|(_, body)| body).ok_or_else(|| format!("{VECTOR_TYPE_TEMPLATE}: no blank line"))
}

/// Expands `body` with `params` (placeholder → value); fails on a placeholder left over.
fn expand(body: &str, params: &[(&str, &str)]) -> Result<String> {
    let mut out = body.to_owned();
    for (placeholder, value) in params {
        out = out.replace(placeholder, value);
    }
    match leftover_placeholder(&out) {
        Some(left) => Err(format!("{VECTOR_TYPE_TEMPLATE}: placeholder {left} has no value")),
        None => Ok(out),
    }
}

/// The first `@NAME@` (capitals and underscores between two `@`) in `text`.
fn leftover_placeholder(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(at) = text[from..].find('@') {
        let start = from + at;
        let rest = &text[start + 1..];
        let len = rest.find(|c: char| !(c.is_ascii_uppercase() || c == '_')).unwrap_or(rest.len());
        if len > 0 && rest[len..].starts_with('@') {
            return Some(&text[start..start + len + 2]);
        }
        from = start + 1;
    }
    None
}

/// Every generated block with the content this checkout generates.
pub fn blocks() -> Result<Vec<Block>> {
    let path = repo_root().join(VECTOR_TYPE_TEMPLATE);
    let template = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let body = template_body(&template)?;
    let mut blocks = Vec::new();
    for (type_name, params) in &VECTOR_TYPES {
        blocks.push(Block {
            file: "pg_strata/sql/types.sql",
            name: format!("vector_type({type_name})"),
            content: expand(body, params)?,
        });
    }
    blocks.push(Block {
        file: "docs/ARCHITECTURE.md",
        name: "line-budget".to_owned(),
        content: crate::code_shape::budget_table(&crate::code_shape::measure(), false)?,
    });
    Ok(blocks)
}

/// `text` with block `name`'s lines replaced by `content`; an error when the markers are missing
/// or out of order.
pub fn replace_block(text: &str, name: &str, content: &str) -> Result<String> {
    let begin_marker = format!("BEGIN GENERATED {name}");
    let end_marker = format!("END GENERATED {name}");
    let begin = text.find(&begin_marker).ok_or_else(|| format!("no `{begin_marker}` line"))?;
    let content_start = text[begin..].find('\n').map(|at| begin + at + 1).ok_or("no line after BEGIN")?;
    let end = text[content_start..]
        .find(&end_marker)
        .map(|at| content_start + at)
        .ok_or(format!("no `{end_marker}` line"))?;
    let end_line = text[..end].rfind('\n').map_or(0, |at| at + 1);
    if end_line < content_start {
        return Err(format!("`{end_marker}` is on the `{begin_marker}` line"));
    }
    let mut content = content.to_owned();
    if !content.ends_with('\n') {
        content.push('\n');
    }
    Ok(format!("{}{content}{}", &text[..content_start], &text[end_line..]))
}

/// The files whose generated blocks differ from what this checkout generates, with each file's
/// new text.
pub fn stale() -> Result<Vec<(PathBuf, String)>> {
    let mut texts: Vec<(PathBuf, String, String)> = Vec::new();
    for block in blocks()? {
        let path = repo_root().join(block.file);
        if !texts.iter().any(|(p, _, _)| *p == path) {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            texts.push((path.clone(), text.clone(), text));
        }
        let entry = texts.iter_mut().find(|(p, _, _)| *p == path).expect("just added");
        entry.2 = replace_block(&entry.2, &block.name, &block.content).map_err(|e| format!("{}: {e}", block.file))?;
    }
    Ok(texts.into_iter().filter(|(_, old, new)| old != new).map(|(path, _, new)| (path, new)).collect())
}

/// `cargo xtask generate`: rewrites every stale generated block.
pub fn run() -> Result {
    let stale = stale()?;
    for (path, text) in &stale {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("rewrote the generated blocks of {}", path.display());
    }
    if stale.is_empty() {
        println!("every generated block is current");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_block_is_current() {
        let stale: Vec<String> = stale().unwrap().iter().map(|(path, _)| path.display().to_string()).collect();
        assert!(stale.is_empty(), "generated blocks out of date in {stale:?}: run `cargo xtask generate`");
    }

    #[test]
    fn blocks_are_replaced_between_their_markers() {
        let text = "a\n-- BEGIN GENERATED x(1): note\nold\nlines\n-- END GENERATED x(1)\nb\n";
        assert_eq!(
            replace_block(text, "x(1)", "new").unwrap(),
            "a\n-- BEGIN GENERATED x(1): note\nnew\n-- END GENERATED x(1)\nb\n"
        );
        assert!(replace_block(text, "y", "new").is_err(), "a missing block is an error");
        assert!(replace_block("BEGIN GENERATED x\n", "x", "new").is_err(), "an unterminated block is an error");
    }

    #[test]
    fn the_template_expands_every_placeholder() {
        let template = std::fs::read_to_string(repo_root().join(VECTOR_TYPE_TEMPLATE)).unwrap();
        let body = template_body(&template).unwrap();
        for (type_name, params) in &VECTOR_TYPES {
            let sql = expand(body, params).unwrap();
            assert!(!sql.contains("@TYPE@") && sql.contains(&format!("CREATE TYPE {type_name};")));
        }
        assert!(expand("CREATE TYPE @TYPE@ @OTHER@;", &[("@TYPE@", "t")]).is_err(), "a placeholder without a value");
        assert!(expand("a@b.c and x@y", &[]).is_ok(), "an @ that is no placeholder");
    }
}
