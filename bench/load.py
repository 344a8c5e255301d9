"""Load: concurrent chats through `python -m rag serve`'s OpenAI-compatible API while `python -m rag ingest` adds
papers to the index it serves; no error, no paper lost or duplicated, and the chats' latency.

One run: a fresh data folder gets the seeds (`python -m rag ingest`); `python -m rag serve` starts on it (the real
app: UI and `/v1`, the default model); `--clients` threads then ask `/v1/chat/completions` one question after
another (questions of eval/qa.jsonl, in turn) for `--seconds`, while, from `--ingest-after` seconds on, one
`python -m rag ingest` process adds `--papers` synthetic papers (bench/corpus.py) from their own folder. When the
time is up each client finishes the answer it waits for, and the ingest finishes. Then it checks:
- every request got HTTP 200 and a non-empty answer (a 503 "busy" counts as an error: the app admits
  `ui.api_max_pending`, set here to at least `--clients`);
- the index holds exactly the seeds and the synthetic papers (catalog ids = the ids the files parse into), every
  paper has chunks, no chunk belongs to a paper the catalog lacks, BM25 holds exactly the stored chunks;
- the app answers from the new papers without a restart (a question filtered to the synthetic file cites one);
- the app's log has no traceback.
Latency is per request, from sending it to the whole answer (non-streamed): with one model answering one question
at a time, most of it is waiting behind the other clients. The CPU and the load average are printed with the
figures. Exit status 1 when a check fails.

    flock /tmp/heavy.lock python -m bench.load --seconds 300 --clients 16 --papers 1000 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .corpus import corpus_file
from .measure import machine, summary

ROOT = Path(__file__).resolve().parent.parent
SYNTHETIC = "synthetic.jsonl"  # the ingested file's name: its papers' `source`


@dataclass(frozen=True)
class Plan:
    seconds: float = 300.0
    clients: int = 16
    papers: int = 1000
    ingest_after: float = 10.0  # seconds of chats before the ingest starts
    threads: int = 1  # llama.cpp threads of the app (RAG_GENERATION_N_THREADS); the ingest takes the other core
    data_dir: Path | None = None  # default: a temporary folder, removed afterwards
    max_tokens: int = 0  # 0 = the app's default


@dataclass
class Request:
    client: int
    question: str
    sent: float  # seconds since the chats began
    latency: float = 0.0
    status: int = 0
    error: str = ""
    cited: int = 0


@dataclass
class Outcome:
    requests: list[Request] = field(default_factory=list)
    ingest: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _questions(limit: int = 60) -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "eval" / "qa.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r["question"] for r in rows if r["kind"] in {"factoid", "which"} and not r.get("history")][:limit]


def _cli(data: Path, *args: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rag", *args, "--data-dir", str(data)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 600) -> str:
    """The loaded model's id, once `/v1/models` answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            got = httpx.get(f"{url}/v1/models", timeout=5)
            if got.status_code == 200:
                return str(got.json()["data"][0]["id"])
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"serve not ready in {timeout:.0f} s: {log.read_text()[-2000:]}")


def _chat(url: str, model: str, question: str, max_tokens: int, extra: dict[str, Any] | None = None,
          timeout: float = 900) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": question}], **(extra or {})}
    if max_tokens:
        body["max_tokens"] = max_tokens
    got = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout)
    return got.status_code, got.json() if got.headers.get("content-type", "").startswith("application/json") else {}


def _client(i: int, url: str, model: str, questions: list[str], plan: Plan, t0: float, stop: threading.Event,
            out: list[Request]) -> None:
    n = i
    while not stop.is_set():
        q = questions[n % len(questions)]
        n += plan.clients
        req = Request(client=i, question=q, sent=time.monotonic() - t0)
        started = time.monotonic()
        try:
            status, body = _chat(url, model, q, plan.max_tokens)
            req.status = status
            if status != 200:
                req.error = json.dumps(body)[:300]
            else:
                message = body["choices"][0]["message"]
                req.cited = len(message.get("citations") or [])
                if not (message.get("content") or "").strip():
                    req.error = "empty answer"
        except Exception as e:  # a dropped connection or a timeout is the finding, not a crash of the bench
            req.error = f"{type(e).__name__}: {e}"
        req.latency = time.monotonic() - started
        out.append(req)


