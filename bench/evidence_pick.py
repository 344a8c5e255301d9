"""The evidence paper by weight of its retrieval score (or of how much of the question it covers): how often the first
evidence paper is a gold paper, without the model.

`python -m bench.evidence_pick --data-dir DIR [--split dev] [--weights 0,1,2,4,8] [--setting evidence_phrase_weight |
evidence_hub_weight]`
reads every question of one split of eval/qa.jsonl that wants one paper (factoids, which-paper questions,
follow-ups), reads and retrieves it with the pipeline (`Assistant.read`, `Assistant.retrieve`) and chooses its
evidence with the pipeline's own `select_evidence` at each `answer.evidence_retrieval_weight` (or `--setting`), the
other answer settings as configured. It prints, per weight and per subset ("" = the original questions), how many
first evidence papers are gold, beside retrieval's own first paper, and how long the choice alone takes (p50, p95;
the sentence vectors already cached). Seconds per question: the embedder's, no generation. DIR must hold an
ingested index of the seeds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .measure import machine
from .sweep import setup, swept


def first_papers(assistant: Any, questions: Iterable[Any], weights: Sequence[float],
                 setting: str = "evidence_retrieval_weight") -> list[dict[str, Any]]:
    """Per question: its id, subset, gold, retrieval's first paper and the first evidence paper at each weight."""
    from rag.evidence import SentenceScorer, select_evidence

    knobs = {w: assistant.settings.answer.model_copy(update={setting: w}) for w in weights}
    scorers = {w: SentenceScorer(assistant.embedder, knobs[w]) for w in weights}
    rows = []
    for q in questions:
        read = assistant.read(q.question, list(q.history))
        if read.summary:
            continue
        retrieved = assistant.retrieve(read)
        if not retrieved.hits:
            continue
        qvec = assistant.embedder.embed([q.question])[0] if read.pinned else retrieved.query_vector
        lexical = assistant.retriever.lexical
        picked, took = {}, {}
        for w in weights:
            k = knobs[w]
            how: dict[str, Any] = dict(max_papers=k.evidence_papers, per_paper=k.sentences_per_paper,
                                       margin=k.evidence_margin, idf=lexical.idf if lexical is not None else None,
                                       cover_weight=k.evidence_cover_weight, focus_weight=k.evidence_focus_weight)
            # the first call embeds and caches the sentence vectors: the timed one is the choice alone
            select_evidence(read, qvec, retrieved.hits, scorers[w], **how)
            t = time.perf_counter()
            blocks = select_evidence(read, qvec, retrieved.hits, scorers[w], **how)
            took[w] = (time.perf_counter() - t) * 1000
            picked[w] = blocks[0].hit.paper.paper_id if blocks else ""
        rows.append({"id": q.id, "subset": q.subset, "gold": list(q.gold),
                     "retrieval": retrieved.hits[0].paper.paper_id, "evidence": picked, "ms": took})
    return rows


def main(argv: list[str] | None = None) -> int:
    split, assistant, questions, weights = setup("bench.evidence_pick", __doc__, "--weights", "0,0.5,1,2,4,8",
                                                 "evidence_retrieval_weight", argv,
                                                 others=("evidence_phrase_weight", "evidence_hub_weight"))
    setting = swept(argv, "evidence_retrieval_weight")
    rows = first_papers(assistant, [q for q in questions if q.kind not in ("unanswerable", "multi")], weights, setting)
    print(f"{split} split, {len(rows)} single-paper questions, {setting}, {machine().get('cpu')}")
    subsets = sorted({r["subset"] for r in rows})

    def counts(right: Any) -> str:
        return ", ".join(f"{s or 'original'} {sum(right(r) for r in rows if r['subset'] == s)}/"
                         f"{sum(r['subset'] == s for r in rows)}" for s in subsets)

    for w in weights:
        ms = np.percentile([r["ms"][w] for r in rows], [50, 95]) if rows else [0.0, 0.0]
        print(f"w = {w:g}: first evidence paper gold: {counts(lambda r, w=w: r['evidence'][w] in r['gold'])}; "
              f"the choice alone p50 {ms[0]:.2f} ms, p95 {ms[1]:.2f} ms")
    print(f"retrieval's own first paper gold: {counts(lambda r: r['retrieval'] in r['gold'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
