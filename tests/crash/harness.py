"""Crash harness: kill -9 a random PostgreSQL process under load, restart, check index == heap.

Run by `cargo xtask crash --trials N` (and 5 trials by `cargo xtask test`), which starts the
cluster and passes, in the environment:

  STRATA_PGHOST / STRATA_PGPORT   the cluster's socket directory and port
  STRATA_PGDATA                   its data directory (for postmaster.pid)
  STRATA_RESTART                  a shell command that (re)starts the cluster after a kill

Every trial's table also has a text column with a bm25 index (tests/crash/text_index.py): after
the restart it too must return exactly the heap's live rows, and after VACUUM its statistics count
only them and its top 10 equal a reference BM25 over them.

Trial 0 is a fixed scenario (an uncommitted transaction's memtables flushed, then the
postmaster killed before its WAL is written: recovery must drop those segments). Each other
trial creates a database with one table and one strata index (kind flat, hnsw, ivf, or ivf
with rerank = 'heap'; small memtables, so flushes and merges run all the time), runs writers (insert / delete /
update, random commits and rollbacks), searchers and a VACUUM loop, kills one process at a
random moment — a writer's backend, the index service, the postmaster (kill -9), or the whole
server (`pg_ctl stop -m immediate`) — optionally waiting for a VACUUM or a flush to be under
way, restarts when needed, and checks:

  1. the TIDs an index scan returns (every row, no LIMIT) are exactly the heap's live rows with
     a vector, each once;
  2. for kind flat, the top 10 of 5 queries through the index equal the exact sequential scan;
  3. after VACUUM, the index's live entries (strata_index_stats) number the heap's rows, so no
     deleted or uncommitted row survives in it.

Fault trials (about half): meanwhile a faulter thread makes pg_strata's file writes fail
(`strata_inject_fault`: ENOSPC or EIO at a random step — create, write, fsync, rename, directory
fsync — of segment, bitmap or manifest writes, once, a few times or until cleared), and writers
attempt poisoned rows (NaN / infinity) by every route: text input, array casts, arithmetic
overflow, the aggregates, and a vector made without validation (`strata_unchecked_vector`, which
only the index's own check stops). Every poisoned row must be refused; the checks are the same.

Prints one JSON line per trial and, with --summary FILE, writes a markdown summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import psycopg

import text_index
from cluster import conninfo, fresh_database, postmaster_pid, service_pid, wait_for_server
from tids import compare_tids

DIMS = 16
KILL_TARGETS = ["backend", "service", "postmaster", "immediate"]
MOMENTS = ["random", "vacuum", "flush"]
FAULT_STEPS = ["create", "write", "fsync", "rename", "fsync_dir", "any"]
FAULT_FILES = ["segment", "bitmap", "manifest", "any"]
FAULT_ERRORS = ["ENOSPC", "EIO"]
# Errors a workload statement may meet while faults are injected (the statement fails, the
# workload goes on): a VACUUM whose bitmap write fails, a writer waiting too long for memtable
# memory held by memtables that cannot flush.
FAULT_SQLSTATES = {"53100", "58030", "53000"}


def poisoned_routes() -> list[tuple[str, str]]:
    """(name, statement inserting a row with a NaN or infinite element), one per route."""
    nan = "[" + ",".join(["NaN"] + ["0"] * (DIMS - 1)) + "]"
    big = "[" + ",".join(["3e38"] * DIMS) + "]"
    nan_array = "{" + ",".join(["1", "NaN"] + ["0"] * (DIMS - 2)) + "}"
    inf_array = "{" + ",".join(["Infinity"] + ["0"] * (DIMS - 1)) + "}"
    return [
        ("text", f"INSERT INTO items (grp, v) VALUES (0, '{nan}')"),
        ("real[] cast", f"INSERT INTO items (grp, v) VALUES (0, '{inf_array}'::real[]::vector)"),
        ("float8[] cast", f"INSERT INTO items (grp, v) VALUES (0, '{nan_array}'::float8[]::vector)"),
        ("addition overflow", f"INSERT INTO items (grp, v) VALUES (0, '{big}'::vector + '{big}'::vector)"),
        ("halfvec", f"INSERT INTO items (grp, v) VALUES (0, ('{big}'::vector)::halfvec::vector)"),
        ("vector_avg state", f"INSERT INTO items (grp, v) VALUES (0, vector_avg('{{1,{nan_array[1:]}'::float8[]))"),
        ("unchecked (aminsert)", f"INSERT INTO items (grp, v) VALUES (0, strata_unchecked_vector('{nan_array}'))"),
    ]


def vector_text(rng: random.Random) -> str:
    return "[" + ",".join(f"{rng.uniform(-1, 1):.6f}" for _ in range(DIMS)) + "]"


def log_size() -> int:
    path = os.path.join(os.environ["STRATA_PGHOST"], "log")
    return os.path.getsize(path) if os.path.exists(path) else 0


def log_since(offset: int) -> str:
    """The server log written since `offset` (a restart appends to the same file)."""
    path = os.path.join(os.environ["STRATA_PGHOST"], "log")
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


@dataclass
class Workload:
    dbname: str
    seed: int
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list = field(default_factory=list)
    writer_pids: list = field(default_factory=list)
    commits: int = 0
    rollbacks: int = 0
    faults: bool = False
    poisoned_attempts: int = 0
    faults_injected: int = 0
    statements_failed_by_faults: int = 0

    def poison(self, c, rng: random.Random) -> None:
        """Attempts one poisoned row (inside a savepoint); it must be refused."""
        name, sql = rng.choice(poisoned_routes())
        self.poisoned_attempts += 1
        try:
            with c.transaction():
                c.execute(sql)
            self.errors.append(f"poisoned row accepted by route {name}")
        except (psycopg.errors.DataException, psycopg.errors.NumericValueOutOfRange):
            pass

    def faulter(self) -> None:
        """Injects file-write faults until the trial stops, clearing each after a while."""
        rng = random.Random(self.seed * 7)
        try:
            with psycopg.connect(conninfo(self.dbname), autocommit=True) as c:
                while not self.stop.is_set():
                    times = rng.choice([1, 3, -1])
                    c.execute(
                        "SELECT strata_inject_fault(%s, %s, %s, %s)",
                        (rng.choice(FAULT_STEPS), rng.choice(FAULT_FILES), rng.choice(FAULT_ERRORS), times),
                    )
                    self.stop.wait(rng.uniform(0.2, 1.5))
                    self.faults_injected += c.execute("SELECT strata_clear_fault()").fetchone()[0]
                    self.stop.wait(rng.uniform(0.1, 0.8))
        except psycopg.Error:
            pass  # the kill ends every connection

    def writer(self, number: int) -> None:
        rng = random.Random(self.seed * 100 + number)
        try:
            with psycopg.connect(conninfo(self.dbname), autocommit=True) as c:
                self.writer_pids.append(c.info.backend_pid)
                while not self.stop.is_set():
                    try:
                        self.write_transaction(c, rng)
                    except psycopg.Error as e:
                        if e.sqlstate not in FAULT_SQLSTATES:
                            raise
                        self.statements_failed_by_faults += 1
        except (psycopg.Error, psycopg.Rollback):
            pass  # the kill ends every connection
        except Exception as e:  # noqa: BLE001 - reported as a problem
            self.errors.append(f"writer: {e!r}")

    def write_transaction(self, c, rng: random.Random) -> None:
        """One transaction of inserts, deletes and updates (30 % rolled back); in fault trials it
        may first attempt a poisoned row."""
        with c.transaction() as tx:
            if self.faults and rng.random() < 0.3:
                self.poison(c, rng)
            for _ in range(rng.randint(1, 40)):
                c.execute("INSERT INTO items (grp, v, body) VALUES (%s, %s, %s)",
                          (rng.randrange(10), vector_text(rng), text_index.body_text(rng)))
            if rng.random() < 0.4:
                c.execute("DELETE FROM items WHERE id IN (SELECT id FROM items TABLESAMPLE BERNOULLI (1) LIMIT 5)")
            if rng.random() < 0.4:
                c.execute(
                    "UPDATE items SET v = %s WHERE id = (SELECT id FROM items TABLESAMPLE BERNOULLI (1) LIMIT 1)",
                    (vector_text(rng),),
                )
            if rng.random() < 0.3:
                c.execute(
                    "UPDATE items SET body = %s WHERE id = (SELECT id FROM items TABLESAMPLE BERNOULLI (1) LIMIT 1)",
                    (text_index.body_text(rng),),
                )
            if rng.random() < 0.3:
                self.rollbacks += 1
                raise psycopg.Rollback(tx)
        self.commits += 1

    def searcher(self, number: int) -> None:
        rng = random.Random(self.seed * 1000 + number)
        try:
            with psycopg.connect(conninfo(self.dbname), autocommit=True) as c:
                c.execute("SET enable_seqscan = off")
                while not self.stop.is_set():
                    rows = c.execute("SELECT id FROM items ORDER BY v <-> %s LIMIT 10", (vector_text(rng),)).fetchall()
                    if len(rows) < 10:
                        self.errors.append(f"search returned {len(rows)} rows")
        except psycopg.Error:
            pass

    def vacuumer(self) -> None:
        try:
            with psycopg.connect(conninfo(self.dbname), autocommit=True) as c:
                while not self.stop.is_set():
                    try:
                        c.execute("VACUUM items")
                    except psycopg.Error as e:
                        if e.sqlstate not in FAULT_SQLSTATES:
                            raise
                        self.statements_failed_by_faults += 1
                    time.sleep(0.3)
        except psycopg.Error:
            pass


def wait_for_moment(moment: str, dbname: str, seconds: float) -> str:
    """Sleeps until `moment` (a VACUUM or a flush under way), at most `seconds`; returns what was seen.
    In a fault trial the server may be restarting after a PANIC (an injected failure of a
    manifest's directory fsync): the moment is then random."""
    deadline = time.monotonic() + seconds
    try:
        with psycopg.connect(conninfo(dbname), autocommit=True) as c:
            while time.monotonic() < deadline:
                if moment == "vacuum":
                    if c.execute("SELECT count(*) FROM pg_stat_progress_vacuum").fetchone()[0] > 0:
                        return "vacuum"
                elif moment == "flush":
                    states = c.execute(
                        "SELECT state FROM strata_index_stats('items_idx') UNION ALL "
                        f"SELECT state FROM strata_index_stats('{text_index.INDEX}')").fetchall()
                    if any(s[0] == "flushing" for s in states):
                        return "flush"
                time.sleep(0.005)
    except psycopg.OperationalError:
        pass
    return "random"


def kill(target: str, workload: Workload) -> str:
    # After a PANIC's crash restart a writer's backend or the old service may be gone already: the
    # postmaster is killed instead.
    try:
        if target == "backend" and workload.writer_pids:
            os.kill(random.choice(workload.writer_pids), signal.SIGKILL)
            return "backend"
        if target == "service":
            pid = service_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)
                return "service"
    except ProcessLookupError:
        pass
    if target == "immediate":
        subprocess.run(os.environ["STRATA_STOP_IMMEDIATE"], shell=True, check=True, capture_output=True)
        return "immediate"
    os.kill(postmaster_pid(), signal.SIGKILL)
    return "postmaster"


