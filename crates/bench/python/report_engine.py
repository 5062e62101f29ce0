"""Renders engine.json as engine.md (tables with ratios) and engine-frontier.png (recall vs QPS)."""

import json
import sys

report = json.load(open(sys.argv[1]))
out = sys.argv[2]
systems = report["systems"]


def fmt(value, digits=3):
    return "–" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def at_recall(system, target=0.95):
    return next((p for p in system["points"] if p["recall_at_10"] >= target), None)


lines = ["# Engine benchmark", "",
         f"Dataset: `{report['dataset']['path']}` — {report['dataset']['rows']} rows, {report['dataset']['queries']} held-out queries, "
         f"cosine. Machine: {report['machine']['cpus']} CPUs, SIMD {report['machine']['simd']}, streaming read "
         f"{report['machine']['memory_bandwidth_gbs']:.1f} GB/s. Build threads: {report['threads']}."
         + (" **Quick run** (subset of data and dials)." if report.get("quick") else ""), "",
         "Produced by `cargo run --release -p strata-bench -- engine`. All systems ran in the same process run on the "
         "same machine; ratios matter more than absolute numbers (shared, noisy machines).", "",
         "## Headline", "", "| metric | value |", "|---|---|"]
for key, value in report["headline"].items():
    lines.append(f"| `{key}` | {fmt(value)} |")
lines += ["", "## At recall@10 ≥ 0.95 (lowest dial reaching it)", "",
          "| system | dial | recall@10 | p50 ms | p99 ms | QPS 1 thread | QPS 2 threads | build s | bytes |", "|---|---|---|---|---|---|---|---|---|"]
for s in systems:
    p = at_recall(s)
    if p is None:
        lines.append(f"| {s['system']} | not reached | | | | | | {fmt(s['build_seconds'], 2)} | {s['bytes_on_disk']} |")
    else:
        lines.append(f"| {s['system']} | {s['dial']}={p['dial']:g} | {p['recall_at_10']:.4f} | {p['p50_ms']:.3f} | {p['p99_ms']:.3f} | "
                     f"{p['qps_1']:.0f} | {p['qps_2']:.0f} | {fmt(s['build_seconds'], 2)} | {s['bytes_on_disk']} |")
lines += ["", "## Every point", "", "| system | dial | recall@10 | p50 ms | p95 ms | p99 ms | QPS 1 | QPS 2 |", "|---|---|---|---|---|---|---|---|"]
for s in systems:
    for p in s["points"]:
        lines.append(f"| {s['system']} | {s['dial']}={p['dial']:g} | {p['recall_at_10']:.4f} | {p['p50_ms']:.3f} | {p['p95_ms']:.3f} | "
                     f"{p['p99_ms']:.3f} | {p['qps_1']:.0f} | {p['qps_2']:.0f} |")
open(f"{out}/engine.md", "w").write("\n".join(lines) + "\n")

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in systems:
        xs = [p["recall_at_10"] for p in s["points"]]
        ys = [p["qps_1"] for p in s["points"]]
        ax.plot(xs, ys, marker="o", label=s["system"])
    ax.set_xlabel("recall@10")
    ax.set_ylabel("queries per second (1 thread)")
    ax.set_yscale("log")
    ax.set_title("Recall vs QPS — engine alone vs hnswlib / faiss")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out}/engine-frontier.png", dpi=120)
except ImportError:
    print("matplotlib missing: engine-frontier.png not written")
