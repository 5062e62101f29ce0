"""Replication, backup and point-in-time-recovery harness (`cargo xtask replica`).

A primary (archiving WAL) and two `pg_basebackup -R` standbys on unix sockets run a sliding-window
workload on three tables of real 384-d MiniLM embeddings, with a `kind = 'flat'` strata index
(exact), a `kind = 'hnsw'` one and a `kind = 'ivf'` one, and a bm25 index on the flat table's
`body` (the rows' PyPI summaries): a build, inserts, deletes, VACUUM, flushes, merges and rows
left unflushed. Then, on every copy of the database (index == heap covers the bm25 index too: a
scan without LIMIT returns exactly the heap rows whose `to_tsvector` matches the probe):

  standby    index == heap on each standby; flat top-10 equal to the primary's; hnsw and ivf
             recall@10 (500 queries) against the standby's own brute force within
             RECALL_TOLERANCE of the primary's; bm25 top-10 ids and scores equal a reference
             BM25 over the standby's own rows (20 queries)
  settled    once every node has flushed and merged until its policy chooses nothing, each
             standby's top-10 ids equal the primary's on every held-out query for the flat index
             and on at least AGREEMENT_APPROXIMATE of them for hnsw and ivf (measured twice: after
             the workload, and after the failing index, kill -9 and TID reuse steps)
  idle       a standby's index keeps up with replay without queries (per-database absorber workers)
  isolation  on a standby, one index whose files cannot be written (EIO injected) shows a failing
             `absorb` row in strata_index_stats and one LOG line, while the other indexes of its
             database keep up; once the fault is cleared it catches up: index == heap
  latency    commit on the primary -> row findable through the index on a standby (btree baseline);
             a bm25 scan right after the standby replayed a commit finds its row
  kill -9    a standby killed mid-replay restarts, catches up, index == heap
  conflicts  a standby transaction's snapshot across a VACUUM and TID reuse on the primary sees
             the same rows again, or is cancelled with the recovery-conflict error
             (hot_standby_feedback off); with hot_standby_feedback on it is never cancelled
  no library a standby without pg_strata preloaded keeps replaying; strata scans fail clearly
  slabs      a standby with 4 memtable slabs follows an idle primary after bulk loads (flushed
             groups are settled without a writer): index == heap
  promotion  a standby promoted mid-workload takes writes and flushes: index == heap
  backup     a pg_basebackup taken under write load, restored on its own: index == heap
  pitr       the first base backup + archived WAL to a recovery_target_time mid-workload:
             the heap is the primary's at that time and index == heap

Figures (WAL bytes per row, insert rate with 0 and 2 standbys, latency, standby recall and query
time) go to stdout as JSON, and with --write-docs to docs/benchmarks/replication.{json,md}. Exits
non-zero when a check fails. Runs as root; the nodes run as `postgres`.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

from checks import (
    BM25_INDEX, absorber_isolation, bm25_findable_at_replay, bm25_index_vs_heap, bm25_top10_vs_reference,
    idle_catch_up, index_scan, index_vs_heap, recall,
    snapshot_survives_replay, top_k_matches, vector_text, wal_position,
)
from nodes import Node, as_postgres, base_backup, make_primary, make_standby, restore, wait_for_replay, PG_BIN

TABLES = ("flat_items", "hnsw_items", "ivf_items")
# The table whose index has a filter column (`grp`).
FILTERED_TABLE = "flat_items"
# The table whose `body` (the row's PyPI summary) has a bm25 index (checks.BM25_INDEX); memtables
# of this many slots, so that its groups open, settle and merge as the vector indexes' do.
TEXT_TABLE = "flat_items"
BM25_MEMTABLE_SLOTS = 2048
KINDS = ("flat", "hnsw", "ivf")
APPROXIMATE = ("hnsw_items", "ivf_items")
# Standbys' recall@10 is measured on this many held-out queries and may be at most
# RECALL_TOLERANCE below the primary's. A standby builds its own segments (other row orders, so
# other k-means samples and graphs): six builds of the same 10,500 rows in shuffled orders varied
# by 0.008 in IVF recall@10 over 1,000 queries (0.002 for HNSW), and by 0.022 over the first 50
# queries (0.014), which is why 50 queries and 0.01 failed on correct standbys. At 500 queries the
# sampling noise of a paired difference is a few thousandths; a standby that misses lists,
# segments or graph links loses far more.
RECALL_QUERIES = 500
RECALL_TOLERANCE = 0.02
# Once every node has settled, a standby's top-10 ids equal the primary's for every query on exact
# kinds and for at least this share of them on approximate kinds (issue 39, item 7).
AGREEMENT_APPROXIMATE = 0.99
REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "crates/bench/python"))


def read_vecs(path: pathlib.Path, rows: int) -> np.ndarray:
    raw = np.fromfile(path, dtype="<i4")
    dims = int(raw[0])
    return raw.reshape(-1, dims + 1)[:rows, 1:].copy().view("<f4")


def copy_text(value: str) -> str:
    """`value` escaped for COPY's text format."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Workload:
    """Rows of the sliding window: row i carries base vector i and, in flat_items, base text i as
    its `body` (ids are 1-based)."""

    def __init__(self, base: np.ndarray, queries: np.ndarray, texts: list[str] | None = None):
        self.base = base
        self.texts = texts or []
        self.text_queries: list[str] = []
        # Every query, for the recall checks; the other checks take the first 50.
        self.recall_queries = [vector_text(q) for q in queries]
        self.queries = self.recall_queries[:50]
        self.next_id = 1

    def copy(self, node: Node, rows: int) -> None:
        ids = range(self.next_id, self.next_id + rows)
        lines = "".join(f"{i}\t{vector_text(self.base[i - 1])}\n" for i in ids)
        texts = "".join(f"{i}\t{vector_text(self.base[i - 1])}\t{copy_text(self.texts[(i - 1) % len(self.texts)])}\n"
                        for i in ids)
        with node.connect("repl") as c, c.transaction():
            for table in TABLES:
                columns, data = ("id, embedding, body", texts) if table == TEXT_TABLE else ("id, embedding", lines)
                with c.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    copy.write(data.encode())
        self.next_id += rows


