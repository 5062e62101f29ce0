"""pg_upgrade of a cluster holding pg_strata indexes to a newer PostgreSQL major version, with the
new version's stock `pg_upgrade` (`cargo xtask upgrade --from 15 --to 18`; also in the CI matrix).

pg_strata keeps its index files in `$PGDATA/pg_strata/{database}_{tablespace}_{relfilenode}/`,
outside PostgreSQL's page store. pg_upgrade (since PostgreSQL 15) keeps database OIDs and
relfilenodes, and the default tablespace is 1663 on every version, so the old directory names
stay right in the new cluster: the README's procedure is pg_upgrade, then replacing the new data
directory's `pg_strata/` by the old one's. This script follows it and checks:

1. an old cluster with a vector index of each kind (flat, HNSW with a filter column, IVF) and a
   bm25 index, rows in segments and in memtables (flushed at the clean shutdown pg_upgrade
   needs), deleted and vacuumed rows;
2. `pg_upgrade --check`, then `pg_upgrade`;
3. a copy of the new cluster started as pg_upgrade left it, without the old directory: each
   index derives its files from its status pages and the table at its first use (pg_upgrade's
   schema restore leaves directories without the node marker), so a scan without LIMIT returns
   exactly the heap's rows and the flat index's top 10 equal the exact plan's;
4. the new cluster after moving the old directory in: the same, and every index's top 10 for
   each probe equal its answers in the old cluster before the upgrade (the same files, the same
   text search configuration for bm25); new rows inserted afterwards are found too.

Runs as root; the clusters run as `postgres` on unix sockets under --root. Exits non-zero when a
check fails and prints one line per check."""

from __future__ import annotations

import argparse
import pathlib
import random
import shutil
import subprocess
import sys
import time

import psycopg

# One table per index (named TABLE_idx), all holding the same rows.
INDEXES = {
    "t_flat": "USING strata (embedding vector_l2_ops) WITH (kind = 'flat')",
    "t_hnsw": "USING strata (embedding vector_l2_ops, tenant) WITH (kind = 'hnsw')",
    "t_ivf": "USING strata (embedding vector_l2_ops) WITH (kind = 'ivf', lists = 8)",
    "t_bm25": "USING bm25 (body)",
}
VECTOR_TABLES = ["t_flat", "t_hnsw", "t_ivf"]
DIMS = 8


def as_postgres(args: list[str], cwd: pathlib.Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, cwd=cwd)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


class Cluster:
    def __init__(self, root: pathlib.Path, name: str, bindir: pathlib.Path, port: int):
        self.dir = root / name
        self.data = self.dir / "data"
        self.log = self.dir / "log"
        self.bindir = bindir
        self.port = port

    def initdb(self) -> None:
        self.dir.mkdir(parents=True)
        shutil.chown(self.dir, "postgres", "postgres")
        self.dir.chmod(0o700)
        args = [str(self.bindir / "initdb"), "-D", str(self.data), "--auth=trust", "--no-sync", "--username=postgres",
                "--encoding=UTF8", "--locale=C.UTF-8"]
        # 18 turns data checksums on by default; pg_upgrade needs both clusters alike.
        if "--no-data-checksums" in as_postgres([str(self.bindir / "initdb"), "--help"]).stdout:
            args.append("--no-data-checksums")
        as_postgres(args)
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = ''\nunix_socket_directories = '{self.dir}'\n"
                "shared_preload_libraries = 'pg_strata'\nmax_connections = 20\nshared_buffers = '128MB'\n"
            )

    def start(self) -> None:
        as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "start"])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "120", "stop"])

    def connect(self, dbname: str = "upgrade") -> psycopg.Connection:
        return psycopg.connect(f"host={self.dir} port={self.port} user=postgres dbname={dbname}", autocommit=True)


def vector_text(rng: random.Random) -> str:
    return "[" + ",".join(f"{rng.uniform(-1, 1):.5f}" for _ in range(DIMS)) + "]"


