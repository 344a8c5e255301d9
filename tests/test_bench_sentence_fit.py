"""bench/sentence_fit.py: the parts of the evidence score read off the pipeline's own questions on a real index of
the seeds (fake embedder), and the conditional-logit fit that weighs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import seeded_assistant

from bench.fallback_pick import Silent
from bench.sentence_fit import PARTS, collect, first_right, fit, shipped
from eval.run import Question
from rag.config import Answering

PRIVGATE = "6480b13cf7654701"


def test_the_parts_of_each_sentence_are_read_for_the_gold_paper(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data", Silent())
    questions = [Question("a", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,), (("62.6%",),)),
                 Question("b", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,),
                          (("no sentence holds this",),))]
    rows = collect(assistant, questions)
    assert [r["id"] for r in rows] == ["a"]  # a fact no sentence holds teaches nothing
    row = rows[0]
    assert row["x"].shape == (len(row["y"]), len(PARTS)) and row["y"].sum() >= 1
    kind = PARTS.index("kind")
    assert all(row["x"][i, kind] == 1.0 for i in np.flatnonzero(row["y"]))  # "how much" is answered by a number
    assert row["x"][0, PARTS.index("opening")] == 1.0 and not row["x"][1:, PARTS.index("opening")].any()


def test_the_fit_moves_weights_towards_what_ranks_the_fact_first() -> None:
    prior = shipped(Answering())
    assert prior[PARTS.index("cosine")] == 1.0
    assert prior[PARTS.index("opening")] == -Answering().opening_sentence_penalty
    # Two sentences per question: the fact-holding one has the kind asked for and a lower cosine.
    x = np.zeros((2, len(PARTS)))
    x[0, PARTS.index("cosine")], x[1, PARTS.index("kind")] = 1.0, 1.0
    rows = [{"id": str(i), "subset": "", "x": x, "y": np.array([False, True])} for i in range(4)]
    assert first_right(rows, prior) == 0.0
    fitted = fit(rows, prior, l2=0.01)
    assert first_right(rows, fitted) == 1.0 and fitted[PARTS.index("kind")] > prior[PARTS.index("kind")]
    # A heavy pull towards the shipped weights leaves them nearly where they were.
    assert np.abs(fit(rows, prior, l2=100.0) - prior).max() < 0.05