def setup_schema(primary: Node, work: Workload, rows: int, memtable_rows: int) -> dict:
    """Creates the tables and their indexes; returns the WAL bytes per row of each CREATE INDEX."""
    with primary.connect("postgres") as c:
        c.execute("CREATE DATABASE repl")
    with primary.connect("repl") as c:
        c.execute("CREATE EXTENSION pg_strata")
        for table in TABLES:
            # `grp`: a filter column of flat_items' index (standbys then follow rows carrying
            # filter values, and checks compare a filtered scan with the heap too).
            c.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding vector(384), "
                      "grp int GENERATED ALWAYS AS (id % 10) STORED"
                      + (", body text)" if table == TEXT_TABLE else ")"))
    work.copy(primary, rows)
    build_wal = {}
    with primary.connect("repl") as c:
        for table, kind in zip(TABLES, KINDS):
            before = wal_position(primary)
            c.execute(
                f"CREATE INDEX {table}_embedding_idx ON {table} USING strata "
                f"(embedding vector_l2_ops{', grp' if table == FILTERED_TABLE else ''}) "
                f"WITH (kind = '{kind}', memtable_rows = {memtable_rows})"
            )
            build_wal[table] = (wal_position(primary) - before) / rows
        c.execute(f"CREATE INDEX {BM25_INDEX} ON {TEXT_TABLE} USING bm25 (body) "
                  f"WITH (text_config = 'english', memtable_slots = {BM25_MEMTABLE_SLOTS})")
    return build_wal


def flush_and_merge(node: Node) -> None:
    with node.connect("repl") as c:
        for index in [f"{table}_embedding_idx" for table in TABLES] + [BM25_INDEX]:
            c.execute(f"SELECT strata_flush('{index}')")
            c.execute(f"SELECT strata_wait_for_merges('{index}', 300)")


def settle_standby(standby: Node, work: Workload) -> None:
    """Brings `standby`'s indexes to rest once it has replayed a settled primary: a scan through
    each index absorbs what replay brought (sealing the groups the primary settled), then the
    standby's own service flushes those memtables and merges until its policy chooses nothing."""
    with standby.connect("repl") as c:
        for table in TABLES:
            index_scan(c, table, work.queries[0], 1)
        for index in [f"{table}_embedding_idx" for table in TABLES] + [BM25_INDEX]:
            c.execute(f"SELECT strata_flush('{index}')")
            c.execute(f"SELECT strata_wait_for_merges('{index}', 300)")


