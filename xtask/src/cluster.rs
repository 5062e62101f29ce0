//! Throwaway PostgreSQL 15 clusters with pg_strata preloaded.
//!
//! Interface relied on by tests, benchmarks and external checks:
//! - data directory `DIR/data`, server log `DIR/log`, unix socket in `DIR` only (no TCP);
//! - superuser `postgres`, trust authentication;
//! - `start` on a directory that already holds a cluster starts it again (after a crash too, so
//!   WAL replay runs) instead of re-initialising it;
//! - `start` returns once the server accepts connections.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{self, as_postgres, run};
use crate::setup::pg_bin;
use crate::Result;

/// A running cluster's coordinates.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The cluster directory (socket directory; data in `dir/data`, log in `dir/log`).
    pub dir: PathBuf,
    /// The port, which with `listen_addresses = ''` only names the socket file.
    pub port: u16,
}

/// Settings appended to `postgresql.conf` at initdb.
fn cluster_settings(dir: &Path, port: u16) -> String {
    format!(
        "\n# pg_strata throwaway cluster\n\
         port = {port}\n\
         listen_addresses = ''\n\
         unix_socket_directories = '{dir}'\n\
         shared_preload_libraries = 'pg_strata'\n\
         max_connections = 50\n\
         shared_buffers = '256MB'\n\
         logging_collector = off\n\
         log_min_messages = warning\n",
        dir = dir.display()
    )
}

fn postgres_ids() -> Result<(u32, u32)> {
    let uid = process::output(Command::new("id").args(["-u", "postgres"]))?;
    let gid = process::output(Command::new("id").args(["-g", "postgres"]))?;
    let parse = |s: String| s.trim().parse::<u32>().map_err(|e| format!("id postgres: {e}"));
    Ok((parse(uid)?, parse(gid)?))
}

/// Creates `dir` owned by `postgres` and checks the `postgres` user can reach it.
fn prepare_dir(dir: &Path) -> Result {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (uid, gid) = postgres_ids()?;
    let metadata = fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if metadata.uid() != uid {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))
            .map_err(|e| format!("cannot give {} to postgres: {e}", dir.display()))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("chmod {}: {e}", dir.display()))?;
    }
    let reachable =
        as_postgres("test", Path::new("/")).arg("-w").arg(dir).status().map_err(|e| format!("runuser: {e}"))?.success();
    if !reachable {
        return Err(format!(
            "the postgres user cannot write to {} (a parent directory is not searchable by others?); \
             choose a --dir elsewhere, e.g. under /tmp",
            dir.display()
        ));
    }
    Ok(())
}

impl Cluster {
    /// Starts the cluster in `dir` on `port`, initialising it first when `dir/data` is empty.
    pub fn start(dir: &Path, port: u16) -> Result<Cluster> {
        Cluster::start_with(dir, port, "")
    }

