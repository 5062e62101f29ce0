"""PostgreSQL 15 nodes for the replication harness: a primary that archives its WAL, streaming
standbys made with `pg_basebackup -R`, base backups restored on their own, and point-in-time
restores. Every node listens on a unix socket in its own directory only (no TCP) and runs as the
`postgres` user; the harness itself runs as root (as `cargo xtask` does).

The PostgreSQL binaries come from STRATA_PG_BIN (default: Debian's PostgreSQL 15)."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import time

import psycopg

PG_BIN = pathlib.Path(os.environ.get("STRATA_PG_BIN", "/usr/lib/postgresql/15/bin"))


def as_postgres(args: list[str], check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs a command as the `postgres` user; raises with its output when it fails and `check`."""
    result = subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def give_to_postgres(path: pathlib.Path) -> None:
    """Creates `path` (mode 0700) owned by the postgres user."""
    path.mkdir(parents=True, exist_ok=True)
    shutil.chown(path, "postgres", "postgres")
    path.chmod(0o700)


class Node:
    """One cluster: data in `dir/data`, server log `dir/log`, socket in `dir`."""

    def __init__(self, root: pathlib.Path, name: str, port: int):
        self.name = name
        self.dir = root / name
        self.data = self.dir / "data"
        self.log = self.dir / "log"
        self.port = port

    # -- connections -------------------------------------------------------------------------
    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.dir} port={self.port} user=postgres dbname={dbname}"

    def connect(self, dbname: str = "postgres", **kwargs) -> psycopg.Connection:
        return psycopg.connect(self.conninfo(dbname), autocommit=True, **kwargs)

    def query(self, sql: str, dbname: str = "repl", params=None) -> list[tuple]:
        with self.connect(dbname) as c:
            return c.execute(sql, params).fetchall()

    def in_recovery(self) -> bool:
        return self.query("SELECT pg_is_in_recovery()", "postgres")[0][0]

    # -- lifecycle ---------------------------------------------------------------------------
    def configure(self, settings: dict[str, str]) -> None:
        """Appends `settings` to postgresql.conf (later lines win)."""
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# replication harness\n")
            for key, value in settings.items():
                conf.write(f"{key} = {value}\n")

    def local_settings(self) -> dict[str, str]:
        return {
            "port": str(self.port),
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.dir}'",
        }

    def start(self, wait_ready: bool = True) -> None:
        as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "300", "start"])
        if wait_ready:
            self.wait_ready()

    def wait_ready(self, seconds: float = 300) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with self.connect() as c:
                    c.execute("SELECT 1")
                    return
            except psycopg.Error:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not accept connections within {seconds:.0f} s; log: {self.log}")

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop"], check=False)

    def postmaster_pid(self) -> int | None:
        try:
            with open(self.data / "postmaster.pid") as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def kill9(self) -> None:
        """kill -9 of the postmaster, then waits until it and its children are gone."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = [p for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == pid]
        os.kill(pid, signal.SIGKILL)
        for child in children:
            try:
                os.kill(int(child), signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in [pid, *map(int, children)]):
            time.sleep(0.05)

    def promote(self) -> None:
        as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "300", "promote"])

    def wait_until_primary(self, seconds: float = 300) -> None:
        deadline = time.monotonic() + seconds
        while self.in_recovery():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} still in recovery after {seconds:.0f} s; log: {self.log}")
            time.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "".join(open(self.log, errors="replace").readlines()[-lines:])
        except OSError:
            return ""


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def make_primary(root: pathlib.Path, port: int, archive: pathlib.Path) -> Node:
    """initdb + settings for a primary that streams to standbys and archives WAL to `archive`."""
    node = Node(root, "primary", port)
    give_to_postgres(node.dir)
    give_to_postgres(archive)
    as_postgres(
        [str(PG_BIN / "initdb"), "-D", str(node.data), "--auth=trust", "--no-sync", "--username=postgres",
         "--encoding=UTF8", "--locale=C.UTF-8"]
    )
    node.configure(
        {
            **node.local_settings(),
            "shared_preload_libraries": "'pg_strata'",
            "wal_level": "replica",
            "max_wal_senders": "10",
            "wal_keep_size": "'2GB'",
            "wal_log_hints": "on",
            "hot_standby": "on",
            "archive_mode": "on",
            "archive_command": f"'test ! -f {archive}/%f && cp %p {archive}/%f'",
            "max_connections": "40",
            "shared_buffers": "128MB",
            "log_min_messages": "warning",
            "logging_collector": "off",
        }
    )
    node.start()
    return node


def base_backup(primary: Node, target: Node, standby: bool) -> None:
    """`pg_basebackup -X stream -c fast` of `primary` into `target.data` (`-R` when `standby`), then
    gives the copy its own port and socket."""
    give_to_postgres(target.dir)
    args = [str(PG_BIN / "pg_basebackup"), "-h", str(primary.dir), "-p", str(primary.port), "-U", "postgres",
            "-D", str(target.data), "-X", "stream", "-c", "fast"]
    if standby:
        args.append("-R")
    as_postgres(args)
    target.configure(target.local_settings())


def make_standby(root: pathlib.Path, name: str, port: int, primary: Node, settings: dict[str, str] | None = None) -> Node:
    node = Node(root, name, port)
    base_backup(primary, node, standby=True)
    if settings:
        node.configure(settings)
    node.start()
    return node


def restore(root: pathlib.Path, name: str, port: int, backup: pathlib.Path, settings: dict[str, str],
            signal_file: str | None) -> Node:
    """Copies the plain-format base backup in `backup` to a new node, adds `settings` and the
    signal file (`recovery.signal` for PITR), and starts it."""
    node = Node(root, name, port)
    give_to_postgres(node.dir)
    shutil.copytree(backup, node.data, symlinks=True)
    subprocess.run(["chown", "-R", "postgres:postgres", str(node.data)], check=True)
    node.data.chmod(0o700)
    node.configure({**node.local_settings(), "archive_mode": "off", **settings})
    if signal_file:
        (node.data / signal_file).touch()
        shutil.chown(node.data / signal_file, "postgres", "postgres")
    node.start()
    return node


def wait_for_replay(primary: Node, standbys: list[Node], seconds: float = 300) -> None:
    """Returns once every standby has replayed the primary's current WAL position."""
    target = primary.query("SELECT pg_current_wal_lsn()::text", "postgres")[0][0]
    deadline = time.monotonic() + seconds
    for standby in standbys:
        while True:
            caught_up = standby.query(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", "postgres", (target,)
            )[0][0]
            if caught_up:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{standby.name} did not replay up to {target} within {seconds:.0f} s")
            time.sleep(0.05)
