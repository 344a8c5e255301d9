"""The load bench in short (slow: the real app, model and embedder in three processes): 16 chats through the
OpenAI-compatible API of `python -m rag serve` while `python -m rag ingest` adds 100 papers, for 20 seconds. No
request fails, the index holds exactly the seeds and the new papers, and the app answers from them without a restart.
bench/RESULTS.md has the full run (5 minutes, 1,000 papers): `python -m bench.load`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.load import Plan, run


@pytest.mark.slow
def test_sixteen_chats_and_an_ingest_at_once_fail_nothing_and_lose_nothing(tmp_path: Path) -> None:
    out = run(Plan(seconds=20, clients=16, papers=100, ingest_after=3, threads=1, data_dir=tmp_path / "data"))
    assert out.problems == [], out.problems
    assert len(out.requests) >= 16 and out.ingest["added"] == 100
    assert out.checks["index"]["papers"] == 38 + 100 and out.checks["app_cites_new_papers"]
