//! Checks of the code's shape, run by `cargo test` and printed by `cargo xtask shape`:
//!
//! - the modules of the pg_strata crate import each other without cycles (a module may use its
//!   parent's items; `crate::a::b` and `super::a` paths count);
//! - no Rust source file is longer than 800 lines;
//! - every pg_strata module reaches PostgreSQL (names `pg_sys` or `pgrx`) or is on
//!   [`PG_FREE_MODULES`], each with the reason it stays in the extension crate: code that can be
//!   decided and tested without PostgreSQL belongs in strata-lsm, strata-text or strata-engine;
//! - every `CREATE FUNCTION … LANGUAGE C` matches the Rust entry point it links to
//!   ([`crate::sql_decls`]);
//! - each area's code lines stay within its budget ([`BUDGETS`]); the table, generated from the
//!   sources, is the `line-budget` block of docs/ARCHITECTURE.md (`cargo xtask generate`
//!   rewrites it; a test fails when it is stale).
//!
//! A *code line* is a line of a `.rs` file that is neither blank nor a comment (`//`, `///`,
//! `//!`). *Test lines* are the code lines of test files (`tests.rs`, `tests_*.rs`,
//! `testdata.rs`, files under a `tests/` directory) and of a top-level `#[cfg(test)] mod … {`
//! block to the end of its file; they count apart and have no budget.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::{repo_root, Result};

/// pg_strata modules (paths under `pg_strata/src`) that name neither `pg_sys` nor `pgrx`, and
/// why each stays in the extension crate.
pub const PG_FREE_MODULES: [(&str, &str); 4] = [
    (
        "access/cache_owners.rs",
        "the backend-local map from segment-cache keys to relation OIDs that access::invalidation's \
         relcache callback reads; it holds PostgreSQL state, keyed by shared-memory index keys",
    ),
    (
        "maintenance.rs",
        "drives strata_lsm::merge_runner over crate::shmem's registry and manifest locks; what to \
         merge, the backoff and the failure episodes' log lines are strata-lsm's (policy, retry)",
    ),
    ("sweep.rs", "drives strata_lsm::garbage over crate::shmem's registry of the cluster's indexes"),
    ("threads.rs", "re-exports strata_lsm::threads under the crate's name (one line)"),
];

/// An area of the code and its budget of code lines.
pub struct Budget {
    /// The area's name in the table.
    pub area: &'static str,
    /// Paths (relative to the repository) whose `.rs` files belong to it: a directory, or
    /// `DIR/*.rs` for the files directly in DIR.
    pub paths: &'static [&'static str],
    /// The most code lines the area may hold. Raising one is a decision: say why in the commit.
    pub limit: usize,
}

/// The areas, most of the code first; every `.rs` file of the repository (outside `target/`)
/// belongs to exactly one (a test checks it).
pub const BUDGETS: [Budget; 12] = [
    Budget {
        area: "strata-engine: kernels, quantizers, HNSW/IVF/flat segments",
        paths: &["crates/engine/src", "crates/engine/tests", "crates/engine/benches"],
        limit: 13_000,
    },
    Budget {
        area: "strata-lsm: the LSM runtime (memtables, manifests, flush, merge, scan)",
        paths: &["crates/lsm/src", "crates/lsm/tests"],
        limit: 11_500,
    },
    Budget {
        area: "strata-text: BM25 documents, postings, text segments",
        paths: &["crates/text/src", "crates/text/tests", "crates/text/examples"],
        limit: 2_200,
    },
    Budget {
        area: "pg_strata access/: the access-method core of both index kinds",
        paths: &["pg_strata/src/access"],
        limit: 1_500,
    },
    Budget { area: "pg_strata index/: the vector access method", paths: &["pg_strata/src/index"], limit: 1_700 },
    Budget { area: "pg_strata text/: the bm25 access method, bm25query", paths: &["pg_strata/src/text"], limit: 1_300 },
    Budget { area: "pg_strata types/: vector, halfvec, sparsevec, bit", paths: &["pg_strata/src/types"], limit: 650 },
    Budget {
        area: "pg_strata top level: workers, shared memory, GUCs, fmgr",
        paths: &["pg_strata/src/*.rs"],
        limit: 1_800,
    },
    Budget { area: "strata-bench: engine benchmarks", paths: &["crates/bench"], limit: 1_700 },
    Budget { area: "fuzz targets", paths: &["crates/engine/fuzz"], limit: 400 },
    Budget { area: "xtask: build, test, bench, cluster commands", paths: &["xtask"], limit: 3_900 },
    Budget { area: "(unassigned)", paths: &[], limit: 0 },
];

