"""Ingest when the sources change: a removed file (and --keep-removed), a moved file, a new title; rebuilds over
several source folders that refuse to drop the others unless told; an index from before namespaces; a collection that
lost chunks, named by info, search and ask and repaired by ingest and serve.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import FILE_A, FILE_B, ROOT, consistent_counts, corpus_settings

from rag.catalog import Catalog
from rag.index import IndexPaths
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import StoreError
from rag.retrieve import Filters
from rag.store import ChunkStore

PY = sys.executable


def test_removed_file_is_kept_with_keep_removed_and_reported(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
    first = build_index(s, HashEmbedder())
    (corpus / FILE_B).unlink()
    kept = build_index(s, HashEmbedder(), keep_removed=True)
    assert (kept.papers, kept.chunks, kept.removed, kept.embedded_chunks) == (38, first.chunks, 0, 0)
    assert [str(n) for n in kept.notes] == [f"{FILE_B}: file no longer present; its papers kept (--keep-removed)"]
    gone = build_index(s, HashEmbedder())
    assert (gone.papers, gone.removed) == (19, 19)
    assert f"{FILE_B}: file no longer present; removed its 19 papers" in [str(n) for n in gone.notes]
    assert consistent_counts(s) == (19, gone.chunks)


def _two_sources(tmp_path: Path, corpus: Path) -> tuple[Any, Path]:
    """An index of two folders: the corpus (FILE_A, 19 papers) and `other` (FILE_B, 19 papers)."""
    other = tmp_path / "other"
    other.mkdir()
    (corpus / FILE_B).rename(other / FILE_B)
    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder(), paths=[corpus])
    both = build_index(s, HashEmbedder(), paths=[other])
    assert both.papers == 38
    return s, other


def test_rebuild_without_paths_rereads_every_stored_source(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    before = consistent_counts(s)
    again = build_index(s, HashEmbedder(), rebuild=True)
    assert (again.papers, again.added) == (38, 38) and sorted(again.files) == [FILE_A, FILE_B]
    assert consistent_counts(s) == before


def test_rebuild_with_paths_refuses_to_drop_other_sources_unless_told(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    before = consistent_counts(s)
    with pytest.raises(StoreError, match=rf"would drop the papers of 1 source.*{FILE_B} \(19 papers, from "
                                         rf"{other}\).*--drop-others"):
        build_index(s, HashEmbedder(), paths=[corpus], rebuild=True)
    assert consistent_counts(s) == before  # refused before anything was dropped
    kept = build_index(s, HashEmbedder(), paths=[corpus, other], rebuild=True)
    assert kept.papers == 38
    dropped = build_index(s, HashEmbedder(), paths=[corpus], rebuild=True, drop_others=True)
    assert dropped.papers == 19 and dropped.files == [FILE_A]
    assert consistent_counts(s) == (19, dropped.chunks)


def test_rebuild_names_a_kept_removed_file_it_cannot_read_again(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    (corpus / FILE_B).unlink()
    build_index(s, HashEmbedder(), keep_removed=True)  # its 19 papers stay, from a file that is gone
    with pytest.raises(StoreError, match=rf"{FILE_B} \(19 papers; {corpus / FILE_B} is gone\)"):
        build_index(s, HashEmbedder(), rebuild=True)
    assert consistent_counts(s)[0] == 38
    assert build_index(s, HashEmbedder(), rebuild=True, drop_others=True).papers == 19


def test_the_cli_refuses_a_rebuild_that_drops_sources_in_one_line(tmp_path: Path, corpus: Path) -> None:
    s, other = _two_sources(tmp_path, corpus)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_DATA_DIR": str(s.paths.data_dir)}
    done = subprocess.run([PY, "-m", "rag", "ingest", "--rebuild", str(corpus)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith("error: ingest --rebuild would drop") and done.stderr.count("\n") == 1
    assert FILE_B in done.stderr and "--drop-others" in done.stderr
    assert consistent_counts(s)[0] == 38


def test_an_index_built_before_namespaces_keeps_its_collection_until_rebuilt(tmp_path: Path, corpus: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from rag import indexer

    s = corpus_settings(tmp_path, corpus, **{"store.retire_grace_s": 0})
    with monkeypatch.context() as m:  # as the code before namespaces built it: no id in the catalog
        m.setattr(indexer, "_new_namespace", lambda: "")
        old = build_index(s, HashEmbedder())
    ip = IndexPaths.of(s)
    assert old.collection == ip.collection == f"chunks-{s.fingerprint()}"
    assert build_index(s, HashEmbedder()).collection == old.collection  # an ingest keeps the old name
    hits = Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage").hits
    assert hits and consistent_counts(s) == (38, old.chunks)
    moved = build_index(s, HashEmbedder(), rebuild=True)  # the way to a namespaced collection (a new generation)
    assert moved.collection == IndexPaths.of(s).collection != old.collection
    assert moved.collection.startswith(old.collection + "-") and (moved.papers, moved.chunks) == (38, old.chunks)
    assert not ip.catalog.exists()  # no reader held the old one: the rebuild collected it
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


class Gate:
    """Stands in for ui.startup.Starting: records which parts of the app were installed."""

    def __init__(self, installed: list[str]) -> None:
        self.installed = installed

    def install(self, which: str, app: Any) -> None:
        self.installed.append(which)


@pytest.mark.slow
def test_serve_repairs_a_collection_missing_chunks_and_says_so(seeded, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """`serve` ingests first: the papers whose chunks are gone are embedded again and it logs a warning saying so
    (the app itself is not served here, nor the model loaded)."""
    from rag.catalog import read_meta
    from ui import app as U
    from ui import startup

    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    s = seeded.with_values({"paths.data_dir": data})
    ip = IndexPaths.of(s)
    store = ChunkStore(ip.chroma, ip.collection, str(read_meta(ip.catalog, "embedding_model")), 384, create=False)
    store.delete_papers(sorted(store.paper_ids())[:3])
    served: list[Any] = []
    monkeypatch.setattr(U.Assistant, "warm", lambda self: served.append(self.retriever.store.count()))
    monkeypatch.setattr(U, "build_app", lambda *args: None)
    monkeypatch.setattr(U, "served_app", lambda *args: None)
    installed: list[str] = []
    startup.prepare(s, Gate(installed))  # type: ignore[arg-type]
    assert installed == ["api", "ui"]
    assert "index: " in caplog.text and "3 papers had no chunks in the store; embedded again" in caplog.text
    assert served == [int(str(read_meta(ip.catalog, "chunks")))]


def test_moved_file_keeps_its_vectors_and_follows_the_new_name(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
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
    s = corpus_settings(tmp_path, corpus)
    first = build_index(s, HashEmbedder())
    row["title"] = "Short"  # same abstract (same paper id), more room per window: fewer chunks
    (corpus / "a.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    second = build_index(s, HashEmbedder())
    assert second.refreshed == 1 and second.chunks < first.chunks
    assert consistent_counts(s) == (1, second.chunks)
    cat = Catalog(IndexPaths.of(s).catalog)
    assert [p.title for p in cat.iter_papers()] == [row["title"]]
