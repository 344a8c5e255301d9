"""The dev/test split of the QA and conversation sets: every record has one, and it is the rule's (eval/split.py)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

import pytest

from eval.split import QA_FILE, SPLITS, assign, mismatches, read_jsonl


def test_rule_on_a_hand_made_group() -> None:
    ids = ["a", "b", "c", "d", "e"]
    by_hash = sorted(ids, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    records = [{"id": i, "kind": "factoid"} for i in ids] + [{"id": "x", "kind": "multi"},
                                                             {"id": "y", "kind": "factoid", "subset": "paraphrase"}]
    got = assign(records)
    assert [got[i] for i in by_hash] == ["dev", "dev", "dev", "test", "test"]  # first half, rounding up
    assert got["x"] == "dev" and got["y"] == "dev"  # a group of one is dev; subsets are their own groups


def test_rule_does_not_depend_on_file_order() -> None:
    records = [{"id": f"q{n}", "kind": ("factoid", "multi")[n % 2]} for n in range(21)]
    shuffled = records[:]
    random.Random(0).shuffle(shuffled)
    assert assign(records) == assign(shuffled)


def test_mismatches_reports_a_wrong_or_missing_split() -> None:
    records = [{"id": "a", "kind": "factoid", "split": "dev"}, {"id": "b", "kind": "factoid"}]
    rule = assign(records)
    records[0]["split"] = "test" if rule["a"] == "dev" else "dev"
    bad = mismatches(records)
    assert [line.split(":")[0] for line in bad] == ["a", "b"]
    records[0]["split"], records[1]["split"] = rule["a"], rule["b"]
    assert mismatches(records) == []
    assert mismatches(records + [dict(records[0])]) == ["a: duplicate id"]


@pytest.mark.parametrize("path", [QA_FILE], ids=["qa"])
def test_every_record_has_the_rules_split(path: Path) -> None:
    records = read_jsonl(path)
    assert records and all(r.get("split") in SPLITS for r in records)
    assert mismatches(records) == []
    per_group = Counter((r["kind"], r.get("subset", ""), r["split"]) for r in records)
    for kind, subset, _ in per_group:
        dev, test = per_group[(kind, subset, "dev")], per_group[(kind, subset, "test")]
        assert dev - test in (0, 1), (kind, subset, dev, test)
