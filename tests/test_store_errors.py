"""An index the settings cannot use: a damaged catalog, another embedding model, other chunking settings, a query
vector of the wrong size. Each is one StoreError that names the fix, raised before any query."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import corpus_settings

from rag.index import IndexPaths, open_store
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import StoreError


def test_a_damaged_catalog_is_a_clear_error_with_the_fix(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    IndexPaths.of(s).catalog.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"catalog.sqlite: cannot open the paper catalog \(file is not a database\); "
                                         r"it is damaged: rebuild the index with `python -m rag ingest --rebuild`"):
        build_index(s, HashEmbedder())
    assert build_index(s, HashEmbedder(), rebuild=True).papers == 38


def test_another_embedding_model_is_a_clear_error_before_any_query(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
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
    """An index built with other chunking settings (or an older default) is not read, and is left as it is: the error
    names it and the `ingest` command, with the inputs it was built from, that builds one for these settings; that
    ingest notes the old one."""
    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    old = f"index-{s.fingerprint()}"
    other = corpus_settings(tmp_path, corpus, **{"chunking.max_tokens": 96})
    with pytest.raises(StoreError) as e:
        Assistant(other, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage")
    assert f"no index for these chunking and embedding settings yet (fingerprint {other.fingerprint()})" in str(e.value)
    assert f"the one here ({old}) was built with others" in str(e.value)
    assert f"run `python -m rag ingest {corpus.resolve()}` to build one for these settings" in str(e.value)
    with pytest.raises(StoreError) as e:
        open_store(other, HashEmbedder(), create=False)
    assert "no index" in str(e.value) and "chunking max_tokens=128, overlap_sentences=1" in str(e.value)
    assert "Run `python -m rag ingest` to build one for these settings" in str(e.value)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "one.txt").write_text("A short abstract about graph neural networks for molecules.\n", encoding="utf-8")
    built = build_index(other, HashEmbedder(), paths=[extra])
    assert [str(n) for n in built.notes] == [
        f"{old}: an index built with other chunking or embedding settings, left as it is; to index its papers here "
        f"too: python -m rag ingest {corpus.resolve()}"]
    assert build_index(s, HashEmbedder()).papers == 38  # the old index is whole, and read with its settings
    assert not build_index(other, HashEmbedder()).notes  # said once, when the new index is made
    again = corpus_settings(tmp_path, corpus, **{"chunking.max_tokens": 64})
    missed = build_index(again, HashEmbedder())  # the seeds read again, the extra folder not
    assert [n.reason.rsplit(": ", 1)[1] for n in missed.notes] == [f"python -m rag ingest {extra.resolve()}"]
    third = corpus_settings(tmp_path, corpus, **{"chunking.max_tokens": 48})
    assert not build_index(third, HashEmbedder(), paths=[corpus, extra]).notes  # every input read again


def test_a_query_vector_of_the_wrong_size_is_a_store_error(tmp_path: Path, corpus: Path) -> None:
    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    with pytest.raises(StoreError, match="query failed"):
        open_store(s, HashEmbedder(), create=False).query(np.ones(64, dtype=np.float32), 3)
