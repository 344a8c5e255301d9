"""A GGUF's speed with its layers on a GPU, on the pipeline's own prompts: answers, prompt lookup, reranker prompts.

Two steps, because the machine with the GPU need not hold the index or the eval:

`python -m bench.offload capture --data-dir DIR --record FILE [--split dev] [--limit 40] --out CASES` (where the
seeds' index is) answers the split's first questions through the pipeline and keeps every chat prompt it sends the
model, with the output the CPU gave (from FILE, bench/replay.py's record, else generated and kept there), and for
each question that wants one paper the abstracts of its top five (the reranker's input, bench/rerank.py).

`python -m bench.offload time --cases CASES --model PATH --data-dir D [--n-gpu-layers -1] [--threads 2]
[--lookup 0,10] --out F` loads the model as the app does (`rag.generate.LlamaGenerator`: its prepared copy, its
template) and, per prompt-lookup value, streams every kept prompt greedily: the first piece's latency, pieces/s
after it, and whether the text is the one the CPU wrote. Then it times the reranker's yes/no judgment of the five
abstracts per question (`bench.rerank.judge`, the prefix shared by a question's prompts kept in the KV cache).
It writes every figure to F (JSON) and prints the medians.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .measure import machine, median, percentile


class Capture:
    """A chat model that keeps the prompts it is asked, and what it answered."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.asked: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:  # name, n_ctx, count_tokens: the model's own
        return getattr(self.model, name)

    def stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        pieces = list(self.model.stream(messages, max_tokens, temperature, stop=stop))
        self.asked.append({"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                           "stop": stop or [], "cpu_text": "".join(pieces)})
        yield from pieces


def capture(args: argparse.Namespace) -> int:
    from eval.run import load_qa
    from rag.config import load as load_settings
    from rag.pipeline import Assistant

    from .replay import Recorded

    settings = load_settings(flags={"paths.data_dir": args.data_dir})
    base = Assistant(settings)
    kept = Capture(Recorded(base.generator, args.record))
    assistant = Assistant(settings, embedder=base.embedder, generator=kept)
    questions = [q for q in load_qa() if q.split == args.split and q.kind != "multi"][:args.limit]
    cases: list[dict[str, Any]] = []
    for q in questions:
        kept.asked.clear()
        assistant.ask(q.question, history=list(q.history))
        read = assistant.read(q.question, list(q.history))
        hits = [] if read.summary else assistant.retrieve(read).hits[:5]
        cases.append({"id": q.id, "question": read.scored, "prompts": list(kept.asked),
                      "abstracts": [h.paper.abstract for h in hits]})
    with open(args.out, "w", encoding="utf-8") as fh:
        for case in cases:
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    print(f"{len(cases)} questions, {sum(len(c['prompts']) for c in cases)} prompts, "
          f"{sum(bool(c['abstracts']) for c in cases)} with abstracts to judge -> {args.out}")
    return 0


def _stream(generator: Any, prompt: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    first = last = 0.0
    pieces: list[str] = []
    for piece in generator.stream(prompt["messages"], prompt["max_tokens"], prompt["temperature"],
                                  stop=prompt["stop"] or None):
        last = time.perf_counter() - t0
        if not pieces:
            first = last
        pieces.append(piece)
    text = "".join(pieces)
    return {"first_ms": round(1000 * first, 1), "total_ms": round(1000 * last, 1), "pieces": len(pieces),
            "decode_per_s": round((len(pieces) - 1) / (last - first), 1) if len(pieces) > 1 and last > first else None,
            "same_as_cpu": text == prompt["cpu_text"], "text": text}


def time_model(args: argparse.Namespace) -> int:
    from rag.config import load as load_settings
    from rag.generate import LlamaGenerator

    from .rerank import _first_tokens, judge

    cases = [json.loads(line) for line in Path(args.cases).read_text(encoding="utf-8").splitlines() if line]
    prompts = [p for c in cases for p in c["prompts"]]
    out: dict[str, Any] = {"machine": machine(), "model": args.model, "n_gpu_layers": args.n_gpu_layers,
                           "threads": args.threads, "runs": {}}
    for lookup in (int(v) for v in args.lookup.split(",")):
        settings = load_settings(flags={"paths.data_dir": args.data_dir, "generation.model_path": args.model,
                                        "generation.n_gpu_layers": args.n_gpu_layers,
                                        "generation.n_threads": args.threads,
                                        "generation.prompt_lookup": lookup})
        t = time.perf_counter()
        generator = LlamaGenerator(settings.generation, settings.paths.data_dir)
        load_s = time.perf_counter() - t
        rows = [_stream(generator, p) for p in prompts]
        firsts = [r["first_ms"] for r in rows]
        decode = [r["decode_per_s"] for r in rows if r["decode_per_s"]]
        run: dict[str, Any] = {"loaded": generator.name, "load_s": round(load_s, 2),
                               "first_ms_p50": median(firsts), "first_ms_p95": percentile(firsts, 95),
                               "decode_per_s_p50": median(decode) if decode else None,
                               "total_ms_p50": median([r["total_ms"] for r in rows]),
                               "same_as_cpu": sum(r["same_as_cpu"] for r in rows), "prompts": len(rows),
                               "rows": rows}
        if lookup == 0:
            llm = generator._llm  # the loaded Llama: the judgment reads one position's logits, which a stream hides
            yes = _first_tokens(llm, ("Yes", " Yes", "yes"))
            no = _first_tokens(llm, ("No", " No", "no"))
            judged = []
            for c in cases:
                if c["abstracts"]:
                    t = time.perf_counter()
                    for abstract in c["abstracts"]:
                        judge(llm, c["question"], abstract, yes, no)
                    judged.append(1000 * (time.perf_counter() - t))
            run["judge_ms_per_question_p50"] = median(judged) if judged else None
            run["judge_ms_per_question_p95"] = percentile(judged, 95) if judged else None
            run["judged_questions"] = len(judged)
        out["runs"][str(lookup)] = run
        print(f"{generator.name} n_gpu_layers={args.n_gpu_layers} threads={args.threads} lookup={lookup}: "
              f"load {load_s:.2f} s, first piece p50 {run['first_ms_p50']:.0f} ms (p95 {run['first_ms_p95']:.0f}), "
              f"decode p50 {run['decode_per_s_p50']} pieces/s, total p50 {run['total_ms_p50']:.0f} ms, "
              f"same text as the CPU {run['same_as_cpu']}/{len(rows)}"
              + (f", reranker 5 abstracts p50 {run['judge_ms_per_question_p50']:.0f} ms "
                 f"(p95 {run['judge_ms_per_question_p95']:.0f})" if run.get("judged_questions") else ""), flush=True)
        del generator
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.offload", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("capture", help="keep the pipeline's prompts for a split's questions")
    c.add_argument("--data-dir", required=True, help="an ingested index of the seeds")
    c.add_argument("--record", required=True, type=Path, help="bench/replay.py's record of the CPU's outputs")
    c.add_argument("--split", default="dev", choices=("dev", "test"))
    c.add_argument("--limit", type=int, default=40)
    c.add_argument("--out", required=True)
    t = sub.add_parser("time", help="time a model on kept prompts")
    t.add_argument("--cases", required=True)
    t.add_argument("--model", required=True, help="a preset name or a GGUF path")
    t.add_argument("--data-dir", required=True, help="where the prepared copy is kept (no index needed)")
    t.add_argument("--n-gpu-layers", type=int, default=-1)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--lookup", default="0,10", help="prompt-lookup values, comma-separated (0 = off)")
    t.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    return capture(args) if args.step == "capture" else time_model(args)


if __name__ == "__main__":
    sys.exit(main())
