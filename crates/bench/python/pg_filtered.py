"""Filtered vector search in PostgreSQL: pg_strata (filter columns inside the index) vs pgvector's
HNSW (post-filter, iterative scans strict and relaxed) vs PostgreSQL's exact path (btree / GIN +
sort), side by side in one cluster.

A cognee-like table over the 100k PyPI MiniLM embeddings (held-out queries): `docs(id, tenant,
tags, created_at, cluster, ext_id, embedding)` with
- `tenant`: 1,000 tenants of Zipf-skewed sizes (the largest about 13 % of the rows);
- `tags`: `common` (10 % of rows), `rare` (1 %), `scarce` (0.1 %), independent of the vectors;
- `created_at`: uniform over 1,000 days;
- `cluster`: the nearest of 1,000 rows drawn as centroids (so a set of clusters is a compact
  region of the vector space: a filter correlated with the vectors);
- `ext_id`: a unique key (the single-row filter).

Filter points, each at 10 %, 1 % and 0.1 % of the rows: a tag (`tags @> ARRAY[…]`), a time
range, a tenant (`tenant = …`, a tenant of about that size), the clusters nearest the query
(correlated: the allowed rows surround the query) and random clusters (anti-correlated: compact
regions away from the query); plus a single-row filter (`ext_id = …`) and no filter.

Per system and point: recall@10 against brute force over the allowed rows, client p50 / p99 over
the unix socket (prepared statements, warmed up), QPS with 2 clients, and the fraction of queries
returning fewer than 10 rows while at least 10 match. Writes filtered.json, filtered.md and plots.
"""

import argparse
import json
import os
import platform
import threading
import time

import numpy as np

from pg_bench import connect
from vecs import read_vecs

SELECTIVITIES = [0.10, 0.01, 0.001]
KINDS = ["tag", "time", "tenant", "cluster_near", "cluster_far"]
TAGS = {0.10: "common", 0.01: "rare", 0.001: "scarce"}
DAY_US = 86_400 * 1_000_000
EPOCH = np.datetime64("2025-01-01T00:00:00", "us")


def attributes(base, rng):
    """The filter columns of every row (numpy arrays), computed once for both databases."""
    n = len(base)
    weights = 1.0 / np.arange(1, 1001)
    tenant = rng.choice(1000, size=n, p=weights / weights.sum())
    tags = {name: rng.random(n) < s for s, name in TAGS.items()}
    created_us = rng.integers(0, 1000 * DAY_US, size=n)
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    centroids = unit[rng.choice(n, size=1000, replace=False)]
    cluster = np.concatenate([np.argmax(unit[i:i + 10_000] @ centroids.T, axis=1) for i in range(0, n, 10_000)])
    ext_id = rng.permutation(n).astype(np.int64) + 1_000_000
    return {"tenant": tenant, "tags": tags, "created_us": created_us, "cluster": cluster,
            "centroids": centroids, "ext_id": ext_id}


