"""Fast tests of eval.metrics on hand-made cases with known answers, and of the runner and report on a fake pipeline."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eval import metrics as M
from eval.report import PLOTS, compare_runs
from eval.run import QueryCache, Question, evaluate, load_qa, load_run
from rag import question as Q
from rag.config import Settings
from rag.records import CANNOT_ANSWER, Answer, Citation, Hit, Paper, SentenceCheck

# --- normalise and fact_hit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ("9.7× Faster", "9.7x faster"),
    ("1,000 GPU\u2013hours", "1000 gpu-hours"),
    ("150,000,000 tokens", "150000000 tokens"),
    ("scores 1,2 and 3", "scores 1,2 and 3"),  # not a thousands separator
    ("12,3456", "12,3456"),  # nor is this
    ("a \u2014 b \u2212 c", "a - b - c"),
    ("  many\u00a0 \n spaces ", "many spaces"),
    ("\uff33\uff55\uff53\uff24\uff49\uff45\uff54", "susdiet"),  # full-width letters (NFKC)
    ("", ""),
])
def test_normalise(raw: str, expected: str) -> None:
    assert M.normalise(raw) == expected


def test_fact_hit_needs_every_fact_and_any_variant() -> None:
    facts = [["9.7×", "9.7x"], ["exposure bias"]]
    assert M.fact_hit("It cuts cost 9.7x by reducing Exposure  Bias [1].", facts) is True
    assert M.fact_hit("It cuts cost 9.7× [1].", facts) is False
    assert M.fact_hit("about 150000 recipes", [["150,000"]]) is True
    assert M.fact_hit("about 150,000 recipes", [["150000"]]) is True
    assert M.fact_hit("a Bridge\u2013Garden split", [["bridge-garden"]]) is True


def test_fact_hit_edge_cases() -> None:
    assert M.fact_hit("anything", []) is None  # nothing to check: not scored
    assert M.fact_hit("", [["SusDiet"]]) is False
    assert M.fact_hit("   ", [["x"], ["y"]]) is False
    assert M.fact_hit(CANNOT_ANSWER, [["42"]]) is False
    assert M.fact_hit("anything", [[""]]) is False  # a blank variant never matches everything


# --- citations ----------------------------------------------------------------------------------------------------


def test_citation_scores() -> None:
    assert M.citation_scores(["a", "a", "b"], ["a", "c"]) == (0.5, 0.5)  # duplicates count once
    assert M.citation_scores(["a"], ["a"]) == (1.0, 1.0)
    assert M.citation_scores([], ["a", "b"]) == (None, 0.0)  # nothing cited: precision undefined
    assert M.citation_scores(["a"], []) == (None, None)  # no gold: scored by abstention instead
    assert M.citation_scores(["a", "b", "c", "d"], ["a", "b", "e"]) == (0.5, pytest.approx(2 / 3))


def test_a_summarys_papers_past_its_list_count_as_shown() -> None:
    from eval.run import score_answer

    listed, rest, off = _paper("a"), _paper("b"), _paper("c")
    ans = Answer(question="Which papers study privacy?", text="- Paper a [1].", citations=(Citation(1, listed),),
                 hits=(), abstained=False, timings={}, model="m", settings_fingerprint="f",
                 more=(Citation(2, rest), Citation(3, off)))
    assert M.shown_papers(ans) == ["a", "b", "c"]
    q = Question(id="m1", kind="multi", question=ans.question, gold=("a", "b"), facts=())
    metrics = score_answer(q, ans)["metrics"]
    # The user sees the papers listed under the answer too: b is found, c is shown off the topic.
    assert metrics["citation_recall"] == 1.0 and metrics["citation_precision"] == pytest.approx(2 / 3)
    assert metrics["correct"] == 1.0


def test_an_answer_saying_no_abstract_mentions_the_topic_declines_but_does_not_abstain() -> None:
    from eval.run import answer_summary, score_answer

    closest = Citation(1, _paper("a"))
    said = Answer(question="Any papers on quantum circuits?", text="No abstract mentions quantum; the closest: A [1].",
                  citations=(closest,), hits=(), abstained=False, timings={}, model="m", settings_fingerprint="f",
                  said_absent=True)
    plain = Answer(question="What does A do?", text="A does a [1].", citations=(closest,), hits=(), abstained=False,
                   timings={}, model="m", settings_fingerprint="f")
    none = Question(id="u1", kind="unanswerable", question=said.question, gold=(), facts=())
    fact = Question(id="f1", kind="factoid", question=plain.question, gold=("a",), facts=(("does a",),))
    rows = [{"id": q.id, "kind": q.kind, **score_answer(q, a)} for q, a in ((none, said), (fact, plain))]
    assert rows[0]["metrics"]["declined"] and not rows[0]["metrics"]["abstained"]
    overall = answer_summary(rows)["overall"]
    assert overall["abstention"]["recall"] == 0.0  # strict: it answered
    assert overall["declining"]["recall"] == 1.0 and overall["declining"]["false_abstention"] == 0.0


def test_outside_retrieved_counts_every_marker() -> None:
    assert M.outside_retrieved(["a", "z", "z"], ["a", "b"]) == 2
    assert M.outside_retrieved([], ["a"]) == 0
    assert M.outside_retrieved(["a"], []) == 1


# --- abstention ---------------------------------------------------------------------------------------------------


def test_abstention_scores_hand_case() -> None:
    s = M.abstention_scores([True, True, False, False, True], [True, False, True, False, False])
    assert (s.abstained, s.unanswerable, s.answerable) == (3, 2, 3)
    assert s.precision == pytest.approx(1 / 3)
    assert s.recall == pytest.approx(1 / 2)
    assert s.false_abstention == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(0.4)


def test_abstention_scores_edges() -> None:
    never = M.abstention_scores([False, False], [True, False])
    assert never.precision is None and never.recall == 0.0 and never.f1 == 0.0 and never.false_abstention == 0.0
    only_answerable = M.abstention_scores([True], [False])
    assert only_answerable.recall is None and only_answerable.false_abstention == 1.0
    empty = M.abstention_scores([], [])
    assert empty.precision is None and empty.recall is None and empty.false_abstention is None
    with pytest.raises(ValueError):
        M.abstention_scores([True], [True, False])


def _best(rows: list[dict[str, Any]], **kw: float) -> float | None:
    got = M.best_threshold(rows, **kw)
    return None if got is None else got["threshold"]


def test_threshold_sweep_and_best() -> None:
    rows = M.threshold_sweep([0.1, 0.2, 0.5, 0.6], [True, True, False, False])
    assert len(rows) == 26 and rows[0]["threshold"] == 0.1 and rows[-1]["threshold"] == 0.6
    at = {r["threshold"]: r for r in rows}
    assert at[0.3]["recall"] == 1.0 and at[0.3]["precision"] == 1.0 and at[0.3]["false_abstention"] == 0.0
    assert at[0.1]["abstained"] == 0  # abstain only when strictly below
    assert at[0.52]["false_abstention"] == 0.5
    # F1 = 1 for every threshold in (0.2, 0.5]: 0.22 .. 0.50, 15 values; the middle one is chosen
    assert _best(rows) == 0.36


def test_best_threshold_respects_false_abstention_cap() -> None:
    sims = [0.2, 0.4, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.96, 0.97, 0.98]
    unanswerable = [True, True] + [False] * 10
    rows = M.threshold_sweep(sims, unanswerable, [0.25, 0.35, 0.45, 0.55])
    # 0.25: F1 .667, false .0 | 0.35: F1 .5, false .1 | 0.45: F1 .8, false .1 | 0.55: F1 .667, false .2
    assert [round(r["f1"], 3) for r in rows] == [0.667, 0.5, 0.8, 0.667]
    assert _best(rows) == 0.45
    assert _best(rows, max_false_abstention=0.0) == 0.25
    assert M.best_threshold(M.threshold_sweep(sims, unanswerable, [0.99])) is None


# --- latency and means --------------------------------------------------------------------------------------------


def test_percentiles_and_mean() -> None:
    assert M.percentiles([4, 1, None, 3, 2]) == {"p50": 2.5, "p95": pytest.approx(3.85)}
    assert M.percentiles([]) == {"p50": None, "p95": None}
    assert M.mean([True, False, None]) == 0.5
    assert M.mean([None]) is None


# --- retrieval ----------------------------------------------------------------------------------------------------


def test_retrieval_metrics_hand_case() -> None:
    gold = {"q1": ["a"], "q2": ["x", "y"], "q3": [], "q4": ["m"]}
    ranked = {"q1": ["b", "a", "c"], "q2": ["x", "z", "y"], "q3": ["a"], "q4": []}
    got = M.retrieval_metrics(gold, ranked)
    assert got["n"] == 3  # q3 has no gold: skipped
    assert got["recall@1"] == pytest.approx(0.5 / 3)
    assert got["recall@5"] == pytest.approx(2 / 3)
    assert got["recall@10"] == pytest.approx(2 / 3)
    assert got["mrr"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    ndcg_q1 = 1 / math.log2(3)
    ndcg_q2 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert got["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 3)


def test_retrieval_metrics_edges() -> None:
    assert M.retrieval_metrics({"u": []}, {"u": ["a"]}) == {"n": 0, "recall@1": None, "recall@5": None,
                                                             "recall@10": None, "mrr": None, "ndcg@10": None}
    dup = M.retrieval_metrics({"q": ["a"]}, {"q": ["b", "b", "a"]})  # a repeated paper counts at its first rank
    assert dup["mrr"] == pytest.approx(0.5)
    missing = M.retrieval_metrics({"q": ["a"]}, {})
    assert missing["recall@10"] == 0.0
    assert M.first_relevant_rank(["b", "a"], ["a", "c"]) == 2
    assert M.first_relevant_rank([], ["a"]) is None


# --- the QA file --------------------------------------------------------------------------------------------------


def test_qa_file_loads_and_limit_is_round_robin() -> None:
    qs = load_qa()
    assert len(qs) >= 181 and len({q.id for q in qs}) == len(qs)
    dev, test = load_qa(split="dev"), load_qa(split="test")
    assert len(dev) + len(test) == len(qs) and not {q.id for q in dev} & {q.id for q in test}
    assert all(q.history for q in qs if q.kind == "followup")
    assert not any("txt#" in m["content"] for q in qs for m in q.history)  # history cites [n], as the app does
    few = load_qa(limit=10)
    assert len(few) == 10 and {q.kind for q in few} == {"factoid", "which_paper", "multi", "unanswerable",
                                                         "followup"}
    assert [q.id for q in load_qa(ids=["u003", "f001"])] == ["f001", "u003"]
    assert {q.kind for q in load_qa(kinds=["multi"])} == {"multi"}


def test_load_qa_names_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "qa.jsonl"
    bad.write_text('{"id": "f1", "kind": "factoid", "question": "q", "gold": [], "facts": []}\n{"id": 1}\n')
    with pytest.raises(ValueError, match="qa.jsonl:2"):
        load_qa(bad)


# --- runner and report on a fake pipeline -------------------------------------------------------------------------


def _paper(pid: str) -> Paper:
    return Paper(paper_id=pid, title=f"Paper {pid}", venue="V", source="s.txt", position=0,
                 abstract=f"Abstract of {pid}.", raw=f"Abstract of {pid}.")


@dataclass
class _Got:
    hits: list[Hit]
    timings: dict[str, float] = field(default_factory=lambda: {"embed_ms": 5.0, "retrieve_ms": 8.0})


class FakePipeline:
    """Ranks papers p0..p4 (p1 first for anything mentioning "SusDiet"); answers by quoting a fixed text."""

    def __init__(self, replies: dict[str, tuple[str, list[str], bool]]) -> None:
        self.replies = replies

    def read(self, question: str, history: list[dict[str, str]] | None = None) -> Q.Question:
        searched = f"{question} (previous question: {history[0]['content']})" if history else question
        return Q.read(question).in_context(searched)

    def retrieve(self, question: Q.Question, filters: Any = None, top_k: int | None = None) -> _Got:
        return self.search(question.searched, top_k=top_k)

    def search(self, question: str, filters: Any = None, top_k: int | None = None, mode: str | None = None) -> _Got:
        order = ["p1", "p0", "p2", "p3", "p4"] if "SusDiet" in question else ["p0", "p1", "p2", "p3", "p4"]
        sim = 0.1 if "pizza" in question else 0.6
        return _Got([Hit(paper=_paper(p), score=1 / (i + 1), best_similarity=sim - i * 0.01)
                     for i, p in enumerate(order[: top_k or 5])])

    def ask(self, question: str, history: list[dict[str, str]] | None = None, filters: Any = None) -> Answer:
        text, cited, abstained = self.replies[question]
        hits = tuple(self.search(question).hits)
        return Answer(question=question, text=text, citations=tuple(Citation(n, _paper(p)) for n, p in
                                                                   enumerate(cited, 1)),
                      hits=hits, abstained=abstained, timings={"embed_ms": 5.0, "first_token_ms": 100.0,
                                                               "total_ms": 300.0, "tokens_per_s": 30.0},
                      model="fake", settings_fingerprint="fp", mode="abstained" if abstained else "generated",
                      # One checked sentence per answer; the wrong number (41) is the one flagged.
                      checks=() if abstained else (SentenceCheck(text, (1,), "41" not in text, 0.7),))


QUESTIONS = [
    Question("f1", "factoid", "How many recipes are in SusDiet?", ("p1",), (("150k",),)),
    Question("f2", "factoid", "What does p0 reach?", ("p0",), (("42",),)),
    Question("m1", "multi", "Which papers do X?", ("p0", "p2"), ()),
    Question("u1", "unanswerable", "A pizza recipe?", (), ()),
    Question("t1", "followup", "And its size?", ("p1",), (("150k",),),
             ({"role": "user", "content": "What is SusDiet?"}, {"role": "assistant", "content": "A dataset [1]."})),
]
REPLIES = {
    "How many recipes are in SusDiet?": ("About 150k recipes [1].", ["p1"], False),
    "What does p0 reach?": ("It reaches 41 [1].", ["p0"], False),
    "Which papers do X?": ("p0 does X [1]. So does p9 [2].", ["p0", "p9"], False),
    "A pizza recipe?": (CANNOT_ANSWER, [], True),
    "And its size?": ("150k [1] [1].", ["p1", "p1"], False),
}


def test_evaluate_on_fake_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = evaluate(FakePipeline(REPLIES), Settings(), QUESTIONS, out, retrieval_only=False, command="test")
    records = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["f1", "f2", "m1", "u1", "t1"]
    by_id = {r["id"]: r for r in records}
    assert by_id["t1"]["query"].startswith("And its size? (previous question")
    assert by_id["f1"]["metrics"]["fact_hit"] is True and by_id["f2"]["metrics"]["fact_hit"] is False
    assert by_id["m1"]["metrics"]["citation_recall"] == 0.5 and by_id["m1"]["metrics"]["outside"] == 1
    assert by_id["t1"]["metrics"]["citation_precision"] == 1.0  # duplicate [1] [1] counts once
    a = summary["answers"]
    assert a["by_kind"]["factoid"]["fact_accuracy"] == 0.5
    assert a["overall"]["outside_citations"] == 1
    assert (a["overall"]["checked_sentences"], a["overall"]["unsupported_sentences"]) == (4, 1)
    assert a["overall"]["flagged_share"] == 0.25
    assert a["overall"]["abstention"]["recall"] == 1.0 and a["overall"]["abstention"]["false_abstention"] == 0.0
    assert summary["retrieval"]["hybrid"]["overall"]["recall@1"] == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert summary["abstention_sweep"]["at_current"]["recall"] == 1.0  # pizza's similarity 0.1 < 0.30
    assert summary["latency"]["first_token_ms"] == {"p50": 100.0, "p95": 100.0}
    meta = summary["meta"]
    assert meta["command"] == "test" and meta["settings_fingerprint"] == Settings().fingerprint()
    assert meta["model_loaded"] == "fake"  # what answered, beside the configured file
    assert {"git_commit", "prompt_version", "model", "model_sha256", "settings", "timestamp"} <= set(meta)
    assert summary["resources"]["peak_rss_mb"] > 0
    assert "## Answers" in (out / "report.md").read_text()
    for name in PLOTS:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_compare_runs_lists_flips(tmp_path: Path) -> None:
    evaluate(FakePipeline(REPLIES), Settings(), QUESTIONS, tmp_path / "a", retrieval_only=False)
    better = {**REPLIES, "What does p0 reach?": ("It reaches 42 [1].", ["p0"], False),
              "A pizza recipe?": ("Knead it [1].", ["p0"], False)}
    evaluate(FakePipeline(better), Settings(), QUESTIONS, tmp_path / "b", retrieval_only=False)
    text = compare_runs(load_run(tmp_path / "a"), load_run(tmp_path / "b"))
    assert "Flipped questions: 2" in text
    assert "| f2 | factoid | fact_hit | no | yes |" in text and "| u1 | unanswerable | abstained | yes | no |" in text


def test_retrieval_only_run_has_no_answers(tmp_path: Path) -> None:
    summary = evaluate(FakePipeline(REPLIES), Settings(), QUESTIONS, tmp_path, retrieval_only=True)
    assert summary["kind"] == "retrieval-only" and "answers" not in summary
    assert set(summary["latency"]) == {"embed_ms", "retrieve_ms"}
    assert (tmp_path / "report.md").exists() and (tmp_path / "recall_at_k.png").exists()


def test_query_cache_embeds_each_query_once() -> None:
    class Counting:
        name, dim, max_tokens, calls = "c", 2, 8, 0

        def embed(self, texts: list[str]) -> list[list[float]]:
            self.calls += 1
            return [[1.0, 0.0] for _ in texts]

        def count_tokens(self, text: str) -> int:
            return len(text.split())

    inner = Counting()
    cache = QueryCache(inner)
    cache.embed(["q"])
    cache.embed(["q"])
    cache.embed(["a", "b"])  # batches (documents, sentences) are never cached
    assert inner.calls == 2 and cache.name == "c" and cache.dim == 2 and cache.count_tokens("a b") == 2


def test_what_the_user_reads_first() -> None:
    assert M.first_sentence("By 7.08 points [1]. It also uses a 5x smaller embedding [1].") == "By 7.08 points [1]."
    assert M.first_sentence("- SOLAR [1]: a retriever.\n- PrivGate [2]: a gate.") == "SOLAR [1]: a retriever."
    assert M.word_count("By 7.08 points [1].") == 3
    assert M.is_quoted("Quoted: “PrivGate achieves 62.6%” [1]", "generated")
    assert M.is_quoted("PrivGate achieves 62.6% [1].", "extractive")
    assert not M.is_quoted("PrivGate achieves 62.6% [1].", "generated")
    assert M.own_words("It works [1]. “a 62.6% cut in leakage” [1]", "generated").count("62.6") == 0
    assert M.own_words("anything", "extractive") == ""
    assert M.median([3, None, 1, 2]) == 2.0 and M.median([]) is None


@pytest.mark.parametrize(("second_cites", "ok"), [("p2", True), ("p1", False)])
def test_a_switch_is_judged_where_the_subject_changes_not_on_a_third_turn_about_the_new_subject(
        second_cites: str, ok: bool) -> None:
    """A switch conversation may ask more of its new subject in a third turn; the switch is judged on the turn whose
    gold shares no paper with the turn before (judged on the third, a stale paper would never be seen)."""
    from eval.conversations import Conversation, Turn, play

    cites = {"About p1?": "p1", "And which paper does Y?": second_cites, "What data?": "p2"}

    class Asker:
        def ask(self, question: str, history: list[dict[str, Any]] | None = None) -> Answer:
            return Answer(question=question, text="It [1].", citations=(Citation(1, _paper(cites[question])),),
                          hits=(), abstained=False, timings={}, model="fake", settings_fingerprint="fp")

    conv = Conversation("s1", "switch", "dev", (Turn("About p1?", ("p1",), ()), Turn("And which paper does Y?",
                                                                                     ("p2",), ()),
                                                 Turn("What data?", ("p2",), ())))
    assert play(Asker(), conv)[-1]["switch_ok"] is ok


def test_a_conversation_turn_that_declines_on_the_paper_discussed_counts_as_declined_not_abstained() -> None:
    """"The abstract of SERA states no limitation of its own work [1]." cites the paper and declines: the summary's
    `declined` counts it, `abstained` (nothing cited) does not."""
    from eval.conversations import Conversation, Turn, play, summarise

    class Asker:
        def ask(self, question: str, history: list[dict[str, Any]] | None = None) -> Answer:
            said = question != "About p1?"
            return Answer(question=question, text="It [1].", citations=(Citation(1, _paper("p1")),), hits=(),
                          abstained=False, timings={}, model="fake", settings_fingerprint="fp", said_absent=said)

    conv = Conversation("c1", "elliptical", "dev", (Turn("About p1?", ("p1",), ()), Turn("Any limitations?",
                                                                                         ("p1",), ())))
    turns = play(Asker(), conv)
    assert [t["declined"] for t in turns] == [False, True] and not turns[-1]["abstained"]
    overall = summarise([{"id": "c1", "kind": "elliptical", "turns": turns}])["overall"]
    assert overall["declined"] == 1.0 and overall["abstained"] == 0.0 and overall["right_paper"] == 1.0
