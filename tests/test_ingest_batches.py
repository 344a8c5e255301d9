"""Ingest in batches: Chroma's batch limit holds for any number of chunks, and a failing batch (the embedder or the
store) is reported while the rest is stored, the next run embedding only what is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder
from helpers import FILE_A, consistent_counts, corpus_settings, make_settings

from rag.indexer import build_index
from rag.records import Chunk
from rag.store import ChunkStore


@pytest.mark.slow
def test_store_upserts_more_than_chromas_max_batch(tmp_path: Path) -> None:
    store = ChunkStore(tmp_path / "chroma", "chunks-batch", "fake", 8)
    n = store.max_batch() + 100  # 5461 + 100 on the embedded store; one Chroma call would refuse it
    chunks = [Chunk(f"p{i % 50}:{i}", f"p{i % 50}", i, f"text {i}", 0, 1) for i in range(n)]
    vectors = np.random.default_rng(0).random((n, 8), dtype=np.float32)
    store.upsert(chunks, vectors, [{"source": "a.txt", "has_code": False}] * n)
    assert store.count() == n
    store.delete_papers([f"p{i}" for i in range(50)])
    assert store.count() == 0


def test_ingest_calls_chroma_in_batches_no_larger_than_its_limit(tmp_path: Path, corpus: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real_init = ChunkStore.__init__

    def init(self: ChunkStore, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        real_upsert = self._col.upsert

        def upsert(**kw: Any) -> Any:
            sizes.append(len(kw["ids"]))
            return real_upsert(**kw)

        self._col.upsert = upsert  # type: ignore[method-assign,assignment]

    monkeypatch.setattr(ChunkStore, "__init__", init)
    monkeypatch.setattr(ChunkStore, "max_batch", lambda self: 7)
    summary = build_index(corpus_settings(tmp_path, corpus), HashEmbedder())
    assert sum(sizes) == summary.chunks and max(sizes) == 7


class FailingEmbedder(HashEmbedder):
    def __init__(self, fail_on: int) -> None:
        super().__init__()
        self.fail_on = fail_on

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.calls + 1 == self.fail_on:
            self.calls += 1
            raise RuntimeError("CUDA out of memory (simulated)")
        return super().embed(texts)


@pytest.mark.parametrize("where", ["embedder", "store"])
def test_a_failing_batch_is_reported_and_the_next_run_completes(tmp_path: Path, corpus: Path, where: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    s = corpus_settings(tmp_path, corpus)
    clean = build_index(make_settings(tmp_path / "clean", **{"paths.seeds_dir": corpus}), HashEmbedder(),
                        batch_papers=4)
    if where == "embedder":
        emb: HashEmbedder = FailingEmbedder(fail_on=3)
    else:
        emb = HashEmbedder()
        calls = {"n": 0}
        real = ChunkStore.upsert

        def flaky(self: ChunkStore, *a: Any) -> None:
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError(28, "No space left on device (simulated)")
            real(self, *a)

        monkeypatch.setattr(ChunkStore, "upsert", flaky)
    failed = build_index(s, emb, batch_papers=4)
    assert failed.failed_batches == 1
    reason = ("RuntimeError: CUDA out of memory (simulated)" if where == "embedder"
              else "OSError: [Errno 28] No space left on device (simulated)")
    assert [str(x) for x in failed.skipped] == [f"{FILE_A}: storing 4 papers (read up to #12 of the file) failed "
                                                f"({reason}); the papers before them are stored, the rest are "
                                                "retried on the next run"]
    assert failed.papers == 8 + 19  # two batches of the first file, all of the second: nothing else lost
    assert consistent_counts(s) == (failed.papers, failed.chunks)
    monkeypatch.undo()
    done = build_index(s, HashEmbedder(), batch_papers=4)
    assert (done.papers, done.chunks, done.failed_batches, done.skipped) == (38, clean.chunks, 0, [])
    assert done.embedded_chunks == clean.chunks - failed.chunks  # only what was missing
    assert consistent_counts(s) == (38, clean.chunks)