def _check_index(data: Path, expected: set[str], env: dict[str, str]) -> dict[str, Any]:
    """Counted in a child process (the real embedder's name and dimension, read from the catalog, open the store)."""
    code = r"""
import json, sys
from pathlib import Path
from rag.catalog import Catalog, read_meta
from rag.config import load
from rag.index import IndexPaths
from rag.lexical import LexicalIndex
from rag.store import ChunkStore
s = load(flags={"paths.data_dir": Path(sys.argv[1])})
ip = IndexPaths.of(s)
cat = Catalog(ip.catalog)
ids = sorted(cat.ids())
store = ChunkStore(ip.chroma, ip.collection, read_meta(ip.catalog, "embedding_model"), 384, create=False)
rows = [r for page in store.iter_rows() for r in page]
lexical = LexicalIndex.load(ip.lexical)
print(json.dumps({"catalog": ids, "catalog_rows": cat.count(), "chunks": len(rows),
                  "chunk_ids_unique": len({c for c, _ in rows}) == len(rows),
                  "papers_with_chunks": sorted({p for _, p in rows}),
                  "bm25_matches_store": lexical is not None
                                        and sorted(lexical.chunk_ids) == sorted(c for c, _ in rows)}))
"""
    done = subprocess.run([sys.executable, "-c", code, str(data)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode:
        return {"error": done.stderr[-2000:]}
    got = json.loads(done.stdout)
    catalog = set(got.pop("catalog"))
    with_chunks = set(got.pop("papers_with_chunks"))
    return {**got, "papers": len(catalog), "expected": len(expected), "lost": sorted(expected - catalog)[:10],
            "lost_count": len(expected - catalog), "unexpected": sorted(catalog - expected)[:10],
            "without_chunks": len(catalog - with_chunks), "orphan_chunk_papers": len(with_chunks - catalog)}


def run(plan: Plan, log: Any = print) -> Outcome:
    """One load run as the module's docstring says; `log` gets progress lines."""
    from rag.files import ParseReport
    from rag.parse import iter_papers
    from rag.text import split_sentences

    tmp = None if plan.data_dir else tempfile.TemporaryDirectory(prefix="rag-load-")
    data = plan.data_dir or Path(tmp.name)  # type: ignore[union-attr]
    out = Outcome()
    env = {**os.environ, "RAG_GENERATION_N_THREADS": str(plan.threads),
           "RAG_UI_API_MAX_PENDING": str(max(plan.clients, 16)), "PYTHONPATH": str(ROOT)}
    env.pop("RAG_DATA_DIR", None)
    server: subprocess.Popen[bytes] | None = None
    try:
        seeded = _cli(data, "ingest", "--json", env=env)
        if seeded.returncode:
            raise RuntimeError(f"ingest of the seeds failed: {seeded.stderr[-2000:]}")
        incoming = data.parent / f"{data.name}-incoming" if plan.data_dir else data / "incoming"
        incoming.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus_file(plan.papers, ROOT / "seeds", data / "synthetic-cache"), incoming / SYNTHETIC)
        expected = {p.paper_id for p in iter_papers([ROOT / "seeds", incoming], ParseReport())}
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server_log = data / "serve.log"
        with server_log.open("wb") as fh:
            server = subprocess.Popen([sys.executable, "-m", "rag", "serve", "--port", str(port), "--data-dir",
                                       str(data)], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        model = _wait_ready(url, server, server_log)
        log(f"serve ready on {url} ({model}); {plan.clients} clients for {plan.seconds:.0f} s, ingest of "
            f"{plan.papers} papers from {plan.ingest_after:.0f} s")
        questions, stop = _questions(), threading.Event()
        t0 = time.monotonic()
        threads = [threading.Thread(target=_client, args=(i, url, model, questions, plan, t0, stop, out.requests),
                                    daemon=True) for i in range(plan.clients)]
        for t in threads:
            t.start()
        time.sleep(min(plan.ingest_after, plan.seconds))
        started = time.monotonic()
        ingest = subprocess.Popen([sys.executable, "-m", "rag", "ingest", str(incoming), "--json", "--data-dir",
                                   str(data)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        time.sleep(max(0.0, plan.seconds - (time.monotonic() - t0)))
        stop.set()
        log(f"{plan.seconds:.0f} s up: {len(out.requests)} answers so far; finishing the ones in flight")
        stdout, stderr = ingest.communicate(timeout=3600)
        out.ingest = {"seconds": round(time.monotonic() - started, 1), "returncode": ingest.returncode,
                      "started_at_s": round(started - t0, 1), "within_window": time.monotonic() - t0 <= plan.seconds}
        if ingest.returncode == 0:
            summary_ = json.loads(stdout.strip().splitlines()[-1])
            out.ingest.update({k: summary_[k] for k in ("papers", "added", "embedded_chunks", "skipped")})
            out.ingest["papers_per_s"] = round(summary_["added"] / max(out.ingest["seconds"], 1e-9), 1)
        else:
            out.problems.append(f"ingest exited {ingest.returncode}: {stderr[-1000:]}")
        for t in threads:
            t.join(timeout=900)
        out.checks["chats_s"] = round(time.monotonic() - t0, 1)
        # The app follows the ingest without a restart: a question kept to the new file cites one of its papers.
        first = json.loads((incoming / SYNTHETIC).read_text(encoding="utf-8").splitlines()[0])["abstract"]
        asked = f"Which paper says that {split_sentences(first)[1].rstrip('.')}?"
        status, body = _chat(url, model, asked, plan.max_tokens, {"filters": {"sources": [SYNTHETIC]}})
        cited = (body.get("choices", [{}])[0].get("message", {}).get("citations") if status == 200 else None) or []
        out.checks["app_cites_new_papers"] = bool(cited) and all(c["source"] == SYNTHETIC for c in cited)
        out.checks["index"] = _check_index(data, expected, env)
        text = server_log.read_text(errors="replace")
        out.checks["server_tracebacks"] = text.count("Traceback")
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        if tmp is not None:
            tmp.cleanup()
    errors = [r for r in out.requests if r.error or r.status != 200]
    if errors:
        out.problems.append(f"{len(errors)} of {len(out.requests)} requests failed, e.g. {errors[0]}")
    index = out.checks.get("index", {})
    if "error" in index:
        out.problems.append(f"index check failed: {index['error']}")
    elif (index["lost_count"], index["unexpected"], index["without_chunks"], index["orphan_chunk_papers"]) != \
            (0, [], 0, 0) or not index["chunk_ids_unique"] or not index["bm25_matches_store"] or \
            index["catalog_rows"] != index["expected"]:
        out.problems.append(f"index not exactly the seeds and the new papers: {index}")
    if not out.checks.get("app_cites_new_papers"):
        out.problems.append("the app did not answer from the new papers after the ingest")
    if out.checks.get("server_tracebacks"):
        out.problems.append(f"{out.checks['server_tracebacks']} traceback(s) in the app's log")
    return out


def report(plan: Plan, out: Outcome, command: str, before: dict[str, Any], load_after: float) -> dict[str, Any]:
    ok = [r.latency for r in out.requests if not r.error and r.status == 200]
    during = [r.latency for r in out.requests if not r.error and out.ingest
              and out.ingest["started_at_s"] <= r.sent <= out.ingest["started_at_s"] + out.ingest["seconds"]]
    return {"command": command, "machine": {"cpu": before["cpu"], "usable_cores": before["usable_cores"],
                                            "load_average_1m_before": before["load_average_1m"],
                                            "load_average_1m_after": round(load_after, 2)},
            "plan": {k: str(v) if isinstance(v, Path) else v for k, v in plan.__dict__.items()},
            "requests": len(out.requests), "errors": sum(bool(r.error) or r.status != 200 for r in out.requests),
            "latency_s": summary(ok), "latency_while_ingesting_s": summary(during),
            "answers_per_min": round(len(ok) / max(out.checks.get("chats_s", 1.0), 1e-9) * 60, 1),
            "ingest": out.ingest, "checks": out.checks, "problems": out.problems}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0],
                                epilog="example: flock /tmp/heavy.lock python -m bench.load --seconds 300 "
                                       "--clients 16 --papers 1000 --threads 1")
    p.add_argument("--seconds", type=float, default=300.0, help="how long the clients keep asking")
    p.add_argument("--clients", type=int, default=16, help="concurrent chats")
    p.add_argument("--papers", type=int, default=1000, help="synthetic papers the concurrent ingest adds")
    p.add_argument("--ingest-after", type=float, default=10.0, help="seconds of chats before the ingest starts")
    p.add_argument("--threads", type=int, default=1, help="the app's llama.cpp threads (RAG_GENERATION_N_THREADS)")
    p.add_argument("--max-tokens", type=int, default=0, help="per answer (0 = the app's default)")
    p.add_argument("--data-dir", type=Path, help="a new folder for the index (default: temporary)")
    p.add_argument("--out", type=Path, help="write the result as JSON here too")
    args = p.parse_args(argv)
    plan = Plan(seconds=args.seconds, clients=args.clients, papers=args.papers, ingest_after=args.ingest_after,
                threads=args.threads, data_dir=args.data_dir, max_tokens=args.max_tokens)
    command = "python -m bench.load " + shlex.join(argv if argv is not None else sys.argv[1:])
    before = machine()
    print(f"{before['cpu']}, {before['usable_cores']} usable cores, load average {os.getloadavg()}", flush=True)
    out = run(plan, log=lambda line: print(line, flush=True))
    result = report(plan, out, command, before, os.getloadavg()[0])
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    for problem in out.problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if out.problems else 0


if __name__ == "__main__":
    sys.exit(main())
