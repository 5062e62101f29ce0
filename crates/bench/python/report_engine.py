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
rows = report["dataset"]["rows"]
dims = report["dataset"].get("dims", 384)
flat_vectors = rows * dims * 4


def system(prefix):
    return next((s for s in systems if s["system"].startswith(prefix)), None)


lines += ["", "## Sizes", "",
          "Segment files hold the row ids (8 B/row) and the vectors in f32 for the exact rerank, plus the kind's "
          "own structure; the structure alone is what a deployment that reranks from the table's heap would keep.", "",
          "| system | file bytes | structure bytes (file − vectors − ids) | structure ÷ flat f32 vectors |", "|---|---|---|---|"]
for s in systems:
    if s["system"].startswith("strata"):
        structure = max(s["bytes_on_disk"] - flat_vectors - rows * 8, 0)
        lines.append(f"| {s['system']} | {s['bytes_on_disk']} | {structure} | {structure / flat_vectors:.3f} |")


def reached(prefix):
    s = system(prefix)
    return at_recall(s) if s else None


hnsw, hnswlib = system("strata hnsw"), system("hnswlib")
ivf, faiss_ivf = system("strata ivf"), system("faiss IndexIVFFlat")
h = report["headline"]
targets = []
if hnsw and hnswlib:
    targets.append(("HNSW single-thread QPS ≥ hnswlib's at recall ≥ 0.95", h["hnsw_qps_ratio_vs_hnswlib"] is not None and h["hnsw_qps_ratio_vs_hnswlib"] >= 1.0,
                    f"ratio {fmt(h['hnsw_qps_ratio_vs_hnswlib'])}"))
    targets.append(("HNSW build time ≤ hnswlib's", hnsw["build_seconds"] <= hnswlib["build_seconds"],
                    f"{hnsw['build_seconds']:.1f} s vs {hnswlib['build_seconds']:.1f} s"))
if ivf and faiss_ivf:
    targets.append(("IVF QPS ≥ faiss IndexIVFFlat's at recall ≥ 0.95, equal lists", h["ivf_qps_ratio_vs_faiss_ivfflat"] is not None and h["ivf_qps_ratio_vs_faiss_ivfflat"] >= 1.0,
                    f"ratio {fmt(h['ivf_qps_ratio_vs_faiss_ivfflat'])}"))
    targets.append(("IVF build ≤ 2× faiss's", ivf["build_seconds"] <= 2 * faiss_ivf["build_seconds"],
                    f"{ivf['build_seconds']:.1f} s vs {faiss_ivf['build_seconds']:.1f} s ({ivf['build_seconds'] / faiss_ivf['build_seconds']:.1f}×)"))
    targets.append(("IVF bytes on disk ≤ 1/6 of flat f32", h["ivf_bytes_ratio_vs_flat"] is not None and h["ivf_bytes_ratio_vs_flat"] <= 1 / 6,
                    f"file ratio {fmt(h['ivf_bytes_ratio_vs_flat'])}; the IVF structure alone is "
                    f"{max(ivf['bytes_on_disk'] - flat_vectors - rows * 8, 0) / flat_vectors:.3f} of flat f32 — the file keeps f32 rerank vectors"))
targets.append(("Quantized flat recall@10 ≥ 0.99", (h["quantized_flat_recall_at_10"] or 0) >= 0.99, fmt(h["quantized_flat_recall_at_10"], 4)))
targets.append(("Quantized scan ≥ 50 % of memory bandwidth", (h["quantized_scan_bandwidth_fraction"] or 0) >= 0.5,
                f"{fmt(h['quantized_scan_bandwidth_fraction'])} of {report['machine']['memory_bandwidth_gbs']:.1f} GB/s"))
lines += ["", "## Targets", "", "| target | met | measured |", "|---|---|---|"]
for name, met, measured in targets:
    lines.append(f"| {name} | {'yes' if met else '**no**'} | {measured} |")
lines += ["", "Notes: faiss's 2-thread QPS is one batched call (`index.search` on all queries, matrix products), "
          "ours and hnswlib's run independent single queries on two threads; compare 1-thread columns for latency. "
          "Peak build memory (heap bytes above the loaded dataset, including the copy of the input handed to the build): "
          + ", ".join(f"{s['system']} {s['peak_build_bytes'] / (rows * dims * 4):.2f}× N·d·4" for s in systems if s.get("peak_build_bytes")) + "."]

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
