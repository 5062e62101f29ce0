//! The SQL declarations of pg_strata's C functions against the Rust entry points behind them.
//!
//! Every `CREATE FUNCTION … LANGUAGE C` in `pg_strata/sql/*.sql`, the companion extension's
//! script (`pg_strata/companion/*.sql`) and the `extension_sql!` blocks of pg_strata's sources
//! names a symbol of pg_strata's library: the `AS
//! 'MODULE_PATHNAME', 'symbol'` link symbol, or the function's own name without one. The Rust
//! side defines every such symbol with `v1_functions!` (`pg_strata/src/fmgr.rs`): an exported
//! `extern "C-unwind" fn symbol(fcinfo)` and its `pg_finfo_symbol` record, calling a body
//! function. The check ([`check`]) parses both sides and fails when
//!
//! - a declaration names a symbol no `v1_functions!` entry exports (PostgreSQL would fail at
//!   `CREATE EXTENSION`, or at the first call of a function created lazily);
//! - an entry point reads an argument beyond those its declaration has: the body reads argument
//!   `n` through a call `helper(fcinfo, n)` with a literal `n` (`arg`, `arg_i32`, …), itself or
//!   in a function it passes `fcinfo` on to, found by name in pg_strata's sources (same file
//!   first). Reading past the declared arguments reads an uninitialised slot;
//! - an exported entry point is declared nowhere (dead, or a declaration is missing).
//!
//! A body that reads no argument (an access-method handler) or ignores trailing ones (a type's
//! input function ignores its typmod) passes: the check is that reads stay within the declared
//! count, which is the property the `fcinfo` accessors' safety relies on.

use std::collections::BTreeMap;
use std::path::Path;

use crate::{repo_root, Result};

/// One `CREATE FUNCTION … LANGUAGE C` declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    /// The SQL name.
    pub name: String,
    /// The C symbol it links to.
    pub symbol: String,
    /// Its argument count.
    pub args: usize,
    /// Where it is: `file:line`.
    pub at: String,
}

/// One `v1_functions!` entry: the exported symbol and the body function it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPoint {
    /// The exported symbol.
    pub symbol: String,
    /// The body's function name (last path segment, generics dropped).
    pub body: String,
    /// The source file (relative to `pg_strata/src`) that declares it.
    pub file: String,
}

