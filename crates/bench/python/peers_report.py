"""peers.md and peers.png from the report `pg_peers.py` builds (also `python3 peers_report.py
peers.json OUT_DIR` to rewrite them from a saved peers.json)."""

import json
import os
import sys

TARGETS = (0.95, 0.99)


def fmt(v, d=2):
    return "–" if v is None else f"{v:.{d}f}"


def dial_text(gucs):
    return ", ".join(f"{k}={v}" for k, v in gucs.items())


def best_point(result, target):
    ok = [p for p in result["points"] if p["recall_at_10"] >= target]
    return min(ok, key=lambda p: p["client_p50_ms"]) if ok else None


def header(report):
    s = report["settings"]
    m = report["machine"]
    load = m["load_1min_during_run"]
    peers = report.get("peers", {})
    lines = ["# pg_strata beside pgvector, pgvectorscale and VectorChord", "",
             "Produced by `cargo xtask bench --peers` (crates/bench/python/pg_peers.py): one throwaway cluster, one database per "
             "index kind, the same data, queries and settings for every system, in one run. "
             + (f"Every index of a set is built first (then prewarmed with pg_prewarm) and the dials are measured in {s['passes']} "
                f"interleaved passes, each over 1/{s['passes']} of the queries and visiting the systems in turn, so that a slower stretch "
                "of the shared machine falls on every system alike. " if s.get("passes", 1) > 1 else "Systems measured one after another. ")
             + ("**Quick run.** " if s["quick"] else ""), "",
             f"Settings for every system: shared_buffers {s['shared_buffers']}, maintenance_work_mem {s['maintenance_work_mem']}, "
             f"max_parallel_maintenance_workers {s['max_parallel_maintenance_workers']} (a leader and {s['max_parallel_maintenance_workers']} "
             f"worker: {s['build_threads']} build processes for pgvector and pgvectorscale, `strata.build_threads` {s['build_threads']}, "
             f"VectorChord's `build_threads` {s['build_threads']}); searches single-client except the QPS@2 column "
             f"(pgbench -M prepared, 2 clients, {s['pgbench_seconds']} s per point, split over the passes); `strata.search_threads` at its default (2). "
             "Latency is client wall time over the unix socket (psycopg, prepared statements, 1,000 queries; the headline figure), "
             f"server p50 the EXPLAIN ANALYZE execution time of {s['explain_queries']} queries. Build time runs until the index is "
             "searchable in its final form (pg_strata: CREATE INDEX, `strata_flush`, `strata_wait_for_merges`). Sizes: the index "
             "relation plus, for pg_strata, its segment files.", "",
             f"Machine: {m['cpus']} CPUs, shared with other work during the run: 1-minute load average {fmt(load['min'], 1)}–"
             f"{fmt(load['max'], 1)} (mean {fmt(load['mean'], 1)}, {load['samples']} samples); `uptime` at the start: "
             f"`{m['uptime_at_start']}`, at the end: `{m['uptime_at_end']}`. Run time {report['run_seconds'] / 60:.0f} min.", "",
             "## Versions", "", "| system | version | source |", "|---|---|---|"]
    versions = {}
    for st in report["sets"]:
        versions.update(st["versions"])
    lines.append(f"| PostgreSQL | {versions.get('postgresql', '–')} | the cluster's server |")
    lines.append(f"| pg_strata | {versions.get('pg_strata', '–')} | this repository |")
    for name in ("pgvector", "pgvectorscale", "VectorChord"):
        info = peers.get(name, {})
        src = f"release {info.get('release', '?')}, commit `{info.get('commit', '?')}`; {info.get('build', '')}" if info else ""
        why = report.get("unavailable", {}).get(name)
        lines.append(f"| {name} | {versions.get(name, 'not measured')} | {src or why or '–'} |")
    return lines


