//! `cargo xtask test`: every test suite, in order of cost, with one summary at the end.
//!
//! 1. `cargo test` of the pure-Rust crates (engine, tooling), then the fuzz smoke run of the
//!    segment decoder and the vector text parser (`cargo xtask fuzz`, 50 s);
//! 2. build and install the extension, start a throwaway cluster;
//! 3. SQL regression tests (`tests/regress`, run by PostgreSQL's `pg_regress` against that cluster):
//!    exact expected output, including every error text;
//! 4. Python client tests (`tests/python`, pytest with psycopg 3 and pgvector-python) against it;
//! 5. pgvector's own test suites (`cargo xtask compat`): its SQL regression files against its
//!    expected output, differences only as listed, and pgvector-python's test suite;
//! 6. the crash harness (`tests/crash/harness.py`), 5 trials of kill -9 under load, then
//!    index == heap;
//! 7. the replication harness, short (`cargo xtask replica`'s checks on 6,000 rows: two
//!    standbys, kill -9 of one, a standby without the library, promotion, pg_rewind, a backup
//!    restore and a point-in-time restore, each with index == heap).
//!
//! Exits non-zero when any suite fails. Clusters live under /tmp so that the `postgres` user can
//! reach them wherever the repository is cloned; a failed run keeps its directory for inspection.
//! `--port P` moves the test cluster to P and the replication nodes to P + 3 … P + 9 (default P:
//! 55432); `--pg N` runs everything on PostgreSQL N.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::Cluster;
use crate::process;
use crate::setup;
use crate::{repo_root, Result};

const TEST_PORT: u16 = 55_432;

#[derive(Default)]
struct Summary {
    passed: Vec<&'static str>,
    failed: Vec<(&'static str, String)>,
}

impl Summary {
    fn record(&mut self, suite: &'static str, outcome: Result) {
        match outcome {
            Ok(()) => self.passed.push(suite),
            Err(error) => {
                eprintln!("xtask: suite failed: {suite}: {error}");
                self.failed.push((suite, error));
            }
        }
    }
}

fn cargo_tests() -> Result {
    println!("==> cargo test (pure-Rust crates)");
    process::run(Command::new("cargo").args(["test", "--workspace", "--exclude", "pg_strata"]).current_dir(repo_root()))
}

fn regress_tests(cluster: &Cluster, work: &Path) -> Result {
    println!("==> SQL regression tests (pg_regress)");
    let input = repo_root().join("tests/regress");
    let mut names: Vec<String> = std::fs::read_dir(input.join("sql"))
        .map_err(|e| format!("{}: {e}", input.display()))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".sql").map(str::to_owned)
        })
        .collect();
    names.sort();
    let pg_regress = setup::pg_regress()?;
    let output_dir = work.join("regress");
    std::fs::create_dir_all(&output_dir).map_err(|e| format!("{}: {e}", output_dir.display()))?;
    let outcome = process::run(
        Command::new(pg_regress)
            .arg(format!("--host={}", cluster.dir.display()))
            .arg(format!("--port={}", cluster.port))
            .arg("--user=postgres")
            .arg(format!("--bindir={}", setup::pg_bin().display()))
            .arg(format!("--inputdir={}", input.display()))
            .arg(format!("--outputdir={}", output_dir.display()))
            .arg("--dbname=strata_regress")
            .args(&names),
    );
    if outcome.is_err() {
        if let Ok(diffs) = std::fs::read_to_string(output_dir.join("regression.diffs")) {
            eprintln!("{diffs}");
        }
    }
    outcome
}

/// A virtual environment with the Python test dependencies, created once per checkout.
pub(crate) fn python_env() -> Result<PathBuf> {
    setup::python_venv("target/python-venv", "tests/python/requirements.txt")
}

fn python_tests(cluster: &Cluster) -> Result {
    println!("==> Python client tests (psycopg 3 + pgvector-python)");
    let python = python_env()?;
    let mut command = Command::new(python);
    command
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/python"])
        .env("STRATA_SHARED_DATA", repo_root().join("../shared/data"))
        .current_dir(repo_root());
    cluster_env(&mut command, cluster)?;
    process::run(&mut command)
}

/// Puts the cluster's coordinates in `command`'s environment, with the commands that restart it
/// (`STRATA_RESTART`), stop it immediately (`STRATA_STOP_IMMEDIATE`) and run its `pg_ctl` as the
/// `postgres` user (`STRATA_PG_CTL`, followed by its arguments).
fn cluster_env(command: &mut Command, cluster: &Cluster) -> Result {
    let xtask = std::env::current_exe().map_err(|e| format!("cannot locate the xtask binary: {e}"))?;
    let major = crate::pg::selected().number();
    let data = cluster.dir.join("data");
    let pg_ctl = format!("runuser -u postgres -- {}", setup::pg_bin().join("pg_ctl").display());
    command
        .env("STRATA_PGHOST", &cluster.dir)
        .env("STRATA_PGPORT", cluster.port.to_string())
        .env("STRATA_PGDATA", &data)
        .env(
            "STRATA_RESTART",
            format!(
                "{} cluster start --pg {major} --dir {} --port {} --no-build",
                xtask.display(),
                cluster.dir.display(),
                cluster.port
            ),
        )
        .env("STRATA_STOP_IMMEDIATE", format!("{pg_ctl} stop -m immediate -D {}", data.display()))
        .env("STRATA_PG_CTL", pg_ctl);
    Ok(())
}