def settled_agreement(report: dict, checks: dict, suffix: str, primary: Node, standbys: tuple[Node, ...],
                      work: Workload) -> None:
    """Settles the primary, then each standby, and records every node's segments
    (`settled_segments{suffix}`) and, for every kind, how many of the held-out queries return
    the same top-10 ids through each standby's index as through the primary's
    (`standby_top10_agreement{suffix}`). The check `standbys_settle_alike{suffix}` wants every
    query on exact kinds and at least AGREEMENT_APPROXIMATE of them on approximate kinds.

    Settled includes VACUUM on the primary: its scans lengthen their candidate lists by a prior
    for dead rows taken from the table's statistics (`round::dead_prior`), which a standby does
    not have, and those statistics can keep counting rows an earlier VACUUM removed (a DELETE's
    counts reach the shared statistics after that VACUUM reported). The primary's live and dead
    counts before and after are recorded (`table_statistics{suffix}`)."""
    statistics = {"before": table_statistics(primary)}
    with primary.connect("repl") as c:
        for table in TABLES:
            c.execute(f"VACUUM {table}")
    flush_and_merge(primary)
    statistics["after"] = table_statistics(primary)
    report[f"table_statistics{suffix}"] = statistics
    wait_for_replay(primary, list(standbys))
    for standby in standbys:
        settle_standby(standby, work)
    report[f"settled_segments{suffix}"] = {node.name: segment_shapes(node) for node in (primary, *standbys)}
    agreement = {
        table: {standby.name: top_k_matches(standby, primary, table, work.recall_queries) for standby in standbys}
        for table in TABLES
    }
    report[f"standby_top10_agreement{suffix}"] = agreement
    for table, by_standby in agreement.items():
        floor = AGREEMENT_APPROXIMATE if table in APPROXIMATE else 1.0
        shares = {name: r.get("same", 0) / max(r.get("queries", 0), 1) for name, r in by_standby.items()}
        checks.setdefault(f"standbys_settle_alike{suffix}", {})[table] = {
            **{name: f"{share:.3f}" for name, share in shares.items()},
            "ok": all(share >= floor - 1e-9 for share in shares.values()),
        }


def table_statistics(node: Node) -> dict:
    """Each table's live and dead rows as the node's statistics count them."""
    rows = node.query("SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relname = ANY(%s)",
                      params=(list(TABLES),))
    return {name: {"live": int(live), "dead": int(dead)} for name, live, dead in rows}


def segment_shapes(node: Node) -> dict:
    """Each vector index's segments as (rows, deleted) pairs, sorted, and its memtable rows: what
    two nodes holding the same partition of the same rows show alike."""
    shapes = {}
    for table in TABLES:
        rows = node.query(f"SELECT part, rows, deleted FROM strata_index_stats('{table}_embedding_idx')")
        shapes[table] = {
            "segments": sorted([int(r[1]), int(r[2])] for r in rows if r[0] == "segment"),
            "memtable_rows": sum(int(r[1]) for r in rows if r[0] == "memtable"),
        }
    return shapes


def wal_per_row(primary: Node, work: Workload, rows: int) -> dict:
    """WAL bytes per single-row INSERT transaction into a table with no index and into one with a
    strata hnsw index, and the insert rate of the latter."""
    result = {}
    with primary.connect("repl") as c:
        c.execute("DROP TABLE IF EXISTS wal_plain, wal_strata")
        c.execute("CREATE TABLE wal_plain (id bigint, embedding vector(384))")
        c.execute("CREATE TABLE wal_strata (id bigint, embedding vector(384))")
        c.execute("CREATE INDEX ON wal_strata USING strata (embedding vector_l2_ops) WITH (kind = 'hnsw')")
        c.execute("CHECKPOINT")
        for table in ("wal_plain", "wal_strata"):
            before = wal_position(primary)
            started = time.perf_counter()
            for i in range(rows):
                c.execute(f"INSERT INTO {table} VALUES (%s, %s::vector)", (i, vector_text(work.base[i])))
            elapsed = time.perf_counter() - started
            result[table] = {"wal_bytes_per_row": (wal_position(primary) - before) / rows, "rows_per_s": rows / elapsed}
        c.execute("DROP TABLE wal_plain, wal_strata")
    return result


