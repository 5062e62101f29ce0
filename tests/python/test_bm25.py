"""The bm25 index through SQL against a reference BM25 written in Python from the formula
(crates/bench/python/bm25_reference.py) over PostgreSQL's own `to_tsvector` output, on CISI,
Cranfield (shared/data/ir) and the 100k PyPI texts (shared/data/pypi-minilm-100k).

Top-10 ids and scores must equal the reference (relative error ≤ 1e-4; rows of equal score may
come in either order) after a build, inserts into memtables, deletes and updates before VACUUM
(when the dead versions still count in N, df and avgdl but are never returned), VACUUM (when
they no longer count), and flushes and merges. The README's hybrid-search example runs here too.
"""

import json
import os
import pathlib
import random
import re
import sys

import numpy as np
import pytest
from pgvector.psycopg import register_vector

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "crates/bench/python"))

from bm25_reference import Reference, load_collection, same_top, tokenise  # noqa: E402

SHARED = pathlib.Path(os.environ.get("STRATA_SHARED_DATA", REPO / "../shared/data"))
INDEX = "docs_bm25"


def collection(name):
    """(documents as [(id, text)], query texts) of one collection."""
    if name == "pypi":
        root = SHARED / "pypi-minilm-100k"
        docs = [(row["id"], row["text"]) for row in map(json.loads, open(root / "base_texts.jsonl"))]
        queries = [row["text"] for row in map(json.loads, open(root / "query_texts.jsonl"))][:150]
        return docs, queries
    docs, queries, _ = load_collection(name, SHARED / "ir")
    return docs, [text for _, text in queries]


