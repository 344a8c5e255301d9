"""Speed of the model presets as the app loads them: cold first token and decode rate through `LlamaGenerator`.

`python -m bench.presets_speed --data-dir DIR [PRESET ...]` loads each preset (the packaged default, or the file that
`python -m rag models install` put in DIR/models) exactly as the pipeline does (its prepared copy included), then
streams an answer to one question about each of N different seed abstracts: different prompts, so llama.cpp's
prefix cache never shortens a prefill and every first token is cold. Prints the CPU, the command and, per preset,
load seconds, prompt tokens, first token p50 and decode pieces/s p50 (pieces after the first / their seconds).
It measures the model alone, not retrieval or evidence selection (`python -m rag eval` times the whole pipeline).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rag import presets
from rag.config import load
from rag.files import ParseReport
from rag.generate import LlamaGenerator, Message
from rag.parse import iter_papers

from .measure import machine


def messages_for(abstract: str) -> list[Message]:
    return [{"role": "system", "content": "Answer from the abstract in one or two sentences and cite it as [1]."},
            {"role": "user", "content": f"[1] {abstract}\n\nQuestion: What does this paper propose, and how well "
                                        "does it work?"}]


def measure(name: str, data_dir: Path, abstracts: list[str], max_tokens: int) -> dict[str, Any]:
    settings = load(flags={"paths.data_dir": data_dir, "generation.model_path": name}, env={})
    t = time.perf_counter()
    gen = LlamaGenerator(settings.generation, data_dir)
    load_s = time.perf_counter() - t
    first, rates, tokens = [], [], []
    for abstract in abstracts:
        msgs = messages_for(abstract)
        tokens.append(gen.count_tokens(msgs))
        start = time.perf_counter()
        stamps = [time.perf_counter() for _ in gen.stream(msgs, max_tokens=max_tokens, temperature=0.0)]
        if not stamps:
            continue
        first.append(stamps[0] - start)
        if len(stamps) > 1:
            rates.append((len(stamps) - 1) / (stamps[-1] - stamps[0]))
    return {"preset": name, "loaded": gen.name, "load_s": round(load_s, 2),
            "prompt_tokens_p50": statistics.median(tokens),
            "first_token_ms_p50": round(1000 * statistics.median(first)) if first else None,
            "decode_pieces_per_s_p50": round(statistics.median(rates), 1) if rates else None, "answers": len(first)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.presets_speed", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", default=list(presets.PRESETS), help="presets (default: all four)")
    p.add_argument("--data-dir", type=Path, default=Path(".rag"), help="where `models install` put them")
    p.add_argument("--prompts", type=int, default=5, help="different abstracts, one cold answer each")
    p.add_argument("--max-tokens", type=int, default=64)
    args = p.parse_args(argv)
    papers = list(iter_papers([Path(__file__).resolve().parent.parent / "seeds"], ParseReport()))
    abstracts = [pp.abstract for pp in papers[:args.prompts]]
    command = "python -m bench.presets_speed " + shlex.join(sys.argv[1:] if argv is None else argv)
    cpu = machine()
    print(f"command: {command}\ncpu: {cpu['cpu']}, {cpu['usable_cores']} usable cores, "
          f"load {cpu['load_average_1m']}", flush=True)
    for name in args.names:
        print(json.dumps(measure(name, args.data_dir, abstracts, args.max_tokens)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
