//! `cargo xtask test`: every test suite, in order of cost, with one summary at the end.
//!
//! 1. the code's shape: `cargo fmt --check` and `cargo clippy --workspace --all-targets -D
//!    warnings` with the workspace lints, `undocumented_unsafe_blocks` included (`cargo xtask
//!    lint`), then `cargo xtask shape` (code lines per area against their budgets, pg_strata
//!    modules that call no PostgreSQL API, SQL declarations against the Rust entry points); then
//!    `cargo test` of the pure-Rust crates (engine, LSM, text, tooling; xtask's tests repeat the
//!    shape checks and check the generated blocks), then the fuzz smoke run of the five targets
//!    (`cargo xtask fuzz`, 75 s);
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
//!    restore and a point-in-time restore, each with index == heap);
//! 8. the Citus suite (`tests/citus`: a coordinator and two workers, Citus built from
//!    shared/vendor when missing, 13.2.2 on PostgreSQL 15 and 14.0.1 on 16–18; distributed flat
//!    top-k == brute force, hnsw recall against one node, filters, settings reaching workers, bm25
//!    scores equal to one node's, hybrid, admin functions, shard moves with index == heap).
//!
//! Steps 2–8 depend on the PostgreSQL version and step 1 does not: `--pg N` runs all of them on
//! the default version (15) and steps 2–8 on another. Without `--pg` the default version runs,
//! and under CI (`CI=true`) the matrix: all steps on 15, steps 2–8 on 16, 17 and 18, then
//! `cargo xtask upgrade` from 15 to each of them with the builds those steps installed.
//!
//! Exits non-zero when any suite fails. Clusters live under /tmp so that the `postgres` user can
//! reach them wherever the repository is cloned; a failed run keeps its directory for inspection.
//! `--port P` moves the test cluster (and afterwards the upgrade's clusters, P … P + 2) to P,
//! the replication nodes to P + 3 … P + 9 and the Citus nodes to P + 10 … P + 12 (default P: 55432).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::pg::{Major, DEFAULT_MAJOR};
use crate::process;
use crate::setup;
use crate::{repo_root, Result};

const TEST_PORT: u16 = 55_432;

#[derive(Default)]
struct Summary {
    passed: Vec<(String, Duration)>,
    failed: Vec<(String, String, Duration)>,
}