/// Removes `--` comments (outside quoted strings) from SQL.
fn strip_sql_comments(sql: &str) -> String {
    sql.lines()
        .map(|line| {
            let mut quoted = false;
            let bytes = line.as_bytes();
            for i in 0..bytes.len() {
                match bytes[i] {
                    b'\'' => quoted = !quoted,
                    b'-' if !quoted && bytes.get(i + 1) == Some(&b'-') => return &line[..i],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The number of comma-separated items at parenthesis depth 0 in `list` (0 for a blank list).
fn count_items(list: &str) -> usize {
    if list.trim().is_empty() {
        return 0;
    }
    let mut depth = 0i32;
    let mut count = 1;
    for c in list.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => count += 1,
            _ => {}
        }
    }
    count
}

/// The `LANGUAGE C` function declarations of one SQL script (`file` names it in `at`).
pub fn parse_declarations(file: &str, sql: &str) -> Vec<Declaration> {
    let text = strip_sql_comments(sql);
    let upper = text.to_ascii_uppercase();
    let mut out = Vec::new();
    let starts: Vec<usize> = upper.match_indices("CREATE ").map(|(at, _)| at).collect();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let statement = &text[start..end];
        let head = statement.to_ascii_uppercase();
        let Some(rest) = head.strip_prefix("CREATE ").map(|r| r.trim_start_matches("OR REPLACE ").trim_start()) else {
            continue;
        };
        if !rest.starts_with("FUNCTION ") {
            continue;
        }
        let words: Vec<&str> = head.split_whitespace().collect();
        if !words.windows(2).any(|w| w[0] == "LANGUAGE" && w[1].trim_end_matches(';') == "C") {
            continue;
        }
        let Some(open) = statement.find('(') else { continue };
        let name_start =
            statement[..open].to_ascii_uppercase().rfind("FUNCTION ").map_or(0, |at| at + "FUNCTION ".len());
        let name = statement[name_start..open].trim().to_owned();
        let mut depth = 0;
        let close = statement[open..]
            .char_indices()
            .find_map(|(at, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(open + at)
            })
            .unwrap_or(statement.len() - 1);
        let args = count_items(&statement[open + 1..close]);
        // AS 'library'[, 'symbol']
        let symbol = statement[close..]
            .split_once(" AS ")
            .or_else(|| statement[close..].split_once("\n    AS "))
            .and_then(|(_, after)| {
                let quoted: Vec<&str> = after.split('\'').collect();
                // quoted[1] is the library; a symbol follows a comma after it.
                (quoted.len() >= 4 && quoted[2].trim() == ",").then(|| quoted[3].to_owned())
            })
            .unwrap_or_else(|| name.clone());
        let line = text[..start].lines().count() + 1;
        out.push(Declaration { name, symbol, args, at: format!("{file}:{line}") });
    }
    out
}

/// The `v1_functions!` entries of one Rust source file (`file` relative to `pg_strata/src`).
pub fn parse_entry_points(file: &str, source: &str) -> Vec<EntryPoint> {
    let mut out = Vec::new();
    for (at, _) in source.match_indices("v1_functions! {") {
        let block_start = at + "v1_functions! {".len();
        let Some(len) = source[block_start..].find("\n}") else { continue };
        let block: Vec<&str> = source[block_start..block_start + len]
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect();
        for entry in block.join("\n").split(';') {
            let Some((symbol, body)) = entry.split_once("=>") else { continue };
            let body = body.trim();
            let path = body.split(['<', ',']).next().unwrap_or(body).trim().trim_end_matches("::");
            let name = path.rsplit("::").next().unwrap_or(path).trim().to_owned();
            out.push(EntryPoint { symbol: symbol.trim().to_owned(), body: name, file: file.to_owned() });
        }
    }
    out
}

/// The body of `fn name` in `source` (from the `fn` to its closing brace at the same indent).
fn function_body<'s>(source: &'s str, name: &str) -> Option<&'s str> {
    let needle_plain = format!("fn {name}(");
    let needle_generic = format!("fn {name}<");
    let start = source.find(&needle_plain).or_else(|| source.find(&needle_generic))?;
    let line_start = source[..start].rfind('\n').map_or(0, |at| at + 1);
    let indent = &source[line_start..start];
    let indent: String = indent.chars().take_while(|c| c.is_whitespace()).collect();
    let close = format!("\n{indent}}}");
    let end = source[start..].find(&close).map_or(source.len(), |at| start + at + close.len());
    Some(&source[start..end])
}

/// Calls in `body` that pass `fcinfo` first: `(callee, Some(n))` for `callee(fcinfo, n)` with a
/// literal `n`, `(callee, None)` for any other call passing `fcinfo` on.
fn fcinfo_calls(body: &str) -> Vec<(String, Option<usize>)> {
    let mut out = Vec::new();
    for (at, _) in body.match_indices("(fcinfo") {
        let after = &body[at + "(fcinfo".len()..];
        if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let before = &body[..at];
        let before = match before.strip_suffix('>') {
            // `name::<T>(fcinfo …)`: skip the generic arguments.
            Some(_) => before.rfind("::<").map_or(before, |lt| &before[..lt]),
            None => before,
        };
        let callee: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if callee.is_empty() || callee == "fn" {
            continue;
        }
        let index = after
            .trim_start()
            .strip_prefix(',')
            .map(str::trim_start)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|digits| digits.parse().ok());
        out.push((callee, index));
    }
    out
}

