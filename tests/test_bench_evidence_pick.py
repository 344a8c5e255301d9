"""bench/evidence_pick.py on a real index of the seeds (fake embedder): the first evidence paper at each weight of
the retrieval score, through the pipeline's own read, retrieve and select_evidence."""

from __future__ import annotations

from pathlib import Path

from helpers import seeded_assistant

from bench.evidence_pick import first_papers
from eval.run import Question

PRIVGATE = "6480b13cf7654701"


def test_a_heavy_retrieval_weight_takes_retrievals_first_paper(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data")
    questions = [Question("a", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,), ()),
                 Question("b", "which_paper", "Which work learns strategies from surveys with random politician "
                          "profiles?", (), ()),
                 Question("c", "multi", "Which papers use reinforcement learning?", (), ())]
    rows = first_papers(assistant, questions, [0.0, 1000.0])
    assert [r["id"] for r in rows] == ["a", "b"]  # a summary chooses no single evidence paper
    assert rows[0]["evidence"][0.0] == rows[0]["retrieval"] == PRIVGATE
    assert all(r["evidence"][1000.0] == r["retrieval"] for r in rows)
    # With the fake embedder one sentence of another paper outscores the paper retrieval put first.
    assert rows[1]["evidence"][0.0] != rows[1]["retrieval"]


def test_the_phrase_weight_is_swept_the_same_way(tmp_path: Path) -> None:
    assistant = seeded_assistant(tmp_path / "data")
    questions = [Question("a", "factoid", "How much does PrivGate reduce privacy leakage?", (PRIVGATE,), ()),
                 Question("b", "which_paper", "Which paper trains agents from outcome rewards, reweighting the "
                          "advantages of steps with cheap hints?", (), ())]
    rows = first_papers(assistant, questions, [0.0, 2.5, 1000.0], setting="evidence_phrase_weight")
    assert rows[0]["evidence"][0.0] == rows[0]["evidence"][1000.0] == PRIVGATE  # named: found either way
    assert all(set(r["evidence"]) == {0.0, 2.5, 1000.0} for r in rows)
    assert all(set(r["ms"]) == {0.0, 2.5, 1000.0} and min(r["ms"].values()) > 0 for r in rows)  # the choice, timed
    # At a weight that outweighs everything else the evidence paper is the one covering most of the question.
    from rag.evidence import SentenceScorer, question_parts

    read = assistant.read(questions[1].question)
    hits = assistant.retrieve(read).hits
    covered = SentenceScorer(assistant.embedder, assistant.settings.answer).coverage(question_parts(read.text),
                                                                                     hits[:6])
    assert rows[1]["evidence"][1000.0] == max(covered, key=covered.__getitem__)
