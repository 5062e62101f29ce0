//! `cargo xtask` — pg_strata's developer commands.
//!
//! ```text
//! cargo xtask demo [--dir DIR] [--port PORT]     set up, build, start a cluster, load the sample, query it
//! cargo xtask test [--port PORT]                 set up, build, run every test suite
//! cargo xtask lint                               cargo fmt --check, cargo clippy -D warnings (every crate)
//! cargo xtask shape                              code lines per area, PostgreSQL-free modules, SQL declarations
//! cargo xtask generate                           rewrite the generated blocks (types.sql, ARCHITECTURE.md)
//! cargo xtask cluster start --dir DIR --port PORT [--no-build]
//! cargo xtask cluster stop --dir DIR
//! cargo xtask citus start|stop [--workers N] [--dir DIR] [--port PORT] [--no-build]   a Citus coordinator + N workers
//! cargo xtask citus test [--port PORT] [--no-build]   the Citus suite of `cargo xtask test` alone
//! cargo xtask citus ops [--rows N] [--port PORT] [--no-build]   shard moves, rebalance, failover: index == heap
//! cargo xtask setup                              install what is missing (apt, cargo-pgrx, PostgreSQL, pgrx init)
//! cargo xtask build                              build and install the extension into the selected PostgreSQL
//! cargo xtask demo-data [--from DIR]             regenerate data/demo from shared/data
//! cargo xtask stress [--seconds N]               the concurrency test at full length (default 60 s)
//! cargo xtask fuzz [--seconds N] | fuzz seeds     fuzz smoke run (default 50 s) | rewrite its seeds
//! cargo xtask crash [--trials N]                 kill -9 / restart / index == heap (default 100)
//! cargo xtask bench [--quick] [--filtered | --unfiltered | --scale [--rows N] [--ingest-only] | --memory [--rows N] | --text | --text-quality | --recall-matrix | --floor | --citus [--rows N]] [--pgvector DIR | --no-build] [--port PORT] [--from DATA] [--dir OUT]   pg_strata vs pgvector
//! cargo xtask bench --peers --pgvector DIR [--pgvectorscale DIR] [--vectorchord DIR] [--sets LIST] [--rows N] [--quick] [--from DATA] [--dir OUT]   beside pgvectorscale and VectorChord
//! cargo xtask replica [--port PORT] [--no-build]  standbys, promotion, backup and PITR: index == heap
//! cargo xtask data scale|synthetic [--dir DIR] [--rows N] [--dims N]   the scale datasets (cached)
//! cargo xtask compat                             pgvector's SQL regression files and pgvector-python's tests
//! cargo xtask upgrade --from 15 --to 18 [--no-build] [--port PORT]   pg_upgrade with pg_strata indexes
//! ```
//!
//! Every command takes `--pg N` (15, 16, 17 or 18; default 15), the PostgreSQL major version it
//! builds for, installs into and runs clusters of; `setup` installs that version when it is
//! missing ([`pg`] says where each comes from). Every command runs as root on a fresh Debian 12
//! machine; clusters run as the `postgres` user. `STRATA_PG_BIN` names another binary directory
//! of the same major version to run clusters from (default: the installation's own); builds
//! always install into the installation `--pg` names.

mod bench;
mod citus;
mod cluster;
mod code_shape;
mod compat;
mod data;
mod demo;
mod demo_data;
mod fuzz;
mod generate;
mod lint;
mod peers;
mod pg;
mod process;
mod replica;
mod setup;
mod sql_decls;
mod test;
mod upgrade;

use std::path::PathBuf;
use std::process::ExitCode;

/// Result type of every command: an error is a message for the user.
pub type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str = "usage (every command also takes --pg 15|16|17|18, default 15):
  cargo xtask demo [--dir DIR] [--port PORT]
  cargo xtask test [--port PORT]
  cargo xtask lint
  cargo xtask shape
  cargo xtask generate
  cargo xtask cluster start --dir DIR --port PORT [--no-build]
  cargo xtask cluster stop --dir DIR
  cargo xtask citus start|stop [--workers N] [--dir DIR] [--port PORT] [--no-build]
  cargo xtask citus build | cargo xtask citus test|ops [--rows N] [--port PORT] [--no-build]
  cargo xtask setup
  cargo xtask build
  cargo xtask demo-data [--from DIR]
  cargo xtask stress [--seconds N]
  cargo xtask fuzz [--seconds N] | cargo xtask fuzz seeds
  cargo xtask crash [--trials N]
  cargo xtask bench [--quick] [--filtered | --unfiltered | --scale [--rows N] [--ingest-only] | --memory [--rows N] | --text | --text-quality | --recall-matrix | --floor | --citus [--rows N]] [--pgvector DIR | --no-build] [--port PORT] [--from DATA] [--dir OUT]
  cargo xtask bench --peers --pgvector DIR [--pgvectorscale DIR] [--vectorchord DIR] [--sets LIST] [--rows N] [--quick] [--port PORT] [--from DATA] [--dir OUT]
  cargo xtask replica [--port PORT] [--no-build]
  cargo xtask data scale|synthetic [--dir DIR] [--rows N] [--dims N]
  cargo xtask compat
  cargo xtask upgrade --from 15 --to 16|18 [--no-build] [--port PORT]";