    /// [`Cluster::start`], with `extra` appended to `postgresql.conf` after the standard settings
    /// when the cluster is initialised (a later line overrides an earlier one, so `extra` may
    /// change `listen_addresses` or `shared_preload_libraries`).
    pub fn start_with(dir: &Path, port: u16, extra: &str) -> Result<Cluster> {
        let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        prepare_dir(&dir)?;
        let data = dir.join("data");
        let log = dir.join("log");
        if data.join("PG_VERSION").is_file() {
            set_port(&data, &dir, port)?;
        } else {
            run(as_postgres(pg_bin().join("initdb"), &dir)
                .arg("-D")
                .arg(&data)
                .args(["--auth=trust", "--no-sync", "--username=postgres", "--encoding=UTF8", "--locale=C.UTF-8"])
                .stdout(std::process::Stdio::null()))?;
            let conf = data.join("postgresql.conf");
            let mut text = fs::read_to_string(&conf).map_err(|e| format!("{}: {e}", conf.display()))?;
            text.push_str(&cluster_settings(&dir, port));
            text.push_str(extra);
            fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))?;
        }
        let cluster = Cluster { dir, port };
        if cluster.accepts_connections() {
            return Ok(cluster);
        }
        // After a crash (kill -9 of the postmaster) the old postmaster may not be reaped yet and
        // its children may still hold the shared memory segment; PostgreSQL refuses to start
        // until both are gone, so wait for them and retry.
        wait_for_exit_of_stale_postmaster(&data, Duration::from_mins(1));
        let started = Instant::now();
        loop {
            let attempt = run(as_postgres(pg_bin().join("pg_ctl"), &cluster.dir)
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "120", "start"])
                // The server's environment stays clean: a developer's RUST_BACKTRACE would
                // otherwise add Rust backtraces to the DETAIL of errors raised in the extension.
                .env_remove("RUST_BACKTRACE")
                .env_remove("RUST_LIB_BACKTRACE")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null()));
            match attempt {
                Ok(()) => break,
                Err(e) if started.elapsed() > Duration::from_mins(1) => {
                    return Err(format!("{e}; server log: {}", log.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
        cluster.wait_until_ready(Duration::from_mins(2))?;
        Ok(cluster)
    }

    /// `host=DIR port=PORT user=postgres` — a libpq connection string for this cluster.
    pub fn conninfo(&self) -> String {
        format!("host={} port={} user=postgres", self.dir.display(), self.port)
    }

    /// Whether the server answers on its socket.
    pub fn accepts_connections(&self) -> bool {
        Command::new(pg_bin().join("pg_isready"))
            .arg("-q")
            .args(["-U", "postgres"])
            .arg("-h")
            .arg(&self.dir)
            .arg("-p")
            .arg(self.port.to_string())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn wait_until_ready(&self, timeout: Duration) -> Result {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if self.accepts_connections() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("server in {} did not accept connections within {timeout:?}", self.dir.display()))
    }

    /// A `psql` command connected to `database` on this cluster, failing on the first error.
    pub fn psql(&self, database: &str) -> Command {
        let mut command = Command::new(pg_bin().join("psql"));
        command
            .arg("-X")
            .arg("-q")
            .args(["-v", "ON_ERROR_STOP=1"])
            .arg("-h")
            .arg(&self.dir)
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", "postgres", "-d", database]);
        command
    }
}

/// Waits (up to `timeout`) until the process named in `data/postmaster.pid`, if any, is gone.
fn wait_for_exit_of_stale_postmaster(data: &Path, timeout: Duration) {
    let Ok(text) = fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    let Some(pid) = text.lines().next().and_then(|line| line.trim().parse::<u32>().ok()) else {
        return;
    };
    let started = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && started.elapsed() < timeout {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Rewrites the `port` setting when an existing cluster is started on a different port.
fn set_port(data: &Path, dir: &Path, port: u16) -> Result {
    let conf = data.join("postgresql.conf");
    let text = fs::read_to_string(&conf).map_err(|e| format!("{}: {e}", conf.display()))?;
    let wanted = format!("port = {port}");
    if text.lines().any(|line| line.trim() == wanted) {
        return Ok(());
    }
    let mut out = String::with_capacity(text.len() + 100);
    for line in text.lines().filter(|line| !line.trim_start().starts_with("port =")) {
        out.push_str(line);
        out.push('\n');
    }
    let _ = writeln!(out, "{wanted}\nunix_socket_directories = '{}'", dir.display());
    fs::write(&conf, out).map_err(|e| format!("{}: {e}", conf.display()))
}

/// Stops the cluster in `dir` (fast shutdown); succeeds when it is not running.
pub fn stop(dir: &Path) -> Result {
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let data = dir.join("data");
    if !data.join("PG_VERSION").is_file() {
        return Err(format!("{} holds no cluster", dir.display()));
    }
    let status = as_postgres(pg_bin().join("pg_ctl"), &dir)
        .arg("-D")
        .arg(&data)
        .arg("status")
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("pg_ctl status: {e}"))?;
    if status.code() == Some(3) {
        println!("cluster in {} is not running", dir.display());
        return Ok(());
    }
    run(as_postgres(pg_bin().join("pg_ctl"), &dir)
        .arg("-D")
        .arg(&data)
        .args(["-w", "-t", "120", "-m", "fast", "stop"])
        .stdout(std::process::Stdio::null()))?;
    println!("stopped cluster in {}", dir.display());
    Ok(())
}
