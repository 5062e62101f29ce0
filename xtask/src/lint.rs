//! `cargo xtask lint`: the code-shape checks that need no server, run first by `cargo xtask test`.
//!
//! 1. `cargo fmt --check` of the workspace and of the fuzz crate (outside the workspace), against
//!    `rustfmt.toml`;
//! 2. `cargo clippy --workspace --all-targets -- -D warnings` with the workspace's lints
//!    (`[workspace.lints]` in the root `Cargo.toml`: clippy's pedantic group and
//!    `undocumented_unsafe_blocks`, so an `unsafe` block without a `// SAFETY:` comment fails).
//!
//! Clippy builds pg_strata, whose `pgrx-pg-sys` dependency generates its bindings from the
//! selected PostgreSQL's headers: the command names that installation's `pg_config` through
//! `PGRX_PG_CONFIG_PATH` (so it needs no `cargo pgrx init`) and enables the cargo feature of its
//! major version and `fault-injection` (the test build's feature set). A fresh machine needs
//! `cargo xtask setup` (or any command that runs it) first, for the server headers.

use std::process::Command;

use crate::process;
use crate::{repo_root, Result};

/// Installs the toolchain's `clippy` and `rustfmt` components when `cargo clippy` or `cargo fmt`
/// is missing (a minimal rustup profile has neither).
fn ensure_components() -> Result {
    let works = |tool: &str| Command::new("cargo").args([tool, "--version"]).output().is_ok_and(|o| o.status.success());
    if works("clippy") && works("fmt") {
        return Ok(());
    }
    println!("==> rustup component add clippy rustfmt");
    process::run(Command::new("rustup").args(["component", "add", "clippy", "rustfmt"]))
}

/// Runs rustfmt's check on the workspace and the fuzz crate; fails on any unformatted file.
pub fn fmt_check() -> Result {
    ensure_components()?;
    println!("==> cargo fmt --check (workspace and fuzz crate)");
    process::run(Command::new("cargo").args(["fmt", "--all", "--check"]).current_dir(repo_root()))?;
    process::run(
        Command::new("cargo")
            .args(["fmt", "--check", "--manifest-path", "crates/engine/fuzz/Cargo.toml"])
            .current_dir(repo_root()),
    )
}

/// Runs clippy over every crate and target of the workspace with warnings as errors, pg_strata
/// built for the selected PostgreSQL version ([`crate::pg::selected`]).
pub fn clippy() -> Result {
    ensure_components()?;
    let major = crate::pg::selected();
    println!("==> cargo clippy --workspace --all-targets -D warnings (pg_strata for {major})");
    let features = format!("pg_strata/{},pg_strata/fault-injection", major.feature());
    let mut command = Command::new("cargo");
    command.args(["clippy", "--workspace", "--all-targets", "--features", &features]);
    if major.number() != crate::pg::DEFAULT_MAJOR {
        // pg_strata's default feature is the default version's: one pgNN feature at a time.
        command.args(["--no-default-features"]);
    }
    command.args(["--", "-D", "warnings"]).env("PGRX_PG_CONFIG_PATH", major.pg_config()).current_dir(repo_root());
    process::run(&mut command)
}

/// `cargo xtask lint`: rustfmt's check, then clippy.
pub fn run() -> Result {
    crate::setup::ensure_prerequisites()?;
    fmt_check()?;
    clippy()
}
