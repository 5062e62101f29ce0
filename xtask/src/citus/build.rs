//! Building Citus from the vendored release tarballs (`../shared/vendor`, see its README.md) into
//! the PostgreSQL that `--pg` selects: [`release`] picks the release, [`ensure_installed`] checks
//! the tarball's sha256, unpacks it under [`BUILD_ROOT`], applies the compatibility fixes the
//! installation's headers call for, and runs `configure`, `make` and `make install` against that
//! installation's `pg_config`.
//!
//! The fixes, each applied only when the headers call for it, to the unpacked copy:
//! - PostgreSQL 15.20 and later 15 releases export `have_createdb_privilege()`, which Citus
//!   13.2.2's `pg_version_compat.h` defines as a static function: the static one is removed;
//! - PostgreSQL 16 before 16.5 (the 16.2 wheel) lacks `systable_inplace_update_begin()` and
//!   `_finish()`, which Citus 14's columnar storage calls: `inplace_update.c` beside this file,
//!   the same update through `heap_inplace_update()`, goes into the one file that calls them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::CitusError;
use crate::pg::{self, Major};
use crate::process::{self, run};
use crate::{repo_root, Result};

/// A Citus release this command builds from its vendored tarball.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The release, e.g. `14.0.1` (the tarball is `citus-VERSION.tar.gz`).
    pub version: &'static str,
    /// The tarball's sha256 (shared/vendor/README.md).
    pub sha256: &'static str,
}

/// Citus 13.2.2, built for PostgreSQL 15 (it serves 15–17).
pub const CITUS_13: Release =
    Release { version: "13.2.2", sha256: "dd2453caec20a830e5e63f1def5c5a98cb6f57ae510407cdcd800916fcdab430" };
/// Citus 14.0.1, built for PostgreSQL 16–18.
pub const CITUS_14: Release =
    Release { version: "14.0.1", sha256: "acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba" };
/// Where the tarball is unpacked and compiled: outside the repository, kept between runs.
const BUILD_ROOT: &str = "/var/tmp/pg_strata-citus-build";
/// The packages Citus's configure and build need (shared/vendor/README.md).
const APT_PACKAGES: &[&str] =
    &["liblz4-dev", "libzstd-dev", "libkrb5-dev", "libxslt1-dev", "libselinux1-dev", "libpam0g-dev", "libreadline-dev"];

/// The Citus release built for `major`: 13.2.2 for PostgreSQL 15 (the release the Citus glue was
/// written against there), 14.0.1 for 16–18 (13.2.2 does not serve 18).
pub fn release(major: Major) -> std::result::Result<Release, CitusError> {
    match major.number() {
        15 => Ok(CITUS_13),
        16..=18 => Ok(CITUS_14),
        other => Err(CitusError::Unsupported(other)),
    }
}

fn pg_config_value(flag: &str) -> Result<PathBuf> {
    Ok(PathBuf::from(process::output(Command::new(pg::selected().pg_config()).arg(flag))?.trim()))
}

/// Whether the selected installation has `release` of Citus: its library, and a control file whose
/// `default_version` is the release's (`14.0.1` installs `default_version = '14.0-1'`).
pub fn is_installed(release: Release) -> Result<bool> {
    let lib = pg_config_value("--pkglibdir")?.join("citus.so");
    let control =
        fs::read_to_string(pg_config_value("--sharedir")?.join("extension/citus.control")).unwrap_or_default();
    Ok(lib.is_file() && control_version(&control).is_some_and(|v| v == release.extension_version()))
}

/// The `default_version` of a control file's text, e.g. `14.0-1`.
fn control_version(control: &str) -> Option<String> {
    control.lines().find_map(|line| {
        let value = line.trim().strip_prefix("default_version")?.trim_start().strip_prefix('=')?;
        Some(value.trim().trim_matches('\'').to_owned())
    })
}

impl Release {
    /// The extension version `CREATE EXTENSION citus` installs: `14.0.1` → `14.0-1`.
    pub fn extension_version(self) -> String {
        match self.version.rsplit_once('.') {
            Some((major_minor, _)) => format!("{major_minor}-1"),
            None => self.version.to_owned(),
        }
    }
}

/// Removes the `static inline bool have_createdb_privilege(void) { … }` compat definition from
/// the text of Citus's `pg_version_compat.h`; the rest of the text is unchanged. `None` when the
/// definition is not there.
pub fn remove_have_createdb_privilege(header: &str) -> Option<String> {
    let signature = "static inline bool\nhave_createdb_privilege(void)\n{";
    let start = header.find(signature)?;
    let body_end = header[start..].find("\n}\n")? + start + "\n}\n".len();
    let mut out = String::with_capacity(header.len());
    out.push_str(&header[..start]);
    out.push_str("/* have_createdb_privilege() is exported by this PostgreSQL release */\n");
    out.push_str(&header[body_end..]);
    Some(out)
}

