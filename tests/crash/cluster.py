"""What the crash scripts (and the shutdown tests in tests/python) share: the cluster's coordinates
(from the environment `cargo xtask` sets), waiting for it to accept connections, fresh databases
with pg_strata installed, and the pids of the postmaster and the index service."""

from __future__ import annotations

import os
import time

import psycopg


def conninfo(dbname: str) -> str:
    """Connection string for `dbname` on the cluster named by STRATA_PGHOST / STRATA_PGPORT."""
    return f"host={os.environ['STRATA_PGHOST']} port={os.environ['STRATA_PGPORT']} user=postgres dbname={dbname}"


def wait_for_server(seconds: float = 120) -> None:
    """Returns once the server accepts connections; raises after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(conninfo("postgres"), connect_timeout=2) as c:
                c.execute("SELECT 1")
                return
        except psycopg.Error:
            time.sleep(0.2)
    raise RuntimeError(f"the server did not come back within {seconds:.0f} s")


def fresh_database(dbname: str) -> None:
    """(Re)creates `dbname` with pg_strata installed."""
    with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{dbname}"')
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute("CREATE EXTENSION pg_strata")


def postmaster_pid() -> int:
    with open(os.path.join(os.environ["STRATA_PGDATA"], "postmaster.pid")) as f:
        return int(f.readline())


def service_pid() -> int | None:
    """The index service's pid: the postmaster's child whose title names it (it has no database
    connection, so pg_stat_activity does not list it)."""
    postmaster = postmaster_pid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title = f.read().decode(errors="replace")
        except OSError:
            continue
        if parent == postmaster and "pg_strata index service" in title:
            return int(entry)
    return None
