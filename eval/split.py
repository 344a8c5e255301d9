"""The fixed dev/test split of the QA set (`eval/qa.jsonl`) and the conversation set (`eval/conversations.jsonl`).

Rule: records are grouped by (kind, subset) (subset "" when absent); within a group they are ordered by the
sha256 hex digest of their `id`, and the first half, rounding up, is "dev", the rest "test". E.g. a group of 5
puts 3 in dev. The split depends only on ids, kinds and subsets, so anyone can recompute it; the committed `split`
fields must equal what `assign` returns (a test checks). Adding records to a group can move others, so new
questions go into a group of their own (a new `subset`) rather than into an existing one.

This module only computes and checks the split; it does not load questions for a run (that is `eval.run.load_qa`).

    python -m eval.split            # check both files, print counts per (kind, subset, split)
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

EVAL_DIR = Path(__file__).resolve().parent
QA_FILE = EVAL_DIR / "qa.jsonl"
CONVERSATIONS_FILE = EVAL_DIR / "conversations.jsonl"
SPLITS = ("dev", "test")


def group_key(record: Mapping[str, Any]) -> tuple[str, str]:
    """The stratum a record is split within: (kind, subset)."""
    return str(record["kind"]), str(record.get("subset") or "")


def assign(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """id -> "dev" / "test" by the rule in the module docstring."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in records:
        groups.setdefault(group_key(r), []).append(str(r["id"]))
    out: dict[str, str] = {}
    for ids in groups.values():
        ordered = sorted(ids, key=lambda i: hashlib.sha256(i.encode("utf-8")).hexdigest())
        n_dev = math.ceil(len(ordered) / 2)
        for n, i in enumerate(ordered):
            out[i] = "dev" if n < n_dev else "test"
    return out


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per non-empty line; a bad line is a ValueError naming file and line."""
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e})") from None
    return records


def mismatches(records: list[dict[str, Any]]) -> list[str]:
    """Ids whose stored `split` is missing or differs from the rule (duplicate ids are reported too)."""
    counts = Counter(str(r["id"]) for r in records)
    expected = assign(records)
    bad = [f"{i}: duplicate id" for i, c in counts.items() if c > 1]
    bad += [f"{r['id']}: split {r.get('split')!r}, rule says {expected[str(r['id'])]!r}"
            for r in records if r.get("split") != expected[str(r["id"])]]
    return bad


def main() -> int:
    status = 0
    for path in (QA_FILE, CONVERSATIONS_FILE):
        if not path.exists():
            continue
        records = read_jsonl(path)
        bad = mismatches(records)
        print(f"{path.name}: {len(records)} records, {len(bad)} off the rule")
        for line in bad:
            print("  " + line)
        status |= bool(bad)
        table = Counter((*group_key(r), str(r.get("split"))) for r in records)
        for (kind, subset, split), n in sorted(table.items()):
            print(f"  {kind:13s} {subset or '-':11s} {split:5s} {n:4d}")
    return status


if __name__ == "__main__":
    sys.exit(main())
