"""Prompt-lookup decoding per model: decode speed with and without, and whether the answers stay the same.

`python -m bench.prompt_lookup --data-dir DIR --models smollm2 PATH.gguf ...` asks every question of one split of
eval/qa.jsonl (default dev) through the real pipeline (`Assistant.stream`: retrieval, evidence, prompt, generation,
checks) at temperature 0, twice per question: with `generation.prompt_lookup` 0 and with it set (`--lookup`, default
10 draft tokens), the two in turn on two Assistants that share the embedder and index, so both see the same machine
and the same sequence of prompts (llama.cpp's prefix cache included). Per model it prints decode pieces/s (pieces
after the first over their seconds, summed over the questions the model answered), first-token and total ms
(medians), and how many final answers and raw model outputs are identical. DIR must hold an ingested index.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from rag.config import PROJECT_ROOT, Settings, load
from rag.records import Answer

from .measure import machine


def questions(qa: Path, split: str, limit: int | None) -> list[str]:
    rows = [json.loads(line) for line in qa.read_text(encoding="utf-8").splitlines() if line.strip()]
    picked = [r["question"] for r in rows if r.get("split") == split]
    return picked[:limit] if limit else picked


def _ask(assistant: Any, question: str) -> dict[str, Any]:
    pieces: list[str] = []
    final: Answer | None = None
    for event in assistant.stream(question, temperature=0.0):
        if isinstance(event, Answer):
            final = event
        else:
            pieces.append(event)
    assert final is not None
    t = final.timings
    n = len(pieces)
    decode_s = (n - 1) / t["tokens_per_s"] if n > 1 and t.get("tokens_per_s") else 0.0
    return {"raw": "".join(pieces), "text": final.text, "mode": final.mode, "pieces": n, "decode_s": decode_s,
            "first_token_ms": t.get("first_token_ms"), "total_ms": t["total_ms"]}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    generated = [r for r in runs if r["pieces"] > 1]
    pieces = sum(r["pieces"] - 1 for r in generated)
    seconds = sum(r["decode_s"] for r in generated)
    first = [r["first_token_ms"] for r in generated if r["first_token_ms"]]
    return {"answers_with_model_text": len(generated), "decode_pieces_per_s": round(pieces / seconds, 1) if seconds
            else None, "first_token_ms_p50": round(statistics.median(first)) if first else None,
            "total_ms_p50": round(statistics.median(r["total_ms"] for r in runs)),
            "total_s_sum": round(sum(r["total_ms"] for r in runs) / 1000, 1)}


def compare(model: str, settings: Settings, qs: list[str], lookup: int) -> dict[str, Any]:
    from rag.pipeline import Assistant

    base = settings.with_values({"generation.model_path": model, "generation.temperature": 0.0})
    off = Assistant(base.with_values({"generation.prompt_lookup": 0}))
    on = Assistant(base.with_values({"generation.prompt_lookup": lookup}), embedder=off.embedder)
    off.warm()
    on.warm()
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for i, q in enumerate(qs):
        order = [("off", off), ("on", on)] if i % 2 == 0 else [("on", on), ("off", off)]
        for name, assistant in order:
            runs[name].append(_ask(assistant, q))
        print(f"  {model}: {i + 1}/{len(qs)}", file=sys.stderr, flush=True)
    same_text = sum(a["text"] == b["text"] for a, b in zip(runs["off"], runs["on"]))
    same_raw = sum(a["raw"] == b["raw"] for a, b in zip(runs["off"], runs["on"]))
    differ = [{"question": q, "off": a["text"], "on": b["text"]}
              for q, a, b in zip(qs, runs["off"], runs["on"]) if a["text"] != b["text"]]
    off_s, on_s = _summary(runs["off"]), _summary(runs["on"])
    ratio = (round(on_s["decode_pieces_per_s"] / off_s["decode_pieces_per_s"], 3)
             if on_s["decode_pieces_per_s"] and off_s["decode_pieces_per_s"] else None)
    return {"model": off.generator.name, "questions": len(qs), "off": off_s, "on": on_s, "decode_ratio": ratio,
            "identical_answers": same_text, "identical_raw_outputs": same_raw, "different_answers": differ}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.prompt_lookup", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder with an ingested index")
    p.add_argument("--models", nargs="+", default=["smollm2"], help="preset names or GGUF paths")
    p.add_argument("--lookup", type=int, default=10, help="generation.prompt_lookup when on (draft tokens)")
    p.add_argument("--split", default="dev")
    p.add_argument("--limit", type=int, help="only the first N questions of the split")
    p.add_argument("--qa", type=Path, default=PROJECT_ROOT / "eval" / "qa.jsonl")
    a = p.parse_args(argv)
    settings = load(flags={"paths.data_dir": a.data_dir}, env={})
    qs = questions(a.qa, a.split, a.limit)
    res: dict[str, Any] = {"command": "python -m bench.prompt_lookup " + shlex.join(sys.argv[1:] if argv is None
                                                                                    else argv),
                           "machine": machine(), "load_average_before": [round(x, 2) for x in os.getloadavg()],
                           "models": []}
    for model in a.models:
        res["models"].append(compare(model, settings, qs, a.lookup))
        res["models"][-1]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
