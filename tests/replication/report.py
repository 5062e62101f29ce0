"""Writes the replication harness's figures to docs/benchmarks/replication.{json,md}."""

from __future__ import annotations

import datetime
import json
import pathlib


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _check_line(name: str, result: dict) -> str:
    parts = []
    for table, r in result.items():
        if not isinstance(r, dict):
            continue
        detail = ", ".join(f"{k} {_fmt(v)}" for k, v in r.items() if k != "ok" and not isinstance(v, dict))
        parts.append(f"{table}: {'pass' if r.get('ok') else '**FAIL**'} ({detail})")
    return f"| {name} | {'; '.join(parts)} |"


def write_docs(directory: pathlib.Path, report: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "replication.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    wal0, wal2 = report.get("wal_no_standbys", {}), report.get("wal_two_standbys", {})
    lines = [
        "# Replication, backups and PITR",
        "",
        f"Written by `cargo xtask replica` on {datetime.date.today().isoformat()} ({report.get('machine')}), "
        f"{report.get('seconds')} s. Settings: `{json.dumps(report.get('settings'))}`.",
        "",
        "## Checks",
        "",
        "| check | result |",
        "|---|---|",
        *(_check_line(name, result) for name, result in report.get("checks", {}).items()),
        "",
        "## WAL per row and insert rate (single-row INSERT transactions, 384-d)",
        "",
        "| table | WAL bytes/row | rows/s, 0 standbys | rows/s, 2 standbys | ratio |",
        "|---|---|---|---|---|",
    ]
    for table in ("wal_plain", "wal_strata"):
        a, b = wal0.get(table, {}), wal2.get(table, {})
        ratio = b.get("rows_per_s", 0) / a["rows_per_s"] if a.get("rows_per_s") else None
        lines.append(
            f"| {table} | {_fmt(float(a.get('wal_bytes_per_row', 0)), 1)} | {_fmt(a.get('rows_per_s'), 0)} "
            f"| {_fmt(b.get('rows_per_s'), 0)} | {_fmt(ratio)} |"
        )
    build = report.get("create_index_wal_bytes_per_row", {})
    if build:
        lines += [
            "",
            "CREATE INDEX WAL per row (the chunks' TID lists): "
            + ", ".join(f"{t} {_fmt(float(v), 1)} B" for t, v in build.items())
            + ".",
        ]
    written = report.get("segment_bytes_written_per_row", {})
    if written:
        lines += [
            "",
            "Segment bytes the primary wrote per row over the workload (flushes, merges, rebuilds): "
            + ", ".join(f"{t} {_fmt(v, 0)} B" for t, v in written.items())
            + ". Logging segment bytes into WAL (option (a)) would add at least this much WAL per row.",
        ]
    latency = report.get("findable_latency", {})
    if latency:
        lines += [
            "",
            "## Commit on the primary → findable on a standby",
            "",
            "| path | found | p50 ms | p99 ms |",
            "|---|---|---|---|",
        ]
        for path in ("index", "btree"):
            r = latency.get(path, {})
            lines.append(f"| {path} | {r.get('found')}/{latency.get('markers_tried')} | {_fmt(r.get('p50_ms'))} | {_fmt(r.get('p99_ms'))} |")
    rec = report.get("recall", {})
    if rec:
        lines += ["", "## recall@10 and query time", "", "| table | node | recall@10 | mean ms |", "|---|---|---|---|"]
        for table, nodes in rec.items():
            for node, r in nodes.items():
                lines.append(f"| {table} | {node} | {_fmt(r.get('recall'), 3)} | {_fmt(r.get('mean_ms'))} |")
    for suffix, title, when in (
        ("", "Standbys answer like the primary",
         "after the workload, its deletes and VACUUM, with rows left unflushed"),
        ("_late", "Standbys answer like the primary, later",
         "after a standby's failing index caught up, a kill -9 of standby2 (which lost its memtables and "
         "rebuilt their settled groups from its heap), and VACUUM with TID reuse on flat_items"),
    ):
        agreement = report.get(f"standby_top10_agreement{suffix}", {})
        shapes = report.get(f"settled_segments{suffix}", {})
        if not agreement:
            continue
        lines += ["", f"## {title}", "",
                  "Share of held-out queries whose top-10 ids through a standby's index equal the primary's, "
                  f"{when}, once every node settled: the primary VACUUMed every table, flushed and merged until its "
                  "policy chose nothing; each standby replayed that, absorbed, flushed and merged until its own policy chose "
                  "nothing (each node builds its own segments from the same rows). Segments: how many each node "
                  "holds; \"same\" when the standby's segments have the primary's (rows, deleted) counts and "
                  "neither node holds memtable rows.", "",
                  "| table | standby | identical top-10s | share | segments (primary) | segments |",
                  "|---|---|---|---|---|---|"]
        for table, nodes in agreement.items():
            primary_shape = shapes.get("primary", {}).get(table, {})
            for node, r in nodes.items():
                share = r["same"] / r["queries"] if r.get("queries") else None
                shape = shapes.get(node, {}).get(table, {})
                same = (shape.get("segments") == primary_shape.get("segments")
                        and not shape.get("memtable_rows") and not primary_shape.get("memtable_rows"))
                lines.append(f"| {table} | {node} | {r.get('same', r.get('error'))}/{r.get('queries', '—')} | "
                             f"{_fmt(share, 3)} | {len(primary_shape.get('segments', []))} | "
                             f"{len(shape.get('segments', []))}{' (same)' if same else ' (differ)'} |")
    (directory / "replication.md").write_text("\n".join(lines) + "\n")
