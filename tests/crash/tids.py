"""Index == heap, by TID: the comparison every crash check makes for each index."""

from __future__ import annotations


def compare_tids(through_index: list[str], heap: list[str], prefix: str = "") -> list[str]:
    """Problems (each starting with `prefix`) when the TIDs a full index scan returned are not
    exactly the heap's live rows, each once."""
    problems = []
    if len(through_index) != len(set(through_index)):
        problems.append(f"{prefix}{len(through_index) - len(set(through_index))} TIDs returned twice")
    missing, extra = set(heap) - set(through_index), set(through_index) - set(heap)
    if missing:
        problems.append(f"{prefix}{len(missing)} live rows missing from the index, e.g. {sorted(missing)[:3]}")
    if extra:
        problems.append(f"{prefix}{len(extra)} rows through the index that the heap does not show, e.g. {sorted(extra)[:3]}")
    return problems
