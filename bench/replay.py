"""A real chat model's answers, recorded once and replayed: the answer settings swept over them in seconds.

`python -m bench.replay --data-dir DIR --model NAME --record FILE [--split dev] --setting NAME --values A,B,...`
(or `--out RUN` for the eval's own run folder of the split, as `python -m rag eval --out RUN` writes it, and
`--conversations --out RUN` for the split's scripted conversations, as `python -m rag eval conversations` plays them)
answers every question of one split of eval/qa.jsonl through the pipeline (`Assistant.ask`, as `python -m rag eval`
does) at each value of one `[answer]` setting, and prints the eval's answer figures per value and subset: fact in the
first sentence, fact anywhere, fact in the model's own words, median words, the share of quoted answers and
citation precision. The chat model's outputs are kept in FILE by prompt: a prompt asked before (in this run or an
earlier one) is answered from FILE, any other by the model, whose output is then kept. Settings that change what
the model is shown (the evidence) cost generation once per new prompt; settings that only judge and compose its
output (`support_*`, `judge_beyond_question`, `reorder_by_evidence`, ...) cost none. Greedy decoding (temperature 0,
as the pipeline asks) makes a kept output the one the model would write again on the same thread count, so record
with the `RAG_GENERATION_N_THREADS` the eval runs with. DIR must hold an ingested index of the seeds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .measure import machine


class Recorded:
    """A chat model whose outputs are kept by prompt in a JSONL file and answered from it when asked again."""

    def __init__(self, model: Any, path: Path) -> None:
        self.model, self.path = model, path
        self.kept: dict[str, str] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.kept[row["key"]] = row["text"]
        self.replayed = self.generated = 0

    def __getattr__(self, name: str) -> Any:  # name, n_ctx, source, count_tokens: the model's own
        return getattr(self.model, name)

    @staticmethod
    def key(messages: list[dict[str, str]], max_tokens: int, temperature: float, stop: list[str] | None) -> str:
        blob = json.dumps([messages, max_tokens, temperature, stop or []], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        key = self.key(messages, max_tokens, temperature, stop)
        if key in self.kept:
            self.replayed += 1
            yield self.kept[key]
            return
        pieces = []
        for piece in self.model.stream(messages, max_tokens, temperature, stop=stop):
            pieces.append(piece)
            yield piece
        self.generated += 1
        self.kept[key] = "".join(pieces)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"key": key, "text": self.kept[key]}, ensure_ascii=False) + "\n")


def run(assistant: Any, questions: Sequence[Any], setting: str,
        values: Sequence[str | None]) -> dict[str | None, dict[str, Any]]:
    """Per value: the eval's answer summary (`eval.run.answer_summary`) of every question answered with it; None
    answers with the settings as they stand (the model's preset filling those left unset)."""
    from eval.run import answer_pass, answer_summary
    from rag.pipeline import Assistant

    out: dict[str | None, dict[str, Any]] = {}
    base = assistant.settings.answer
    for v in values:
        quiet = assistant
        if v is not None:
            value = getattr(type(base).model_validate({**base.model_dump(), setting: v}), setting)  # "0.5", "true"
            # Set as the user would: the model's preset still fills the settings left unset (`Assistant.answering`).
            settings = assistant.settings.model_copy(update={"answer": base.model_copy(update={setting: value})})
            quiet = Assistant(settings, embedder=assistant.embedder, generator=assistant.generator)
        answers = answer_pass(quiet, questions, progress=False)
        out[v] = answer_summary([{"kind": q.kind, "subset": q.subset, **answers[q.id]} for q in questions])
    return out


def conversations(assistant: Any, split: str, out: Path, command: str) -> str:
    """Play the split's scripted conversations with `assistant` as `python -m rag eval conversations` does, write the
    run folder `out` (conversations.jsonl, summary.json) and return the summary table."""
    from eval import conversations as C
    from eval.run import stamp

    meta = stamp(assistant.settings, assistant.prompts.version, C.CONVERSATIONS, command)
    return C.table(C.run(assistant, C.load(C.CONVERSATIONS, split), out, meta, progress=False))


_FIGURES = (("first sentence", "first_sentence_accuracy"), ("fact", "fact_accuracy"),
            ("own words", "own_words_accuracy"), ("words", "words_median"), ("quoted", "quoted_share"),
            ("citation P", "citation_precision"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="an ingested index of the seeds")
    ap.add_argument("--model", default="", help="a preset name or a GGUF path (default: the settings' model)")
    ap.add_argument("--record", required=True, type=Path, help="the JSONL file of kept outputs (made when absent)")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--setting", default="reorder_by_evidence", help="the [answer] setting swept")
    ap.add_argument("--values", default="", help="comma-separated values (default: the settings as they stand)")
    ap.add_argument("--out", type=Path, help="instead of a sweep: write the eval's run folder (`python -m rag eval "
                                             "--out`) of the split as the settings stand, outputs replayed or kept")
    ap.add_argument("--conversations", action="store_true",
                    help="with --out: play the split's scripted conversations instead (`python -m rag eval "
                         "conversations --out`), outputs replayed or kept")
    args = ap.parse_args(argv)

    from eval.cli import resolve_model
    from eval.run import load_qa
    from rag.config import load as load_settings
    from rag.pipeline import Assistant, with_model

    settings = load_settings(flags={"paths.data_dir": args.data_dir})
    if args.setting not in type(settings.answer).model_fields:
        ap.error(f"--setting: {args.setting!r} is not an [answer] setting")
    if args.model:
        settings = with_model(settings, str(resolve_model(args.model, settings.paths.models_dir)))
    base = Assistant(settings)
    recorded = Recorded(base.generator, args.record)
    assistant = Assistant(settings, embedder=base.embedder, generator=recorded)
    values: list[str | None] = list(args.values.split(",")) if args.values else [None]
    command = "python -m bench.replay " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.conversations:
        if not args.out:
            ap.error("--conversations needs --out")
        played = conversations(assistant, args.split, args.out, command)
        print(played)
        print(f"outputs replayed {recorded.replayed}, generated {recorded.generated}; run folder: {args.out}")
        return 0
    questions = [q for q in load_qa() if q.split == args.split]
    if args.out:
        from eval.report import summary_text
        from eval.run import evaluate

        summary = evaluate(assistant, settings, questions, args.out, retrieval_only=False,
                           prompt_version=assistant.prompts.version, command=command, progress=False)
        print(summary_text(summary))
        print(f"outputs replayed {recorded.replayed}, generated {recorded.generated}; run folder: {args.out}")
        return 0
    summaries = run(assistant, questions, args.setting, values)
    print(f"{args.split} split, {len(questions)} questions, {recorded.model.name}, {machine().get('cpu')}; "
          f"outputs replayed {recorded.replayed}, generated {recorded.generated}")
    for v, s in summaries.items():
        for part, block in [("all", s["overall"]), *s["by_subset"].items()]:
            figures = ", ".join(f"{label} {block[key]:.3f}" if isinstance(block[key], float) else
                                f"{label} {block[key]}" for label, key in _FIGURES)
            label = "as the settings stand" if v is None else f"{args.setting} = {v}"
            print(f"{label} [{part}, n={block['n']}]: {figures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