/// The highest argument index the body function `name` reads (through literal reads, itself or
/// in the functions it passes `fcinfo` on to); `None` when it reads none it can see.
fn max_read(sources: &BTreeMap<String, String>, file: &str, name: &str, seen: &mut Vec<String>) -> Option<usize> {
    if seen.iter().any(|s| s == name) {
        return None;
    }
    seen.push(name.to_owned());
    let body = sources
        .get(file)
        .and_then(|source| function_body(source, name))
        .map(|body| (file.to_owned(), body))
        .or_else(|| sources.iter().find_map(|(f, source)| function_body(source, name).map(|b| (f.clone(), b))));
    let (found_in, body) = body?;
    let mut max = None;
    for (callee, index) in fcinfo_calls(body) {
        let read = match index {
            Some(n) => Some(n),
            None if callee == name => None,
            None => max_read(sources, &found_in, &callee, seen),
        };
        max = max.max(read);
    }
    max
}

/// Reads pg_strata's SQL scripts and Rust sources and checks them against each other (see the
/// module docs); returns the number of declarations checked, or every mismatch.
pub fn check() -> Result<usize> {
    let root = repo_root();
    let mut declarations = Vec::new();
    for dir in ["pg_strata/sql", "pg_strata/companion"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .map_err(|e| format!("{dir}: {e}"))?
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        for path in files {
            let sql = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
            declarations.extend(parse_declarations(&name, &sql));
        }
    }
    let sources = rust_sources(&root.join("pg_strata/src"))?;
    for (file, source) in &sources {
        for sql in extension_sql(source) {
            declarations.extend(parse_declarations(&format!("pg_strata/src/{file} (extension_sql!)"), sql));
        }
    }
    let entries: Vec<EntryPoint> = sources.iter().flat_map(|(file, source)| parse_entry_points(file, source)).collect();
    compare(&declarations, &entries, &sources).map(|()| declarations.len())
}

/// The SQL of each `extension_sql!` in a Rust source: its first (raw) string literal.
fn extension_sql(source: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for (at, _) in source.match_indices("extension_sql!(") {
        let rest = &source[at..];
        let Some(open) = rest.find('"') else { continue };
        let hashes = rest[..open].chars().rev().take_while(|&c| c == '#').count();
        let close = format!("\"{}", "#".repeat(hashes));
        if let Some(len) = rest[open + 1..].find(&close) {
            out.push(&rest[open + 1..open + 1 + len]);
        }
    }
    out
}

/// Every `.rs` file under `src`, keyed by its path relative to `src`.
fn rust_sources(src: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                out.insert(path.strip_prefix(src).expect("under src").display().to_string(), text);
            }
        }
    }
    Ok(out)
}

