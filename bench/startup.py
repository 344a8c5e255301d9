"""Start-up as a user waits for it: `ask` (and `search`, the same without the language model) as whole-process wall
time, and `serve` from launch to its first HTTP 200, to ready (`/v1/models` answers: models loaded, UI built) and to
its first answer through the `/chat` API (gradio_client, as any client would call it).

`serve` listens before it loads (ui/startup.py): its first 200 is the page saying the models are loading; requests
sent meanwhile wait for the app. An older `serve` answered its first 200 only once ready, so there the two agree.

Each figure is the median of `--repeats` fresh processes, run one after another on an index that already exists
(`python -m rag ingest --data-dir D` first: `serve` re-checks the seeds, which embeds nothing when they are
unchanged). The page cache is warm, so this is a process cold start, not a disk cold start. The CPU and the load
average are printed with the figures; nothing here asserts a time. `--tree NAME=DIR` (repeatable) runs
`python -m rag` from each source tree (e.g. a `git archive` of an older commit) in turn, run by run, so that their
figures come from the same minutes of the same machine and compare as ratios.

    python -m bench.startup --data-dir /tmp/startup-data --repeats 5
    python -m bench.startup --data-dir /tmp/startup-data --tree before=/tmp/before --tree after=. --only serve
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
import threading
import time
from pathlib import Path
from typing import Any

from .measure import median

QUESTION = "How much does PrivGate reduce privacy leakage?"
KINDS = ("ask", "search", "serve", "serve_api")
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


def ask_once(data_dir: Path, question: str, command: str = "ask",
             root: Path = ROOT) -> tuple[float, float, dict[str, Any]]:
    """Seconds from spawning `python -m rag ask --json` (or `search`) to its exit, its CPU seconds, and what it
    printed."""
    cmd = [sys.executable, "-m", "rag", command, question, "--json", "--data-dir", str(data_dir)]
    cpu = children_cpu_s()
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=False)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, children_cpu_s() - cpu, json.loads(done.stdout.strip().splitlines()[-1])


def serve_once(data_dir: Path, question: str, timeout: float = 300.0, root: Path = ROOT,
               client: str = "chat") -> dict[str, Any]:
    """Launch `python -m rag serve`, poll until `/` answers 200; then, at once, ask one question in a thread (through
    Gradio's `/chat` with gradio_client, or `client="api"`: `/v1/models` then `/v1/chat/completions`) while this
    thread polls `/` until it is the UI rather than the loading page."""
    import httpx
    from gradio_client import Client  # imported before the launch: the client's own import is not the app's time

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, "-m", "rag", "serve", "--data-dir", str(data_dir), "--port", str(port)]
    log = data_dir / f"serve-{port}.log"
    out: dict[str, Any] = {}

    def ask() -> None:
        try:
            if client == "api":
                models = httpx.get(url + "v1/models", timeout=timeout)  # waits while the models load
                models.raise_for_status()
                out["api_ready_s"] = time.perf_counter() - t
                got = httpx.post(url + "v1/chat/completions", timeout=timeout, json={
                    "model": models.json()["data"][0]["id"], "messages": [{"role": "user", "content": question}]})
                got.raise_for_status()
                out["first_answer_s"] = time.perf_counter() - t
                rag = got.json()["rag"]
                out["mode"], out["answer_total_ms"] = rag["mode"], rag["timings"]["total_ms"]
                return
            with contextlib.redirect_stdout(sys.stderr):  # the client prints "Loaded as API: ..."
                chat = Client(url, verbose=False, httpx_kwargs={"timeout": timeout})
            answer = chat.predict(question=question, api_name="/chat")
            out["first_answer_s"] = time.perf_counter() - t
            out["mode"], out["answer_total_ms"] = answer["mode"], answer["timings"]["total_ms"]
        except Exception as e:  # reported by the polling thread
            out["error"] = f"{type(e).__name__}: {e}"

    cpu = children_cpu_s()
    with log.open("w") as logfile:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    asking = threading.Thread(target=ask, daemon=True)
    try:
        while "first_200_s" not in out or "ui_ready_s" not in out:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            if time.perf_counter() - t > timeout:
                raise RuntimeError(f"serve gave no 200 within {timeout:.0f} s")
            with contextlib.suppress(httpx.HTTPError):
                got = httpx.get(url, timeout=5)
                if got.status_code == 200:
                    loading = b"is starting" in got.content
                    if "first_200_s" not in out:
                        out["first_200_s"], out["loading_page"] = time.perf_counter() - t, loading
                        asking.start()
                    if not loading:
                        out["ui_ready_s"] = time.perf_counter() - t
                        break
            time.sleep(0.05)
        asking.join(timeout)
        if "error" in out or "first_answer_s" not in out:
            raise RuntimeError(f"the question failed: {out.get('error')}: {log.read_text()[-2000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.unlink(missing_ok=True)
    return {**out, "cpu_s": children_cpu_s() - cpu}


def measure(data_dir: Path, repeats: int, question: str, only: set[str],
            trees: dict[str, Path] | None = None) -> dict[str, Any]:
    """The figures for each tree (default: this one), its runs interleaved with the other trees' runs."""
    trees = trees or {"this tree": ROOT}
    res: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count(), "repeats": repeats, "question": question,
                           "command": "python -m bench.startup " + shlex.join(sys.argv[1:]),
                           "trees": {name: str(root) for name, root in trees.items()},
                           "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    runs: dict[str, dict[str, list[Any]]] = {name: {w: [] for w in KINDS} for name in trees}
    for what in KINDS:
        if what not in only:
            continue
        res[f"load_average_before_{what}"] = [round(x, 2) for x in os.getloadavg()]
        for _ in range(repeats):
            for name, root in trees.items():
                runs[name][what].append(
                    serve_once(data_dir, question, root=root, client="api" if what == "serve_api" else "chat")
                    if what.startswith("serve") else ask_once(data_dir, question, what, root=root))
    for name in trees:
        res[name] = _figures(runs[name], data_dir, question)
    res["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return res


def _figures(runs: dict[str, list[Any]], data_dir: Path, question: str) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if asked := runs["ask"]:
        # The answer's own total_ms covers retrieval to the last token; the rest of the wall time is start-up
        # (interpreter, imports, loading models and index) and exit.
        res["ask"] = {"wall_s": round(median([s for s, _, _ in asked]), 2),
                      "cpu_s": round(median([c for _, c, _ in asked]), 2),
                      "answer_s": round(median([a["timings"]["total_ms"] / 1000 for _, _, a in asked]), 2),
                      "outside_answer_s": round(median([s - a["timings"]["total_ms"] / 1000 for s, _, a in asked]),
                                                2),
                      "runs_s": [round(s, 2) for s, _, _ in asked], "mode": asked[-1][2].get("mode"),
                      "command": f"python -m rag ask {shlex.quote(question)} --json --data-dir {data_dir}"}
    if found := runs["search"]:  # the same start-up without the language model
        res["search"] = {"wall_s": round(median([s for s, _, _ in found]), 2),
                         "cpu_s": round(median([c for _, c, _ in found]), 2),
                         "runs_s": [round(s, 2) for s, _, _ in found],
                         "command": f"python -m rag search {shlex.quote(question)} --json --data-dir {data_dir}"}
    for what, client in (("serve", "/chat (gradio_client)"), ("serve_api", "/v1/chat/completions")):
        if served := runs[what]:
            ready = "api_ready_s" if what == "serve_api" else "ui_ready_s"
            res[what] = {"first_200_s": round(median([r["first_200_s"] for r in served]), 2),
                         "first_200_is_loading_page": served[-1]["loading_page"],
                         "ui_ready_s": round(median([r["ui_ready_s"] for r in served]), 2),
                         **({"api_ready_s": round(median([r[ready] for r in served]), 2)} if ready != "ui_ready_s"
                            else {}),
                         "first_answer_s": round(median([r["first_answer_s"] for r in served]), 2),
                         "answer_s": round(median([r["answer_total_ms"] / 1000 for r in served]), 2),
                         "cpu_s": round(median([r["cpu_s"] for r in served]), 2),
                         "runs_200_s": [round(r["first_200_s"], 2) for r in served],
                         "runs_ui_ready_s": [round(r["ui_ready_s"], 2) for r in served],
                         "runs_answer_s": [round(r["first_answer_s"], 2) for r in served],
                         "mode": served[-1]["mode"], "asked_through": client,
                         "command": f"python -m rag serve --data-dir {data_dir} --port PORT"}
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder with the seeds already ingested")
    p.add_argument("--repeats", type=int, default=5, help="fresh processes per figure (the median is reported)")
    p.add_argument("--question", default=QUESTION)
    p.add_argument("--only", default="ask,search,serve,serve_api",
                   help="any of ask, search, serve (first answer through /chat), serve_api (through /v1)")
    p.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                   help="run `python -m rag` from this source tree (repeatable; runs alternate between trees)")
    a = p.parse_args(argv)
    trees = {name: Path(folder).resolve() for name, _, folder in (t.partition("=") for t in a.tree)} or None
    res = measure(a.data_dir.resolve(), a.repeats, a.question, set(a.only.split(",")), trees)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