impl Summary {
    /// Runs one suite and records its outcome and time.
    fn timed(&mut self, suite: String, body: impl FnOnce() -> Result) {
        let started = Instant::now();
        let outcome = body();
        let took = started.elapsed();
        match outcome {
            Ok(()) => self.passed.push((suite, took)),
            Err(error) => {
                eprintln!("xtask: suite failed: {suite}: {error}");
                self.failed.push((suite, error, took));
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

/// Which suites a run on one major version covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every suite: the pure-Rust crates' tests and the fuzz smoke run too.
    Full,
    /// The suites that run against a server (steps 2–8): the others do not depend on the
    /// PostgreSQL version and run in the [`Scope::Full`] pass.
    Server,
}

/// The versions a run covers: the one `--pg` names (all suites on the default version, the
/// server suites on another); without `--pg`, the default version only, or under CI
/// (`CI=true`) the matrix: every suite on 15, the server suites on 16, 17 and 18, then pg_upgrade
/// from 15 to each.
fn plan(pg_flag: Option<Major>) -> Vec<(Major, Scope)> {
    let scope = |major: Major| if major.number() == DEFAULT_MAJOR { Scope::Full } else { Scope::Server };
    if let Some(major) = pg_flag {
        return vec![(major, scope(major))];
    }
    let mut versions = vec![DEFAULT_MAJOR];
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        versions.extend(CI_MATRIX);
    }
    versions.into_iter().filter_map(|n| Major::parse(&n.to_string()).ok()).map(|m| (m, scope(m))).collect()
}

/// The versions CI tests beside the default one (their server suites).
const CI_MATRIX: [u32; 3] = [16, 17, 18];

/// Runs every suite of the run's plan ([`plan`]), the test cluster on `port` (default
/// [`TEST_PORT`]); prints one summary with each suite's time; fails when any suite fails.
pub fn run(port: Option<u16>, pg_flag: Option<Major>) -> Result {
    let port = port.unwrap_or(TEST_PORT);
    let started = Instant::now();
    let mut summary = Summary::default();
    let mut kept = Vec::new();
    let plan = plan(pg_flag);
    for &(major, scope) in &plan {
        crate::pg::select(major);
        println!("\n==> {major}: {}", if scope == Scope::Full { "every suite" } else { "the server suites" });
        match run_version(major, scope, port, &mut summary) {
            Ok(None) => {}
            Ok(Some(dir)) => kept.push(dir),
            Err(error) => summary.failed.push((format!("pg{}: set-up", major.number()), error, Duration::ZERO)),
        }
    }
    // With more than one version installed (the CI matrix): pg_upgrade from the default version
    // to each other one, with the extension builds the suites installed.
    let set_up_failed: Vec<String> =
        summary.failed.iter().filter_map(|(suite, _, _)| suite.strip_suffix(": set-up").map(str::to_owned)).collect();
    let installed = |major: Major| !set_up_failed.contains(&format!("pg{}", major.number()));
    if let Some(&(from, _)) = plan.first().filter(|_| plan.len() > 1 && installed(plan[0].0)) {
        for &(to, _) in plan.iter().skip(1).filter(|(to, _)| installed(*to)) {
            let suite = format!("pg_upgrade {} → {}", from.number(), to.number());
            summary.timed(suite, || crate::upgrade::run(from, to, false, Some(port)));
        }
    }
    println!("\n==> summary");
    for (suite, took) in &summary.passed {
        println!("  ok      {suite} ({:.0} s)", took.as_secs_f64());
    }
    for (suite, _, took) in &summary.failed {
        println!("  FAILED  {suite} ({:.0} s)", took.as_secs_f64());
    }
    println!("total time: {:.1} min", started.elapsed().as_secs_f64() / 60.0);
    println!("suites: {} passed, {} failed", summary.passed.len(), summary.failed.len());
    if summary.failed.is_empty() {
        Ok(())
    } else {
        let kept: Vec<String> = kept.iter().map(|p: &PathBuf| p.display().to_string()).collect();
        let kept = if kept.is_empty() { String::new() } else { format!("; cluster files kept in {}", kept.join(", ")) };
        Err(format!("{} suite(s) failed{kept}", summary.failed.len()))
    }
}

/// Runs one version's suites; returns the cluster directory when a suite failed (kept).
fn run_version(major: Major, scope: Scope, port: u16, summary: &mut Summary) -> Result<Option<PathBuf>> {
    let name = |suite: &str| format!("pg{}: {suite}", major.number());
    let failures_before = summary.failed.len();
    setup::ensure_prerequisites()?;
    if scope == Scope::Full {
        summary.timed(name("rustfmt"), crate::lint::fmt_check);
        summary.timed(name("clippy"), crate::lint::clippy);
        summary.timed(name("code shape"), crate::code_shape::run);
        summary.timed(name("cargo test"), cargo_tests);
        summary.timed(name("fuzz smoke"), || crate::fuzz::smoke(crate::fuzz::SMOKE_SECONDS));
    }
    let build = Instant::now();
    setup::build_and_install_for_tests()?;
    summary.passed.push((name("build and install"), build.elapsed()));

    let work = PathBuf::from(format!("/tmp/pg_strata-test-{}-pg{}", std::process::id(), major.number()));
    let cluster = Cluster::start(&work, port)?;
    println!("==> test cluster ({major}): {}", cluster.conninfo());
    summary.timed(name("sql regression"), || regress_tests(&cluster, &work));
    summary.timed(name("python client"), || python_tests(&cluster));
    summary.timed(name("pgvector's own tests"), || crate::compat::suites(&cluster, &work));
    // Last: it kills and restarts the cluster.
    summary.timed(name("crash harness (5 trials)"), || crash_trials(&cluster, 5, None));
    let stopped = crate::cluster::stop(&cluster.dir);
    summary.timed(name("replication (short)"), || crate::replica::short(port + 3));
    summary.timed(name("citus (coordinator + 2 workers)"), || crate::citus::suite(port + 10));
    stopped?;
    if summary.failed.len() == failures_before {
        let _ = std::fs::remove_dir_all(&work);
        Ok(None)
    } else {
        Ok(Some(work))
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
