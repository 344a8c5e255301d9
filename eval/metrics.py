"""Pure scoring functions for the QA set: fact matching, citations, abstention, latency, paper-level retrieval.

Everything here takes plain values (strings, paper ids, floats) and returns plain values, so it can be tested on
hand-made cases; nothing here runs the pipeline, reads files or draws plots (see `eval.run` and `eval.report`).

Conventions: a metric that is undefined for a question (citation precision when nothing was cited, retrieval
metrics for a question with no gold paper) is `None` and is skipped by `mean`, never counted as 0 or 1.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rag.answer import MARKER

# U+2010..U+2015 (hyphen, non-breaking hyphen, figure dash, en, em, horizontal bar) and U+2212 (minus sign).
_DASHES = re.compile("[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]")
# "1,000" -> "1000", "150,000,000" -> "150000000"; "1,2" and "(1, 000)" are left alone.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFKC, lowercase, x for the multiplication sign, '-' for every dash, no thousands separators, single spaces.

    e.g. "9.7× faster, on 1,000 GPU\u2013hours" -> "9.7x faster, on 1000 gpu-hours"
    """
    text = unicodedata.normalize("NFKC", text).lower().replace("\u00d7", "x")
    text = _DASHES.sub("-", text)
    text = _THOUSANDS.sub("", text)
    return _SPACES.sub(" ", text).strip()


def fact_hit(answer: str, facts: Sequence[Sequence[str]]) -> bool | None:
    """True when every fact has some variant in the answer (substring after `normalise`); None when no facts."""
    if not facts:
        return None
    text = normalise(answer)
    return all(any(normalise(v) in text for v in variants if v.strip()) for variants in facts)


def shown_papers(answer: Any) -> list[str]:
    """The paper ids an answer shows: those it cites, then a summary's further papers on the topic that come listed
    under it (`Answer.more`, past `answer.summary_max_papers`), which the user sees as well."""
    return [c.paper.paper_id for c in (*answer.citations, *answer.more)]


def citation_scores(cited: Iterable[str], gold: Iterable[str]) -> tuple[float | None, float | None]:
    """(precision, recall) of the cited paper ids against the gold ones, counting each paper once.

    Precision is None when nothing was cited; both are None when there is no gold paper (an unanswerable question
    is scored by abstention instead). e.g. cited [a, a, b], gold [a, c] -> (1/2, 1/2).
    """
    cited_set, gold_set = set(cited), set(gold)
    if not gold_set:
        return None, None
    right = len(cited_set & gold_set)
    precision = right / len(cited_set) if cited_set else None
    return precision, right / len(gold_set)


def outside_retrieved(cited: Iterable[str], retrieved: Iterable[str]) -> int:
    """Citations (each cited marker, duplicates included) naming a paper that retrieval did not return."""
    allowed = set(retrieved)
    return sum(1 for pid in cited if pid not in allowed)


@dataclass(frozen=True)
class Abstention:
    """Abstention as a detector of unanswerable questions: positives are the unanswerable ones."""

    precision: float | None  # of the abstentions, the share on unanswerable questions (None: never abstained)
    recall: float | None  # of the unanswerable questions, the share abstained on (None: none in the set)
    false_abstention: float | None  # of the answerable questions, the share abstained on (None: none in the set)
    f1: float
    abstained: int
    unanswerable: int
    answerable: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def abstention_scores(abstained: Sequence[bool], unanswerable: Sequence[bool]) -> Abstention:
    if len(abstained) != len(unanswerable):
        raise ValueError(f"abstention_scores: {len(abstained)} decisions for {len(unanswerable)} questions")
    tp = sum(1 for a, u in zip(abstained, unanswerable, strict=True) if a and u)
    fp = sum(1 for a, u in zip(abstained, unanswerable, strict=True) if a and not u)
    n_abst, n_un = tp + fp, sum(unanswerable)
    n_ans = len(unanswerable) - n_un
    precision = tp / n_abst if n_abst else None
    recall = tp / n_un if n_un else None
    p, r = precision or 0.0, recall or 0.0
    return Abstention(precision=precision, recall=recall, false_abstention=fp / n_ans if n_ans else None,
                      f1=2 * p * r / (p + r) if p + r else 0.0, abstained=n_abst, unanswerable=n_un,
                      answerable=n_ans)


