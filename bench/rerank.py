"""A GGUF as a paper reranker: does asking the loaded chat model "does this abstract answer the question?" pick the
right paper more often than retrieval and evidence do, and at what cost per question?

`python -m bench.rerank --data-dir DIR --model smollm2 [--split dev] [--top 5]` reads every question of one split of
eval/qa.jsonl that wants one paper (factoids, which-paper questions, follow-ups; not summaries or unanswerables),
retrieves its top papers with the pipeline (`Assistant.read` and `retrieve`), and for each of the top `--top` papers
renders one chat prompt with the GGUF's own template: the question first, then the abstract, then "Reply Yes or No".
The judgment is log P(yes) - log P(no) over the first answer token's logits (the "Yes"/"yes"/" Yes" and
"No"/"no"/" No" tokens). Consecutive prompts share the question, so llama.cpp re-evaluates only from the abstract on
(the prefix of the previous prompt's tokens is kept in the KV cache).

It prints, per weight w, how often the paper ranked first by `retrieval score + w * judgment` is a gold paper (w = 0
is retrieval alone; "judge" is the judgment alone), overall and on the paraphrase subset, and the judging seconds per
question (p50, p95). Like bench/llm.py it talks to llama_cpp directly: it needs the logits of one position, which a
chat stream does not give. DIR must hold an ingested index of the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rag.config import load as load_settings

from .llm import load, render
from .measure import machine

SYSTEM = "You judge whether a paper abstract answers a question. Reply Yes or No."
WEIGHTS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def _first_tokens(llm: Any, words: tuple[str, ...]) -> list[int]:
    return sorted({llm.tokenize(w.encode(), add_bos=False, special=False)[0] for w in words})


def judge(llm: Any, question: str, abstract: str, yes: list[int], no: list[int]) -> float:
    """log P(yes) - log P(no) for the first token of the model's reply."""
    import ctypes

    import llama_cpp
    import numpy as np

    tokens = render(llm, [{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": f"Question: {question}\n\nAbstract: {abstract}\n\n"
                                                      "Does this abstract answer the question? Reply Yes or No."}])
    kept = 0
    previous = list(llm._input_ids[:llm.n_tokens])
    while kept < min(len(previous), len(tokens) - 1) and previous[kept] == tokens[kept]:
        kept += 1
    llm.n_tokens = kept
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm._ctx.ctx), -1, kept, -1)
    llm.eval(tokens[kept:])
    logits = np.ctypeslib.as_array(ctypes.cast(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1),
                                               ctypes.POINTER(ctypes.c_float)), shape=(llm.n_vocab(),))
    return float(np.logaddexp.reduce(logits[yes]) - np.logaddexp.reduce(logits[no]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rerank", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="an ingested index of the seeds")
    ap.add_argument("--model", default="smollm2", help="a preset name or a GGUF path")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--top", type=int, default=5, help="papers judged per question")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="write the per-question judgments here (JSON)")
    args = ap.parse_args(argv)

    from eval.run import load_qa
    from rag.gguf import resolve_model
    from rag.pipeline import Assistant

    settings = load_settings(flags={"paths.data_dir": args.data_dir, "generation.model_path": args.model})
    assistant = Assistant(settings)
    path = resolve_model(settings.generation, settings.paths.data_dir)
    llm = load(Path(path), n_threads=args.threads)
    yes, no = _first_tokens(llm, ("Yes", " Yes", "yes")), _first_tokens(llm, ("No", " No", "no"))
    rows: list[dict[str, Any]] = []
    seconds: list[float] = []
    for q in load_qa():
        if q.split != args.split or q.kind in ("unanswerable", "multi"):
            continue
        read = assistant.read(q.question, list(q.history))
        if read.summary:
            continue
        hits = assistant.retrieve(read).hits[:args.top]
        if not hits:
            continue
        t = time.perf_counter()
        judged = [judge(llm, read.scored, h.paper.abstract, yes, no) for h in hits]
        seconds.append(time.perf_counter() - t)
        rows.append({"id": q.id, "subset": q.subset, "gold": list(q.gold), "papers": [h.paper.paper_id for h in hits],
                     "retrieval": [h.score for h in hits], "judged": judged})
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    cpu = machine()
    print(f"{path.name}, {args.split} split, top {args.top}, {args.threads} threads, {cpu.get('cpu')}")
    print(f"judging per question: p50 {statistics.median(seconds):.2f} s, "
          f"p95 {sorted(seconds)[int(0.95 * (len(seconds) - 1))]:.2f} s over {len(seconds)} questions")
    para = [r for r in rows if r["subset"] == "paraphrase"]
    for w in (*WEIGHTS, None):
        def right(r: dict[str, Any], w: float | None = w) -> bool:
            score = [j if w is None else s + w * j for s, j in zip(r["retrieval"], r["judged"])]
            return r["papers"][max(range(len(score)), key=score.__getitem__)] in r["gold"]
        name = "judge alone" if w is None else f"retrieval + {w} x judge"
        print(f"{name:26s} first paper right {sum(map(right, rows))}/{len(rows)}, "
              f"paraphrase {sum(map(right, para))}/{len(para)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
