"""End-to-end figures: process start to ready (models loaded, index open, one token generated), one full question,
and the pipeline's real prompts captured for the generation figures.

`ready` runs in a fresh worker process (`python -m bench.cli _ready ...`) so it includes interpreter start and
imports; the parent times from spawning the process to the worker's READY line. The page cache is warm (the files
were just read by the bench), so this is a process cold start, not a disk cold start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rag.config import Settings
from rag.embed import Embedder
from rag.generate import Generator, Message
from rag.pipeline import Assistant

from .measure import median

FOLLOW_UP = "And how much faster is it than the baseline?"


class Recorder:
    """A generator that records the prompts the pipeline sends, replying with a canned answer (or the inner one's)."""

    def __init__(self, inner: Generator, reply: str | None = None) -> None:
        self.inner, self.reply = inner, reply
        self.name, self.n_ctx = inner.name, inner.n_ctx
        self.prompts: list[list[Message]] = []

    def count_tokens(self, messages: list[Message]) -> int:
        return self.inner.count_tokens(messages)

    def stream(self, messages: list[Message], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        self.prompts.append([dict(m) for m in messages])
        if self.reply is None:
            yield from self.inner.stream(messages, max_tokens, temperature, stop)
        else:
            yield self.reply


def capture_prompts(settings: Settings, embedder: Embedder, generator: Generator, questions: list[str],
                    reply: str = "Training cost is reduced by 9.7x [1].") -> dict[str, list[Message]]:
    """The pipeline's prompts: "cold" (questions[0]), "cold_single" (the same, one paper of evidence), "other"
    (questions[1]), "followup" (a follow-up question) and "followup_pipeline" (what the pipeline sends for it)."""
    rec = Recorder(generator, reply)
    out: dict[str, list[Message]] = {}
    assistant = Assistant(settings, embedder=embedder, generator=rec)
    for key, q in (("cold", questions[0]), ("other", questions[1])):
        n = len(rec.prompts)
        assistant.ask(q)
        if len(rec.prompts) > n:
            out[key] = rec.prompts[-1]
    history: list[Message] = [{"role": "user", "content": questions[0]}, {"role": "assistant", "content": reply}]
    n = len(rec.prompts)
    assistant.ask(FOLLOW_UP, history=history)
    if len(rec.prompts) > n:
        out["followup_pipeline"] = rec.prompts[-1]
    single = settings.with_values({"answer.evidence_papers": 1})
    n = len(rec.prompts)
    Assistant(single, embedder=embedder, generator=rec).ask(questions[0])
    if len(rec.prompts) > n:
        out["cold_single"] = rec.prompts[-1]
    out["followup"] = [{"role": "user", "content": FOLLOW_UP}]
    if "cold" not in out or "other" not in out:
        raise RuntimeError("the pipeline abstained on the bench questions; no prompt to measure")
    return out


def stream_figures(generator: Generator, prompts: dict[str, list[Message]], max_tokens: int = 64,
                   repeats: int = 3) -> dict[str, Any]:
    """TTFT and pieces/s through the Generator protocol (what the pipeline sees), for any generator.

    A generator may cache the previous prompt (llama.cpp does), so each timed prompt follows what would precede
    it in use: "cold" and "cold_single" follow a one-word chat (as after `Assistant.warm()`: nothing of the prompt
    is cached), "other" and "followup_pipeline" follow the "cold" question.
    """
    flush: list[Message] = [{"role": "user", "content": "Hi"}]
    before = {"cold": flush, "cold_single": flush, "other": prompts["cold"], "followup_pipeline": prompts["cold"]}
    out: dict[str, Any] = {}
    for key, prior in before.items():
        if key not in prompts:
            continue
        ttft, rate = [], []
        for _ in range(repeats):
            for _piece in generator.stream(prior, 1, 0.0):
                pass
            t = time.perf_counter()
            first = last = 0.0
            n = 0
            for _piece in generator.stream(prompts[key], max_tokens, 0.0):
                last = time.perf_counter()
                first = first or last
                n += 1
            ttft.append((first or time.perf_counter()) - t)
            rate.append((n - 1) / (last - first) if n > 1 and last > first else 0.0)
        out[key] = {"ttft_ms": round(median(ttft) * 1000, 1), "pieces_per_s": round(median(rate), 1)}
    return out


def ready_in_process(settings: Settings, question: str, embedder: Embedder | None = None,
                     generator: Generator | None = None, on_ready: Callable[[], None] | None = None) -> dict[str, Any]:
    """Load, warm, then answer `question` twice (cold and warm): seconds and the answer's own timings."""
    t = time.perf_counter()
    assistant = Assistant(settings, embedder=embedder, generator=generator)
    assistant.warm()
    ready = time.perf_counter() - t
    if on_ready is not None:
        on_ready()
    runs = []
    for _ in range(2):
        t = time.perf_counter()
        ans = assistant.ask(question)
        runs.append({"seconds": round(time.perf_counter() - t, 3), "mode": ans.mode,
                     "first_token_ms": round(ans.timings.get("first_token_ms", 0.0), 1),
                     "retrieve_ms": round(ans.timings.get("retrieve_ms", 0.0), 1),
                     "prompt_tokens": ans.timings.get("prompt_tokens", 0)})
    return {"warm_s": round(ready, 3), "first_question": runs[0], "second_question": runs[1]}


def ready_subprocess(data_dir: Path, question: str, repeats: int = 3, extra: list[str] | None = None,
                     timeout: float = 600) -> dict[str, Any]:
    """Median seconds from spawning a worker process to it being ready, and its question figures."""
    runs: list[dict[str, Any]] = []
    readies: list[float] = []
    for _ in range(repeats):
        cmd = [sys.executable, "-m", "bench.cli", "_ready", "--data-dir", str(data_dir), "--question", question,
               *(extra or [])]
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy(),
                                cwd=Path(__file__).resolve().parent.parent)
        assert proc.stdout is not None
        ready = None
        result: dict[str, Any] = {}
        for line in proc.stdout:
            if line.startswith("READY") and ready is None:
                ready = time.perf_counter() - t
            elif line.startswith("{"):
                result = json.loads(line)
        proc.wait(timeout=timeout)
        if proc.returncode != 0 or ready is None:
            raise RuntimeError(f"ready worker failed (exit {proc.returncode})")
        readies.append(ready)
        runs.append(result)
    best = runs[len(runs) // 2]
    return {"ready_s": round(median(readies), 2), "ready_runs_s": [round(r, 2) for r in readies],
            "warm_s_in_worker": best.get("warm_s"), "first_question": best.get("first_question"),
            "second_question": best.get("second_question"), "repeats": repeats}
