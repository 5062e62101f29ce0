"""The crash harness's bm25 index: bodies the writers store, and the checks after a trial.

Every trial's table has a `body text` column with a bm25 index (`items_text`, small memtables,
so text flushes and merges run all the time next to the vector index's). After the restart and
before anything else, and again after VACUUM:

  1. index == heap: a full scan through the index (no LIMIT, a query naming every word of the
     vocabulary, so every body matches) returns exactly the heap's live rows, each once;
  2. after VACUUM the index's live entries (strata_index_stats) number the heap's rows, so no
     deleted, updated-away or uncommitted row survives in its statistics;
  3. after VACUUM, the top 10 of a few queries (ids and scores, relative error ≤ 1e-4) equal the
     reference BM25 (crates/bench/python/bm25_reference.py) over the heap's live rows, tokenised
     by PostgreSQL's own to_tsvector.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "crates/bench/python"))

from bm25_reference import Reference, same_top  # noqa: E402
from tids import compare_tids  # noqa: E402

INDEX = "items_text"
# Words of varied frequency: the writers draw from them with a skewed distribution, so document
# frequencies (and so IDFs) spread out.
VOCABULARY = (
    "postgres replication lag vacuum index segment memtable merge flush crash recovery standby "
    "backup restore vector search ranking query planner heap tuple snapshot checkpoint wal "
    "buffer page lock latch shared memory worker service manifest bitmap deletion insert update "
    "commit rollback cluster table column filter score token lexeme dictionary stemming "
    "postings block compression dimension cosine distance neighbour graph centroid quantizer"
).split()
MEMTABLE_SLOTS = [64, 256, 1024]


def body_text(rng: random.Random) -> str:
    """A body of 1–12 words, skewed towards the vocabulary's first words."""
    words = [VOCABULARY[min(int(rng.paretovariate(0.9)) - 1, len(VOCABULARY) - 1)] for _ in range(rng.randint(1, 12))]
    return " ".join(words)


def create_index(c, rng: random.Random) -> int:
    slots = rng.choice(MEMTABLE_SLOTS)
    c.execute(f"CREATE INDEX {INDEX} ON items USING bm25 (body) WITH (text_config = 'english', memtable_slots = {slots})")
    return slots


def every_row_through_the_index(c) -> list[str]:
    """The TIDs a full index scan returns for a query matching every body."""
    c.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET strata.max_scan_tuples = 100000000")
    try:
        return [r[0] for r in c.execute(
            f"SELECT ctid::text FROM items ORDER BY body <@> to_bm25query(%s, '{INDEX}')", (" ".join(VOCABULARY),)).fetchall()]
    finally:
        c.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET strata.max_scan_tuples")


def heap_rows(c) -> list[str]:
    return sorted(r[0] for r in c.execute("SELECT ctid::text FROM items WHERE body IS NOT NULL").fetchall())


def check_before_vacuum(c) -> list[str]:
    """Check 1, right after the restart (recovery's refill of memtables included)."""
    return compare_tids(every_row_through_the_index(c), heap_rows(c), "bm25: ")


def check_after_vacuum(c, rng: random.Random, queries: int = 5) -> tuple[list[str], int]:
    """Checks 1–3 once the caller has run VACUUM; returns (problems, queries compared)."""
    heap = heap_rows(c)
    problems = compare_tids(every_row_through_the_index(c), heap, "bm25: ")
    live = c.execute(f"SELECT coalesce(sum(rows - deleted), 0) FROM strata_index_stats('{INDEX}')").fetchone()[0]
    if live != len(heap):
        problems.append(f"bm25: after VACUUM the index holds {live} live entries for {len(heap)} heap rows")
    tokens = {}
    for tid, lexeme, tf in c.execute(
            "SELECT ctid::text, v.lexeme, cardinality(v.positions) FROM items, "
            "unnest(to_tsvector('english', body)) v WHERE body IS NOT NULL").fetchall():
        tokens.setdefault(tid, {})[lexeme] = tf
    for tid in heap:
        tokens.setdefault(tid, {})
    reference = Reference(tokens)
    c.execute("SET enable_seqscan = off; SET enable_bitmapscan = off")
    compared = 0
    for _ in range(queries):
        query = " ".join(rng.sample(VOCABULARY, rng.randint(1, 3)))
        lexemes = [r[0] for r in c.execute("SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", (query,)).fetchall()]
        got = [(tid, -score) for tid, score in c.execute(
            f"SELECT ctid::text, body <@> to_bm25query(%s, '{INDEX}') AS s FROM items ORDER BY s LIMIT 10", (query,)).fetchall()]
        want = reference.top(lexemes, 1_000)
        compared += 1
        if not same_top(got, want):
            problems.append(f"bm25: top 10 of {query!r} differs from the reference: {got[:3]} vs {want[:3]}")
            break
    c.execute("RESET enable_seqscan; RESET enable_bitmapscan")
    return problems, compared