def load(conn, rows):
    with conn.cursor().copy("COPY docs (id, body) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


class Model:
    """What the index should hold: every row version it indexed (dead ones until VACUUM) and
    the live rows, each as its lexeme counts."""

    def __init__(self):
        self.versions = {}  # version key → terms; live rows are keyed by their id
        self.dead = 0

    def insert(self, doc_id, terms):
        self.versions[doc_id] = terms

    def kill(self, doc_id):
        self.versions[("dead", self.dead)] = self.versions.pop(doc_id)
        self.dead += 1

    def vacuum(self):
        self.versions = {k: v for k, v in self.versions.items() if not isinstance(k, tuple)}

    def reference(self):
        return Reference(self.versions, live_ids=[k for k in self.versions if not isinstance(k, tuple)])


def index_top(conn, query, k=10):
    sql = (f"SELECT id, -(body <@> to_bm25query(%s, '{INDEX}')) FROM docs "
           f"ORDER BY body <@> to_bm25query(%s, '{INDEX}') LIMIT {k}")
    return [(i, s) for i, s in conn.execute(sql, (query, query)).fetchall()]


def check(conn, model, queries, query_lexemes, stage):
    reference = model.reference()
    mismatched = []
    for query, lexemes in zip(queries, query_lexemes):
        got = index_top(conn, query)
        want = reference.top(lexemes, 1_000)  # past rank 10, so that a tie at rank 10 is seen whole
        if not same_top(got, want):
            mismatched.append((query, got[:3], want[:3]))
    assert not mismatched, f"{stage}: {len(mismatched)} of {len(queries)} queries differ, e.g. {mismatched[:2]}"
    live = conn.execute(f"SELECT sum(rows - deleted) FROM strata_index_stats('{INDEX}')").fetchone()[0]
    heap = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    indexed = conn.execute(f"SELECT sum(rows) FROM strata_index_stats('{INDEX}')").fetchone()[0]
    assert indexed >= live and live >= heap, (stage, indexed, live, heap)


@pytest.mark.parametrize("name", ["cisi", "cranfield", "pypi"])
def test_top10_equals_reference_through_the_lsm(conn, name):
    docs, queries = collection(name)
    rng = random.Random(17)
    texts = [text for _, text in docs]
    text_of = dict(docs)
    doc_terms = tokenise(conn, texts)
    query_lexemes = [list(t) for t in tokenise(conn, queries)]
    assert sum(1 for lexemes in query_lexemes if lexemes) >= 100 or len(queries) < 150
    # No autovacuum: the stage "before VACUUM" counts dead versions in the statistics, and an
    # autovacuum woken by the inserts would remove some of them while the queries run.
    conn.execute("CREATE TABLE docs (id int PRIMARY KEY, body text) WITH (autovacuum_enabled = off)")
    conn.execute("SET enable_seqscan = off")
    model = Model()
    built = int(len(docs) * 0.7)
    load(conn, docs[:built])
    for (doc_id, _), terms in zip(docs[:built], doc_terms):
        model.insert(doc_id, terms)
    conn.execute(f"CREATE INDEX {INDEX} ON docs USING bm25 (body) WITH (text_config = 'english')")
    plan = "\n".join(r[0] for r in conn.execute(
        f"EXPLAIN SELECT id FROM docs ORDER BY body <@> to_bm25query('x', '{INDEX}') LIMIT 10"))
    assert f"Index Scan using {INDEX}" in plan, plan
    check(conn, model, queries, query_lexemes, "after the build")

    load(conn, docs[built:])
    for (doc_id, _), terms in zip(docs[built:], doc_terms[built:]):
        model.insert(doc_id, terms)
    check(conn, model, queries, query_lexemes, "with rows in memtables")

    ids = [doc_id for doc_id, _ in docs]
    deleted = rng.sample(ids, len(ids) // 20)
    conn.execute("DELETE FROM docs WHERE id = ANY(%s)", (deleted,))
    for doc_id in deleted:
        model.kill(doc_id)
    survivors = sorted(set(ids) - set(deleted))
    updated = 0
    for doc_id in rng.sample(survivors, len(survivors) // 30):
        source = rng.randrange(len(docs))
        if texts[source] == text_of[doc_id]:
            continue  # an unchanged body would be a HOT update, not a new index entry
        conn.execute("UPDATE docs SET body = %s WHERE id = %s", (texts[source], doc_id))
        model.kill(doc_id)
        model.insert(doc_id, doc_terms[source])
        updated += 1
    assert updated > 0
    check(conn, model, queries, query_lexemes, "after deletes and updates, before VACUUM")

    conn.execute("VACUUM (INDEX_CLEANUP ON) docs")  # never PostgreSQL's bypass of the indexes
    model.vacuum()
    check(conn, model, queries, query_lexemes, "after VACUUM")

    conn.execute(f"SELECT strata_flush('{INDEX}')")
    conn.execute(f"SELECT strata_wait_for_merges('{INDEX}')")
    check(conn, model, queries, query_lexemes, "after flushes and merges")
    parts = conn.execute(f"SELECT count(*) FILTER (WHERE part = 'memtable' AND rows > 0), "
                         f"count(*) FILTER (WHERE part = 'segment') FROM strata_index_stats('{INDEX}')").fetchone()
    assert parts[0] == 0 and parts[1] >= 1, parts


def readme_python_example():
    """The README's hybrid-search example: its one ```python block."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    return blocks[0]


def test_readme_hybrid_example_runs(conn, monkeypatch):
    """Runs the README's example as written, with a stand-in for the embedding model (the
    MiniLM vectors of shared/data/pypi-minilm-100k, looked up by text) and `psycopg.connect`
    returning the test's connection; its hits must be strata_hybrid's, best first."""
    import types

    import psycopg

    root = SHARED / "pypi-minilm-100k"
    rows = 3_000
    raw = np.fromfile(root / "base.fvecs", dtype="<i4")
    base = raw.reshape(-1, raw[0] + 1)[:rows, 1:].copy().view("<f4")
    texts = [row["text"] for _, row in zip(range(rows), map(json.loads, open(root / "base_texts.jsonl")))]
    by_text = {t: base[i] for i, t in enumerate(texts)}
    register_vector(conn)
    conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, body text, embedding vector(384))")
    with conn.cursor().copy("COPY items (id, body, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "text", "vector"])
        for i, text in enumerate(texts):
            copy.write_row([i, text, base[i]])
    conn.execute("CREATE INDEX ON items USING bm25 (body)")
    conn.execute("CREATE INDEX ON items USING strata (embedding vector_cosine_ops)")

    class StandInModel:
        def __init__(self, name):
            self.name = name

        def encode(self, text):
            return by_text.get(text, base[0])

    question = texts[42]
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=StandInModel))
    monkeypatch.setattr(psycopg, "connect", lambda *args, **kwargs: conn)
    printed = []
    scope = {"print": lambda *args: printed.append(args), "__name__": "readme_example"}
    exec(compile(readme_python_example().replace("postgres replication lag", question), "README.md", "exec"), scope)
    hits = scope["hybrid_search"](conn, question, k=5)
    want = conn.execute(
        "SELECT i.id, h.score FROM strata_hybrid('items', 'body', 'embedding', %s, %s, k => 5) h "
        "JOIN items i ON i.ctid = h.ctid ORDER BY h.score DESC, least(h.text_rank, h.vector_rank), i.id",
        (question, by_text[question])).fetchall()
    assert [(h["id"], pytest.approx(h["score"])) for h in hits] == [(i, pytest.approx(s)) for i, s in want]
    assert 42 in [h["id"] for h in hits]
    assert len(printed) == 10
