"""Runs hnswlib and faiss on the same data as `strata-bench engine` and writes their results in
the same JSON shape (systems with dial sweeps: recall@10, latency percentiles, QPS at 1 and 2
threads, build time, bytes)."""

import argparse
import json
import os
import time

import numpy as np

from vecs import read_vecs




def ground_truth(base, queries, k=100):
    b = base / np.linalg.norm(base, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    out = []
    for chunk in range(0, len(q), 64):
        scores = q[chunk:chunk + 64] @ b.T
        out.append(np.argsort(-scores, axis=1, kind="stable")[:, :k])
    return np.vstack(out)


def recall(found, truth):
    return np.mean([len(set(f[:10]) & set(t[:10])) / 10 for f, t in zip(found, truth)])


def sweep(name, dial, values, search_one, search_batch_2, queries, truth, build_seconds, nbytes):
    points = []
    for value in values:
        search_one(queries[0], value)
        for q in queries:  # warm-up
            search_one(q, value)
        latencies, found = [], []
        started = time.perf_counter()
        for q in queries:
            t = time.perf_counter()
            found.append(search_one(q, value))
            latencies.append((time.perf_counter() - t) * 1e3)
        qps1 = len(queries) / (time.perf_counter() - started)
        started = time.perf_counter()
        search_batch_2(queries, value)
        qps2 = len(queries) / (time.perf_counter() - started)
        lat = np.sort(np.array(latencies))
        points.append({"dial": float(value), "recall_at_10": float(recall(found, truth)),
                       "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
                       "p99_ms": float(np.percentile(lat, 99)), "qps_1": qps1, "qps_2": qps2})
        print(f"  {name} {dial}={value}: recall {points[-1]['recall_at_10']:.4f}, p50 {points[-1]['p50_ms']:.3f} ms, QPS {qps1:.0f}/{qps2:.0f}", flush=True)
    return {"system": name, "dial": dial, "build_seconds": build_seconds, "peak_build_bytes": None,
            "bytes_on_disk": nbytes, "code_bytes": 0, "points": points}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--queries", type=int, required=True)
    parser.add_argument("--lists", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    import faiss
    import hnswlib

    base = read_vecs(os.path.join(args.data, "base.fvecs"), args.rows, "<f4")
    queries = read_vecs(os.path.join(args.data, "query.fvecs"), args.queries, "<f4")
    base = base / np.linalg.norm(base, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    truth = ground_truth(base, queries)
    dims = base.shape[1]
    results = []

    # hnswlib, M=16, ef_construction=64 (inner product on normalised vectors = cosine).
    started = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=dims)
    index.init_index(max_elements=len(base), M=16, ef_construction=64, random_seed=42)
    index.set_num_threads(args.threads)
    index.add_items(base, np.arange(len(base)))
    build = time.perf_counter() - started
    path = os.path.join(os.path.dirname(args.out), "hnswlib.tmp.bin")
    index.save_index(path)
    nbytes = os.path.getsize(path)
    os.remove(path)

    def h_one(q, ef):
        index.set_ef(int(max(ef, 10)))
        index.set_num_threads(1)
        return index.knn_query(q, k=10)[0][0]

    def h_two(qs, ef):
        index.set_ef(int(max(ef, 10)))
        index.set_num_threads(2)
        index.knn_query(qs, k=10)

    efs = [40, 100] if args.quick else [10, 20, 40, 64, 100, 200, 400]
    results.append(sweep("hnswlib (M=16, efc=64)", "ef_search", efs, h_one, h_two, queries, truth, build, nbytes))

    faiss.omp_set_num_threads(args.threads)

    def faiss_system(name, dial, values, make, set_dial):
        started = time.perf_counter()
        index = make()
        if not index.is_trained:
            index.train(base)
        index.add(base)
        build = time.perf_counter() - started
        nbytes = faiss.serialize_index(index).nbytes

        def one(q, value):
            set_dial(index, value)
            faiss.omp_set_num_threads(1)
            return index.search(q.reshape(1, -1), 10)[1][0]

        def two(qs, value):
            set_dial(index, value)
            faiss.omp_set_num_threads(2)
            index.search(qs, 10)

        return sweep(name, dial, values, one, two, queries, truth, build, nbytes)

    results.append(faiss_system("faiss IndexFlatIP", "none", [0], lambda: faiss.IndexFlatIP(dims), lambda i, v: None))
    probes = [4, 16] if args.quick else [1, 2, 4, 8, 16, 32, 64]
    results.append(faiss_system(
        f"faiss IndexIVFFlat (lists={args.lists})", "probes", probes,
        lambda: faiss.IndexIVFFlat(faiss.IndexFlatIP(dims), dims, args.lists, faiss.METRIC_INNER_PRODUCT),
        lambda i, v: setattr(i, "nprobe", int(v))))
    results.append(faiss_system(
        f"faiss IndexIVFScalarQuantizer 4-bit (lists={args.lists})", "probes", probes,
        lambda: faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dims), dims, args.lists, faiss.ScalarQuantizer.QT_4bit, faiss.METRIC_INNER_PRODUCT),
        lambda i, v: setattr(i, "nprobe", int(v))))
    results.append(faiss_system(
        "faiss IndexHNSWFlat (M=16, efc=64)", "ef_search", efs,
        lambda: (lambda i: (setattr(i.hnsw, "efConstruction", 64), i)[1])(faiss.IndexHNSWFlat(dims, 16, faiss.METRIC_INNER_PRODUCT)),
        lambda i, v: setattr(i.hnsw, "efSearch", int(max(v, 10)))))

    with open(args.out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