def headline_lines(report):
    h = report["headline"]
    lines = ["", "## Headline", "",
             "Worst set of the run for each key (the smallest lead, the largest build ratio); per set below and in "
             "`headline_by_set`. Ratios of client p50: best peer ÷ pg_strata (> 1: pg_strata faster); QPS@2: pg_strata ÷ best "
             "peer; build: pg_strata's fastest index ÷ the fastest peer index (< 1: pg_strata faster); compact size: "
             "pg_strata ivf with `rerank = heap` ÷ the smallest peer index reaching 0.95. The issue's goal: ≥ 1.5, ≥ 1.5, ≤ 1, ≤ 1.",
             "", "| key | value |", "|---|---|"]
    for k, v in h.items():
        lines.append(f"| `{k}` | {', '.join(v) if isinstance(v, list) else fmt(v, 3)} |")
    lines += ["", "| set | p50 ratio at 0.95 | at 0.99 | QPS@2 ratio at 0.95 | at 0.99 | build ratio | compact size ratio at 0.95 |",
              "|---|---|---|---|---|---|---|"]
    for name, b in report["headline_by_set"].items():
        lines.append(f"| {name} | {fmt(b['p50_ratio_vs_best_peer_at_095'])} | {fmt(b['p50_ratio_vs_best_peer_at_099'])} | "
                     f"{fmt(b['qps2_ratio_vs_best_peer_at_095'])} | {fmt(b['qps2_ratio_vs_best_peer_at_099'])} | "
                     f"{fmt(b['build_ratio_vs_fastest_peer'])} | {fmt(b['compact_size_ratio_vs_smallest_peer_at_095'], 3)} |")
    if report.get("floor"):
        f = report["floor"]
        lines += ["", f"`floor_over_btree_ms` ({f['source']}): {fmt(f['value'], 3)} ms"
                  + (f" (strata scan of 1,000 rows {fmt(f.get('strata_scan_p50_ms'), 3)} ms − btree lookup "
                     f"{fmt(f.get('btree_lookup_p50_ms'), 3)} ms, client p50)." if "strata_scan_p50_ms" in f else ".")]
    return lines


