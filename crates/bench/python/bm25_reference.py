"""A reference BM25, written from issue 17's formula, over PostgreSQL's own tokens; the IR
collections' readers. Shared by the quality benchmark (ir_quality.py), the speed benchmark
(pg_text.py) and the SQL exactness tests (tests/python/test_bm25.py).

Tokens: `to_tsvector(text_config, text)`; `tf` = a lexeme's number of positions, `dl` = the sum
of a document's `tf`s; a query is its distinct lexemes. With `N` documents of mean length
`avgdl`, `df` = documents holding the lexeme:

    IDF   = ln(1 + (N − df + 0.5) / (df + 0.5))
    score = Σ over the query's lexemes of IDF · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))
"""

import math
import re
from collections import defaultdict

K1, B = 1.2, 0.75


def parse_smart(path, fields):
    """SMART records (`.I id`, then `.X` fields) → [(id, text of `fields` joined)] in file order."""
    records, current, field = [], None, None
    with open(path, encoding="latin-1") as f:
        for line in f:
            head = re.match(r"^\.([A-Z])\b ?(.*)$", line.rstrip("\n"))
            if head:
                if head.group(1) == "I":
                    current = {"id": int(head.group(2).strip()), "parts": defaultdict(list)}
                    records.append(current)
                field = head.group(1)
                continue
            if current is not None and field in fields:
                current["parts"][field].append(line.strip())
    return [(r["id"], " ".join(" ".join(r["parts"][f]) for f in fields if r["parts"][f])) for r in records]


def load_collection(name, root):
    """(documents, queries, judgments) of `cranfield` or `cisi` under shared/data/ir: documents
    and queries as [(id, text)], judgments as {query id: {document id: gain}}."""
    if name == "cranfield":
        # `.W` repeats the title in Cranfield.
        docs = parse_smart(root / "cranfield/cran.all.1400", ["W"])
        queries = parse_smart(root / "cranfield/cran.qry", ["W"])
        # Judgments number the queries 1..225 in file order.
        qids = {i + 1: qid for i, (qid, _) in enumerate(queries)}
        qrels = defaultdict(dict)
        for line in open(root / "cranfield/cranqrel"):
            q, d, grade = (int(x) for x in line.split()[:3])
            qrels[qids[q]][d] = 5 - grade if 1 <= grade <= 4 else 0
    else:
        docs = parse_smart(root / "cisi/CISI.ALL", ["T", "W"])
        queries = parse_smart(root / "cisi/CISI.QRY", ["T", "W"])
        qrels = defaultdict(dict)
        for line in open(root / "cisi/CISI.REL"):
            q, d = (int(x) for x in line.split()[:2])
            qrels[q][d] = 1
    return docs, queries, qrels


def tokenise(conn, texts, config="english"):
    """PostgreSQL's to_tsvector of each text → [{lexeme: tf}] in order (NULL texts → {})."""
    rows = conn.execute(
        "SELECT t.i, v.lexeme, cardinality(v.positions) FROM unnest(%s::text[]) WITH ORDINALITY t(body, i), "
        "unnest(to_tsvector(%s::regconfig, t.body)) v",
        (list(texts), config),
    ).fetchall()
    out = [dict() for _ in texts]
    for i, lexeme, tf in rows:
        out[i - 1][lexeme] = tf
    return out


class Reference:
    """BM25 over a fixed collection: `indexed` = the rows whose statistics count (every row
    version the index holds), `live` = the ids a query may return (a subset, e.g. before VACUUM
    removes deleted rows from the statistics). Both as {key: {lexeme: tf}}; a live id must be a
    key of `indexed`."""

    def __init__(self, indexed, live_ids=None, k1=K1, b=B):
        self.k1, self.b = k1, b
        self.n = len(indexed)
        self.lengths = {key: sum(terms.values()) for key, terms in indexed.items()}
        self.avgdl = sum(self.lengths.values()) / self.n if self.n else 0.0
        self.postings = defaultdict(list)
        for key, terms in indexed.items():
            for lexeme, tf in terms.items():
                self.postings[lexeme].append((key, tf))
        self.live = set(indexed) if live_ids is None else set(live_ids)

    def idf(self, lexeme):
        df = len(self.postings.get(lexeme, ()))
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def top(self, query_lexemes, k):
        """The `k` best live rows as [(key, score)], score descending then key ascending; rows
        holding no query lexeme are not returned."""
        scores = defaultdict(float)
        for lexeme in set(query_lexemes):
            postings = self.postings.get(lexeme)
            if not postings:
                continue
            idf = self.idf(lexeme)
            for key, tf in postings:
                if key in self.live:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[key] / self.avgdl)
                    scores[key] += idf * tf * (self.k1 + 1) / (tf + norm)
        return sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]


def reference_bm25(doc_terms, doc_ids, query_lexemes, k, k1=K1, b=B):
    """Top `k` (id, score) of a collection given as parallel lists, every row live."""
    return Reference(dict(zip(doc_ids, doc_terms)), k1=k1, b=b).top(query_lexemes, k)


def same_top(got, want, k=10, tolerance=1e-4):
    """Whether `got` equals `want` in its first k: scores close rank by rank, ids equal except
    among tied scores (`want` should run past k so that a tie at rank k is seen whole)."""
    if len(got[:k]) != len(want[:k]):
        return False
    for (gid, gs), (wid, ws) in zip(got[:k], want[:k]):
        if abs(gs - ws) > tolerance * max(abs(ws), 1e-12):
            return False
        if gid != wid:
            tied = [d for d, s in want if abs(s - ws) <= 1e-9 * max(abs(ws), 1e-12)]
            if gid not in tied:
                return False
    return True
