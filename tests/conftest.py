"""Shared fixtures: fakes, a seeded index on the real embedder, and a network guard.

The guard makes any connection to a non-loopback address fail at once, so a test that would reach the network
fails instead of hanging (and proves the suite runs offline).

Under CI (the `CI` variable non-empty) a skipped test is a failure, its reason shown: whatever a test needs is
installed by `pyproject.toml`'s [test] extra or `scripts/test.sh`, so a skip there means a guarantee went unchecked.
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


def _skips_fail() -> bool:
    return bool(os.environ.get("CI"))


def _as_failure(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skipped report into a failed one whose message is the skip's reason."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, which counts as a failure (CI={os.environ.get('CI')!r}): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped and not hasattr(report, "wasxfail"):
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped:  # a module-level skip or importorskip
        _as_failure(report)


def make_settings(data_dir: Path, **flags: object) -> Settings:
    return load(flags={"paths.data_dir": data_dir, "paths.seeds_dir": SEEDS, **flags}, env={})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "data")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The seeds ingested once with the real embedder into a session-wide data folder."""
    from rag.pipeline import ingest

    data = tmp_path_factory.mktemp("seeded")
    s = make_settings(data)
    ingest(s)
    return s


@pytest.fixture(scope="session")
def real_assistant(seeded: Settings):  # type: ignore[no-untyped-def]
    from rag.pipeline import Assistant

    assistant = Assistant(seeded)
    assistant.warm()
    return assistant


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A copy of the seeds to edit."""
    dst = tmp_path / "corpus"
    shutil.copytree(SEEDS, dst)
    return dst


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