fn ensure_apt_packages() -> Result {
    crate::setup::install_apt_packages(APT_PACKAGES, "Citus")
}

/// The vendored tarball of `release`: `STRATA_VENDOR` when set, else `../shared/vendor` beside the
/// repository.
fn tarball(release: Release) -> PathBuf {
    std::env::var_os("STRATA_VENDOR")
        .map_or_else(|| repo_root().join("../shared/vendor"), PathBuf::from)
        .join(format!("citus-{}.tar.gz", release.version))
}

/// A directory name for the release and the installation `pg_config` lives in, so that builds
/// for different installations do not share object files.
fn build_dir(release: Release) -> PathBuf {
    let install = pg::selected().install_dir().display().to_string();
    let name: String = install.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    PathBuf::from(BUILD_ROOT).join(format!("citus-{}{name}", release.version))
}

/// Checks the tarball of `release` is there and is the release (its sha256).
fn check_tarball(release: Release) -> Result<PathBuf> {
    let tarball = tarball(release);
    if !tarball.is_file() {
        return Err(CitusError::NoTarball(tarball.display().to_string()).into());
    }
    let sum = process::output(Command::new("sha256sum").arg(&tarball))?;
    let found = sum.split_whitespace().next().unwrap_or("").to_owned();
    if found != release.sha256 {
        return Err(
            CitusError::Checksum { path: tarball.display().to_string(), found, expected: release.sha256 }.into()
        );
    }
    Ok(tarball)
}

/// Builds the Citus release for the selected PostgreSQL ([`release`]) from the vendored tarball
/// and installs it into that installation's directories, unless it is installed there already.
/// Prints how long the build took.
pub fn ensure_installed() -> Result {
    let major = pg::selected();
    let release = release(major)?;
    if is_installed(release)? {
        return Ok(());
    }
    ensure_apt_packages()?;
    let tarball = check_tarball(release)?;
    let started = std::time::Instant::now();
    let dir = build_dir(release);
    println!("==> building Citus {} in {} for {major} (1.5 to 5 minutes on 2 cores)", release.version, dir.display());
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    run(Command::new("tar").args(["xzf"]).arg(&tarball).args(["--strip-components=1", "-C"]).arg(&dir))?;
    apply_compat_fixes(&dir)?;
    run(Command::new("./configure")
        .arg("--without-libcurl")
        .arg(format!("PG_CONFIG={}", major.pg_config().display()))
        .current_dir(&dir)
        .stdout(std::process::Stdio::null()))?;
    // PG_CONFIG, and CFLAGS without the warning options this machine's compiler refuses (the
    // wheels' PostgreSQL was compiled by a newer one).
    let make_args = major.pgxs_make_args()?;
    let jobs = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    run(Command::new("make")
        .arg(format!("-j{jobs}"))
        .arg("-s")
        .args(&make_args)
        .current_dir(&dir)
        .stdout(std::process::Stdio::null()))?;
    run(Command::new("make")
        .args(["-s", "install"])
        .args(&make_args)
        .current_dir(&dir)
        .stdout(std::process::Stdio::null()))?;
    if !is_installed(release)? {
        return Err(format!(
            "make install in {} did not install Citus {} into {major}",
            dir.display(),
            release.version
        ));
    }
    println!("==> Citus {} installed ({:.1} min)", release.version, started.elapsed().as_secs_f64() / 60.0);
    Ok(())
}

/// Applies the compatibility fixes the selected installation's server headers call for (module
/// documentation) to the source unpacked in `dir`.
fn apply_compat_fixes(dir: &Path) -> Result {
    let server_headers = pg_config_value("--includedir-server")?;
    let header = |name: &str| fs::read_to_string(server_headers.join(name)).unwrap_or_default();
    if header("commands/dbcommands.h").contains("have_createdb_privilege") {
        remove_static_have_createdb_privilege(dir)?;
    }
    if !header("access/genam.h").contains("systable_inplace_update_begin") {
        add_inplace_update(dir)?;
    }
    Ok(())
}

/// Removes the static `have_createdb_privilege()` of `pg_version_compat.h`, which clashes with the
/// server's exported one (PostgreSQL 15.20 and later 15 releases). Nothing to do when the release
/// defines none (Citus 14).
fn remove_static_have_createdb_privilege(dir: &Path) -> Result {
    let header = dir.join("src/include/pg_version_compat.h");
    let text = fs::read_to_string(&header).map_err(|e| format!("{}: {e}", header.display()))?;
    if !text.contains("have_createdb_privilege(void)") {
        return Ok(());
    }
    let fixed = remove_have_createdb_privilege(&text).ok_or_else(|| CitusError::CompatFix {
        file: header.display().to_string(),
        what: "the static have_createdb_privilege() definition to remove",
    })?;
    fs::write(&header, fixed).map_err(|e| format!("{}: {e}", header.display()))?;
    println!("==> removed the static have_createdb_privilege() from {} (the server exports it)", header.display());
    Ok(())
}

