"""Start-up as a user waits for it: `ask` (and `search`, the same without the language model) as whole-process wall
time, and `serve` from launch to its first HTTP 200 and to its first answer through the `/chat` API (gradio_client,
as any client would call it).

Each figure is the median of `--repeats` fresh processes, run one after another on an index that already exists
(`python -m rag ingest --data-dir D` first: `serve` re-checks the seeds, which embeds nothing when they are
unchanged). The page cache is warm, so this is a process cold start, not a disk cold start. The CPU is printed with
the figures; nothing here asserts a time.

    python -m bench.startup --data-dir /tmp/startup-data --repeats 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .measure import median

QUESTION = "How much does PrivGate reduce privacy leakage?"
ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """`lscpu`'s model name (what the figures were taken on)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_cpu_s() -> float:
    """User + system CPU seconds of the waited-for children so far: a figure that a busy machine inflates far less
    than wall time, printed beside it."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ask_once(data_dir: Path, question: str, command: str = "ask") -> tuple[float, float, dict[str, Any]]:
    """Seconds from spawning `python -m rag ask --json` (or `search`) to its exit, its CPU seconds, and what it
    printed."""
    cmd = [sys.executable, "-m", "rag", command, question, "--json", "--data-dir", str(data_dir)]
    cpu = children_cpu_s()
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, children_cpu_s() - cpu, json.loads(done.stdout.strip().splitlines()[-1])


def serve_once(data_dir: Path, question: str, timeout: float = 300.0) -> dict[str, Any]:
    """Launch `python -m rag serve`, poll until `/` answers 200, then ask one question through `/chat`."""
    import httpx
    from gradio_client import Client  # imported before the launch: the client's own import is not the app's time

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "rag", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    log = data_dir / f"serve-{port}.log"
    cpu = children_cpu_s()
    with log.open("w") as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        first_200 = None
        while first_200 is None:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            if time.perf_counter() - t > timeout:
                raise RuntimeError(f"serve gave no 200 within {timeout:.0f} s")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code == 200:
                    first_200 = time.perf_counter() - t
                    break
            time.sleep(0.05)
        with contextlib.redirect_stdout(sys.stderr):  # the client prints "Loaded as API: ..."
            client = Client(url, verbose=False)
        answer = client.predict(question=question, api_name="/chat")
        first_answer = time.perf_counter() - t
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.unlink(missing_ok=True)
    return {"first_200_s": first_200, "first_answer_s": first_answer, "cpu_s": children_cpu_s() - cpu,
            "mode": answer.get("mode") if isinstance(answer, dict) else None}


def measure(data_dir: Path, repeats: int, question: str, only: set[str]) -> dict[str, Any]:
    res: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "repeats": repeats, "question": question,
                           "command": "python -m bench.startup " + shlex.join(sys.argv[1:]),
                           "load_average_before": round(os.getloadavg()[0], 2)}
    if "ask" in only:
        runs = [ask_once(data_dir, question) for _ in range(repeats)]
        # The answer's own total_ms covers retrieval to the last token; the rest of the wall time is start-up
        # (interpreter, imports, loading models and index) and exit.
        res["ask"] = {"wall_s": round(median([s for s, _, _ in runs]), 2),
                      "cpu_s": round(median([c for _, c, _ in runs]), 2),
                      "answer_s": round(median([a["timings"]["total_ms"] / 1000 for _, _, a in runs]), 2),
                      "outside_answer_s": round(median([s - a["timings"]["total_ms"] / 1000 for s, _, a in runs]), 2),
                      "runs_s": [round(s, 2) for s, _, _ in runs], "mode": runs[-1][2].get("mode"),
                      "command": f"python -m rag ask {shlex.quote(question)} --json --data-dir {data_dir}"}
    if "search" in only:  # the same start-up without the language model
        found = [ask_once(data_dir, question, "search") for _ in range(repeats)]
        res["search"] = {"wall_s": round(median([s for s, _, _ in found]), 2),
                         "cpu_s": round(median([c for _, c, _ in found]), 2),
                         "runs_s": [round(s, 2) for s, _, _ in found],
                         "command": f"python -m rag search {shlex.quote(question)} --json --data-dir {data_dir}"}
    if "serve" in only:
        runs2 = [serve_once(data_dir, question) for _ in range(repeats)]
        res["serve"] = {"first_200_s": round(median([r["first_200_s"] for r in runs2]), 2),
                        "first_answer_s": round(median([r["first_answer_s"] for r in runs2]), 2),
                        "cpu_s": round(median([r["cpu_s"] for r in runs2]), 2),
                        "runs_200_s": [round(r["first_200_s"], 2) for r in runs2],
                        "runs_answer_s": [round(r["first_answer_s"], 2) for r in runs2],
                        "mode": runs2[-1]["mode"],
                        "command": f"python -m rag serve --data-dir {data_dir} --port PORT"}
    res["load_average_after"] = round(os.getloadavg()[0], 2)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder with the seeds already ingested")
    p.add_argument("--repeats", type=int, default=5, help="fresh processes per figure (the median is reported)")
    p.add_argument("--question", default=QUESTION)
    p.add_argument("--only", default="ask,search,serve", help="any of ask, search, serve (comma-separated)")
    a = p.parse_args(argv)
    res = measure(a.data_dir.resolve(), a.repeats, a.question, set(a.only.split(",")))
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
