"""bench/summary_pick.py on a real index of the seeds (fake embedder): the papers a summary lists at each
summary_min_sentence, through the pipeline's own read, retrieve and relevant_papers, and their recall/precision."""

from __future__ import annotations

from pathlib import Path

from helpers import seeded_assistant

from bench.summary_pick import listings, scores
from eval.run import Question


def test_a_stricter_sentence_threshold_lists_a_subset(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data")
    questions = [Question("a", "factoid", "How much does PrivGate reduce privacy leakage?", (), ()),
                 Question("b", "multi", "Which papers study privacy?", ("6480b13cf7654701",), ())]
    rows = listings(assistant, questions, [0.0, 0.99])
    assert [r["id"] for r in rows] == ["b"]  # a factoid lists nothing
    lenient, strict = rows[0]["listed"][0.0], rows[0]["listed"][0.99]
    assert "6480b13cf7654701" in lenient and set(strict) <= set(lenient) and len(strict) < len(lenient)


def test_scores_are_mean_recall_and_precision_over_questions_with_gold() -> None:
    rows = [{"gold": ["a", "b"], "listed": {0.3: ["a", "c", "d", "e"]}},
            {"gold": ["x"], "listed": {0.3: ["x"]}},
            {"gold": [], "listed": {0.3: ["y"]}}]  # no gold: not scored
    assert scores(rows, 0.3) == (0.75, 0.625)


def test_another_summary_setting_can_be_swept(tmp_path: Path) -> None:
    """`--setting summary_min_cover`: when no share of the topic's words is needed, more papers are listed than when
    no paper can hold enough (those left are listed on a very close sentence)."""
    assistant = seeded_assistant(tmp_path / "data")
    questions = [Question("b", "multi", "Which papers study privacy?", ("6480b13cf7654701",), ())]
    row = listings(assistant, questions, [0.0, 2.0], "summary_min_cover")[0]
    assert set(row["listed"][2.0]) < set(row["listed"][0.0])
    from bench.sweep import swept
    assert swept(["--data-dir", "d", "--setting", "summary_sure_cover"], "summary_min_sentence") == "summary_sure_cover"
    assert swept(["--data-dir", "d"], "summary_min_sentence") == "summary_min_sentence"
