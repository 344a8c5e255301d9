"""The papers a summary lists, without the model: recall and precision of the listing against the gold papers, at
each value of `answer.summary_min_sentence` (or of another summary setting, `--setting`).

`python -m bench.summary_pick --data-dir DIR [--split dev] [--values 0.3,0.32,0.35,0.4] [--setting
summary_sure_cover|summary_sure_sentence|summary_min_cover|summary_min_idf]` (`--min-sentence` is `--values`) reads
every "which papers ...?" / "summarize ..." question (kind multi) of one split of eval/qa.jsonl, reads and retrieves it
with the pipeline (`Assistant.read`, `Assistant.retrieve`) and lists its papers with the pipeline's own
`relevant_papers` (cut at `answer.summary_max_papers`), the other answer settings as configured. It prints, per value
and per subset ("" = the original questions), the mean recall and precision of the listed papers. The answer's own
figures (what `rag eval` scores) can only be lower: a listed paper whose line the check drops is not cited. Seconds per
question: the embedder's, no generation. DIR must hold an ingested index of the seeds.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .measure import machine
from .sweep import setup, swept


def listings(assistant: Any, questions: Iterable[Any], values: Sequence[float],
             setting: str = "summary_min_sentence") -> list[dict[str, Any]]:
    """Per summary question: its id, subset, gold and the paper ids listed at each value of `setting`."""
    from rag.evidence import SentenceScorer, relevant_papers

    lexical = assistant.retriever.lexical
    idf = lexical.idf if lexical is not None else (lambda words: {})
    rows = []
    for q in questions:
        read = assistant.read(q.question, list(q.history))
        if not read.summary:
            continue
        retrieved = assistant.retrieve(read)
        listed = {}
        for v in values:
            knobs = assistant.settings.answer.model_copy(update={setting: v})
            blocks = relevant_papers(read, retrieved.query_vector, retrieved.hits,
                                     SentenceScorer(assistant.embedder, knobs), idf, knobs)
            listed[v] = [b.hit.paper.paper_id for b in blocks[:knobs.summary_max_papers]]
        rows.append({"id": q.id, "subset": q.subset, "gold": list(q.gold), "listed": listed})
    return rows


def scores(rows: Sequence[dict[str, Any]], value: float) -> tuple[float, float]:
    """Mean (recall, precision) of the listings at one value; a question with no gold paper is skipped."""
    pairs = []
    for r in rows:
        gold, listed = set(r["gold"]), r["listed"][value]
        if gold:
            right = len(gold & set(listed))
            pairs.append((right / len(gold), right / len(listed) if listed else 0.0))
    if not pairs:
        return 0.0, 0.0
    return sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs)


def main(argv: list[str] | None = None) -> int:
    others = ("summary_sure_cover", "summary_sure_sentence", "summary_min_cover", "summary_min_idf")
    split, assistant, questions, values = setup("bench.summary_pick", __doc__, "--values", "0.3,0.32,0.35,0.4",
                                                "summary_min_sentence", argv, others, aliases=("--min-sentence",))
    setting = swept(argv, "summary_min_sentence")
    rows = listings(assistant, [q for q in questions if q.kind == "multi"], values, setting)
    print(f"{split} split, {len(rows)} summary questions, {machine().get('cpu')}")
    for v in values:
        parts = []
        for s in sorted({r["subset"] for r in rows}):
            recall, precision = scores([r for r in rows if r["subset"] == s], v)
            parts.append(f"{s or 'original'} {recall:.3f}/{precision:.3f}")
        recall, precision = scores(rows, v)
        print(f"{setting} = {v:g}: recall/precision all {recall:.3f}/{precision:.3f}; {', '.join(parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
