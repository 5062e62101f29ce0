//! `cargo xtask upgrade --from 15 --to 18`: pg_upgrade of a cluster holding pg_strata indexes with
//! the new version's stock `pg_upgrade`, then index == heap on every index with no REINDEX
//! (`tests/upgrade/upgrade.py` says what it checks). Also the last suite of `cargo xtask test`'s
//! CI matrix, once each version's extension is installed.

use std::process::Command;

use crate::pg::{self, Major};
use crate::process;
use crate::setup;
use crate::test::python_env;
use crate::{repo_root, Result};

/// The first port of the upgrade's clusters (old, new, and a copy of new).
const UPGRADE_PORT: u16 = 56_450;

/// Installs both versions and the extension into each (unless `build` is false: already done),
/// then runs the upgrade harness from `from` to `to` with clusters on `port`..`port + 2`.
pub fn run(from: Major, to: Major, build: bool, port: Option<u16>) -> Result {
    if from.number() >= to.number() {
        return Err(format!("upgrade: --from {} must be older than --to {}", from.number(), to.number()));
    }
    for major in [from, to] {
        pg::select(major);
        setup::ensure_prerequisites()?;
        if build {
            setup::build_and_install_for_tests()?;
        }
    }
    println!(
        "==> pg_upgrade {} → {} with pg_strata indexes (stock pg_upgrade of {})",
        from.number(),
        to.number(),
        to.number()
    );
    let root = format!("/tmp/pg_strata-upgrade-{}-{}to{}", std::process::id(), from.number(), to.number());
    process::run(
        Command::new(python_env()?)
            .arg("tests/upgrade/upgrade.py")
            .arg("--old-bindir")
            .arg(from.bindir())
            .arg("--new-bindir")
            .arg(to.bindir())
            .args(["--root", &root, "--port", &port.unwrap_or(UPGRADE_PORT).to_string()])
            .current_dir(repo_root()),
    )
}