def fill(old: Cluster, rows: int) -> None:
    with old.connect("postgres") as c:
        c.execute("CREATE DATABASE upgrade")
    rng = random.Random(40)
    with old.connect() as c:
        c.execute("CREATE EXTENSION pg_strata")
        for table in INDEXES:
            c.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, tenant int, embedding vector({DIMS}), body text)")
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]

        def insert(ids: range) -> None:
            rows = [(i, i % 4, vector_text(rng), " ".join(rng.choice(words) for _ in range(6))) for i in ids]
            with c.cursor() as cur:
                for table in INDEXES:
                    with cur.copy(f"COPY {table} (id, tenant, embedding, body) FROM STDIN") as copy:
                        for row in rows:
                            copy.write_row(row)

        insert(range(1, rows + 1))
        for table, definition in INDEXES.items():
            c.execute(f"CREATE INDEX {table}_idx ON {table} {definition}")
        # Rows after the build sit in memtables until the clean shutdown flushes them.
        insert(range(rows + 1, rows + rows // 4 + 1))
        for table in INDEXES:
            c.execute(f"DELETE FROM {table} WHERE id % 10 = 0")
            c.execute(f"VACUUM {table}")
        insert(range(rows + rows // 4 + 1, rows + rows // 2 + 1))


def strip_unknown_column_options(old: Cluster, new_bindir: pathlib.Path) -> None:
    """Debian's PostgreSQL 15.20 stamps every column with the attribute option `pg_attver`, which
    older releases of other major versions (the 16.2 and 18.6 installations used here) do not
    know: pg_upgrade's schema restore fails on it (`unrecognized parameter "pg_attver"`), for any
    table. When the new server does not know the option, it is removed from the old cluster's
    columns before the upgrade. This concerns PostgreSQL's releases, not pg_strata."""
    if b"pg_attver" in (new_bindir / "postgres").read_bytes():
        return
    with old.connect() as c:
        stripped = c.execute(
            "UPDATE pg_catalog.pg_attribute SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o "
            "WHERE o NOT LIKE 'pg_attver=%'), '{}') WHERE array_to_string(attoptions, ',') LIKE '%pg_attver=%'"
        ).rowcount
    if stripped:
        print(f"upgrade: removed the attribute option pg_attver from {stripped} columns (unknown to the new server)")


PROBE = "[" + ",".join(["0.1"] * DIMS) + "]"
# Every body holds some of these words, so every row matches.
TEXT_PROBE = "alpha beta gamma delta epsilon zeta eta theta"


def index_rows(c: psycopg.Connection, table: str) -> list[int]:
    """Every row of `table` through its index (the plan is checked), best first."""
    c.execute("SET enable_seqscan = off")
    c.execute("SET enable_bitmapscan = off")
    c.execute("SET strata.max_scan_tuples = 2147483647")
    c.execute("SET hnsw.iterative_scan = relaxed_order")
    if table == "t_bm25":
        sql, probe = f"SELECT id FROM {table} ORDER BY body <@> to_bm25query(%s, '{table}_idx') LIMIT 1000000", TEXT_PROBE
    else:
        sql, probe = f"SELECT id FROM {table} ORDER BY embedding <-> %s::vector", PROBE
    try:
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN (COSTS OFF) " + sql, (probe,)).fetchall())
        if f"{table}_idx" not in plan:
            raise AssertionError(f"not an index scan of {table}_idx:\n{plan}")
        return [r[0] for r in c.execute(sql, (probe,)).fetchall()]
    finally:
        c.execute("RESET ALL")


def top10_exact(c: psycopg.Connection) -> bool:
    """The flat index's top 10 equal the exact plan's."""
    c.execute("SET enable_indexscan = off")
    exact = [r[0] for r in c.execute("SELECT id FROM t_flat ORDER BY embedding <-> %s::vector, id LIMIT 10", (PROBE,))]
    c.execute("RESET ALL")
    return index_rows(c, "t_flat")[:10] == exact


VECTOR_PROBES = ["[" + ",".join(f"{0.1 * ((i * 7 + j) % 11 - 5):.1f}" for j in range(DIMS)) + "]" for i in range(5)]
TEXT_PROBES = ["alpha beta", "gamma", "delta epsilon zeta", "theta eta", "beta beta gamma"]


def answers(cluster: Cluster) -> dict[str, list[list[int]]]:
    """Each index's top 10 ids for each probe (the plan is checked)."""
    result = {}
    with cluster.connect() as c:
        c.execute("SET enable_seqscan = off")
        for table in INDEXES:
            if table == "t_bm25":
                sql = f"SELECT id FROM {table} ORDER BY body <@> to_bm25query(%s, '{table}_idx') LIMIT 10"
                probes = TEXT_PROBES
            else:
                sql = f"SELECT id FROM {table} ORDER BY embedding <-> %s::vector LIMIT 10"
                probes = VECTOR_PROBES
            plan = "\n".join(r[0] for r in c.execute("EXPLAIN (COSTS OFF) " + sql, (probes[0],)).fetchall())
            if f"{table}_idx" not in plan:
                raise AssertionError(f"not an index scan of {table}_idx:\n{plan}")
            result[table] = [[r[0] for r in c.execute(sql, (p,)).fetchall()] for p in probes]
    return result


def check_all(new: Cluster, results: list[tuple[str, bool, str]], stage: str) -> None:
    with new.connect() as c:
        for table in INDEXES:
            heap = sorted(r[0] for r in c.execute(f"SELECT id FROM {table}"))
            try:
                ids = index_rows(c, table)
            except (psycopg.Error, AssertionError) as e:
                results.append((f"{stage}: {table}_idx == heap", False, str(e).strip().splitlines()[0]))
                continue
            ok = sorted(ids) == heap
            results.append((f"{stage}: {table}_idx == heap", ok, f"{len(set(ids))} of {len(heap)} rows"))
        results.append((f"{stage}: t_flat_idx top 10 == exact plan", top10_exact(c), ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-bindir", type=pathlib.Path, required=True)
    parser.add_argument("--new-bindir", type=pathlib.Path, required=True)
    parser.add_argument("--root", type=pathlib.Path, required=True)
    parser.add_argument("--port", type=int, default=56450)
    parser.add_argument("--rows", type=int, default=4000)
    args = parser.parse_args()
    if args.root.exists():
        shutil.rmtree(args.root)
    args.root.mkdir(parents=True)
    args.root.chmod(0o755)
    old = Cluster(args.root, "old", args.old_bindir, args.port)
    new = Cluster(args.root, "new", args.new_bindir, args.port + 1)
    results: list[tuple[str, bool, str]] = []
    started = time.monotonic()
    try:
        old.initdb()
        old.start()
        fill(old, args.rows)
        # Settled first (every row in segments, merges done), so that the clean shutdown moves
        # nothing and the new cluster reads the very files these answers came from.
        with old.connect() as c:
            for table in INDEXES:
                c.execute(f"SELECT strata_flush('{table}_idx'), strata_wait_for_merges('{table}_idx')")
        before = answers(old)
        strip_unknown_column_options(old, args.new_bindir)
        old.stop()
        new.initdb()
        upgrade = [str(args.new_bindir / "pg_upgrade"), "-b", str(args.old_bindir), "-B", str(args.new_bindir),
                   "-d", str(old.data), "-D", str(new.data), "-p", str(args.port), "-P", str(args.port + 1),
                   "-s", str(args.root / "sockets")]
        (args.root / "sockets").mkdir()
        shutil.chown(args.root / "sockets", "postgres", "postgres")
        work = args.root / "work"
        work.mkdir()
        shutil.chown(work, "postgres", "postgres")
        as_postgres([*upgrade, "--check"], cwd=work)
        results.append(("pg_upgrade --check", True, ""))
        as_postgres(upgrade, cwd=work)
        results.append(("pg_upgrade", True, ""))

        # A copy of the upgraded cluster started as pg_upgrade left it, without the old
        # pg_strata/: every index derives itself from its status pages and the table. (A copy:
        # that derivation must not touch the cluster the README's procedure goes on with.)
        bare = Cluster(args.root, "new-without-files", args.new_bindir, args.port + 2)
        subprocess.run(["cp", "-a", str(new.dir), str(bare.dir)], check=True)
        with open(bare.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {bare.port}\nunix_socket_directories = '{bare.dir}'\n")
        bare.start()
        check_all(bare, results, "without the old pg_strata/ (derived)")
        bare.stop()

        # The README's step: the new data directory's pg_strata/ replaced by the old one's.
        shutil.rmtree(new.data / "pg_strata", ignore_errors=True)
        shutil.copytree(old.data / "pg_strata", new.data / "pg_strata", symlinks=True)
        subprocess.run(["chown", "-R", "postgres:postgres", str(new.data / "pg_strata")], check=True)
        new.start()
        check_all(new, results, "after upgrade")
        after = answers(new)
        for table in INDEXES:
            same = sum(a == b for a, b in zip(before[table], after[table]))
            results.append((f"after upgrade: {table}_idx top 10s == before the upgrade", same == len(before[table]),
                            f"{same} of {len(before[table])} probes"))
        with new.connect() as c:
            for table in INDEXES:
                c.execute(f"INSERT INTO {table} SELECT 100000 + i, i % 4, array_fill(i::real / 1000, ARRAY[{DIMS}])::vector, 'alpha omega' FROM generate_series(1, 300) i")
                c.execute(f"SELECT strata_flush('{table}_idx')")
        check_all(new, results, "after new rows and a flush")
    except Exception as e:  # noqa: BLE001 — reported as a failed check with the logs' tails
        results.append(("harness", False, f"{type(e).__name__}: {e}"))
        for cluster in (old, new):
            if cluster.log.exists():
                print(f"--- {cluster.log}:\n" + "".join(open(cluster.log, errors="replace").readlines()[-20:]))
    finally:
        for cluster in (new, old, Cluster(args.root, "new-without-files", args.new_bindir, 0)):
            cluster.stop()
    failed = [r for r in results if not r[1]]
    for name, ok, detail in results:
        print(f"  {'ok    ' if ok else 'FAILED'}  {name}" + (f"  ({detail})" if detail else ""))
    print(f"upgrade: {len(results) - len(failed)} passed, {len(failed)} failed in {time.monotonic() - started:.0f} s")
    if not failed:
        shutil.rmtree(args.root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