def check(dbname: str, kind: str, rng: random.Random, filtered: bool = False, text: bool = False) -> dict:
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        # A fault left by a trial that was not restarted (a killed backend) ends here.
        c.execute("SELECT strata_clear_fault()")
        started = time.monotonic()
        c.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET strata.max_scan_tuples = 100000000; "
                  "SET hnsw.iterative_scan = relaxed_order")
        origin = "[" + ",".join("0" for _ in range(DIMS)) + "]"
        first_query_ms = None
        through_index = [r[0] for r in c.execute("SELECT ctid::text FROM items ORDER BY v <-> %s", (origin,)).fetchall()]
        first_query_ms = (time.monotonic() - started) * 1000
        recovery = c.execute(
            "SELECT duration_ms, listed_memtables, dropped_segments, invalidated_rows, rebuilt_memtables, reinserted_rows "
            "FROM strata_index_recovery('items_idx')"
        ).fetchone()
        c.execute("RESET enable_seqscan; RESET enable_bitmapscan")
        heap = sorted(r[0] for r in c.execute("SELECT ctid::text FROM items WHERE v IS NOT NULL").fetchall())
        problems = compare_tids(through_index, heap)
        text_recovery = None
        if text:
            problems += text_index.check_before_vacuum(c)
            text_recovery = c.execute(
                f"SELECT duration_ms, reinserted_rows FROM strata_index_recovery('{text_index.INDEX}')").fetchone()
        if filtered:
            # The filter column through the index: exactly the heap's rows of each group.
            c.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET strata.max_scan_tuples = 100000000; "
                      "SET hnsw.iterative_scan = relaxed_order")
            for grp in rng.sample(range(10), 3):
                via_index = sorted(r[0] for r in c.execute(
                    "SELECT ctid::text FROM items WHERE grp = %s ORDER BY v <-> %s", (grp, origin)).fetchall())
                in_heap = sorted(r[0] for r in c.execute(
                    "SELECT ctid::text FROM items WHERE grp + 0 = %s AND v IS NOT NULL", (grp,)).fetchall())
                if via_index != in_heap:
                    problems.append(f"group {grp}: {len(via_index)} rows through the filtered index scan, {len(in_heap)} in the heap")
            c.execute("RESET enable_seqscan; RESET enable_bitmapscan")
        if kind == "flat":
            for _ in range(5):
                q = vector_text(rng)
                c.execute("SET enable_seqscan = off")
                where = f"WHERE grp = {rng.randrange(10)}" if filtered else ""
                fast = [r[0] for r in c.execute(f"SELECT id FROM items {where} ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()]
                c.execute("RESET enable_seqscan; SET enable_indexscan = off")
                exact = [r[0] for r in c.execute(f"SELECT id FROM items {where} ORDER BY v <-> %s LIMIT 10", (q,)).fetchall()]
                c.execute("RESET enable_indexscan")
                if fast != exact:
                    problems.append(f"flat top-10 differs from the exact scan: {fast} vs {exact}")
                    break
        # INDEX_CLEANUP ON: without it VACUUM skips the indexes when few pages hold dead items
        # (PostgreSQL's bypass below 2 % of the pages), and their entries would rightly stay.
        c.execute("VACUUM (INDEX_CLEANUP ON) items")
        live = c.execute("SELECT coalesce(sum(rows - deleted), 0) FROM strata_index_stats('items_idx')").fetchone()[0]
        rows = len(heap)
        if live != rows:
            problems.append(f"after VACUUM the index holds {live} live entries for {rows} heap rows")
        text_queries = 0
        if text:
            text_problems, text_queries = text_index.check_after_vacuum(c, rng)
            problems += text_problems
        return {
            "rows": rows,
            "first_query_ms": round(first_query_ms, 1),
            "recovery_ms": recovery[0],
            "listed_memtables": recovery[1],
            "dropped_segments": recovery[2],
            "invalidated_rows": recovery[3],
            "rebuilt_memtables": recovery[4],
            "reinserted_rows": recovery[5],
            "text_queries_checked": text_queries,
            "text_recovery_ms": text_recovery[0] if text_recovery else None,
            "text_reinserted_rows": text_recovery[1] if text_recovery else 0,
            "problems": problems,
        }


KIND_OPTIONS = {
    "flat": "kind = 'flat'",
    "hnsw": "kind = 'hnsw'",
    "ivf": "kind = 'ivf'",
    # Segments keep codes only: merges copy codes, scans rerank from the heap.
    "ivf_heap": "kind = 'ivf', rerank = 'heap'",
}


def trial(number: int, seed: int, forced_target: str | None = None) -> dict:
    rng = random.Random(seed)
    dbname = f"crash_{number}"
    kind = rng.choice(["flat", "flat", "hnsw", "ivf", "ivf_heap"])
    memtable_rows = rng.choice([64, 200, 1000])
    # Half the trials index `grp` as a filter column: memtable rows and segments then carry it,
    # and recovery refills it from the heap.
    filtered = rng.random() < 0.5
    fresh_database(dbname)
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute(f"CREATE TABLE items (id bigserial PRIMARY KEY, grp int, v vector({DIMS}), body text)")
        with c.cursor().copy("COPY items (grp, v, body) FROM STDIN") as copy:
            for _ in range(2000):
                copy.write_row((rng.randrange(10), vector_text(rng), text_index.body_text(rng)))
        c.execute(
            f"CREATE INDEX items_idx ON items USING strata (v vector_l2_ops{', grp' if filtered else ''}) "
            f"WITH ({KIND_OPTIONS[kind]}, memtable_rows = {memtable_rows})"
        )
        text_slots = text_index.create_index(c, rng)
    workload = Workload(dbname, seed, faults=rng.random() < 0.5)
    threads = [threading.Thread(target=workload.writer, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=workload.searcher, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=workload.vacuumer))
    if workload.faults:
        threads.append(threading.Thread(target=workload.faulter))
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0.5, 3.0))
    target = forced_target or rng.choice(KILL_TARGETS)
    wanted = rng.choice(MOMENTS)
    moment = wait_for_moment(wanted, dbname, 3.0) if wanted != "random" else "random"
    killed = kill(target, workload)
    workload.stop.set()
    for t in threads:
        t.join(timeout=30)
    if killed in ("postmaster", "immediate"):
        time.sleep(0.2)
        subprocess.run(os.environ["STRATA_RESTART"], shell=True, check=True, capture_output=True)
    wait_for_server()
    result = check(dbname, kind, rng, filtered, text=True)
    result.update(
        trial=number,
        seed=seed,
        kind=kind,
        memtable_rows=memtable_rows,
        text_memtable_slots=text_slots,
        filtered=filtered,
        killed=killed,
        moment=moment,
        commits=workload.commits,
        rollbacks=workload.rollbacks,
        faults=workload.faults,
        faults_injected=workload.faults_injected,
        poisoned_attempts=workload.poisoned_attempts,
        statements_failed_by_faults=workload.statements_failed_by_faults,
    )
    result["problems"] += workload.errors
    if not result["problems"]:
        with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    return result