/// The definitions of `systable_inplace_update_begin()` and `_finish()` for a server without them.
const INPLACE_UPDATE: &str = include_str!("inplace_update.c");
/// The one file of Citus 14.0.1 that calls them.
const INPLACE_UPDATE_CALLER: &str = "src/backend/columnar/columnar_metadata.c";
/// The line of that file after which the definitions go (its last compat header).
const INPLACE_UPDATE_ANCHOR: &str = "#include \"columnar/columnar_version_compat.h\"\n";

/// `source` with [`INPLACE_UPDATE`] after its [`INPLACE_UPDATE_ANCHOR`] line; `None` when the
/// anchor is missing or `source` calls `systable_inplace_update_cancel()`, which it lacks.
pub fn insert_inplace_update(source: &str) -> Option<String> {
    if source.contains("systable_inplace_update_cancel") {
        return None;
    }
    let at = source.find(INPLACE_UPDATE_ANCHOR)? + INPLACE_UPDATE_ANCHOR.len();
    Some(format!("{}{INPLACE_UPDATE}{}", &source[..at], &source[at..]))
}

/// Gives the server's missing `systable_inplace_update_*` functions (PostgreSQL 16 before 16.5,
/// the 16.2 wheel) to the file that calls them; refuses a release that calls them elsewhere.
fn add_inplace_update(dir: &Path) -> Result {
    let mut callers = Vec::new();
    let mut pending = vec![dir.join("src")];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).map_err(|e| format!("{}: {e}", folder.display()))?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "c" || ext == "h")
                && fs::read_to_string(&path).is_ok_and(|text| text.contains("systable_inplace_update_"))
            {
                callers.push(path);
            }
        }
    }
    let caller = dir.join(INPLACE_UPDATE_CALLER);
    if callers.is_empty() {
        return Ok(());
    }
    let unexpected = |what| CitusError::CompatFix { file: caller.display().to_string(), what };
    if callers != [caller.clone()] {
        return Err(unexpected("the only caller of systable_inplace_update_* (other files call them too)").into());
    }
    let text = fs::read_to_string(&caller).map_err(|e| format!("{}: {e}", caller.display()))?;
    let fixed = insert_inplace_update(&text)
        .ok_or_else(|| unexpected("the columnar_version_compat.h include, and no systable_inplace_update_cancel()"))?;
    fs::write(&caller, fixed).map_err(|e| format!("{}: {e}", caller.display()))?;
    println!("==> gave {} systable_inplace_update_begin/_finish (the server predates them)", caller.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_fix_removes_only_the_static_definition() {
        let header = "#define X 1\n\n\nstatic inline bool\nhave_createdb_privilege(void)\n{\n\tbool result = false;\n\
                      \tif (superuser())\n\t{\n\t\treturn true;\n\t}\n\treturn result;\n}\n\n\ntypedef bool Y;\n";
        let fixed = remove_have_createdb_privilege(header).unwrap();
        assert!(!fixed.contains("have_createdb_privilege(void)"));
        assert!(fixed.starts_with("#define X 1\n"));
        assert!(fixed.ends_with("\n\ntypedef bool Y;\n"));
        assert!(remove_have_createdb_privilege(&fixed).is_none());
    }

    #[test]
    fn inplace_update_goes_after_the_compat_include() {
        let source = "#include \"postgres.h\"\n#include \"columnar/columnar_version_compat.h\"\n\nstatic int x;\n";
        let fixed = insert_inplace_update(source).unwrap();
        let at = fixed.find("static void\nsystable_inplace_update_begin(").unwrap();
        assert!(fixed.find("columnar_version_compat.h").unwrap() < at);
        assert!(fixed.contains("systable_inplace_update_finish(void *state, HeapTuple tuple)"));
        assert!(fixed.ends_with("\nstatic int x;\n"));
        assert!(insert_inplace_update("#include \"postgres.h\"\n").is_none());
        let cancels = format!("{source}systable_inplace_update_cancel(state);\n");
        assert!(insert_inplace_update(&cancels).is_none());
    }

    #[test]
    fn each_version_gets_its_release() {
        assert_eq!(release(Major::parse("15").unwrap()).unwrap(), CITUS_13);
        for n in ["16", "17", "18"] {
            assert_eq!(release(Major::parse(n).unwrap()).unwrap(), CITUS_14);
        }
        assert_eq!(CITUS_14.extension_version(), "14.0-1");
        assert_eq!(CITUS_13.extension_version(), "13.2-1");
    }

    #[test]
    fn installed_release_is_read_from_the_control_file() {
        let control = "# Citus extension\ncomment = 'Citus distributed database'\ndefault_version = '14.0-1'\n\
                       module_pathname = '$libdir/citus'\n";
        assert_eq!(control_version(control).as_deref(), Some("14.0-1"));
        assert_eq!(control_version("comment = 'x'\n"), None);
    }
}