def threshold_sweep(similarities: Sequence[float], unanswerable: Sequence[bool],
                    thresholds: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """Abstention scores if the pipeline abstained whenever the best similarity is below each threshold.

    Default thresholds: 0.10, 0.12, ..., 0.60 (rounded, so 0.3 is exactly 0.30 and prints as such).
    """
    if thresholds is None:
        thresholds = [round(0.10 + 0.02 * i, 2) for i in range(26)]
    rows = []
    for t in thresholds:
        s = abstention_scores([sim < t for sim in similarities], unanswerable)
        rows.append({"threshold": t, **s.to_dict()})
    return rows


def best_threshold(rows: Sequence[Mapping[str, Any]], max_false_abstention: float = 0.1) -> dict[str, Any] | None:
    """The sweep row with the highest abstention F1 among those with false abstention <= the cap.

    Ties go to the lower false-abstention rate, then to the middle of the tied run of thresholds: a threshold in the
    middle of a plateau is the one least likely to move when a question or the embedder changes slightly.
    """
    ok = [r for r in rows if (r["false_abstention"] or 0.0) <= max_false_abstention + 1e-12]
    if not ok:
        return None
    top = max((r["f1"], -(r["false_abstention"] or 0.0)) for r in ok)
    tied = [r for r in ok if (r["f1"], -(r["false_abstention"] or 0.0)) == top]
    return dict(tied[(len(tied) - 1) // 2])


def percentiles(values: Iterable[float | None], qs: Sequence[int] = (50, 95)) -> dict[str, float | None]:
    """{"p50": ..., "p95": ...} with linear interpolation; None where there are no values."""
    vals = [float(v) for v in values if v is not None]
    return {f"p{q}": (float(np.percentile(vals, q)) if vals else None) for q in qs}


def mean(values: Iterable[float | bool | None]) -> float | None:
    """Mean of the defined values (bools count as 0/1); None when none is defined."""
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def first_relevant_rank(ranked: Sequence[str], gold: Iterable[str]) -> int | None:
    """1-based rank of the first gold paper in the ranking, None if absent."""
    gold_set = set(gold)
    return next((i for i, pid in enumerate(ranked, 1) if pid in gold_set), None)


def retrieval_metrics(gold: Mapping[str, Sequence[str]], ranked: Mapping[str, Sequence[str]],
                      ks: Sequence[int] = (1, 5, 10), ndcg_k: int = 10) -> dict[str, float | int | None]:
    """Recall@k, MRR and nDCG@k at paper level, computed by ranx, over the questions that have gold papers.

    `gold` maps question id -> relevant paper ids (binary relevance); `ranked` maps question id -> paper ids in
    the order retrieval returned them. Questions without gold are skipped; a question with gold but no ranking
    scores 0. Scores given to ranx are n - rank, so ranx sees exactly the pipeline's order (ties in the pipeline's
    own scores are already broken there). Returns {"n": questions scored, "recall@1": ..., "mrr": ..., ...}.
    """
    from ranx import Qrels, Run, evaluate  # imported here: numba start-up is seconds, only pay it when used

    metrics = [f"recall@{k}" for k in ks] + ["mrr", f"ndcg@{ndcg_k}"]
    scored = [q for q, g in gold.items() if g]
    if not scored:
        return {"n": 0, **{m: None for m in metrics}}
    qrels = Qrels({q: {pid: 1 for pid in gold[q]} for q in scored})
    run_dict: dict[str, dict[str, float]] = {}
    for q in scored:
        ids = list(dict.fromkeys(ranked.get(q, ())))  # a paper ranked twice counts at its first rank
        run_dict[q] = {pid: float(len(ids) - i) for i, pid in enumerate(ids)} or {"<no hits>": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's uint64->int64 cast warnings inside ranx
        got = evaluate(qrels, Run(run_dict), metrics)
    values = got if isinstance(got, dict) else {metrics[0]: got}
    return {"n": len(scored), **{m: float(values[m]) for m in metrics}}


# --- what the user reads ------------------------------------------------------------------------------------------

_QUOTED = re.compile(r"[“\"][^”\"]{8,}[”\"]")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_WORDS = re.compile(r"[^\W_]+(?:[.'’\-][^\W_]+)*")


def first_sentence(answer: str) -> str:
    """The answer's first sentence, its [n] markers kept; a list answer's first line stands for it.

    e.g. "By 7.08 points [1]. It also uses a 5x smaller embedding [1]." -> "By 7.08 points [1]."
    """
    from rag.text import split_sentences

    text = answer.strip()
    if not text:
        return ""
    head = _LIST_ITEM.sub("", text.splitlines()[0]) if text.lstrip().startswith(("-", "*", "•")) else text
    sentences = split_sentences(head.split("\n\n", 1)[0])
    if not sentences:
        return ""
    first = sentences[0]
    # A marker-only fragment after the full stop ("... points. [1]") belongs to the first sentence.
    if len(sentences) > 1 and not MARKER.sub("", sentences[1]).strip(" .;,"):
        first = f"{first} {sentences[1]}"
    return first


def own_words(answer: str, mode: str) -> str:
    """What the system wrote itself: nothing for an answer made of copied evidence (mode "extractive"), and any
    quoted span (“...”) left out of the rest. e.g. ('It cuts leakage [1]. Quoted: “a 62.6% cut” [1]', 'generated')
    -> 'It cuts leakage [1]. Quoted:  [1]'."""
    if mode == "extractive":
        return ""
    return _QUOTED.sub(" ", answer)


def word_count(answer: str) -> int:
    """Words the user reads: citation markers are not words. e.g. "By 7.08 points [1]." -> 3."""
    return len(_WORDS.findall(MARKER.sub(" ", answer)))


def is_quoted(answer: str, mode: str) -> bool:
    """An answer that pastes evidence instead of answering: the extractive mode, or quoted spans in the text."""
    return mode == "extractive" or bool(_QUOTED.search(answer))


def median(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.median(vals)) if vals else None