/// The check proper, over parsed declarations, entry points and sources.
fn compare(declarations: &[Declaration], entries: &[EntryPoint], sources: &BTreeMap<String, String>) -> Result {
    let mut problems = Vec::new();
    for declaration in declarations {
        let Some(entry) = entries.iter().find(|e| e.symbol == declaration.symbol) else {
            problems.push(format!(
                "{}: {} links to symbol {}, which no v1_functions! entry in pg_strata/src exports",
                declaration.at, declaration.name, declaration.symbol
            ));
            continue;
        };
        if let Some(read) = max_read(sources, &entry.file, &entry.body, &mut Vec::new()) {
            if read >= declaration.args {
                problems.push(format!(
                    "{}: {} is declared with {} argument(s), but {} (pg_strata/src/{}, body {}) reads argument {read}",
                    declaration.at, declaration.name, declaration.args, entry.symbol, entry.file, entry.body
                ));
            }
        }
    }
    for entry in entries {
        if !declarations.iter().any(|d| d.symbol == entry.symbol) {
            problems.push(format!(
                "pg_strata/src/{}: v1_functions! exports {}, which no CREATE FUNCTION … LANGUAGE C declares",
                entry.file, entry.symbol
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c_function_declaration_matches_an_entry_point() {
        let checked = check().unwrap_or_else(|e| panic!("SQL declarations and Rust entry points disagree:\n{e}"));
        assert!(checked > 130, "found the declarations ({checked})");
    }

    const SQL: &str = "-- a comment with CREATE FUNCTION in it\n\
        CREATE FUNCTION vector_in(cstring, oid, integer) RETURNS vector\n    AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT;\n\
        CREATE OR REPLACE FUNCTION l2_distance(vector, vector) RETURNS float8\n    AS 'MODULE_PATHNAME', 'l2_distance' LANGUAGE C;\n\
        CREATE FUNCTION avg_of(double precision[], numeric(10, 2)) RETURNS float8 AS 'MODULE_PATHNAME', 'avg_sym' LANGUAGE C;\n\
        CREATE FUNCTION plain(int) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n\
        CREATE TYPE vector (INPUT = vector_in);\n";

    const RUST: &str = "v1_functions! {\n    vector_in => input::<Vector>;\n    l2_distance => distance, kernels::l2;\n    avg_sym => avg;\n}\n\
        unsafe fn input<K: VectorType>(fcinfo: pg_sys::FunctionCallInfo) -> Datum {\n    let text = unsafe { arg(fcinfo, 0) };\n    unsafe { typmod(fcinfo) }\n}\n\
        unsafe fn typmod(fcinfo: pg_sys::FunctionCallInfo) -> i32 {\n    unsafe { arg_i32(fcinfo, 2) }\n}\n\
        unsafe fn distance(fcinfo: pg_sys::FunctionCallInfo, f: Kernel) -> Datum {\n    let (a, b) = unsafe { (elems::<K>(arg(fcinfo, 0)), elems::<K>(arg(fcinfo, 1))) };\n}\n\
        unsafe fn avg(fcinfo: pg_sys::FunctionCallInfo) -> Datum {\n    unsafe { arg(fcinfo, 1) }\n}\n";

    fn fixture(sql: &str, rust: &str) -> Result {
        let sources: BTreeMap<String, String> = [("types/mod.rs".to_owned(), rust.to_owned())].into();
        compare(&parse_declarations("t.sql", sql), &parse_entry_points("types/mod.rs", rust), &sources)
    }

    #[test]
    fn declarations_and_entry_points_are_parsed() {
        let declarations = parse_declarations("t.sql", SQL);
        let summary: Vec<(&str, &str, usize)> =
            declarations.iter().map(|d| (d.name.as_str(), d.symbol.as_str(), d.args)).collect();
        assert_eq!(
            summary,
            [("vector_in", "vector_in", 3), ("l2_distance", "l2_distance", 2), ("avg_of", "avg_sym", 2)]
        );
        let entries = parse_entry_points("types/mod.rs", RUST);
        let bodies: Vec<(&str, &str)> = entries.iter().map(|e| (e.symbol.as_str(), e.body.as_str())).collect();
        assert_eq!(bodies, [("vector_in", "input"), ("l2_distance", "distance"), ("avg_sym", "avg")]);
        assert_eq!(fixture(SQL, RUST), Ok(()));
    }

    #[test]
    fn a_renamed_symbol_fails() {
        let renamed = SQL.replace("'l2_distance' LANGUAGE", "'l2_distanc' LANGUAGE");
        let error = fixture(&renamed, RUST).unwrap_err();
        assert!(error.contains("links to symbol l2_distanc"), "{error}");
        assert!(error.contains("exports l2_distance, which no CREATE FUNCTION"), "{error}");
    }

    #[test]
    fn an_argument_read_past_the_declaration_fails() {
        // The typmod argument is read two calls deep: declaring two arguments is too few.
        let fewer = SQL.replace("vector_in(cstring, oid, integer)", "vector_in(cstring, oid)");
        let error = fixture(&fewer, RUST).unwrap_err();
        assert!(
            error.contains("vector_in is declared with 2 argument(s)") && error.contains("reads argument 2"),
            "{error}"
        );
        let one = SQL.replace("avg_of(double precision[], numeric(10, 2))", "avg_of(double precision[])");
        assert!(fixture(&one, RUST).unwrap_err().contains("avg_of is declared with 1 argument(s)"));
    }
}
