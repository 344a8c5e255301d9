"""Which sentence of the right paper answers: the evidence score's weights fitted on dev questions, judged by
leave-one-out, before any of them is shipped.

`python -m bench.sentence_fit --data-dir DIR [--split dev] [--l2 1.0]` answers every single-answer question of one
split of eval/qa.jsonl that has facts through the pipeline with a model that writes nothing (as `bench.fallback_pick`
does), and keeps, for the question's gold paper, every sentence's parts of the evidence score
(`evidence.select_evidence`: cosine to the question, share of its words, the kind asked for, a cause, a comparison
or a finding when one is asked for, cosine to the part that asks, the paper-idf focus, the noun asked for, the
opening sentence, a sentence going on from the one before) and whether it holds the question's facts
(`eval.metrics.fact_hit`). It then fits the weights of those parts by a conditional logit (the fact-holding
sentences against the paper's others), pulled towards the shipped weights by an L2 penalty, and prints how often the
fact-holding sentence ranks first in its paper at the shipped weights and at fitted ones: on the questions fitted
(what a tuned rule claims) and by leave-one-out (what a question not tuned on may expect). Run it on dev; a split's
figure with weights fitted on that split is not a result.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from .fallback_pick import Silent
from .measure import machine

# The parts of a sentence's evidence score, in the order of `weights` and the `[answer]` setting giving each one.
PARTS = ("cosine", "lexical", "kind", "reason", "comparison", "finding", "ask", "focus", "noun", "opening",
         "continues")
SETTINGS = {"cosine": None, "lexical": "lexical_weight", "kind": "answer_type_boost", "reason": "reason_boost",
            "comparison": "comparison_boost", "finding": "finding_boost", "ask": "evidence_ask_weight",
            "focus": "evidence_focus_weight",
            "noun": "asked_noun_boost", "opening": "opening_sentence_penalty", "continues": "continuation_weight"}


def shipped(knobs: Any) -> np.ndarray:
    """The shipped weight of each part (the opening sentence's penalty as a negative weight)."""
    out = []
    for part in PARTS:
        name = SETTINGS[part]
        w = 1.0 if name is None else float(getattr(knobs, name))
        out.append(-w if part == "opening" else w)
    return np.array(out)


def parts(q: Any, qvec: np.ndarray, hit: Any, scorer: Any) -> tuple[list[str], np.ndarray]:
    """(the paper's sentences, one row of PARTS per sentence) as `select_evidence` computes them."""
    from rag.evidence import answer_type_boost, reports_finding, states_cause, states_comparison, with_focus
    from rag.text import continues, tokens

    sents, vecs = scorer.sentences([hit])[hit.paper.paper_id]
    qtok = set(tokens(q.scored))
    zero = [(s, 0.0) for s in sents]
    focus = [x for _, x in with_focus(q.asked, zero, 1.0, False)]
    noun = [x for _, x in with_focus(q.asked, zero, 0.0, False, noun=q.noun, noun_weight=1.0)] if q.noun \
        else [0.0] * len(sents)
    ask = vecs @ scorer.embedder.embed([q.ask])[0] if q.ask else np.zeros(len(sents))
    rows = []
    for i, (s, v) in enumerate(zip(sents, vecs)):
        words = set(tokens(s))
        rows.append([float(v @ qvec), len(qtok & words) / len(qtok) if qtok else 0.0,
                     answer_type_boost(q.asks, s, 1.0), float("reason" in q.asks and states_cause(s)),
                     float("comparison" in q.asks and states_comparison(s)),
                     float("finding" in q.asks and reports_finding(s)), float(ask[i]),
                     focus[i], noun[i],
                     1.0 if i == 0 and len(sents) > 1 and q.wants != "expansion" else 0.0,
                     1.0 if i and continues(s) else 0.0])
    return list(sents), np.array(rows)


def collect(assistant: Any, questions: list[Any]) -> list[dict[str, Any]]:
    """Per question whose gold paper was retrieved and has a sentence holding every fact: its parts and labels."""
    import rag.pipeline as P
    from eval.metrics import fact_hit
    from rag.orders import addressed

    seen: dict[str, Any] = {}
    real = P.select_evidence

    def spy(q: Any, qvec: Any, hits: Any, scorer: Any, *args: Any, **kwargs: Any) -> Any:
        seen.update(q=q, qvec=qvec, hits=hits, scorer=scorer)
        return real(q, qvec, hits, scorer, *args, **kwargs)

    P.select_evidence = spy  # type: ignore[assignment]
    try:
        rows = []
        for question in questions:
            seen.clear()
            assistant.ask(question.question, list(question.history))
            hit = next((h for h in seen.get("hits", ()) if h.paper.paper_id in question.gold), None)
            if hit is None:
                continue
            sents, x = parts(seen["q"], seen["qvec"], hit, seen["scorer"])
            keep = [i for i, s in enumerate(sents) if not addressed(s)]
            labels = np.array([bool(fact_hit(sents[i], question.facts)) for i in keep])
            if len(keep) > 1 and labels.any() and not labels.all():
                rows.append({"id": question.id, "subset": question.subset, "x": x[keep], "y": labels})
        return rows
    finally:
        P.select_evidence = real


def first_right(rows: list[dict[str, Any]], w: np.ndarray) -> float:
    return sum(bool(r["y"][int(np.argmax(r["x"] @ w))]) for r in rows) / len(rows)


def fit(rows: list[dict[str, Any]], prior: np.ndarray, l2: float) -> np.ndarray:
    """Weights maximising the mean log share of softmax(x @ w) on each question's fact-holding sentences, minus l2
    times the squared distance to `prior` (L-BFGS over all sentences at once)."""
    from scipy.optimize import minimize

    x = np.vstack([r["x"] for r in rows])
    y = np.concatenate([r["y"] for r in rows]).astype(float)
    starts = np.cumsum([0] + [len(r["y"]) for r in rows[:-1]])
    group = np.repeat(np.arange(len(rows)), [len(r["y"]) for r in rows])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ w
        z = z - np.maximum.reduceat(z, starts)[group]
        e = np.exp(z)
        p = e / np.add.reduceat(e, starts)[group]
        py = p * y
        share = np.add.reduceat(py, starts)
        q = py / share[group]
        value = -np.log(share).mean() + l2 * float((w - prior) @ (w - prior))
        grad = -(x.T @ (q - p)) / len(rows) + 2 * l2 * (w - prior)
        return value, grad

    return np.asarray(minimize(loss, prior, jac=True, method="L-BFGS-B").x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sentence_fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="an ingested index of the seeds")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--l2", default="1.0", help="comma-separated penalties towards the shipped weights")
    args = ap.parse_args(argv)

    from eval.run import load_qa
    from rag.config import load as load_settings
    from rag.pipeline import Assistant

    assistant = Assistant(load_settings(flags={"paths.data_dir": args.data_dir}), generator=Silent())
    questions = [q for q in load_qa() if q.split == args.split and q.kind not in ("unanswerable", "multi") and q.facts]
    rows = collect(assistant, questions)
    prior = shipped(assistant.settings.answer)
    print(f"{args.split} split: {len(rows)} questions with a fact-holding sentence in the retrieved gold paper, "
          f"{sum(len(r['y']) for r in rows)} sentences; {machine().get('cpu')}")
    print(f"shipped weights {dict(zip(PARTS, prior.round(2)))}: first right {first_right(rows, prior):.3f}")
    for l2 in (float(v) for v in args.l2.split(",")):
        w = fit(rows, prior, l2)
        held = [bool(r["y"][int(np.argmax(r["x"] @ fit(rows[:i] + rows[i + 1:], prior, l2)))])
                for i, r in enumerate(rows)]
        print(f"l2 {l2:g}: fitted {dict(zip(PARTS, w.round(2)))}; first right on the fitted questions "
              f"{first_right(rows, w):.3f}, leave-one-out {sum(held) / len(held):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
