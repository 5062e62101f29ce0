//! `cargo xtask replica`: the replication, backup and point-in-time-recovery harness
//! (`tests/replication/replica.py`): a primary and two streaming standbys on unix sockets, a
//! sliding-window workload, kill -9 of a standby, a standby without the library, promotion, a base
//! backup restored on its own and a point-in-time restore, each checked for index == heap. Writes
//! docs/benchmarks/replication.{json,md}; fails when a check fails.

use std::process::Command;

use crate::process;
use crate::setup::{self, pg_bin};
use crate::test::python_env;
use crate::{repo_root, Options, Result};

/// Builds and installs the extension (unless `--no-build`) with the `fault-injection` feature (the
/// isolation check injects EIO into one index's files on a standby), then runs the harness and
/// writes its figures to docs/benchmarks/replication.{json,md}.
pub fn run(options: &Options) -> Result {
    if !options.no_build {
        setup::ensure_prerequisites()?;
        setup::build_and_install_for_tests()?;
    }
    let mut command = harness()?;
    command.arg("--write-docs");
    if let Some(port) = options.port {
        command.args(["--port", &port.to_string()]);
    }
    process::run(&mut command)
}

/// The short run inside `cargo xtask test` (the extension already installed): every check on
/// 6,000 rows, nodes on ports `port`..`port + 6`, no figures written.
pub fn short(port: u16) -> Result {
    println!("==> replication harness, short (primary + standbys, promotion, pg_rewind, backup, PITR)");
    let mut command = harness()?;
    command.args(["--rows", "6000", "--wal-rows", "300", "--markers", "10", "--port", &port.to_string()]);
    process::run(&mut command)
}

fn harness() -> Result<Command> {
    let mut command = Command::new(python_env()?);
    command
        .arg("tests/replication/replica.py")
        .current_dir(repo_root())
        .env("STRATA_SHARED_DATA", repo_root().join("../shared/data"))
        .env("STRATA_PG_BIN", pg_bin());
    Ok(command)
}
