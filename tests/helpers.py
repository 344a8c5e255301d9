"""What tests import by name: paths, settings on a temporary data folder, free ports, servers run until ready, the
launched app, a read-only folder, and the checks several ingest tests share. Fixtures and hooks stay in conftest.py.

Importing this module also sets the offline variables (when unset) and installs the network guard: any connection to
a non-loopback address fails at once, so a test that would reach the network fails instead of hanging (and proves the
suite runs offline). conftest.py imports it, and so does every child process that runs these helpers (the crash
tests' forkserver, the writer-lock scripts), so the guard holds there too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag.config import Settings, load

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
FILE_A, FILE_B = "000_938f08ec0059db85.txt", "003_fcd762a5da0c7c9c.txt"  # the two seed files, 19 papers each
LONG_QUESTION = "How much does PrivGate reduce privacy leakage? " * 2200  # still on topic once truncated

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback(address: object) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    host = str(address[0])
    if host in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests are offline: refused connection to {address!r}")
    return _real_connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests are offline: refused connection to {address!r}")
    return _real_connect_ex(self, address)  # type: ignore[arg-type]


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


def make_settings(data_dir: Path, **flags: object) -> Settings:
    return load(flags={"paths.data_dir": data_dir, "paths.seeds_dir": SEEDS, **flags}, env={})


def seeded_assistant(data_dir: Path, generator: Any = None) -> Any:
    """An Assistant over an index of the seeds built in `data_dir` with the fake embedder (the model-free benches'
    set-up); `generator` defaults to a ScriptedGenerator."""
    from fakes import HashEmbedder, ScriptedGenerator

    from rag.indexer import build_index
    from rag.pipeline import Assistant

    s = make_settings(data_dir)
    emb = HashEmbedder()
    build_index(s, emb)
    return Assistant(s, embedder=emb, generator=generator or ScriptedGenerator())


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_only_shell(folder: Path, script: str) -> list[str]:
    """A command running `script` (sh) with `folder` read-only even for root, who runs CI and whom chmod does not
    stop: a read-only bind mount in a private mount namespace (`unshare -m`). Checked first: if this machine
    cannot do it, the test is skipped, which CI counts as a failure. A non-root user gets `chmod -R a-w` instead."""
    if os.geteuid() != 0:
        return ["sh", "-c", f"chmod -R a-w {folder} && {{ {script}; }}; rc=$?; chmod -R u+w {folder}; exit $rc"]
    probe = folder.parent / f".ro-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        check = f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && ! touch {probe}/x 2>/dev/null"
        ok = shutil.which("unshare") is not None and subprocess.run(
            ["unshare", "-m", "sh", "-c", check], capture_output=True).returncode == 0
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if not ok:
        pytest.skip("cannot make a folder read-only for root here: `unshare -m` and a read-only bind mount failed")
    return ["unshare", "-m", "sh", "-c", f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && "
            f"{{ {script}; }}"]


@contextlib.contextmanager
def server_process(cmd: list[str], ready_url: str, log: Path, timeout: float) -> Iterator[None]:
    """Run a server (Chroma, llama_cpp.server) until `ready_url` answers 200; fail with its log if it does not."""
    import httpx

    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{cmd[:3]} exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd[:3]} did not answer in {timeout:.0f} s: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def running_app(seeded: Settings, max_tokens: int,
                queue_size: int | None = None) -> Iterator[tuple[str, Any, Settings]]:
    """(url, the app's Assistant, settings): the real app on a free 127.0.0.1 port over the seeded index."""
    import ui.app as U
    from rag.pipeline import Assistant, ingest

    settings = seeded.with_values({"generation.max_tokens": max_tokens})
    if queue_size is not None:
        settings = settings.with_values({"ui.queue_size": queue_size})
    ingest(settings)  # idempotent: a no-op on the seeded index, a full ingest if run on its own
    assistant = Assistant(settings)
    assistant.warm()
    app = U.build_app(assistant, settings)
    port = free_port()
    U.launch(app, settings, port=port, block=False)
    try:
        yield f"http://127.0.0.1:{port}/", assistant, settings
    finally:
        app.close()


def corpus_settings(tmp_path: Path, corpus: Path, **flags: object) -> Settings:
    """Settings on `tmp_path / "data"` that ingest `corpus` (a copy of the seeds, or a folder a test wrote)."""
    return make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus, **flags})


def consistent_counts(s: Settings) -> tuple[int, int]:
    """Every chunk belongs to a catalogued paper and every paper has chunks; returns (papers, chunks)."""
    from fakes import HashEmbedder

    from rag.catalog import Catalog
    from rag.index import IndexPaths, open_store

    ip = IndexPaths.of(s)
    catalog = Catalog(ip.catalog)
    chunks = open_store(s, HashEmbedder(), create=False).all_chunks()
    ids = catalog.ids()
    assert {pid for _, pid, _ in chunks} == ids
    assert len({cid for cid, _, _ in chunks}) == len(chunks)
    catalog.close()
    return len(ids), len(chunks)