def set_lines(st, by_set, settings):
    lines = ["", f"## {st['set']}: {st['rows']:,} rows × {st['dims']}, {st['queries']} queries, cosine", "", st["description"] + ".", ""]
    for t in TARGETS:
        tag = f"{int(t * 100):03d}"
        lines += [f"Best point per index at recall@10 ≥ {t} (lowest client p50):", "",
                  "| index | dial | recall@10 | client p50 ms | client p99 ms | server p50 ms | QPS@1 | QPS@2 | build s | size MB |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in st["results"]:
            p = best_point(r, t)
            if p:
                lines.append(f"| {r['system']} | {dial_text(p['dial'])} | {p['recall_at_10']:.4f} | {p['client_p50_ms']:.3f} | "
                             f"{p['client_p99_ms']:.3f} | {p['server_p50_ms']:.3f} | {p['qps_1']:.0f} | {p['qps_2']:.0f} | "
                             f"{r['build_seconds']:.1f} | {r['index_bytes'] / 1e6:.1f} |")
            else:
                top = max(p["recall_at_10"] for p in r["points"])
                lines.append(f"| {r['system']} | not reached (best {top:.4f}) | | | | | | | {r['build_seconds']:.1f} | {r['index_bytes'] / 1e6:.1f} |")
        per = by_set.get(f"per_peer_at_{tag}", {})
        if per:
            lines += ["", "Against each peer: " + "; ".join(
                f"{name}: p50 ratio {fmt(v['p50_ratio'])}, QPS@2 ratio {fmt(v['qps2_ratio'])}" for name, v in per.items()) + ".", ""]
    lines += ["Every point:", "", "| index | dial | recall@10 | client p50 | client p99 | server p50 | QPS@1 | QPS@2 |",
              "|---|---|---|---|---|---|---|---|"]
    for r in st["results"]:
        for p in r["points"]:
            lines.append(f"| {r['system']} | {dial_text(p['dial'])} | {p['recall_at_10']:.4f} | {p['client_p50_ms']:.3f} | "
                         f"{p['client_p99_ms']:.3f} | {p['server_p50_ms']:.3f} | {p['qps_1']:.0f} | {p['qps_2']:.0f} |")
    if st["insert"]:
        preload = settings.get("insert", {}).get("preload_fraction", 0.5)
        lines += ["", f"Sustained insert rate ({preload:.0%} of the rows preloaded and indexed, then 2 pgbench writers × 100 rows per "
                  "transaction from a staging table, `synchronous_commit = off`, rows ÷ (insert time + time until pg_strata's "
                  "background indexing is drained)):", "",
                  "| index | rows/s sustained | rows/s while inserting | drain s |", "|---|---|---|---|"]
        for i in st["insert"]:
            lines.append(f"| {i['system']} | {i['rows_per_second']:,.0f} | {i['burst_rows_per_second']:,.0f} | {i['drain_seconds']:.1f} |")
    if st["filtered"]:
        lines += ["", "Filtered search, each system in its own form, at the dial where it first reached 0.95 unfiltered (a tag "
                  "independent of the vectors on 10 %, 1 % and 0.1 % of the rows; recall against brute force over the allowed "
                  "rows; *short*: queries returning fewer than 10 rows):", "",
                  "| index | form | settings | " + " | ".join(p["point"] for p in st["filtered"][0]["points"]) + " |",
                  "|---|---|---|" + "---|" * len(st["filtered"][0]["points"])]
        for f in st["filtered"]:
            cells = [f"{p['recall_at_10']:.3f} / {p['p50_ms']:.2f} ms / p99 {p['p99_ms']:.1f} / {p['qps_2']:.0f} qps"
                     + (f" / short {p['short_fraction']:.2f}" if p["short_fraction"] else "") for p in f["points"]]
            lines.append(f"| {f['system']} | {f['form']} | {dial_text({k: v for k, v in f['settings'].items() if k != 'enable_seqscan'})} | "
                         + " | ".join(cells) + " |")
        lines += ["", "Cells: recall@10 / client p50 / p99 (ms) / QPS at 2 clients."]
    return lines


def plot(report, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: peers.png not written")
        return
    sets = report["sets"]
    fig, axes = plt.subplots(len(sets), 2, figsize=(12, 4.6 * len(sets)), squeeze=False)
    for row, st in zip(axes, sets):
        for ax, (key, label) in zip(row, [("client_p50_ms", "client p50 (ms)"), ("qps_2", "QPS, 2 clients")]):
            for r in st["results"]:
                style = "-" if r["extension"] == "pg_strata" else "--"
                ax.plot([p["recall_at_10"] for p in r["points"]], [p[key] for p in r["points"]], style, marker="o", label=r["system"])
            ax.set_yscale("log")
            ax.set_xlabel("recall@10")
            ax.set_ylabel(label)
            ax.set_title(f"{st['set']} ({st['rows']:,} × {st['dims']})")
            ax.grid(True, alpha=0.3)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "peers.png"), dpi=110)
    plt.close(fig)


def write(report, out):
    """Writes peers.md and peers.png into `out`."""
    lines = header(report) + headline_lines(report)
    unavailable = report.get("unavailable") or {}
    if unavailable:
        lines += ["", "Not measured: " + "; ".join(f"{k}: {v}" for k, v in unavailable.items()) + "."]
    for st in report["sets"]:
        lines += set_lines(st, report["headline_by_set"].get(st["set"], {}), report["settings"])
    lines += ["", "![recall against client p50 and QPS at 2 clients](peers.png)", ""]
    open(os.path.join(out, "peers.md"), "w").write("\n".join(lines) + "\n")
    plot(report, out)


if __name__ == "__main__":
    write(json.load(open(sys.argv[1])), sys.argv[2])