def findable_latency(primary: Node, standby: Node, work: Workload, markers: int, timeout: float) -> dict:
    """For `markers` rows committed one at a time on the primary: the time until the standby finds
    the row through the flat index (nearest neighbour of its own vector) and through the primary
    key's btree (plain replay latency). Stops early after 3 rows the index never finds."""
    rng = np.random.default_rng(7)
    index_ms, btree_ms, never, tried = [], [], 0, 0
    with primary.connect("repl") as p, standby.connect("repl") as s:
        s.execute("SET enable_seqscan = off")
        s.execute("SET enable_bitmapscan = off")
        for n in range(markers):
            tried += 1
            marker_id = 10_000_000 + n
            marker = vector_text(rng.standard_normal(384).astype(np.float32) * 3)
            p.execute("INSERT INTO flat_items VALUES (%s, %s::vector)", (marker_id, marker))
            committed = time.perf_counter()
            found_index = found_btree = None
            while time.perf_counter() - committed < timeout and (found_index is None or found_btree is None):
                if found_btree is None and s.execute("SELECT 1 FROM flat_items WHERE id = %s", (marker_id,)).fetchone():
                    found_btree = time.perf_counter() - committed
                if found_index is None:
                    row = s.execute(
                        "SELECT id FROM flat_items ORDER BY embedding <-> %s::vector LIMIT 1", (marker,)
                    ).fetchone()
                    if row and row[0] == marker_id:
                        found_index = time.perf_counter() - committed
                time.sleep(0.001)
            if found_btree is not None:
                btree_ms.append(1000 * found_btree)
            if found_index is None:
                never += 1
                if never >= 3 and not index_ms:
                    break
            else:
                index_ms.append(1000 * found_index)
        p.execute("DELETE FROM flat_items WHERE id >= 10000000")

    def summary(values: list[float]) -> dict:
        if not values:
            return {"found": 0}
        return {"found": len(values), "p50_ms": float(np.percentile(values, 50)), "p99_ms": float(np.percentile(values, 99))}

    return {
        "markers_tried": tried,
        "index": summary(index_ms),
        "btree": summary(btree_ms),
        "index_never_found": never,
        "timeout_s": timeout,
        "ok": never == 0,
    }


class SegmentWatcher(threading.Thread):
    """Polls the primary's pg_strata directory and remembers every segment file's size: their sum
    is what option (a) (segment bytes in WAL) would add to the WAL."""

    def __init__(self, node: Node):
        super().__init__(daemon=True)
        self.directory = node.data / "pg_strata"
        self.sizes: dict[str, int] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            for path in self.directory.glob("*/*.seg"):
                try:
                    self.sizes[str(path)] = path.stat().st_size
                except OSError:
                    pass
            time.sleep(0.05)

    def bytes_by_relfilenode(self) -> dict[int, int]:
        """Stops polling; bytes of all segment files seen, by index relfilenode (directory
        names end in `_{relfilenode}`)."""
        self.stop_event.set()
        self.join()
        totals: dict[int, int] = {}
        for path, size in self.sizes.items():
            relfilenode = int(pathlib.Path(path).parent.name.rsplit("_", 1)[1])
            totals[relfilenode] = totals.get(relfilenode, 0) + size
        return totals


def rewind_old_primary(old: Node, new_primary: Node) -> None:
    """`pg_rewind -R` of the (stopped) old primary from the promoted standby, then starts it as a
    standby of the new primary. pg_rewind copies the source's configuration files, so the node's
    own port and socket are set again afterwards."""
    # A recently promoted source's control file names its new timeline only after a checkpoint.
    with new_primary.connect() as c:
        c.execute("CHECKPOINT")
    rewound = as_postgres([str(PG_BIN / "pg_rewind"), "--target-pgdata", str(old.data),
                           "--source-server", new_primary.conninfo(), "--write-recovery-conf"])
    if "no rewind required" in rewound.stdout + rewound.stderr:
        raise RuntimeError(f"pg_rewind found nothing to rewind:\n{rewound.stdout}{rewound.stderr}")
    old.configure({**old.local_settings(), "archive_mode": "off"})
    old.start()


