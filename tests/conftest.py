"""Hooks and fixtures: settings on a temporary folder, a seeded index on the real embedder, a copy of the seeds.

What tests import by name (paths, make_settings, free ports, servers, the launched app) is in helpers.py, which also
installs the network guard (any non-loopback connection fails at once); importing it here puts the guard on every run.

Under CI (the `CI` variable non-empty) a skipped test is a failure, its reason shown: whatever a test needs is
installed by `pyproject.toml`'s [test] extra or `scripts/test.sh`, so a skip there means a guarantee went unchecked.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import SEEDS, make_settings

from rag.config import Settings


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
