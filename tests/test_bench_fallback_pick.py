"""bench/fallback_pick.py on a real index of the seeds (fake embedder): the evidence-only answer, through the
pipeline's own ask with a model that writes nothing, scored as the eval scores answers."""

from __future__ import annotations

from pathlib import Path

from helpers import seeded_assistant

from bench.fallback_pick import Silent, answers, main
from eval.run import Question

PRIVGATE = "6480b13cf7654701"


def test_the_evidence_answer_is_scored_at_each_value(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data", Silent())
    questions = [Question("a", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,), (("62.6%",),)),
                 Question("b", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,),
                          (("a fact no abstract holds",),))]
    rows = answers(assistant, questions, "continuation_weight", [0.0, 1.0])
    assert [r["id"] for r in rows] == ["a", "b"]
    for v in (0.0, 1.0):
        first, anywhere, words = rows[0]["at"][v]
        assert first and anywhere and 0 < words <= 80
        assert rows[1]["at"][v][:2] == (False, False)
    # The answer really is the evidence's: the pipeline with the silent model quotes the paper's sentence.
    answer = assistant.ask("How much does PrivGate reduce privacy leakage?")
    assert answer.mode == "extractive" and "62.6%" in answer.text


def test_an_unknown_setting_is_refused(capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    with pytest.raises(SystemExit):
        main(["--data-dir", "x", "--setting", "no_such_setting", "--values", "1"])
    assert "invalid choice" in capsys.readouterr().err