def all_index_vs_heap(node: Node, work: Workload) -> dict:
    checked = {table: index_vs_heap(node, table, work.queries[0]) for table in TABLES}
    checked[BM25_INDEX] = bm25_index_vs_heap(node)
    return checked


def ok_all(result: dict) -> bool:
    return all(part.get("ok", False) for part in result.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000, help="rows before the standbys start")
    parser.add_argument("--memtable-rows", type=int, default=2_000)
    parser.add_argument("--wal-rows", type=int, default=2_000, help="single-row inserts per WAL measurement")
    parser.add_argument("--markers", type=int, default=20)
    parser.add_argument("--port", type=int, default=56400)
    parser.add_argument("--keep", action="store_true", help="keep the nodes' directories")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    data = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", REPO.parent / "shared/data")) / "pypi-minilm-100k"
    rows_needed = min(100_000, 3 * args.rows + 20_000)
    texts = [json.loads(line)["text"] for line, _ in zip(open(data / "base_texts.jsonl"), range(rows_needed))]
    work = Workload(read_vecs(data / "base.fvecs", rows_needed), read_vecs(data / "query.fvecs", RECALL_QUERIES), texts)
    work.text_queries = [json.loads(line)["text"] for line, _ in zip(open(data / "query_texts.jsonl"), range(20))]
    root = pathlib.Path(tempfile.mkdtemp(prefix="strata-repl-", dir="/tmp"))
    root.chmod(0o755)
    archive = root / "archive"
    report: dict = {"settings": vars(args), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}
    checks: dict = {}
    nodes: list[Node] = []
    started = time.monotonic()

    def step(name: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {name}", flush=True)

    try:
        step("primary")
        primary = make_primary(root, args.port, archive)
        nodes.append(primary)
        watcher = SegmentWatcher(primary)
        watcher.start()
        report["create_index_wal_bytes_per_row"] = setup_schema(primary, work, args.rows, args.memtable_rows)
        step("WAL per row, no standbys")
        report["wal_no_standbys"] = wal_per_row(primary, work, args.wal_rows)

        step("base backup for PITR, then two standbys")
        pitr_base = Node(root, "pitr_base", 0)
        base_backup(primary, pitr_base, standby=False)
        # Standbys do not archive (a promoted one would otherwise write its timeline into the
        # archive the PITR restore reads).
        s1 = make_standby(root, "standby1", args.port + 1, primary, {"archive_mode": "off"})
        s2 = make_standby(root, "standby2", args.port + 2, primary, {"archive_mode": "off"})
        nodes += [s1, s2]
        step("WAL per row, two standbys")
        report["wal_two_standbys"] = wal_per_row(primary, work, args.wal_rows)

        step("sliding window: inserts, a base backup under load, a PITR target")
        backup_node = Node(root, "load_backup", 0)
        backup_thread = threading.Thread(target=base_backup, args=(primary, backup_node, False))
        for batch in range(args.rows // 1_000):
            work.copy(primary, 1_000)
            if batch == 2:
                backup_thread.start()
            if batch == args.rows // 2_000:
                time.sleep(1.1)
                pitr_time = primary.query("SELECT clock_timestamp()::text")[0][0]
                pitr_ids = {table: {r[0] for r in primary.query(f"SELECT id FROM {table}")} for table in TABLES}
                time.sleep(1.1)
        backup_thread.join()
        step("deletes, VACUUM, flush, merges, rows left unflushed")
        with primary.connect("repl") as c:
            for table in TABLES:
                c.execute(f"DELETE FROM {table} WHERE id <= %s", (args.rows // 4,))
                c.execute(f"VACUUM {table}")
        flush_and_merge(primary)
        work.copy(primary, 3 * args.memtable_rows // 2)
        primary.query("SELECT pg_switch_wal()", "postgres")
        wait_for_replay(primary, [s1, s2])
        written = watcher.bytes_by_relfilenode()
        report["segment_bytes_written_per_row"] = {
            table: written.get(primary.query(f"SELECT pg_relation_filenode('{table}_embedding_idx')")[0][0], 0)
            / (work.next_id - 1)
            for table in TABLES
        }

        step("standbys: index == heap, top-10, recall")
        checks["primary_index_vs_heap"] = all_index_vs_heap(primary, work)
        for standby in (s1, s2):
            checks[f"{standby.name}_index_vs_heap"] = all_index_vs_heap(standby, work)
            checks[f"{standby.name}_flat_top10"] = {"flat_items": top_k_matches(standby, primary, "flat_items", work.queries)}
            # No dead row is left in the index (VACUUM ran after the deletes): the reference BM25
            # over the standby's live rows is exact.
            checks[f"{standby.name}_bm25_top10"] = {BM25_INDEX: bm25_top10_vs_reference(standby, work.text_queries)}
        step("settle every node: the primary flushes and merges, the standbys replay, flush, merge")
        # The share of queries whose top-10 ids through a standby's index equal the primary's,
        # for every kind, after both settled (exact kinds: checked equal above on 50 queries).
        settled_agreement(report, checks, "", primary, (s1, s2), work)
        report["recall"] = {}
        for table in APPROXIMATE:
            primary_recall = recall(primary, table, work.recall_queries)
            report["recall"][table] = {"primary": primary_recall}
            for standby in (s1, s2):
                r = recall(standby, table, work.recall_queries)
                report["recall"][table][standby.name] = r
                # At most RECALL_TOLERANCE below the primary's (being better is fine).
                ok = (
                    "recall" in r
                    and "recall" in primary_recall
                    and r["recall"] >= primary_recall["recall"] - RECALL_TOLERANCE - 1e-9
                )
                checks.setdefault(f"{standby.name}_recall", {})[table] = {**r, "ok": ok}

        step("an idle standby keeps up without queries (absorber workers)")
        work.copy(primary, 1_000)
        wait_for_replay(primary, [s1, s2])
        checks["standby_idle_catch_up"] = {table: idle_catch_up(s1, table) for table in TABLES}

        step("one index failing on a standby does not hold up the others")
        checks["standby_absorb_failure_isolated"] = absorber_isolation(
            primary, s1, "flat_items", ("hnsw_items", "ivf_items"), lambda: work.copy(primary, 1_000)
        )

        step("commit -> findable on a standby")
        report["findable_latency"] = findable_latency(primary, s1, work, args.markers, timeout=2.0)
        checks["findable_on_standby"] = {"flat_items": report["findable_latency"]}
        checks["bm25_findable_at_replay"] = {
            BM25_INDEX: bm25_findable_at_replay(primary, s1, vector_text(work.base[0]), args.markers)
        }

        step("kill -9 of a standby mid-replay")
        writer = threading.Thread(target=work.copy, args=(primary, 2_000))
        writer.start()
        time.sleep(0.3)
        s2.kill9()
        writer.join()
        s2.start()
        wait_for_replay(primary, [s1, s2])
        checks["standby2_after_kill9_index_vs_heap"] = all_index_vs_heap(s2, work)

        step("a standby transaction's snapshot across a VACUUM and TID reuse on the primary")
        for feedback in (False, True):
            checks[f"standby_snapshot_feedback_{'on' if feedback else 'off'}"] = {
                "flat_items": snapshot_survives_replay(primary, s2, "flat_items", work.queries[1], feedback)
            }

        step("settle every node again: after kill -9, a failing index recovered, VACUUM and TID reuse")
        # standby2 lost its memtables to the kill and rebuilt their settled groups from its heap;
        # standby1's flat index caught up after failing writes: other paths to the same groups.
        settled_agreement(report, checks, "_late", primary, (s1, s2), work)

        step("standby without pg_strata preloaded")
        bare = make_standby(
            root, "standby_bare", args.port + 3, primary, {"shared_preload_libraries": "''", "archive_mode": "off"}
        )
        nodes.append(bare)
        work.copy(primary, 500)
        wait_for_replay(primary, [bare])
        try:
            heap_rows = bare.query("SELECT count(*) FROM flat_items")[0][0]
            replayed = heap_rows == primary.query("SELECT count(*) FROM flat_items")[0][0]
        except Exception as e:  # noqa: BLE001 — the error text is what is judged
            replayed, heap_error = False, str(e).strip().splitlines()[0]
        else:
            heap_error = None
        try:
            with bare.connect("repl") as c:
                c.execute("SET enable_seqscan = off")
                c.execute("SELECT id FROM flat_items ORDER BY embedding <-> %s::vector LIMIT 1", (work.queries[0],))
            index_error = None
        except Exception as e:  # noqa: BLE001
            index_error = str(e).strip().splitlines()[0]
        clear = index_error is not None and "shared_preload_libraries" in index_error
        checks["standby_without_library"] = {
            "flat_items": {"heap_readable": replayed, "heap_error": heap_error, "index_error": index_error,
                           "ok": clear and replayed}
        }
        bare.stop()

        step("a standby with 4 memtable slabs follows an idle primary after bulk loads")
        # Each table's bulk load ends with a sealed memtable flushed after the statement: its group
        # stays open unless the primary settles it without a writer (src/settler.rs). The standby
        # holds one slab per open group, so without that it runs out of its 4 slabs and stalls.
        small = make_standby(
            root, "standby_small", args.port + 6, primary, {"strata.memtable_memory": "64", "archive_mode": "off"}
        )
        nodes.append(small)
        work.copy(primary, 2 * args.memtable_rows + 1)
        wait_for_replay(primary, [small])
        time.sleep(1.0)
        checks["small_standby_follows_idle_primary"] = all_index_vs_heap(small, work)
        checks["small_standby_follows_idle_primary"]["primary_open_groups"] = {
            "open": [primary.query(f"SELECT open FROM strata_index_groups('{t}_embedding_idx')")[0][0] for t in TABLES],
            "ok": True,
        }
        small.stop()

        step("promotion of standby1 mid-workload")
        writer = threading.Thread(target=work.copy, args=(primary, 2_000))
        writer.start()
        time.sleep(0.2)
        s1.promote()
        s1.wait_until_primary()
        writer.join()
        primary.stop("immediate")
        promoted_work = Workload(work.base, np.zeros((1, 384), dtype=np.float32), work.texts)
        promoted_work.queries = work.queries
        promoted_work.next_id = work.next_id + 5_000
        promoted_work.copy(s1, 1_000)
        flush_and_merge(s1)
        promoted_work.copy(s1, 1_000)
        checks["promoted_index_vs_heap"] = all_index_vs_heap(s1, work)

        step("pg_rewind of the old primary; it follows the promoted standby")
        rewind_old_primary(primary, s1)
        promoted_work.copy(s1, 500)
        wait_for_replay(s1, [primary])
        checks["rewound_old_primary_follows"] = {
            table: {"ok": primary.query(f"SELECT count(*) FROM {table}") == s1.query(f"SELECT count(*) FROM {table}")}
            for table in TABLES
        }
        checks["rewound_old_primary_index_vs_heap"] = all_index_vs_heap(primary, work)
        primary.stop()

        step("restore of the base backup taken under load")
        restored = restore(root, "restored", args.port + 4, backup_node.data, {}, None)
        nodes.append(restored)
        checks["backup_restore_index_vs_heap"] = all_index_vs_heap(restored, work)
        restored.stop()

        step(f"point-in-time restore to {pitr_time}")
        pitr = restore(
            root, "pitr", args.port + 5, pitr_base.data,
            {"restore_command": f"'cp {archive}/%f %p'", "recovery_target_time": f"'{pitr_time}'",
             "recovery_target_action": "'promote'"},
            "recovery.signal",
        )
        nodes.append(pitr)
        pitr.wait_until_primary()
        checks["pitr_heap_at_target"] = {
            table: {"ok": {r[0] for r in pitr.query(f"SELECT id FROM {table}")} == pitr_ids[table]} for table in TABLES
        }
        checks["pitr_index_vs_heap"] = all_index_vs_heap(pitr, work)
    except Exception as e:  # noqa: BLE001 — report, then fail
        checks["harness"] = {"run": {"ok": False, "error": f"{type(e).__name__}: {e}"}}
        for node in nodes:
            print(f"--- {node.name} log tail ---\n{node.log_tail()}", file=sys.stderr)
    finally:
        for node in nodes:
            node.stop("immediate")
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    report["checks"] = checks
    report["seconds"] = round(time.monotonic() - started, 1)
    failed = [name for name, result in checks.items() if not ok_all(result)]
    report["failed"] = failed
    print(json.dumps(report, indent=2, default=str))
    if args.write_docs:
        from report import write_docs

        write_docs(REPO / "docs/benchmarks", report)
    print(f"replica: {len(checks) - len(failed)} checks passed, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