/// Runs the crash harness (`tests/crash/harness.py`) for `trials` trials against `cluster`, which
/// it kills and restarts; writes a markdown summary to `summary` when given.
fn crash_trials(cluster: &Cluster, trials: u32, summary: Option<&Path>) -> Result {
    println!(
        "==> crash harness: {trials} trials (kill -9 of a backend, the index service, the postmaster; immediate stop)"
    );
    let mut command = crash_command(cluster, "tests/crash/harness.py")?;
    command.args(["--trials", &trials.to_string()]);
    if let Some(summary) = summary {
        command.arg("--summary").arg(summary);
    }
    process::run(&mut command)
}

/// A Python command for a script under tests/crash, with the cluster's coordinates and the
/// commands that restart or stop it in the environment.
fn crash_command(cluster: &Cluster, script: &str) -> Result<Command> {
    let python = python_env()?;
    let mut command = Command::new(python);
    command.arg(script).current_dir(repo_root());
    cluster_env(&mut command, cluster)?;
    Ok(command)
}

/// `cargo xtask crash --trials N`: the long crash run, then the recovery-time measurement at
/// 100k and 1M rows; writes docs/benchmarks/crash.md and docs/benchmarks/recovery.{json,md}.
pub fn crash(trials: u32) -> Result {
    setup::ensure_prerequisites()?;
    setup::build_and_install_for_tests()?;
    let work = PathBuf::from(format!("/tmp/pg_strata-crash-{}", std::process::id()));
    let cluster = Cluster::start(&work, TEST_PORT + 2)?;
    let summary = repo_root().join("docs/benchmarks/crash.md");
    let outcome = crash_trials(&cluster, trials, Some(&summary)).and_then(|()| {
        println!("==> index recovery time at 100k and 1M rows (kill -9 with 5,000 unflushed rows)");
        process::run(&mut crash_command(&cluster, "tests/crash/recovery_time.py")?)
    });
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
        println!("==> summary written to {}", summary.display());
    }
    outcome
}

/// Runs every suite, the test cluster on `port` (default [`TEST_PORT`]); fails when any fails.
pub fn run(port: Option<u16>) -> Result {
    let port = port.unwrap_or(TEST_PORT);
    setup::ensure_prerequisites()?;
    let mut summary = Summary::default();
    summary.record("cargo test", cargo_tests());
    summary.record("fuzz smoke", crate::fuzz::smoke(crate::fuzz::SMOKE_SECONDS));
    setup::build_and_install_for_tests()?;

    let work = PathBuf::from(format!("/tmp/pg_strata-test-{}", std::process::id()));
    let cluster = Cluster::start(&work, port)?;
    println!("==> test cluster ({}): {}", crate::pg::selected(), cluster.conninfo());
    summary.record("sql regression", regress_tests(&cluster, &work));
    summary.record("python client", python_tests(&cluster));
    summary.record("pgvector's own tests", crate::compat::suites(&cluster, &work));
    // Last: it kills and restarts the cluster.
    summary.record("crash harness (5 trials)", crash_trials(&cluster, 5, None));
    let stopped = crate::cluster::stop(&cluster.dir);
    summary.record("replication (short)", crate::replica::short(port + 3));

    println!("\n==> summary");
    for suite in &summary.passed {
        println!("  ok      {suite}");
    }
    for (suite, _) in &summary.failed {
        println!("  FAILED  {suite}");
    }
    println!("suites: {} passed, {} failed", summary.passed.len(), summary.failed.len());
    stopped?;
    if summary.failed.is_empty() {
        let _ = std::fs::remove_dir_all(&work);
        Ok(())
    } else {
        Err(format!("{} suite(s) failed; cluster files kept in {}", summary.failed.len(), work.display()))
    }
}

/// Runs the concurrent writers/searchers test (4 + 4 clients, then index == heap) for `seconds`.
pub fn stress(seconds: u32) -> Result {
    setup::ensure_prerequisites()?;
    setup::build_and_install_for_tests()?;
    let work = PathBuf::from(format!("/tmp/pg_strata-stress-{}", std::process::id()));
    let cluster = Cluster::start(&work, TEST_PORT + 1)?;
    println!("==> stress: 4 writers + 4 searchers for {seconds} s on {}", cluster.conninfo());
    let python = python_env()?;
    let outcome = process::run(
        Command::new(python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/python/test_index.py", "-k", "concurrent"])
            .env("STRATA_PGHOST", &cluster.dir)
            .env("STRATA_PGPORT", cluster.port.to_string())
            .env("STRATA_SHARED_DATA", repo_root().join("../shared/data"))
            .env("STRATA_STRESS_SECONDS", seconds.to_string())
            .current_dir(repo_root()),
    );
    crate::cluster::stop(&cluster.dir)?;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(&work);
    }
    outcome
}