RECOVERY_LINE = re.compile(r"Strata Recovery: [0-9.]+ ms, (\d+) memtables rebuilt from (\d+) heap rows, "
                           r"(\d+) segments dropped, (\d+) rows invalidated")


def explain_reports_recovery(c: psycopg.Connection) -> list[str]:
    """The index's first use after a restart, under EXPLAIN ANALYZE: its `Strata Recovery` line
    must be there and say what `strata_index_recovery` says the recovery did."""
    c.execute("SET enable_seqscan = off")
    origin = "[" + ",".join("0" for _ in range(DIMS)) + "]"
    plan = "\n".join(r[0] for r in c.execute(
        "EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM items ORDER BY v <-> %s LIMIT 5", (origin,)).fetchall())
    c.execute("RESET enable_seqscan")
    recovered = c.execute("SELECT rebuilt_memtables, reinserted_rows, dropped_segments, invalidated_rows "
                          "FROM strata_index_recovery('items_idx')").fetchone()
    line = RECOVERY_LINE.search(plan)
    if line is None:
        return [f"no Strata Recovery line in the first statement's EXPLAIN ANALYZE after the restart:\n{plan}"]
    reported = tuple(int(n) for n in line.groups())
    if recovered is None or reported != tuple(recovered):
        return [f"EXPLAIN's Strata Recovery line says {reported}, strata_index_recovery says {recovered}"]
    return []


