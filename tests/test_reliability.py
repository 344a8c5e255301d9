"""Reliability and security of the store, the model file and the running app (crash safety and bad input have
their own files).

Store: removed files (and --keep-removed), moved and retitled papers, one writer at a time across processes,
Chroma's batch limit, a failing batch, another embedding model or chunking. Model: missing, truncated, random or
crashing GGUF files fail in a child process with one clear error; chat templates render only in a sandbox; long
prompts are budgeted. App: loopback by default; no outbound connection while ingesting and answering.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import ROOT, SEEDS, make_settings

from rag import generate as G
from rag import gguf
from rag.catalog import Catalog
from rag.config import Generation, load
from rag.index import IndexPaths, check_unlocked, open_store
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import Chunk, ModelError, StoreError, StoreLockedError
from rag.retrieve import Filters
from rag.store import ChunkStore

PY = sys.executable
FILE_A, FILE_B = "000_938f08ec0059db85.txt", "003_fcd762a5da0c7c9c.txt"


def _settings(tmp_path: Path, corpus: Path, **flags: object) -> Any:
    return make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus, **flags})


def _consistent(s: Any) -> tuple[int, int]:
    """Every chunk belongs to a catalogued paper and every paper has chunks; returns (papers, chunks)."""
    ip = IndexPaths.of(s)
    catalog = Catalog(ip.catalog)
    chunks = open_store(s, HashEmbedder(), create=False).all_chunks()
    ids = catalog.ids()
    assert {pid for _, pid, _ in chunks} == ids
    assert len({cid for cid, _, _ in chunks}) == len(chunks)
    catalog.close()
    return len(ids), len(chunks)


# --- store and ingest -----------------------------------------------------------------------------------------------


def test_removed_file_is_kept_with_keep_removed_and_reported(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    first = build_index(s, HashEmbedder())
    (corpus / FILE_B).unlink()
    kept = build_index(s, HashEmbedder(), keep_removed=True)
    assert (kept.papers, kept.chunks, kept.removed, kept.embedded_chunks) == (38, first.chunks, 0, 0)
    assert [str(n) for n in kept.notes] == [f"{FILE_B}: file no longer present; its papers kept (--keep-removed)"]
    gone = build_index(s, HashEmbedder())
    assert (gone.papers, gone.removed) == (19, 19)
    assert f"{FILE_B}: file no longer present; removed its 19 papers" in [str(n) for n in gone.notes]
    assert _consistent(s) == (19, gone.chunks)


def _two_sources(tmp_path: Path, corpus: Path) -> tuple[Any, Path]:
    """An index of two folders: the corpus (FILE_A, 19 papers) and `other` (FILE_B, 19 papers)."""
    other = tmp_path / "other"
    other.mkdir()
    (corpus / FILE_B).rename(other / FILE_B)
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder(), paths=[corpus])
    both = build_index(s, HashEmbedder(), paths=[other])
    assert both.papers == 38
    return s, other


def test_rebuild_without_paths_rereads_every_stored_source(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    before = _consistent(s)
    again = build_index(s, HashEmbedder(), rebuild=True)
    assert (again.papers, again.added) == (38, 38) and sorted(again.files) == [FILE_A, FILE_B]
    assert _consistent(s) == before


def test_rebuild_with_paths_refuses_to_drop_other_sources_unless_told(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    before = _consistent(s)
    with pytest.raises(StoreError, match=rf"would drop the papers of 1 source.*{FILE_B} \(19 papers, from "
                                         rf"{other}\).*--drop-others"):
        build_index(s, HashEmbedder(), paths=[corpus], rebuild=True)
    assert _consistent(s) == before  # refused before anything was dropped
    kept = build_index(s, HashEmbedder(), paths=[corpus, other], rebuild=True)
    assert kept.papers == 38
    dropped = build_index(s, HashEmbedder(), paths=[corpus], rebuild=True, drop_others=True)
    assert dropped.papers == 19 and dropped.files == [FILE_A]
    assert _consistent(s) == (19, dropped.chunks)


def test_rebuild_names_a_kept_removed_file_it_cannot_read_again(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    (corpus / FILE_B).unlink()
    build_index(s, HashEmbedder(), keep_removed=True)  # its 19 papers stay, from a file that is gone
    with pytest.raises(StoreError, match=rf"{FILE_B} \(19 papers; {corpus / FILE_B} is gone\)"):
        build_index(s, HashEmbedder(), rebuild=True)
    assert _consistent(s)[0] == 38
    assert build_index(s, HashEmbedder(), rebuild=True, drop_others=True).papers == 19


def test_the_cli_refuses_a_rebuild_that_drops_sources_in_one_line(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_DATA_DIR": str(s.paths.data_dir)}
    done = subprocess.run([PY, "-m", "rag", "ingest", "--rebuild", str(corpus)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("error: ingest --rebuild would drop") and done.stderr.count("\n") == 1
    assert FILE_B in done.stderr and "--drop-others" in done.stderr
    assert _consistent(s)[0] == 38


def test_an_index_built_before_namespaces_keeps_its_collection_until_rebuilt(tmp_path: Path, corpus: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from rag import indexer

    s = _settings(tmp_path, corpus)
    with monkeypatch.context() as m:  # as the code before namespaces built it: no id in the catalog
        m.setattr(indexer, "_new_namespace", lambda: "")
        old = build_index(s, HashEmbedder())
    ip = IndexPaths.of(s)
    assert old.collection == ip.collection == f"chunks-{s.fingerprint()}"
    assert build_index(s, HashEmbedder()).collection == old.collection  # an ingest keeps the old name
    hits = Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage").hits
    assert hits and _consistent(s) == (38, old.chunks)
    moved = build_index(s, HashEmbedder(), rebuild=True)  # the way to a namespaced collection
    assert moved.collection == ip.collection != old.collection and moved.collection.startswith(old.collection + "-")
    assert (moved.papers, moved.chunks) == (38, old.chunks)
    build_index(s, HashEmbedder())  # the old collection is kept for readers until the next ingest collects it
    with pytest.raises(StoreError, match="no index"):
        ChunkStore(ip.chroma, old.collection, "fake-hash", 256, create=False)


@pytest.mark.slow
def test_info_search_and_ask_say_when_the_collection_disagrees_with_the_catalog(seeded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The real CLI on a copy of the seeded index whose collection lost five papers' chunks: one line each, naming
    the fix; `ingest` (the fix) embeds them again and search answers."""
    from rag.catalog import read_meta

    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    s = seeded.with_values({"paths.data_dir": data})
    ip = IndexPaths.of(s)
    store = ChunkStore(ip.chroma, ip.collection, str(read_meta(ip.catalog, "embedding_model")), 384, create=False)
    store.delete_papers(sorted(store.paper_ids())[:5])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_DATA_DIR": str(data)}
    for cmd in (["info"], ["search", "privacy leakage"], ["ask", "How much does PrivGate cut privacy leakage?"]):
        done = subprocess.run([PY, "-m", "rag", *cmd], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, (cmd, done.stdout, done.stderr)
        line = done.stderr.strip()
        assert "\n" not in line and line.startswith("error: ") and "disagrees with its catalog" in line, line
        assert "5 of 38 papers have no chunks" in line and "Run `python -m rag ingest`" in line, line
    fixed = subprocess.run([PY, "-m", "rag", "ingest", "--json"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert fixed.returncode == 0 and json.loads(fixed.stdout)["repaired"] == 5, fixed.stderr
    done = subprocess.run([PY, "-m", "rag", "search", "--json", "privacy leakage"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and json.loads(done.stdout)["hits"], done.stderr


@pytest.mark.slow
def test_serve_repairs_a_collection_missing_chunks_and_says_so(seeded, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """`serve` ingests first: the papers whose chunks are gone are embedded again and it logs a warning saying so
    (the app itself is not launched here)."""
    from rag.catalog import read_meta
    from ui import app as U

    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    s = seeded.with_values({"paths.data_dir": data})
    ip = IndexPaths.of(s)
    store = ChunkStore(ip.chroma, ip.collection, str(read_meta(ip.catalog, "embedding_model")), 384, create=False)
    store.delete_papers(sorted(store.paper_ids())[:3])
    served: list[Any] = []
    monkeypatch.setattr(U.Assistant, "warm", lambda self: served.append(self.retriever.store.count()))
    monkeypatch.setattr(U, "launch", lambda *a, **kw: None)
    U.serve(s)
    assert "index: " in caplog.text and "3 papers had no chunks in the store; embedded again" in caplog.text
    assert served == [int(str(read_meta(ip.catalog, "chunks")))]


def test_moved_file_keeps_its_vectors_and_follows_the_new_name(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    (corpus / FILE_B).rename(corpus / "renamed.txt")
    moved = build_index(s, HashEmbedder())
    assert (moved.papers, moved.embedded_chunks, moved.removed, moved.refreshed) == (38, 0, 0, 19)
    a = Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator())
    assert FILE_B not in a.catalog.sources()
    hits = a.search("privacy leakage", filters=Filters(sources=frozenset({"renamed.txt"}))).hits
    assert hits and all(h.paper.source == "renamed.txt" for h in hits)  # the chunk metadata follows too


def test_a_new_title_replaces_the_chunks_and_leaves_no_stale_ones(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    abstract = " ".join(f"Sentence {i} says something about sparse retrieval models and data." for i in range(12))
    row = {"title": " ".join(["A longer title about retrieval"] * 4), "abstract": abstract}  # eats window room
    (corpus / "a.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    s = _settings(tmp_path, corpus)
    first = build_index(s, HashEmbedder())
    row["title"] = "Short"  # same abstract (same paper id), more room per window: fewer chunks
    (corpus / "a.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    second = build_index(s, HashEmbedder())
    assert second.refreshed == 1 and second.chunks < first.chunks
    assert _consistent(s) == (1, second.chunks)
    cat = Catalog(IndexPaths.of(s).catalog)
    assert [p.title for p in cat.iter_papers()] == [row["title"]]


_HOLDER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = sys.argv[1:3]
    from pathlib import Path
    from helpers import make_settings
    from fakes import HashEmbedder
    from rag.indexer import build_index

    class Slow(HashEmbedder):
        def embed(self, texts):
            print("writing", flush=True)
            time.sleep(600)

    build_index(make_settings(Path(sys.argv[3]), **{"paths.seeds_dir": Path(sys.argv[4])}), Slow())
""")

_SECOND = textwrap.dedent("""
    import sys, time
    sys.path[:0] = sys.argv[1:3]
    from pathlib import Path
    from helpers import make_settings
    from fakes import HashEmbedder
    from rag.indexer import build_index
    from rag.records import StoreLockedError

    flags = {"paths.seeds_dir": Path(sys.argv[4]), "chunking.max_tokens": int(sys.argv[5])}
    t = time.perf_counter()
    try:
        build_index(make_settings(Path(sys.argv[3]), **flags), HashEmbedder())
        print("built", flush=True)
    except StoreLockedError as e:
        print(f"locked after {time.perf_counter() - t:.3f}s: {e}", flush=True)
""")


def _python(script: str, *args: object, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-c", script, str(ROOT / "tests"), str(ROOT), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_second_writer_fails_fast_with_a_clear_message(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    holder = _python(_HOLDER, data, corpus)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "writing"
        # Same index, and another chunking (another collection in the same Chroma folder): both refused at once.
        for max_tokens in (128, 96):
            t = time.perf_counter()
            out, err = _python(_SECOND, data, corpus, max_tokens).communicate(timeout=60)
            assert out.startswith("locked after "), err
            assert f"being written by process {holder.pid}; wait for it to finish or use another --data-dir" in out
            assert float(out.split()[2].rstrip("s:")) < 1.0 and time.perf_counter() - t < 15
        with pytest.raises(StoreLockedError, match=f"process {holder.pid}"):  # the check before loading models
            check_unlocked(make_settings(data, **{"paths.seeds_dir": corpus}))
    finally:
        holder.kill()  # SIGKILL: the kernel drops the lock with the process
        holder.wait()
    out, err = _python(_SECOND, data, corpus, 128).communicate(timeout=120)
    assert out.strip() == "built", err
    assert _consistent(make_settings(data, **{"paths.seeds_dir": corpus}))[0] == 38


@pytest.mark.slow
def test_the_cli_refuses_to_ingest_while_another_process_writes(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    holder = _python(_HOLDER, data, corpus)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "writing"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t = time.perf_counter()
        done = subprocess.run([PY, "-m", "rag", "ingest", str(corpus), "--data-dir", str(data)], env=env,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        seconds = time.perf_counter() - t
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {data}: the index is being written by process {holder.pid}; wait for it to finish or use another "
        "--data-dir")
    assert seconds < 120, f"took {seconds:.0f}s"


def test_a_damaged_catalog_is_a_clear_error_with_the_fix(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    IndexPaths.of(s).catalog.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"catalog.sqlite: cannot open the paper catalog \(file is not a database\); "
                                         r"it is damaged: rebuild the index with `python -m rag ingest --rebuild`"):
        build_index(s, HashEmbedder())
    assert build_index(s, HashEmbedder(), rebuild=True).papers == 38


def test_writer_lock_in_process_is_exclusive_and_reentrant_after_release(tmp_path: Path, corpus: Path) -> None:
    from rag.lock import writer_lock

    s = _settings(tmp_path, corpus)
    with writer_lock(IndexPaths.of(s).lock_folder):
        with pytest.raises(StoreLockedError, match="being written by process"):
            build_index(s, HashEmbedder())
    assert build_index(s, HashEmbedder()).papers == 38


def test_the_app_rebuilds_bm25_in_memory_while_ingest_writes(tmp_path: Path, corpus: Path) -> None:
    from rag.index import lexical_for_reading
    from rag.lock import writer_lock

    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    ip = IndexPaths.of(s)
    shutil.rmtree(ip.lexical)  # missing (or stale): the app has to rebuild it
    store, catalog = open_store(s, HashEmbedder(), create=False), Catalog(ip.catalog)
    with writer_lock(ip.lock_folder):  # an ingest is running
        assert len(lexical_for_reading(s, store, catalog)) == store.count()
        assert not ip.lexical.exists()  # nothing written under the writer's feet
    assert len(lexical_for_reading(s, store, catalog)) == store.count() and ip.lexical.exists()


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
    summary = build_index(_settings(tmp_path, corpus), HashEmbedder())
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
    s = _settings(tmp_path, corpus)
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
    assert _consistent(s) == (failed.papers, failed.chunks)
    monkeypatch.undo()
    done = build_index(s, HashEmbedder(), batch_papers=4)
    assert (done.papers, done.chunks, done.failed_batches, done.skipped) == (38, clean.chunks, 0, [])
    assert done.embedded_chunks == clean.chunks - failed.chunks  # only what was missing
    assert _consistent(s) == (38, clean.chunks)


def test_another_embedding_model_is_a_clear_error_before_any_query(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    other_dim = Assistant(s, embedder=HashEmbedder(dim=128), generator=ScriptedGenerator())
    with pytest.raises(StoreError, match=r"built with embedding model 'fake-hash' \(dim 256\), not 'fake-hash' "
                                         r"\(dim 128\); re-ingest with `python -m rag ingest --rebuild`"):
        other_dim.search("privacy leakage")
    renamed = HashEmbedder()
    renamed.name = "other-model"
    with pytest.raises(StoreError, match="not 'other-model'"):
        Assistant(s, embedder=renamed, generator=ScriptedGenerator()).ask("privacy leakage?")


def test_other_chunking_settings_are_a_clear_error_with_the_fix(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    other = _settings(tmp_path, corpus, **{"chunking.max_tokens": 96})
    with pytest.raises(StoreError, match="run `python -m rag ingest`"):
        Assistant(other, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage")
    with pytest.raises(StoreError) as e:
        open_store(other, HashEmbedder(), create=False)
    assert "no index" in str(e.value) and "chunking max_tokens=128, overlap_sentences=1" in str(e.value)
    assert "Run `python -m rag ingest` to build one for these settings" in str(e.value)


def test_a_query_vector_of_the_wrong_size_is_a_store_error(tmp_path: Path, corpus: Path) -> None:
    s = _settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    with pytest.raises(StoreError, match="query failed"):
        open_store(s, HashEmbedder(), create=False).query(np.ones(64, dtype=np.float32), 3)


# --- the model file -------------------------------------------------------------------------------------------------


def _gen(path: Path, **kw: Any) -> Generation:
    return Generation(model_path=str(path), **kw)


@pytest.mark.parametrize(("name", "data", "message"), [
    ("missing.gguf", None, "model file not found"),
    ("random.gguf", os.urandom(2 << 20), "not a GGUF model file (bad header)"),
    ("tiny.gguf", b"GGUF" + os.urandom(1000), "model file is only 1004 bytes; truncated?"),
    ("garbage.gguf", b"GGUF" + os.urandom(2 << 20), "llama.cpp cannot load this file (this GGUF file is version"),
    ("badkv.gguf", b"GGUF\x03\x00\x00\x00" + (1).to_bytes(8, "little") + (10**12).to_bytes(8, "little")
     + os.urandom(2 << 20), "llama.cpp cannot load this file"),
])
def test_bad_model_files_are_one_clear_error(tmp_path: Path, name: str, data: bytes | None, message: str) -> None:
    path = tmp_path / name
    if data is not None:
        path.write_bytes(data)
    with pytest.raises(ModelError) as e:
        G.LlamaGenerator(_gen(path))
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_a_crashing_or_hanging_load_stays_in_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + os.urandom(2 << 20))
    monkeypatch.setattr(gguf, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(ModelError, match=r"llama.cpp crashed reading this file \(signal 11\)"):
        G.LlamaGenerator(_gen(path))
    monkeypatch.setattr(gguf, "_PROBE", "import time; time.sleep(60)")
    t = time.perf_counter()
    with pytest.raises(ModelError, match="did not load within 1 s"):
        gguf.probe_gguf(path, timeout=1)
    assert time.perf_counter() - t < 10


@pytest.mark.slow
def test_a_truncated_real_model_is_rejected_and_a_good_one_probes_quickly(tmp_path: Path) -> None:
    good = gguf.default_model_path()
    cut = tmp_path / "cut.gguf"
    with good.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(good.stat().st_size // 2))
    with pytest.raises(ModelError, match="data is not within the file bounds, model is corrupted or incomplete"):
        G.LlamaGenerator(_gen(cut))
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(good, copy)
    t = time.perf_counter()
    gguf.probe_gguf(copy, timeout=60)
    probe_s = time.perf_counter() - t
    t = time.perf_counter()
    gguf.probe_gguf(copy, timeout=60)  # remembered: picking the model again costs nothing
    assert probe_s < 10 and time.perf_counter() - t < 0.05
    assert gguf.is_packaged_default(good) and not gguf.is_packaged_default(copy)


# --- chat templates -------------------------------------------------------------------------------------------------

ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.system('echo pwned') }}",
    "{{ messages.__class__.__base__ }}",
    "{% set _ = messages.append({'role': 'system', 'content': 'injected'}) %}ok",
    "{{ raise_exception.__globals__.os }}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_gguf_chat_templates_render_only_in_a_sandbox(template: str) -> None:
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(template, eos_token="</s>", bos_token="<s>")
    assert isinstance(formatter._environment.environment, ImmutableSandboxedEnvironment)
    with pytest.raises(SecurityError):
        formatter(messages=[{"role": "user", "content": "hi"}])


def test_llama_cpp_uses_the_sandboxed_formatter_for_gguf_templates() -> None:
    """What the test above relies on, read from the installed source: GGUF templates go to Jinja2ChatFormatter,
    which builds an ImmutableSandboxedEnvironment, and no plain jinja2 Environment is made anywhere."""
    import llama_cpp

    pkg = Path(llama_cpp.__file__).parent
    fmt, llama = (pkg / "llama_chat_format.py").read_text(), (pkg / "llama.py").read_text()
    assert "environment = ImmutableSandboxedEnvironment(" in fmt
    assert "llama_chat_format.Jinja2ChatFormatter(" in llama
    assert "jinja2.Environment(" not in fmt + llama and "from jinja2 import Environment" not in fmt + llama


@pytest.mark.slow
def test_a_gguf_whose_template_escapes_is_refused_and_never_runs(tmp_path: Path) -> None:
    good = gguf.default_model_path()
    data = bytearray(good.read_bytes())
    from llama_cpp import Llama

    template = Llama(model_path=str(good), vocab_only=True, verbose=False).metadata["tokenizer.chat_template"]
    marker = tmp_path / "pwned"
    evil = "{{ cycler.__init__.__globals__.os.system('touch " + str(marker) + "') }}"
    evil += "{#" + " " * (len(template.encode()) - len(evil.encode()) - 4) + "#}"  # same length: offsets unchanged
    at = data.find(template.encode())
    data[at : at + len(template.encode())] = evil.encode()
    path = tmp_path / "evil.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"its chat template was refused \(SecurityError: access to attribute "
                                         r"'__init__' of '\w+' object is unsafe"):
        G.LlamaGenerator(_gen(path, n_ctx=512))
    # Even with the probe off, llama-cpp-python renders it in its sandbox: refused, nothing ran.
    from jinja2.exceptions import SecurityError

    gen = G.LlamaGenerator(_gen(path, n_ctx=512, probe_timeout=0))
    with pytest.raises(SecurityError):
        list(gen.stream([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0.0))
    assert not marker.exists()


# --- prompts longer than the context ---------------------------------------------------------------------------------

LONG_QUESTION = "How much does PrivGate reduce privacy leakage? " * 2200  # still on topic once truncated


def test_a_100000_character_question_is_truncated_with_a_notice(tmp_path: Path, corpus: Path) -> None:
    assert len(LONG_QUESTION) > 100_000
    s = _settings(tmp_path, corpus, **{"generation.n_ctx": 512})
    build_index(s, HashEmbedder())
    gen = ScriptedGenerator(["PrivGate reduces privacy leakage by 62.6% [1]."], n_ctx=512)
    answer = Assistant(s, embedder=HashEmbedder(), generator=gen).ask(LONG_QUESTION)
    assert any("truncated" in n for n in answer.notices)
    assert len(answer.question) <= 1000 and gen.prompts and not answer.abstained
    for prompt in gen.prompts:  # what would have reached llama.cpp fits with room for the answer
        assert gen.count_tokens(prompt) + 16 <= gen.n_ctx


@pytest.mark.slow
def test_budgeted_prompts_fit_the_real_models_context() -> None:
    """The budget (answer.fit_budget, counting with LlamaGenerator.count_tokens) against the real chat template
    and tokenizer: a 1,000-character question (what is left of a 100,000-character one), eight long sources and
    three long earlier turns are cut to fit n_ctx = 512 with room for the answer, and llama.cpp accepts them."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from rag import answer as A
    from rag.parse import ParseReport, iter_papers
    from rag.prompts import load_prompts
    from rag.records import Evidence, Hit
    from rag.text import split_sentences

    gen = G.LlamaGenerator(Generation(n_ctx=512))
    prompts = load_prompts(make_settings(Path("unused")).paths.prompts_dir)
    papers = list(iter_papers([SEEDS], ParseReport()))[:8]
    blocks = [Evidence(n=i + 1, hit=Hit(paper=p, score=1.0), sentences=tuple(split_sentences(p.abstract)))
              for i, p in enumerate(papers)]
    question, notice = A.truncate_question(LONG_QUESTION)
    assert notice and len(question) <= 1000
    history = [{"role": r, "content": papers[i].abstract} for i in range(3) for r in ("user", "assistant")]
    budget = A.fit_budget(gen, prompts, blocks, question, history, max_tokens=64)
    assert budget.dropped_blocks or budget.dropped_turns
    llm = gen._llm
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"], "<|im_end|>", "")
    templated = formatter(messages=budget.messages).prompt  # type: ignore[arg-type]
    used = len(llm.tokenize(templated.encode(), add_bos=False, special=True))
    assert gen.count_tokens(budget.messages) >= used, "the budget must never undercount"
    assert used + budget.max_tokens <= 512, f"the templated prompt takes {used} tokens"
    assert list(gen.stream(budget.messages, 2, temperature=0.0))  # llama.cpp evaluates the whole prompt


# --- the app at run time --------------------------------------------------------------------------------------------


def test_the_app_listens_on_loopback_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.cli import build_parser, settings_from

    monkeypatch.chdir(tmp_path)  # no ./rag.toml
    for var in [v for v in os.environ if v.startswith("RAG_")]:
        monkeypatch.delenv(var)
    assert load(env={}).ui.host == "127.0.0.1"
    assert settings_from(build_parser().parse_args(["serve"])).ui.host == "127.0.0.1"


_OFFLINE_RUN = textwrap.dedent("""
    import ipaddress, json, sys
    log, out = [], sys.argv[1]

    def local(host):
        if host in (None, "", "localhost") or str(host).startswith("/"):
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    def hook(event, args):
        host = None
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            address = args[-1]
            host = address[0] if isinstance(address, tuple) else None
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
            host = args[0]
        elif event == "urllib.Request":
            host = args[0]
        else:
            return
        if not local(host):
            log.append(f"{event} {host!r}")
            with open(out, "w") as fh:
                json.dump(log, fh)
            raise ConnectionRefusedError(f"offline test: {event} to {host!r} refused")

    sys.addaudithook(hook)
    from rag.cli import main
    for argv in json.loads(sys.argv[2]):  # one process: the imports are paid once
        print(json.dumps({"argv": argv[0], "rc": main(argv)}), flush=True)
""")


@pytest.mark.slow
def test_no_outbound_connection_while_ingesting_and_answering(seeded: Any, tmp_path: Path) -> None:
    """The CLI in a child process whose non-loopback connections and name lookups are recorded and refused:
    ingest (real embedder), search, and ask (real GGUF) a question 100,000 characters long."""
    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "ANONYMIZED_", "GRADIO_", "RAG_"))}  # the app sets its own
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "outbound.json"
    questions = tmp_path / "q.txt"
    questions.write_text(LONG_QUESTION + "\n")
    flags = ["--data-dir", str(data)]
    runs = [["ingest", str(SEEDS), "--json", *flags], ["search", "symmetric multimodal retrieval", *flags],
            ["ask", "--questions-file", str(questions), "--json", "--max-tokens", "48", *flags]]
    done = subprocess.run([PY, "-c", _OFFLINE_RUN, str(log), json.dumps(runs)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600)
    assert not log.exists(), f"tried to reach the network: {log.read_text()}"
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(x["argv"], x["rc"]) for x in lines if "rc" in x] == [("ingest", 0), ("search", 0), ("ask", 0)]
    answers = [x for x in lines if "answer" in x]
    assert len(answers) == 1 and answers[0]["citations"] and len(answers[0]["question"]) <= 1000
    assert any("truncated" in n for n in answers[0]["notices"])


def test_the_offline_guard_itself_catches_a_connection(tmp_path: Path) -> None:
    log = tmp_path / "outbound.json"
    script = _OFFLINE_RUN.split("from rag.cli import main")[0] + textwrap.dedent("""
        import socket
        try:
            socket.socket().connect(("192.0.2.1", 80))
        except ConnectionRefusedError:
            pass
    """)
    subprocess.run([PY, "-c", script, str(log)], check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert json.loads(log.read_text()) == ["socket.connect '192.0.2.1'"]

