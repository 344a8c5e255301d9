"""Generation on another box: answers per minute and first-token p50/p95 for 1, 4 and 8 concurrent API clients.

Starts `python -m llama_cpp.server` on 127.0.0.1 serving the default GGUF (the copy the app itself would load:
Q8_0 for a Q4_0/Q4_1 file), then, for each backend, the OpenAI-compatible API in this process (ui/api.py, no UI)
over the seeds' index, and N client threads each asking factoid questions from eval/qa.jsonl through the `openai`
client, streamed.
Backends: `local` (the GGUF in-process, every answer under the one compute lock: the baseline) and `remote-pN`
(generation.remote_url at the server, generation.remote_parallel = N: retrieval under the lock, generation not).

Per answer it records the model's first token as the pipeline timed it (`rag.timings.first_token_ms`: from the
request entering the pipeline, so waiting for the lock counts) and the client's whole latency; per run, answers per
minute over the wall time of all clients. Every client asks the same number of questions after one warm-up answer.

Threads: on a machine other jobs load, llama.cpp with as many threads as cores can run 10-40x slower than with one
(its threads wait for each other at every operation, and a descheduled one stalls the rest: 64 tokens took 17-68 s
with 2 threads and 1.7 s with 1 on the 2-core box under a load of 10), so `--threads` sets both sides alike.

llama-cpp-python's server decodes one request at a time (it has no parallel slots), so on one machine what the
remote backend buys is retrieval and answer checking overlapping another answer's generation, not parallel decoding;
a llama.cpp `llama-server --parallel N` on a GPU box decodes N at once.

Run it alone (figures from a loaded machine are not figures):
    flock /tmp/heavy.lock .venv/bin/python -m bench.remote_parallel --clients 1 4 8 --answers 16
This module measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.measure import machine, percentile
from rag.config import PROJECT_ROOT, Settings, load
from rag.cpu import physical_cores
from rag.gguf import resolve_model
from rag.pipeline import Assistant, ingest
from rag.quantize import prepare_model


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(gguf: Path, n_ctx: int, threads: int, log: Path) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free loopback port until the block ends; yields its base URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
           "--n_batch", "128", "--model_alias", gguf.stem,
           # Its default, True, makes a new request cut off the one streaming: concurrent answers came back empty.
           "--interrupt_requests", "False"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {proc.returncode}: {log.read_text()[-1500:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer in 120 s: {log.read_text()[-1500:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def questions(limit: int) -> list[str]:
    rows = [json.loads(line) for line in (PROJECT_ROOT / "eval" / "qa.jsonl").read_text().splitlines() if line]
    return [r["question"] for r in rows if r.get("kind") == "factoid"][:limit]


def run_clients(base_url: str, model: str, asked: list[list[str]]) -> dict[str, Any]:
    """One thread per client, each asking its questions in turn (streamed); figures over all answers."""
    from openai import OpenAI

    records: list[dict[str, Any]] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(asked) + 1)

    def client(qs: list[str]) -> None:
        api = OpenAI(base_url=f"{base_url}/v1", api_key="bench", max_retries=0, timeout=600)
        start.wait()
        for q in qs:
            t0 = time.perf_counter()
            try:
                extras: dict[str, Any] = {}
                for chunk in api.chat.completions.create(model=model, stream=True,
                                                         messages=[{"role": "user", "content": q}]):
                    extras = getattr(chunk, "rag", None) or extras
            except Exception as e:  # counted and shown, never hidden
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                records.append({"latency_ms": (time.perf_counter() - t0) * 1000,
                                "first_token_ms": extras.get("timings", {}).get("first_token_ms"),
                                "abstained": extras.get("abstained")})

    threads = [threading.Thread(target=client, args=(qs,)) for qs in asked]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    firsts = [r["first_token_ms"] for r in records if r["first_token_ms"] is not None]
    lat = [r["latency_ms"] for r in records]
    return {"answers": len(records), "errors": errors, "wall_s": round(wall, 1),
            "answers_per_min": round(len(records) / wall * 60, 1) if wall else 0.0,
            "first_token_p50_ms": round(percentile(firsts, 50)), "first_token_p95_ms": round(percentile(firsts, 95)),
            "latency_p50_ms": round(percentile(lat, 50)), "latency_p95_ms": round(percentile(lat, 95)),
            "generated": len(firsts), "abstained": sum(1 for r in records if r["abstained"])}


def measure(settings: Settings, label: str, clients: list[int], answers: int, pool: list[str]) -> list[dict[str, Any]]:
    from ui import api

    assistant = Assistant(settings)
    assistant.warm()
    served = api.run(api.create_api(assistant, settings), "127.0.0.1", _free_port(), block=False)
    assert served is not None
    rows = []
    try:
        model = api.loaded_model_id(assistant)
        run_clients(served.url, model, [pool[:1]])  # warm-up: first HTTP request, caches
        for n in clients:
            per = max(1, answers // n)
            asked = [[pool[(c * per + i) % len(pool)] for i in range(per)] for c in range(n)]
            got = run_clients(served.url, model, asked)
            rows.append({"backend": label, "clients": n, **got})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        served.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.remote_parallel", description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--answers", type=int, default=16, help="answers per run, shared among the clients")
    p.add_argument("--parallel", type=int, nargs="+", default=[1, 4], help="generation.remote_parallel values")
    p.add_argument("--no-local", action="store_true", help="skip the in-process baseline")
    p.add_argument("--threads", type=int, default=0,
                   help="llama.cpp threads, in the app (local) and the server alike (0 = generation.n_threads)")
    p.add_argument("--data-dir", type=Path, default=Path(".rag/bench/remote-parallel"))
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    settings = load(flags={"paths.data_dir": args.data_dir, "generation.n_threads": args.threads or None}, env={})
    command = "flock /tmp/heavy.lock .venv/bin/python -m bench.remote_parallel " + shlex.join(argv or sys.argv[1:])
    info = machine()
    print(f"# {command}\n# cpu: {info['cpu']}, {info['usable_cores']} usable cores, load {info['load_average_1m']}",
          flush=True)
    ingest(settings)  # idempotent
    pool = questions(64)
    threads = settings.generation.n_threads or physical_cores()
    gguf = prepare_model(resolve_model(settings.generation, settings.paths.data_dir), settings.generation,
                         settings.paths.data_dir)
    rows: list[dict[str, Any]] = []
    if not args.no_local:
        rows += measure(settings, "local", args.clients, args.answers, pool)
    with llama_server(gguf, settings.generation.n_ctx, threads, args.data_dir / "llama_server.log") as url:
        for parallel in args.parallel:
            remote = settings.with_values({"generation.remote_url": url, "generation.remote_parallel": parallel})
            rows += measure(remote, f"remote-p{parallel}", args.clients, args.answers, pool)
    print("\n| backend | clients | answers/min | first token p50 / p95 (ms) | latency p50 / p95 (ms) | answers "
          "(generated, abstained) | errors |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['clients']} | {r['answers_per_min']} | {r['first_token_p50_ms']} / "
              f"{r['first_token_p95_ms']} | {r['latency_p50_ms']} / {r['latency_p95_ms']} | {r['answers']} "
              f"({r['generated']}, {r['abstained']}) | {len(r['errors'])} |")
    print(f"\nmodel file: {gguf.name}; load after: {round(os.getloadavg()[0], 2)}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "machine": info, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