def uncommitted_flush_scenario(number: int, seed: int) -> dict:
    """The paper's §5.4 case for dropping segments: one open transaction fills several memtables,
    the service flushes them to durable segments, and the server dies before the transaction's
    WAL (the memtables' registrations included) reaches the disk. Recovery must drop those
    segments. The WAL writer is slowed for the duration so nothing flushes the WAL early."""
    rng = random.Random(seed)
    dbname = f"crash_{number}"
    fresh_database(dbname)
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        # No autovacuum: the first use of the index after the restart must be the EXPLAIN below.
        c.execute(f"CREATE TABLE items (id bigserial PRIMARY KEY, grp int, v vector({DIMS})) WITH (autovacuum_enabled = off)")
        for _ in range(500):
            c.execute("INSERT INTO items (grp, v) VALUES (0, %s)", (vector_text(rng),))
        c.execute("CREATE INDEX items_idx ON items USING strata (v vector_l2_ops) WITH (kind = 'flat', memtable_rows = 64)")
        c.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        c.execute("SELECT pg_reload_conf()")
        c.execute("CHECKPOINT")
        built = c.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'segment'").fetchone()[0]
    # 65 rows: the first registers memtable X and fills it, the 65th seals X and registers X + 1;
    # the service then flushes X while nothing flushes the WAL (no commit, no later insert that
    # would release X's list and flush the WAL).
    writer = psycopg.connect(conninfo(dbname))
    for _ in range(65):
        writer.execute("INSERT INTO items (grp, v) VALUES (1, %s)", (vector_text(rng),))
    deadline = time.monotonic() + 10
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        while time.monotonic() < deadline:
            segments = c.execute("SELECT count(*) FROM strata_index_stats('items_idx') WHERE part = 'segment'").fetchone()[0]
            if segments > built:
                break
            time.sleep(0.05)
    os.kill(postmaster_pid(), signal.SIGKILL)
    writer.close()
    time.sleep(0.2)
    subprocess.run(os.environ["STRATA_RESTART"], shell=True, check=True, capture_output=True)
    wait_for_server()
    with psycopg.connect(conninfo(dbname), autocommit=True) as c:
        c.execute("ALTER SYSTEM RESET wal_writer_delay")
        c.execute("SELECT pg_reload_conf()")
        explain_problems = explain_reports_recovery(c)
    result = check(dbname, "flat", rng)
    result["problems"] += explain_problems
    result.update(trial=number, seed=seed, kind="flat", memtable_rows=64, killed="postmaster", moment="uncommitted-flush")
    result.update(commits=0, rollbacks=0)
    if not result["problems"]:
        with psycopg.connect(conninfo("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    return result


def write_summary(path: str, results: list[dict], seconds: float, log: str) -> None:
    log_bytes = len(log.encode())
    episode_lines = len(re.findall(r"failed: .*; retrying with backoff", log))
    panics = log.count("PANIC:  pg_strata:")
    recovered_lines = len(re.findall(r"after \d+ failed attempts", log))
    failures = [r for r in results if r["problems"]]
    by_target = {t: sum(1 for r in results if r["killed"] == t) for t in KILL_TARGETS}
    by_moment = {m: sum(1 for r in results if r["moment"] == m) for m in MOMENTS + ["uncommitted-flush"]}
    recovery = sorted(r["recovery_ms"] for r in results)
    lines = [
        "# Crash harness",
        "",
        "Written by `cargo xtask crash --trials N` (tests/crash/harness.py). Each trial: a table with",
        "2,000 rows, a strata index and a bm25 index, both with small memtables, 3 writers (insert /",
        "delete / update, 30 % rollbacks), 2 searchers and a VACUUM loop; one process killed at a random",
        "moment; restart; then, for each index, index == heap (every live row exactly once through a",
        "full index scan), kind flat equal to the exact scan on 5 queries, after VACUUM the index's live",
        "entries equal the heap's rows, and the bm25 top 10 of 5 queries (ids and scores) equal a",
        "reference BM25 over the heap's live rows.",
        "Trial 0 is fixed: an open transaction fills memtables that the service flushes, then the",
        "postmaster dies before that WAL is written, so recovery has to drop the segments.",
        "",
        "| trials | failures | wall time |",
        "|---:|---:|---:|",
        f"| {len(results)} | {len(failures)} | {seconds:.0f} s |",
        "",
        "| process killed | trials |",
        "|---|---:|",
        *[f"| {t} | {n} |" for t, n in by_target.items()],
        "",
        "| moment | trials |",
        "|---|---:|",
        *[f"| {m} | {n} |" for m, n in by_moment.items()],
        "",
        "| recovery duration (ms), across trials | min | median | max |",
        "|---|---:|---:|---:|",
        f"| strata_index_recovery().duration_ms | {recovery[0]:.2f} | {recovery[len(recovery) // 2]:.2f} | {recovery[-1]:.2f} |",
        "",
        "Totals: "
        + ", ".join(
            f"{key} {sum(r.get(key, 0) for r in results)}"
            for key in [
                "dropped_segments",
                "invalidated_rows",
                "rebuilt_memtables",
                "reinserted_rows",
                "commits",
                "rollbacks",
                "faults_injected",
                "poisoned_attempts",
                "statements_failed_by_faults",
                "text_queries_checked",
                "text_reinserted_rows",
            ]
        )
        + ".",
        "",
        f"Fault trials (file-write faults injected, poisoned rows attempted): {sum(1 for r in results if r.get('faults'))}. "
        f"Server log written during the run: {log_bytes:,} bytes, {episode_lines} lines starting a failure episode "
        f"(\"failed: …; retrying with backoff\"), {recovered_lines} lines ending one; {panics} PANICs for a "
        "manifest renamed but not synced (each followed by a crash restart and recovery).",
        "",
    ]
    if failures:
        lines += ["## Failures", ""] + [f"- trial {r['trial']} (seed {r['seed']}): {'; '.join(r['problems'])}" for r in failures]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--summary")
    parser.add_argument("--target", choices=KILL_TARGETS, help="always kill this (default: a random choice per trial)")
    args = parser.parse_args()
    started = time.monotonic()
    log_start = log_size()
    results = []
    for number in range(args.trials):
        if number == 0 and args.target is None:
            # Any other commit in the cluster (autovacuum, a checkpoint, a buffer eviction) can
            # flush the WAL first and turn the drop into a trim; try a few times to reach it.
            for attempt in range(3):
                result = uncommitted_flush_scenario(number, args.seed + attempt)
                if result["problems"] or result["dropped_segments"] > 0:
                    break
        else:
            result = trial(number, args.seed + number, args.target)
        results.append(result)
        print(json.dumps(result), flush=True)
    log = log_since(log_start)
    print(
        f"crash harness: server log grew by {len(log.encode()):,} bytes; "
        f"{len(re.findall(r'failed: .*; retrying with backoff', log))} failure episodes logged"
    )
    if args.summary:
        write_summary(args.summary, results, time.monotonic() - started, log)
    failures = [r for r in results if r["problems"]]
    print(f"crash harness: {len(results)} trials, {len(failures)} failures (seed {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