def load(conn, base, attrs):
    conn.execute("DROP TABLE IF EXISTS docs")
    conn.execute(f"""CREATE TABLE docs (id int PRIMARY KEY, tenant int, tags text[], created_at timestamptz,
                     cluster int, ext_id bigint, embedding vector({base.shape[1]}))""")
    with conn.cursor().copy("COPY docs FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "text[]", "timestamptz", "int4", "int8", "vector"])
        for i, row in enumerate(base):
            tags = [name for name, mask in attrs["tags"].items() if mask[i]] + ["all"]
            created = (EPOCH + np.timedelta64(int(attrs["created_us"][i]), "us")).astype(object).replace(tzinfo=_utc())
            copy.write_row([i, int(attrs["tenant"][i]), tags, created, int(attrs["cluster"][i]), int(attrs["ext_id"][i]), row])
    conn.execute("VACUUM ANALYZE docs")


def _utc():
    import datetime
    return datetime.timezone.utc


def points(attrs, queries, rng, n):
    """Every filter point: name, kind, target selectivity, and per query (SQL clause, parameters,
    allowed-row mask)."""
    unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sizes = np.bincount(attrs["cluster"], minlength=1000)
    tenant_sizes = np.bincount(attrs["tenant"], minlength=1000)
    out = [{"name": "no filter", "kind": "none", "selectivity": 1.0,
            "per_query": [("TRUE", [], None)] * len(queries)}]
    for s in SELECTIVITIES:
        tag = TAGS[s]
        mask = attrs["tags"][tag]
        out.append({"name": f"tag {s:.1%}", "kind": "tag", "selectivity": s,
                    "per_query": [("tags @> %s", [[tag]], mask)] * len(queries)})
        span = int(s * 1000 * DAY_US)
        per = []
        for _ in queries:
            start = int(rng.integers(0, 1000 * DAY_US - span))
            m = (attrs["created_us"] >= start) & (attrs["created_us"] < start + span)
            to_ts = lambda us: (EPOCH + np.timedelta64(us, "us")).astype(object).replace(tzinfo=_utc())
            per.append(("created_at >= %s AND created_at < %s", [to_ts(start), to_ts(start + span)], m))
        out.append({"name": f"time {s:.1%}", "kind": "time", "selectivity": s, "per_query": per})
        # The tenant whose size is nearest the target (one per query, drawn among the nearest few).
        order = np.argsort(np.abs(tenant_sizes - s * n))[:5]
        per = []
        for _ in queries:
            t = int(rng.choice(order))
            per.append(("tenant = %s", [t], attrs["tenant"] == t))
        out.append({"name": f"tenant {s:.1%}", "kind": "tenant", "selectivity": s, "per_query": per})
        for kind in ["cluster_near", "cluster_far"]:
            per = []
            for q in unit_q:
                ranked = np.argsort(-(attrs["centroids"] @ q)) if kind == "cluster_near" else rng.permutation(1000)
                chosen, total = [], 0
                for c in ranked:
                    chosen.append(int(c))
                    total += sizes[c]
                    if total >= s * n:
                        break
                per.append(("cluster = ANY(%s)", [chosen], np.isin(attrs["cluster"], chosen)))
            out.append({"name": f"{kind.replace('_', ' ')} {s:.1%}", "kind": kind, "selectivity": s, "per_query": per})
    per = []
    for _ in queries:
        row = int(rng.integers(0, n))
        mask = np.zeros(n, dtype=bool)
        mask[row] = True
        per.append(("ext_id = %s", [int(attrs["ext_id"][row])], mask))
    out.append({"name": "single row", "kind": "single", "selectivity": 1.0 / n, "per_query": per})
    return out


def truth_for(point, distances):
    """Per query: the ids of the 10 nearest allowed rows and the number allowed."""
    result = []
    for (clause, params, mask), d in zip(point["per_query"], distances):
        if mask is None:
            ids = np.argsort(d, kind="stable")[:10]
            result.append((set(ids.tolist()), len(d)))
        else:
            allowed = np.flatnonzero(mask)
            ids = allowed[np.argsort(d[allowed], kind="stable")[:10]]
            result.append((set(ids.tolist()), len(allowed)))
    return result


def sql_of(clause):
    return f"SELECT id FROM docs WHERE {clause} ORDER BY embedding <=> %s LIMIT 10"


def measure(args, db, gucs, point, queries, truth):
    """Recall, latency, short results and 2-client QPS of one system at one point."""
    with connect(args, db) as conn:
        for k, v in gucs.items():
            conn.execute(f"SET {k} = {v}")
        cases = list(zip(point["per_query"], queries))
        for (clause, params, _), q in cases[: min(10, len(cases))]:  # warm-up
            conn.execute(sql_of(clause), (*params, q), prepare=True).fetchall()
        walls, hits, wanted, short, with_ten = [], 0, 0, 0, 0
        for ((clause, params, _), q), (ids, allowed) in zip(cases, truth):
            t = time.perf_counter()
            rows = conn.execute(sql_of(clause), (*params, q), prepare=True).fetchall()
            walls.append((time.perf_counter() - t) * 1e3)
            got = {r[0] for r in rows}
            hits += len(got & ids)
            wanted += min(10, allowed)
            if allowed >= 10:
                with_ten += 1
                short += len(rows) < 10
        plan = conn.execute("EXPLAIN (COSTS OFF) " + sql_of(cases[0][0][0]), (*cases[0][0][1], cases[0][1])).fetchall()
    qps = two_clients(args, db, gucs, cases, args.seconds)
    walls = np.array(walls)
    return {
        "recall_at_10": hits / wanted if wanted else 1.0,
        "p50_ms": float(np.percentile(walls, 50)), "p99_ms": float(np.percentile(walls, 99)),
        "qps_2": qps, "short_fraction": short / with_ten if with_ten else 0.0,
        "plan": " / ".join(line[0].strip().removeprefix("->  ")[:90] for line in plan
                             if "Order By" not in line[0] and "Sort Key" not in line[0])[:300],
    }


def two_clients(args, db, gucs, cases, seconds):
    """Queries per second with two connections issuing the point's queries in turn."""
    done = [0, 0]
    stop = time.perf_counter() + seconds

    def client(slot):
        with connect(args, db) as conn:
            for k, v in gucs.items():
                conn.execute(f"SET {k} = {v}")
            i = slot
            while time.perf_counter() < stop:
                (clause, params, _), q = cases[i % len(cases)]
                conn.execute(sql_of(clause), (*params, q), prepare=True).fetchall()
                done[slot] += 1
                i += 2

    threads = [threading.Thread(target=client, args=(slot,)) for slot in range(2)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - started)


def run_points(args, db, name, gucs, pts, queries, truths):
    out = []
    for point, truth in zip(pts, truths):
        m = measure(args, db, gucs, point, queries, truth)
        m.update({"point": point["name"], "kind": point["kind"], "selectivity": point["selectivity"]})
        out.append(m)
        print(f"  {name:<34} {point['name']:<22} recall {m['recall_at_10']:.3f}  p50 {m['p50_ms']:8.2f} ms  "
              f"p99 {m['p99_ms']:8.2f}  QPS@2 {m['qps_2']:7.0f}  short {m['short_fraction']:.2f}  [{m['plan']}]", flush=True)
    return {"system": name, "gucs": gucs, "points": out}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pgvector", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(16)
    base = read_vecs(os.path.join(args.data, "base.fvecs"), args.rows, "<f4")
    queries = read_vecs(os.path.join(args.data, "query.fvecs"), args.queries, "<f4")
    attrs = attributes(base, rng)
    pts = points(attrs, queries, rng, len(base))
    unit_b = base / np.linalg.norm(base, axis=1, keepdims=True)
    distances = 1.0 - (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit_b.T
    truths = [truth_for(p, distances) for p in pts]
    for p in pts:
        allowed = [int(m.sum()) for _, _, m in p["per_query"] if m is not None]
        p["allowed_mean"] = float(np.mean(allowed)) if allowed else float(len(base))
    systems, builds, versions = [], {}, {}

    with connect(args, "strata_bench") as conn:
        load(conn, base, attrs)
        versions["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
        started = time.perf_counter()
        conn.execute("CREATE INDEX docs_strata ON docs USING strata (embedding vector_cosine_ops, tenant, tags, created_at, cluster, ext_id)")
        builds["pg_strata"] = time.perf_counter() - started
        conn.execute("SELECT strata_flush('docs_strata')")
        conn.execute("SELECT strata_wait_for_merges('docs_strata')")
        conn.execute("ANALYZE docs")
        systems.append(run_points(args, "strata_bench", "pg_strata hnsw, filter columns", {}, pts, queries, truths))
        # The planner's choice next to btree / GIN indexes on the filter columns: with the filter
        # columns in the strata index, and with a strata index on the vector alone.
        for column in ["tenant", "created_at", "cluster", "ext_id"]:
            conn.execute(f"CREATE INDEX ON docs ({column})")
        conn.execute("CREATE INDEX ON docs USING gin (tags)")
        conn.execute("ANALYZE docs")
    systems.append(run_points(args, "strata_bench", "pg_strata filter columns + btree/GIN (planner)", {}, pts, queries, truths))
    with connect(args, "strata_bench") as conn:
        conn.execute("DROP INDEX docs_strata")
        conn.execute("CREATE INDEX docs_strata ON docs USING strata (embedding vector_cosine_ops)")
        conn.execute("SELECT strata_flush('docs_strata')")
        conn.execute("SELECT strata_wait_for_merges('docs_strata')")
    systems.append(run_points(args, "strata_bench", "pg_strata vector only + btree/GIN (planner)", {}, pts, queries, truths))
    with connect(args, "strata_bench") as conn:
        for column in ["tenant", "created_at", "cluster", "ext_id"]:
            conn.execute(f"DROP INDEX docs_{column}_idx")
        conn.execute("DROP INDEX docs_tags_idx")
    systems.append(run_points(args, "strata_bench", "pg_strata vector only, widening past the filter",
                              {"enable_seqscan": "off"}, pts, queries, truths))

    if args.pgvector:
        with connect(args, "pgvector_bench") as conn:
            load(conn, base, attrs)
            versions["pgvector"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            conn.execute("SET maintenance_work_mem = '2GB'")
            started = time.perf_counter()
            conn.execute("CREATE INDEX docs_hnsw ON docs USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
            builds["pgvector"] = time.perf_counter() - started
        # The HNSW paths (the only index on the table, ef_search 100 as pg_strata's default).
        hnsw = {"enable_seqscan": "off", "hnsw.ef_search": 100}
        for mode in ["off", "strict_order", "relaxed_order"]:
            label = {"off": "post-filter", "strict_order": "iterative strict", "relaxed_order": "iterative relaxed"}[mode]
            systems.append(run_points(args, "pgvector_bench", f"pgvector hnsw, {label}", dict(hnsw, **{"hnsw.iterative_scan": mode}),
                                      pts, queries, truths))
        with connect(args, "pgvector_bench") as conn:
            conn.execute("DROP INDEX docs_hnsw")
            for column in ["tenant", "created_at", "cluster", "ext_id"]:
                conn.execute(f"CREATE INDEX ON docs ({column})")
            conn.execute("CREATE INDEX ON docs USING gin (tags)")
            conn.execute("ANALYZE docs")
        systems.append(run_points(args, "pgvector_bench", "exact: btree / GIN + sort", {}, pts, queries, truths))

    report(args, base, queries, pts, systems, builds, versions)


def planner_table(systems, pts):
    """The planner's choice, next to btree / GIN indexes, against the faster of the two paths it
    chose between (both measured in this run): the strata scan alone and the exact path."""
    by_name = {s["system"]: s for s in systems}
    exact = by_name.get("exact: btree / GIN + sort")
    cases = [("pg_strata filter columns + btree/GIN (planner)", "pg_strata hnsw, filter columns"),
             ("pg_strata vector only + btree/GIN (planner)", "pg_strata vector only, widening past the filter")]
    if not exact or any(a not in by_name or b not in by_name for a, b in cases):
        return []
    lines = ["## The planner's choice next to btree / GIN indexes", "",
             "Per point: the plan PostgreSQL chose (strata scan or btree/GIN + sort), its p50, and the p50 of the faster "
             "of the two paths measured on their own (the strata scan alone, the exact path). *ok* when the choice is "
             "the faster path or within 25 % of it.", "",
             "| point | " + " | ".join(f"{a} (choice, p50 / best p50)" for a, _ in cases) + " |", "|---|" + "---|" * len(cases)]
    for i, p in enumerate(pts):
        if p["kind"] == "none":
            continue
        cells = []
        for chosen_name, alone_name in cases:
            chosen = by_name[chosen_name]["points"][i]
            best = min(by_name[alone_name]["points"][i]["p50_ms"], exact["points"][i]["p50_ms"])
            path = "strata" if "docs_strata" in chosen["plan"] else "btree/GIN + sort"
            verdict = "ok" if chosen["p50_ms"] <= 1.25 * best else "**slower**"
            cells.append(f"{path}, {chosen['p50_ms']:.2f} / {best:.2f} ms, {verdict}")
        lines.append(f"| {p['name']} | " + " | ".join(cells) + " |")
    return lines


def report(args, base, queries, pts, systems, builds, versions):
    ours = systems[0]
    by_point = {p["point"]: p for p in ours["points"]}
    unfiltered = by_point["no filter"]["p50_ms"]
    filtered = [p for p in ours["points"] if p["kind"] not in ("none", "single")]

    def ratio_vs(name):
        theirs = next((s for s in systems if s["system"] == name), None)
        if not theirs:
            return None
        ratios = [t["p50_ms"] / by_point[t["point"]]["p50_ms"] for t in theirs["points"] if t["kind"] != "none"]
        return min(ratios) if ratios else None

    headline = {
        "min_recall_at_10": min(p["recall_at_10"] for p in ours["points"]),
        "max_short_fraction": max(p["short_fraction"] for p in ours["points"]),
        "max_p50_vs_unfiltered": max(p["p50_ms"] / unfiltered for p in filtered),
        "single_row_p50_ms": by_point["single row"]["p50_ms"],
        "unfiltered_p50_ms": unfiltered,
        "min_p50_speedup_vs_pgvector_iterative_strict": ratio_vs("pgvector hnsw, iterative strict"),
        "min_p50_speedup_vs_pgvector_iterative_relaxed": ratio_vs("pgvector hnsw, iterative relaxed"),
        "min_p50_speedup_vs_exact_path": ratio_vs("exact: btree / GIN + sort"),
    }
    data = {
        "headline": headline,
        "dataset": {"rows": len(base), "queries": len(queries), "metric": "cosine"},
        "points": [{"name": p["name"], "kind": p["kind"], "target_selectivity": p["selectivity"], "allowed_rows_mean": p["allowed_mean"]} for p in pts],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": versions, "build_seconds": builds, "quick": args.quick, "systems": systems,
    }
    json.dump(data, open(os.path.join(args.out, "filtered.json"), "w"), indent=2)
    fmt = lambda v, d=2: "–" if v is None else f"{v:.{d}f}"
    lines = ["# Filtered vector search", "",
             f"{len(base):,} rows × {base.shape[1]} (pypi-minilm) with filter columns, {len(queries)} held-out queries per point, "
             f"cosine, LIMIT 10; PostgreSQL {versions.get('postgresql')}, pgvector {versions.get('pgvector', 'not built')}. "
             + ("**Quick run.** " if args.quick else "") + "Produced by `cargo xtask bench --filtered` (see README.md here). "
             "Latency is client wall time over the unix socket (prepared statements); QPS with 2 clients; recall@10 against "
             "brute force over the rows the filter allows; *short* = fraction of queries returning fewer than 10 rows while "
             "at least 10 match. pg_strata runs at its defaults (`strata.ef_search` 100) with the filter columns in the "
             "index; pgvector's HNSW (m 16, ef_construction 64) runs with `hnsw.ef_search = 100` as the table's only index; "
             "the exact path has btree indexes on the scalar columns and GIN on `tags` and no vector index.", "",
             "## Headline", "", "| metric | value |", "|---|---|"]
    lines += [f"| `{k}` | {fmt(v, 3)} |" for k, v in headline.items()]
    lines += ["", "## Every point", "", "| point | allowed rows | " + " | ".join(s["system"] for s in systems) + " |",
              "|---|---|" + "---|" * len(systems)]
    for i, p in enumerate(pts):
        cells = []
        for s in systems:
            m = s["points"][i]
            cells.append(f"{m['recall_at_10']:.3f} / {m['p50_ms']:.2f} ms / p99 {m['p99_ms']:.1f} / {m['qps_2']:.0f} qps"
                         + (f" / short {m['short_fraction']:.2f}" if m["short_fraction"] else ""))
        lines.append(f"| {p['name']} | {p['allowed_mean']:,.0f} | " + " | ".join(cells) + " |")
    lines += ["", "Cells: recall@10 / p50 / p99 (ms) / QPS at 2 clients [/ short results].", ""]
    lines += planner_table(systems, pts)
    lines += ["", "## Plans (first query of each point)", ""]
    for s in systems:
        lines.append(f"- **{s['system']}**: " + "; ".join(f"{m['point']}: `{m['plan']}`" for m in s["points"]))
    lines.append("")
    lines.append(f"Index builds: " + ", ".join(f"{k} {v:.1f} s" for k, v in builds.items()) + ".")
    open(os.path.join(args.out, "filtered.md"), "w").write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for key, label, fname, log in [("p50_ms", "p50 latency (ms)", "filtered-latency.png", True),
                                       ("recall_at_10", "recall@10 (allowed rows)", "filtered-recall.png", False)]:
            fig, axes = plt.subplots(1, len(KINDS), figsize=(4 * len(KINDS), 4.2), sharey=True)
            for ax, kind in zip(axes, KINDS):
                for s in systems:
                    pts_k = [m for m in s["points"] if m["kind"] == kind]
                    ax.plot([m["selectivity"] for m in pts_k], [m[key] for m in pts_k], marker="o", label=s["system"])
                ax.set_xscale("log")
                if log:
                    ax.set_yscale("log")
                ax.set_title(kind.replace("_", " "))
                ax.set_xlabel("selectivity")
                ax.grid(True, alpha=0.3)
            axes[0].set_ylabel(label)
            axes[-1].legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(args.out, fname), dpi=110)
            plt.close(fig)
    except ImportError:
        print("matplotlib missing: plots not written")


if __name__ == "__main__":
    main()
