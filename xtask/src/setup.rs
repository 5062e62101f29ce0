//! Installing what a fresh Debian 12 machine lacks, and building the extension.
//!
//! Each step checks first and only acts when something is missing, so running it again costs
//! seconds: apt packages, `cargo-pgrx` at the pinned version, and `cargo pgrx init` (only when its
//! config lacks PostgreSQL 15, because rewriting that file forces pgrx-pg-sys to rebuild).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::{self, run};
use crate::{repo_root, Result};

/// The PostgreSQL major version pg_strata builds against.
pub const PG_MAJOR: u32 = 15;
/// The cargo-pgrx version matching the pinned `pgrx` dependency.
pub const PGRX_VERSION: &str = "0.18.1";

/// Debian's PostgreSQL 15 binary directory, which builds and installs always use.
fn debian_pg_bin() -> PathBuf {
    PathBuf::from(format!("/usr/lib/postgresql/{PG_MAJOR}/bin"))
}

/// The PostgreSQL 15 binary directory clusters run from: `STRATA_PG_BIN` when set (a relocated
/// copy of the installation holding a copy of the extension, so that a long run is not disturbed
/// by other installs), else Debian's.
pub fn pg_bin() -> PathBuf {
    std::env::var_os("STRATA_PG_BIN").map_or_else(debian_pg_bin, PathBuf::from)
}

/// The `pg_config` of Debian's PostgreSQL 15: what the extension is built against and installed
/// into.
pub fn pg_config() -> PathBuf {
    debian_pg_bin().join("pg_config")
}

const APT_PACKAGES: &[&str] = &[
    "postgresql-15",
    "postgresql-server-dev-15",
    "sudo",
    "build-essential",
    "pkg-config",
    "libssl-dev",
    "clang",
    "libclang-dev",
    "python3-venv",
];

fn missing_apt_packages() -> Vec<&'static str> {
    APT_PACKAGES
        .iter()
        .copied()
        .filter(|package| {
            let status = Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", package])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"));
            !status
        })
        .collect()
}

fn ensure_apt_packages() -> Result {
    let missing = missing_apt_packages();
    if missing.is_empty() {
        return Ok(());
    }
    if !process::on_path("apt-get") {
        return Err(format!("missing packages {missing:?} and no apt-get to install them"));
    }
    println!("==> installing apt packages: {}", missing.join(" "));
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn cargo_pgrx_version() -> Option<String> {
    let out = Command::new("cargo").args(["pgrx", "--version"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn ensure_cargo_pgrx() -> Result {
    if cargo_pgrx_version().is_some_and(|v| v.ends_with(PGRX_VERSION)) {
        return Ok(());
    }
    println!("==> installing cargo-pgrx {PGRX_VERSION} (several minutes, once per machine)");
    run(Command::new("cargo").args(["install", "cargo-pgrx", "--version", PGRX_VERSION, "--locked"]))
}

fn pgrx_home() -> PathBuf {
    std::env::var_os("PGRX_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".pgrx"),
        PathBuf::from,
    )
}

fn ensure_pgrx_init() -> Result {
    let config = pgrx_home().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap_or_default();
    if text.lines().any(|line| line.trim_start().starts_with(&format!("pg{PG_MAJOR}"))) {
        return Ok(());
    }
    println!("==> cargo pgrx init --pg{PG_MAJOR} {}", pg_config().display());
    run(Command::new("cargo").args(["pgrx", "init"]).arg(format!("--pg{PG_MAJOR}")).arg(pg_config()))
}

/// Installs whatever is missing: apt packages, cargo-pgrx, and pgrx's PostgreSQL 15 config.
pub fn ensure_prerequisites() -> Result {
    ensure_apt_packages()?;
    ensure_cargo_pgrx()?;
    ensure_pgrx_init()
}

/// The cargo profile for the installed extension: `release` unless `STRATA_PROFILE` says otherwise
/// (benchmarks use `bench-release`).
fn profile() -> String {
    std::env::var("STRATA_PROFILE").unwrap_or_else(|_| "release".to_owned())
}

/// Builds pg_strata and installs it into PostgreSQL 15's library and extension directories.
pub fn build_and_install() -> Result {
    build_and_install_with(&[])
}

/// Builds and installs the extension for the test suites: with the `fault-injection` feature,
/// whose SQL function `strata_inject_fault()` makes file writes fail (never in other builds).
pub fn build_and_install_for_tests() -> Result {
    build_and_install_with(&["fault-injection"])
}

fn build_and_install_with(features: &[&str]) -> Result {
    let crate_dir = repo_root().join("pg_strata");
    println!("==> building and installing pg_strata (profile {}, features {features:?})", profile());
    let mut command = Command::new("cargo");
    command.args(["pgrx", "install", "--profile", &profile(), "--pg-config"]).arg(pg_config());
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    run(command.current_dir(&crate_dir))?;
    check_installed(&crate_dir)?;
    install_companion(&crate_dir)
}

/// Copies the companion extension `pg_strata_pgvector` (control file and SQL script in
/// `pg_strata/companion`; its C functions live in pg_strata's library) into PostgreSQL's extension
/// directory, next to the files `cargo pgrx install` put there.
fn install_companion(crate_dir: &Path) -> Result {
    let sharedir = process::output(Command::new(pg_config()).arg("--sharedir"))?;
    let target = Path::new(sharedir.trim()).join("extension");
    let source = crate_dir.join("companion");
    let entries = std::fs::read_dir(&source).map_err(|e| format!("{}: {e}", source.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", source.display()))?.path();
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, target.join(name)).map_err(|e| format!("installing {}: {e}", path.display()))?;
        }
    }
    println!("==> installed companion extension pg_strata_pgvector into {}", target.display());
    Ok(())
}

fn check_installed(crate_dir: &Path) -> Result {
    let pkglibdir = process::output(Command::new(pg_config()).arg("--pkglibdir"))?;
    let library = Path::new(pkglibdir.trim()).join("pg_strata.so");
    if library.is_file() {
        Ok(())
    } else {
        Err(format!("cargo pgrx install in {} did not produce {}", crate_dir.display(), library.display()))
    }
}

/// PostgreSQL 15's `pg_regress` (beside PGXS, from `pg_config --pgxs`).
pub fn pg_regress() -> Result<PathBuf> {
    let pgxs = process::output(Command::new(pg_config()).arg("--pgxs"))?;
    Path::new(pgxs.trim())
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("test/regress/pg_regress"))
        .ok_or_else(|| "cannot locate pg_regress from pg_config --pgxs".to_owned())
}

/// A virtual environment at `dir` (relative to the repository) with `requirements` installed;
/// made again only when the requirements file changed. Returns its interpreter.
pub fn python_venv(dir: &str, requirements: &str) -> Result<PathBuf> {
    let venv = repo_root().join(dir);
    let python = venv.join("bin/python");
    let requirements = repo_root().join(requirements);
    let stamp = venv.join(".requirements");
    let wanted = std::fs::read_to_string(&requirements).map_err(|e| format!("{}: {e}", requirements.display()))?;
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) && python.is_file() {
        return Ok(python);
    }
    println!("==> creating Python environment {}", venv.display());
    process::run(Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv))?;
    process::run(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&requirements),
    )?;
    std::fs::write(&stamp, wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(python)
}
