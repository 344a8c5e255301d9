"""The QA and conversation sets: every record has the split the rule gives (eval/split.py), the conversations are
well formed, and every fact is written as its gold abstract writes it (eval/QA.md)."""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from eval.split import CONVERSATIONS_FILE, QA_FILE, SPLITS, assign, mismatches, read_jsonl
from rag.files import ParseReport
from rag.parse import iter_papers

SEEDS = QA_FILE.parent.parent / "seeds"
CONVERSATION_KINDS = {"pronoun", "ordinal", "switch", "drilldown", "compare", "elliptical", "select"}


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


@pytest.mark.parametrize("path", [QA_FILE, CONVERSATIONS_FILE], ids=["qa", "conversations"])
def test_every_record_has_the_rules_split(path: Path) -> None:
    records = read_jsonl(path)
    assert records and all(r.get("split") in SPLITS for r in records)
    assert mismatches(records) == []
    per_group = Counter((r["kind"], r.get("subset", ""), r["split"]) for r in records)
    for kind, subset, _ in per_group:
        dev, test = per_group[(kind, subset, "dev")], per_group[(kind, subset, "test")]
        assert dev - test in (0, 1), (kind, subset, dev, test)


def test_conversations_are_well_formed() -> None:
    conversations = read_jsonl(CONVERSATIONS_FILE)
    kinds = Counter(c["kind"] for c in conversations)
    assert set(kinds) == CONVERSATION_KINDS and len(conversations) >= 40
    for c in conversations:
        turns = c["turns"]
        assert 2 <= len(turns) <= 3, c["id"]
        assert all(t["question"].strip() and isinstance(t["gold"], list) and isinstance(t["facts"], list)
                   for t in turns), c["id"]
        last, before = turns[-1], turns[-2]
        if c["kind"] == "ordinal":  # gold is whatever the previous answer cited at that position
            assert re.fullmatch(r"previous_citations?(_\d+)+", last["refers_to"]) and last["gold"] == [], c["id"]
            assert len(before["gold"]) >= 2, c["id"]
        else:
            assert "refers_to" not in last and last["gold"], c["id"]
        if c["kind"] == "switch":  # a new subject shares no paper with the old one (a third turn may ask more of it)
            assert any(not set(b["gold"]) & set(a["gold"]) for a, b in zip(turns, turns[1:])), c["id"]
        if c["kind"] == "drilldown":  # the listing opens; a third turn may ask more of the paper drilled into
            listing = turns[0]
            assert len(listing["gold"]) >= 2 and set(last["gold"]) < set(listing["gold"]), c["id"]
        if c["kind"] == "compare":  # two papers compared after the first turn; a third turn may ask which of the two
            compared = next((t for t in turns[1:] if len(t["gold"]) >= 2), None)
            assert compared is not None and set(last["gold"]) <= set(compared["gold"]), c["id"]
        if c["kind"] == "elliptical":  # the follow-up is about the paper of the turn before
            assert len(before["gold"]) == 1 and last["gold"] == before["gold"], c["id"]
        if c["kind"] == "select":  # "which of them ...?": one paper of the opening listing (a third turn asks more)
            listing = turns[0]
            assert len(listing["gold"]) >= 2 and len(last["gold"]) == 1 and set(last["gold"]) < set(listing["gold"]), \
                c["id"]


def _readable(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower().replace("\u00d7", "x")


def test_every_fact_is_written_as_its_gold_abstract_writes_it() -> None:
    abstracts = {p.paper_id: _readable(p.abstract) for p in iter_papers([SEEDS], ParseReport())}
    assert len(abstracts) == 38
    cases = [(r["id"], r["gold"], r["facts"]) for r in read_jsonl(QA_FILE)]
    cases += [(f"{c['id']} turn {n}", t["gold"], t["facts"]) for c in read_jsonl(CONVERSATIONS_FILE)
              for n, t in enumerate(c["turns"], 1)]
    for label, gold, facts in cases:
        assert set(gold) <= set(abstracts), label
        if facts:  # a fact names a gold paper's content (a comparison's, either paper's)
            assert gold, label
            missing = [v for fact in facts for v in fact if not any(_readable(v) in abstracts[g] for g in gold)]
            assert not missing, f"{label}: {missing} not in the abstract of {gold[0]}"


def test_conversations_written_for_one_purpose_are_scored_on_their_own_line() -> None:
    from eval.conversations import load, summarise, table

    user2 = [c for c in load() if c.subset == "user2"]
    assert len(user2) >= 20 and all(c.id.startswith("v") for c in user2)
    turn = {"fact_hit": True, "first_sentence_hit": False, "right_paper": True, "citation_recall": None,
            "citation_precision": 1.0, "abstained": False, "words": 10, "gold": ["p"]}
    records = [{"id": "a", "kind": "pronoun", "subset": "user2", "turns": [turn]},
               {"id": "b", "kind": "pronoun", "subset": "", "turns": [{**turn, "fact_hit": False}]}]
    summary = summarise(records)
    assert summary["by_subset"]["user2"]["last_fact_accuracy"] == 1.0 and set(summary["by_subset"]) == {"user2"}
    assert summary["overall"]["last_fact_accuracy"] == 0.5 and "subset user2" in table(summary)


def test_compare_reads_two_conversation_runs(tmp_path: Path) -> None:
    """`eval compare` on conversation runs: their figures side by side and the conversations whose last turn
    flipped (it raised KeyError 'retrieval' on them)."""
    import json

    from eval.conversations import summarise
    from eval.report import compare_runs
    from eval.run import load_run

    turn = {"fact_hit": True, "first_sentence_hit": True, "right_paper": True, "citation_recall": None,
            "citation_precision": 1.0, "abstained": False, "words": 10, "gold": ["p"], "answer": "It is 7 [1]."}
    for name, hit in (("a", False), ("b", True)):
        records = [{"id": "c1", "kind": "pronoun", "subset": "", "turns": [turn, {**turn, "fact_hit": hit}]},
                   {"id": "c2", "kind": "switch", "subset": "", "turns": [turn]}]
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(summarise(records)))
        (tmp_path / name / "conversations.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    text = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    assert "| last_fact_accuracy | 0.500 | 1.000 | +0.500 |" in text
    assert "| pronoun last_fact_accuracy | 0.000 | 1.000 | +1.000 |" in text
    assert "Flipped questions: 1" in text and "| c1 | pronoun | fact_hit | no | yes | It is 7 [1]. |" in text
