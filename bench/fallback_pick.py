"""The evidence-only answer, without the model: how often its first sentence, and the answer at all, holds the fact,
at each value of one answer setting.

`python -m bench.fallback_pick --data-dir DIR [--split dev] --setting NAME --values V1,V2,...` reads every question
of one split of eval/qa.jsonl that wants one answer (factoids, which-paper questions, follow-ups with their history)
and answers it through the pipeline (`Assistant.ask`) with a chat model that writes nothing. Every such answer is the
one the user reads whenever none of the model's sentences survives the support check (`compose.fallback`): with the
default model, most answers. It prints, per value and per subset ("" = the original questions), the share of fact
questions whose first sentence holds the fact (`eval.metrics.first_sentence`, `fact_hit`), the share whose answer
holds it, and the median words. Seconds per question: the embedder's, no generation. DIR must hold an ingested
index of the seeds.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .measure import machine
from .sweep import setup, swept


class Silent:
    """A chat model that answers nothing, so every answer is the evidence's own."""

    name = "no model (evidence only)"
    n_ctx = 32768

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        return iter(())

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return sum(len(m["content"]) for m in messages) // 4


def answers(assistant: Any, questions: Sequence[Any], setting: str, values: Sequence[float]) -> list[dict[str, Any]]:
    """Per question with facts: its id, subset and, at each value, (first sentence holds a fact, answer does, words)."""
    from eval.metrics import fact_hit, first_sentence, word_count
    from rag.pipeline import Assistant

    rows: list[dict[str, Any]] = [{"id": q.id, "subset": q.subset, "at": {}} for q in questions]
    for v in values:
        settings = assistant.settings.model_copy(
            update={"answer": assistant.settings.answer.model_copy(update={setting: v})})
        quiet = Assistant(settings, embedder=assistant.embedder, generator=Silent())
        for row, q in zip(rows, questions):
            text = quiet.ask(q.question, list(q.history)).text
            row["at"][v] = (bool(fact_hit(first_sentence(text), q.facts)), bool(fact_hit(text, q.facts)),
                            word_count(text))
    return rows


# The answer settings that shape the evidence-only answer, any of which `--setting` may sweep.
_SETTINGS = ("continuation_weight", "lexical_weight", "evidence_focus_weight", "evidence_ask_weight",
             "opening_sentence_penalty", "asked_noun_boost", "addressed_penalty", "long_sentence_words",
             "wrong_kind_penalty", "complete_answer_words", "added_sentence_novelty", "evidence_retrieval_weight",
             "evidence_cover_weight", "evidence_margin", "evidence_phrase_weight")


def main(argv: list[str] | None = None) -> int:
    split, assistant, questions, values = setup("bench.fallback_pick", __doc__, "--values", "1", "answer_type_boost",
                                                argv, others=_SETTINGS)
    setting = swept(argv, "answer_type_boost")
    wanted = [q for q in questions if q.kind not in ("unanswerable", "multi") and q.facts]
    rows = answers(assistant, wanted, setting, values)
    print(f"{split} split, {len(rows)} single-answer questions with facts, {machine().get('cpu')}")
    for v in values:
        parts = []
        for s in [None, *sorted({r["subset"] for r in rows})]:
            at = [r["at"][v] for r in rows if s is None or r["subset"] == s]
            first, anywhere = sum(a[0] for a in at) / len(at), sum(a[1] for a in at) / len(at)
            words = statistics.median(a[2] for a in at)
            parts.append(f"{'all' if s is None else s or 'original'} {first:.3f}/{anywhere:.3f}/{words:g}")
        print(f"{setting} = {v:g}: first sentence/fact/words {'; '.join(parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