/// Parsed `--flag value` options.
#[derive(Debug, Default)]
#[allow(clippy::struct_excessive_bools)] // one flag per command-line switch
pub struct Options {
    dir: Option<PathBuf>,
    port: Option<u16>,
    from: Option<PathBuf>,
    no_build: bool,
    seconds: Option<u32>,
    trials: Option<u32>,
    pgvector: Option<PathBuf>,
    quick: bool,
    filtered: bool,
    scale: bool,
    ingest_only: bool,
    memory: bool,
    text: bool,
    text_quality: bool,
    unfiltered: bool,
    recall_matrix: bool,
    floor: bool,
    citus: bool,
    peers: bool,
    pgvectorscale: Option<PathBuf>,
    vectorchord: Option<PathBuf>,
    sets: Option<String>,
    rows: Option<u64>,
    dims: Option<u32>,
    workers: Option<u32>,
    from_pg: Option<pg::Major>,
    to_pg: Option<pg::Major>,
}

fn parse_options(args: &[String]) -> Result<Options> {
    let mut options = Options::default();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--dir" => options.dir = Some(PathBuf::from(value()?)),
            "--port" => {
                let text = value()?;
                options.port = Some(text.parse().map_err(|_| format!("--port: not a port number: {text}"))?);
            }
            "--from" if args.iter().any(|a| a == "--to") => options.from_pg = Some(pg::Major::parse(value()?)?),
            "--from" => options.from = Some(PathBuf::from(value()?)),
            "--to" => options.to_pg = Some(pg::Major::parse(value()?)?),
            "--no-build" => options.no_build = true,
            "--quick" => options.quick = true,
            "--filtered" => options.filtered = true,
            "--scale" => options.scale = true,
            "--ingest-only" => options.ingest_only = true,
            "--memory" => options.memory = true,
            "--text" => options.text = true,
            "--text-quality" => options.text_quality = true,
            "--unfiltered" => options.unfiltered = true,
            "--recall-matrix" => options.recall_matrix = true,
            "--floor" => options.floor = true,
            "--citus" => options.citus = true,
            "--peers" => options.peers = true,
            "--pgvectorscale" => options.pgvectorscale = Some(PathBuf::from(value()?)),
            "--vectorchord" => options.vectorchord = Some(PathBuf::from(value()?)),
            "--sets" => options.sets = Some(value()?.clone()),
            "--pgvector" => options.pgvector = Some(PathBuf::from(value()?)),
            "--seconds" => {
                let text = value()?;
                options.seconds = Some(text.parse().map_err(|_| format!("--seconds: not a number: {text}"))?);
            }
            "--rows" => {
                let text = value()?;
                options.rows = Some(text.parse().map_err(|_| format!("--rows: not a number: {text}"))?);
            }
            "--dims" => {
                let text = value()?;
                options.dims = Some(text.parse().map_err(|_| format!("--dims: not a number: {text}"))?);
            }
            "--workers" => {
                let text = value()?;
                options.workers = Some(text.parse().map_err(|_| format!("--workers: not a number: {text}"))?);
            }
            "--trials" => {
                let text = value()?;
                options.trials = Some(text.parse().map_err(|_| format!("--trials: not a number: {text}"))?);
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(options)
}

fn run(args: &[String]) -> Result {
    let mut args = args.to_vec();
    let pg_flag = pg::take_pg_flag(&mut args)?;
    if let Some(major) = pg_flag {
        pg::select(major);
    }
    let (command, rest) = args.split_first().ok_or(USAGE)?;
    match command.as_str() {
        "demo" => demo::run(&parse_options(rest)?),
        "test" => test::run(parse_options(rest)?.port, pg_flag),
        "fuzz" => fuzz::command(rest),
        "lint" => lint::run(),
        "shape" => code_shape::run(),
        "generate" => generate::run(),
        "bench" => bench::run(&parse_options(rest)?),
        "stress" => test::stress(parse_options(rest)?.seconds.unwrap_or(60)),
        "crash" => test::crash(parse_options(rest)?.trials.unwrap_or(100)),
        "replica" => replica::run(&parse_options(rest)?),
        "compat" => compat::run(),
        "upgrade" => {
            let options = parse_options(rest)?;
            let from = options.from_pg.ok_or_else(|| format!("upgrade needs --from N\n{USAGE}"))?;
            let to = options.to_pg.ok_or_else(|| format!("upgrade needs --to N\n{USAGE}"))?;
            upgrade::run(from, to, !options.no_build, options.port)
        }
        "data" => {
            let (kind, rest) = rest.split_first().ok_or(USAGE)?;
            data::run(kind, &parse_options(rest)?)
        }
        "setup" => {
            setup::ensure_prerequisites()?;
            let major = pg::selected();
            println!("{major}: {} (pg_config {})", major.install_dir().display(), major.pg_config().display());
            Ok(())
        }
        "build" => {
            setup::ensure_prerequisites()?;
            setup::build_and_install()
        }
        "demo-data" => demo_data::generate(&parse_options(rest)?),
        "citus" => {
            let (action, rest) = rest.split_first().ok_or(USAGE)?;
            citus::command(action, &parse_options(rest)?)
        }
        "cluster" => {
            let (action, rest) = rest.split_first().ok_or(USAGE)?;
            let options = parse_options(rest)?;
            let dir = options.dir.clone().ok_or_else(|| format!("cluster {action} needs --dir\n{USAGE}"))?;
            match action.as_str() {
                "start" => {
                    let port = options.port.ok_or_else(|| format!("cluster start needs --port\n{USAGE}"))?;
                    if options.no_build {
                        setup::ensure_server()?;
                    } else {
                        setup::ensure_prerequisites()?;
                        setup::build_and_install()?;
                    }
                    let cluster = cluster::Cluster::start(&dir, port)?;
                    println!("{}", cluster.conninfo());
                    Ok(())
                }
                "stop" => cluster::stop(&dir),
                other => Err(format!("unknown cluster action {other}\n{USAGE}")),
            }
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other}\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The repository root (the parent of the `xtask` crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives inside the repository").to_path_buf()
}