/// The measured size of one area.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Measured {
    /// `.rs` files.
    pub files: usize,
    /// Code lines outside tests.
    pub code: usize,
    /// Code lines of tests.
    pub test: usize,
}

/// Every `.rs` file under `dir` (recursively, skipping `target` directories).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Code lines and test lines of one source file (see the module docs).
pub fn count_lines(relative: &str, source: &str) -> (usize, usize) {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    let test_file = name.starts_with("tests") || name == "testdata.rs" || relative.contains("/tests/");
    let lines: Vec<&str> = source.lines().collect();
    let (mut code, mut test, mut in_test) = (0, 0, test_file);
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        if *line == "#[cfg(test)]" && next.starts_with("mod ") && next.trim_end().ends_with('{') {
            in_test = true;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        if in_test {
            test += 1;
        } else {
            code += 1;
        }
    }
    (code, test)
}

/// The budget index of a file (relative to the repository): the first [`BUDGETS`] entry with a
/// matching path, else the last ("unassigned").
fn area_of(relative: &str) -> usize {
    BUDGETS
        .iter()
        .position(|b| {
            b.paths.iter().any(|p| match p.strip_suffix("/*.rs") {
                Some(dir) => {
                    relative.strip_prefix(dir).and_then(|r| r.strip_prefix('/')).is_some_and(|r| !r.contains('/'))
                }
                None => relative.starts_with(&format!("{p}/")),
            })
        })
        .unwrap_or(BUDGETS.len() - 1)
}

/// Measures every area of this checkout, in [`BUDGETS`] order.
pub fn measure() -> Vec<Measured> {
    let root = repo_root();
    let mut measured = vec![Measured::default(); BUDGETS.len()];
    for top in ["crates", "pg_strata", "xtask"] {
        for path in rust_files(&root.join(top)) {
            let relative = path.strip_prefix(&root).expect("under the root").to_string_lossy().into_owned();
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            let (code, test) = count_lines(&relative, &source);
            let entry = &mut measured[area_of(&relative)];
            entry.files += 1;
            entry.code += code;
            entry.test += test;
        }
    }
    measured
}

/// The Markdown table of `measured` against [`BUDGETS`]; an error when an area is over its
/// budget or a file belongs to no area. `exact` prints every count as measured (`cargo xtask
/// shape`); otherwise code and test lines are rounded to the nearest 100 and files left out (the
/// `line-budget` block of docs/ARCHITECTURE.md, which then changes only when an area grows or
/// shrinks by about 100 lines, not with every edit).
pub fn budget_table(measured: &[Measured], exact: bool) -> Result<String> {
    let shown = |n: usize| if exact { n.to_string() } else { format!("≈ {}", (n + 50) / 100 * 100) };
    let mut out = if exact {
        String::from("| area | files | code lines | budget | test lines |\n|---|---:|---:|---:|---:|\n")
    } else {
        String::from("| area | code lines | budget | test lines |\n|---|---:|---:|---:|\n")
    };
    let mut over = Vec::new();
    let (mut files, mut code, mut test) = (0, 0, 0);
    for (budget, m) in BUDGETS.iter().zip(measured) {
        if budget.paths.is_empty() {
            if m.files > 0 {
                over.push(format!("{} file(s) belong to no area of code_shape::BUDGETS", m.files));
            }
            continue;
        }
        if m.code > budget.limit {
            over.push(format!("{}: {} code lines, budget {}", budget.area, m.code, budget.limit));
        }
        let paths: Vec<String> = budget.paths.iter().map(|p| format!("`{p}`")).collect();
        let files_cell = if exact { format!(" {} |", m.files) } else { String::new() };
        let _ = writeln!(
            out,
            "| {} ({}) |{files_cell} {} | {} | {} |",
            budget.area,
            paths.join(", "),
            shown(m.code),
            budget.limit,
            shown(m.test)
        );
        files += m.files;
        code += m.code;
        test += m.test;
    }
    let files_cell = if exact { format!(" {files} |") } else { String::new() };
    let _ = writeln!(out, "| total |{files_cell} {} | | {} |", shown(code), shown(test));
    if over.is_empty() {
        Ok(out)
    } else {
        Err(format!("over budget: {}", over.join("; ")))
    }
}

/// pg_strata modules that name neither `pg_sys` nor `pgrx`, relative to `pg_strata/src`.
pub fn pg_free_modules() -> Vec<String> {
    let src = repo_root().join("pg_strata/src");
    rust_files(&src)
        .into_iter()
        .filter(|path| std::fs::read_to_string(path).is_ok_and(|s| !s.contains("pg_sys") && !s.contains("pgrx")))
        .map(|path| path.strip_prefix(&src).expect("under src").to_string_lossy().into_owned())
        .collect()
}

/// `cargo xtask shape`: prints the per-area budget and the PostgreSQL-free pg_strata modules with
/// their reasons; fails when an area is over budget, a module reaches no PostgreSQL API without
/// a listed reason (or a listed one does now), or docs/ARCHITECTURE.md's table is stale.
pub fn run() -> Result {
    println!("==> code shape: code lines per area (budgets in xtask/src/code_shape.rs)");
    let table = budget_table(&measure(), true)?;
    print!("{table}");
    println!("==> pg_strata modules that call no PostgreSQL API (pg_sys, pgrx), and why they stay");
    let found = pg_free_modules();
    let mut problems = Vec::new();
    for module in &found {
        match PG_FREE_MODULES.iter().find(|(m, _)| m == module) {
            Some((_, why)) => println!("  {module}: {why}"),
            None => problems.push(format!("pg_strata/src/{module} calls no PostgreSQL API: move it to a pure crate or list it in code_shape::PG_FREE_MODULES with a reason")),
        }
    }
    for (module, _) in &PG_FREE_MODULES {
        if !found.iter().any(|m| m == module) {
            problems.push(format!(
                "code_shape::PG_FREE_MODULES lists {module}, which now reaches PostgreSQL (or is gone): remove it"
            ));
        }
    }
    let declarations = crate::sql_decls::check();
    if let Ok(count) = &declarations {
        println!("==> SQL declarations: {count} CREATE FUNCTION … LANGUAGE C match their Rust entry points");
    }
    problems.extend(declarations.err());
    if !crate::generate::stale()?.is_empty() {
        problems.push(
            "generated blocks are stale (docs/ARCHITECTURE.md's budget or sql/types.sql): run `cargo xtask generate`"
                .to_owned(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Module path (`index::state`) → source, for every `.rs` file under `src`.
    fn modules(src: &Path) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut pending = vec![src.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let relative = path.strip_prefix(src).unwrap().with_extension("");
                    let name = relative.to_string_lossy().replace("/mod", "").replace('/', "::");
                    out.insert(
                        if name == "lib" { "crate".to_owned() } else { name },
                        std::fs::read_to_string(&path).unwrap(),
                    );
                }
            }
        }
        out
    }

    /// The modules each module refers to through `crate::…` or `super::…` paths.
    fn edges(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges = BTreeMap::new();
        for (name, source) in modules {
            let parent = name.rsplit_once("::").map_or("", |(p, _)| p);
            let mut targets = BTreeSet::new();
            for (prefix, base) in [("crate::", ""), ("super::", parent)] {
                for (at, _) in source.match_indices(prefix) {
                    let before = source[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let path: Vec<&str> = source[at + prefix.len()..]
                        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .collect();
                    let join = |parts: &[&str]| {
                        let tail = parts.join("::");
                        if base.is_empty() {
                            tail
                        } else {
                            format!("{base}::{tail}")
                        }
                    };
                    let target = [2, 1]
                        .into_iter()
                        .filter(|&n| path.len() >= n)
                        .map(|n| join(&path[..n]))
                        .find(|m| modules.contains_key(m));
                    if let Some(target) = target.filter(|t| t != name && !name.starts_with(&format!("{t}::"))) {
                        targets.insert(target);
                    }
                }
            }
            edges.insert(name.clone(), targets);
        }
        edges
    }

    /// A module on a cycle, with the cycle, if there is one.
    fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        fn visit(
            node: &str,
            edges: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(start) = path.iter().position(|p| p == node) {
                return Some(path[start..].to_vec());
            }
            if !done.insert(node.to_owned()) {
                return None;
            }
            path.push(node.to_owned());
            for next in edges.get(node).into_iter().flatten() {
                if let Some(cycle) = visit(next, edges, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        edges.keys().find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
    }

    #[test]
    fn pg_strata_modules_import_each_other_without_cycles() {
        let src = crate::repo_root().join("pg_strata/src");
        let modules = modules(&src);
        assert!(modules.contains_key("access::state"), "read the crate's modules");
        let edges = edges(&modules);
        assert!(edges["access::recovery"].contains("access::state"), "edges are found");
        assert_eq!(find_cycle(&edges), None, "pg_strata's modules import each other in a cycle");
    }

    #[test]
    fn no_rust_source_file_is_longer_than_800_lines() {
        let root = crate::repo_root();
        let mut pending: Vec<_> = ["pg_strata", "crates", "xtask"].iter().map(|d| root.join(d)).collect();
        let mut checked = 0;
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() && !path.ends_with("target") {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                    assert!(lines <= 800, "{} has {lines} lines (at most 800)", path.display());
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "found the sources ({checked} files)");
    }

    #[test]
    fn areas_are_within_budget_and_every_file_has_one() {
        let measured = super::measure();
        let table = super::budget_table(&measured, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(measured.iter().map(|m| m.files).sum::<usize>() > 200, "found the sources");
        assert!(table.contains("| total |"));
    }

    #[test]
    fn pg_free_modules_are_exactly_the_listed_ones() {
        let found = super::pg_free_modules();
        let listed: Vec<&str> = super::PG_FREE_MODULES.iter().map(|(m, _)| *m).collect();
        assert!(
            found.iter().all(|m| listed.contains(&m.as_str())),
            "unlisted PostgreSQL-free modules: {found:?} (listed: {listed:?})"
        );
        assert!(
            listed.iter().all(|m| found.iter().any(|f| f == m)),
            "listed modules that reach PostgreSQL now: {listed:?} vs {found:?}"
        );
    }

    #[test]
    fn lines_are_counted_as_code_or_test() {
        let source =
            "//! doc\nuse x;\n\n/// item\nfn f() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        assert_eq!(super::count_lines("a/src/lib.rs", source), (2, 5));
        assert_eq!(super::count_lines("a/src/tests_x.rs", "fn t() {}\n"), (0, 1));
        assert_eq!(super::count_lines("a/tests/it.rs", "fn t() {}\n// c\n"), (0, 1));
        assert_eq!(super::area_of("pg_strata/src/lib.rs"), 7);
        assert_eq!(super::area_of("pg_strata/src/index/mod.rs"), 4);
        assert_eq!(super::area_of("somewhere/else.rs"), super::BUDGETS.len() - 1);
    }

    #[test]
    fn a_cycle_is_found() {
        let modules: BTreeMap<String, String> = [
            ("a".to_owned(), "use crate::b::thing;".to_owned()),
            ("b".to_owned(), "fn f() { super::c::g() }".to_owned()),
            ("c".to_owned(), "use crate::a;".to_owned()),
        ]
        .into();
        let cycle = find_cycle(&edges(&modules)).expect("a → b → c → a");
        assert_eq!(cycle.len(), 3);
    }
}
