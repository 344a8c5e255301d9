"""Chroma client/server: a real `chroma run` on loopback, ingest and search through it, same hits as embedded;
data folders sharing the server keep to their own collections; a collection missing chunks is detected at open.

The embedder is the deterministic fake (this is about the store, not the vectors), so both stores hold identical
vectors and must return identical similarities for every chunk. Its bag-of-words vectors tie often, so rankings are
compared with ties in id order rather than through a top-k cut that either store may break differently.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import free_port, make_settings, server_process

from rag.index import IndexPaths, open_store
from rag.pipeline import Assistant, ingest
from rag.records import StoreError

pytestmark = pytest.mark.slow

QUESTIONS = [
    "How much does PrivGate reduce privacy leakage?",
    "symmetric multimodal retrieval",
    "transformation inversion on Lie groups",
    "distillation with hard and soft labels",
]


def _chroma_cli() -> str:
    """The `chroma` command chromadb (a dependency) installs next to this Python; never skipped when missing."""
    found = Path(sys.executable).parent / "chroma"
    cli = str(found) if found.exists() else (shutil.which("chroma") or "")
    assert cli, f"no `chroma` command next to {sys.executable} or on PATH: reinstall with `bash scripts/install.sh`"
    return cli


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cli = _chroma_cli()
    port = free_port()
    folder = tmp_path_factory.mktemp("chroma-server")
    url = f"http://127.0.0.1:{port}"
    cmd = [cli, "run", "--path", str(folder / "db"), "--host", "127.0.0.1", "--port", str(port)]
    with server_process(cmd, f"{url}/api/v2/heartbeat", folder / "server.log", timeout=60):
        yield url


def _nearest(assistant: Assistant) -> list[list[tuple[str, float]]]:
    """Every chunk's similarity to each question, read through the store (all of them, so no HNSW cut-off), ties
    put in id order: the fake vectors tie often, and Chroma may return equal distances in any order."""
    store, embedder = assistant.retriever.store, HashEmbedder()
    out = []
    for q in QUESTIONS:
        got = store.query(embedder.embed([q])[0], store.count(), texts=False)
        out.append(sorted(((c.chunk_id, round(c.similarity, 4)) for c in got), key=lambda x: (-x[1], x[0])))
    return out


def test_server_store_matches_embedded_store(chroma_server: str, tmp_path: Path) -> None:
    embedded = make_settings(tmp_path / "embedded")
    served = make_settings(tmp_path / "served", **{"store.chroma_url": chroma_server})
    first = ingest(served, embedder=HashEmbedder())
    assert first.papers == 38 and first.chunks > 38
    assert not (tmp_path / "served" / "chroma").exists()  # the vectors went to the server, not the data folder
    again = ingest(served, embedder=HashEmbedder())
    assert (again.added, again.embedded_chunks, again.chunks) == (0, 0, first.chunks)  # idempotent through HTTP
    local = ingest(embedded, embedder=HashEmbedder())
    assert local.chunks == first.chunks
    a = Assistant(embedded, embedder=HashEmbedder(), generator=ScriptedGenerator())
    b = Assistant(served, embedder=HashEmbedder(), generator=ScriptedGenerator())
    assert b.retriever.store.url == chroma_server
    assert _nearest(a) == _nearest(b)
    for q in QUESTIONS:  # and the answer's evidence starts from the same paper
        assert a.search(q).hits[0].paper.paper_id == b.search(q).hits[0].paper.paper_id


def test_data_folders_sharing_a_server_keep_their_own_collections(chroma_server: str, tmp_path: Path) -> None:
    """Seeds into folder A, one paper into folder B, both on one server: B's ingest (and its sweep of chunks its
    catalog does not know) leaves A's index whole, and each searches only its own papers."""
    one = tmp_path / "one"
    one.mkdir()
    (one / "one.jsonl").write_text(json.dumps({"title": "Zebra stripes in thermal imaging",
                                               "abstract": "We study zebra stripes with thermal cameras."}) + "\n")
    a = make_settings(tmp_path / "a", **{"store.chroma_url": chroma_server})
    b = make_settings(tmp_path / "b", **{"store.chroma_url": chroma_server})
    built = ingest(a, embedder=HashEmbedder())
    only = ingest(b, embedder=HashEmbedder(), paths=[one])
    assert (only.papers, only.removed) == (1, 0)
    assert ingest(a, embedder=HashEmbedder()).chunks == built.chunks  # A's sweep leaves B's chunks alone too
    assert ingest(b, embedder=HashEmbedder(), paths=[one]).chunks == only.chunks
    names = {IndexPaths.of(a).collection, IndexPaths.of(b).collection}
    assert len(names) == 2 and all(n.startswith(f"chunks-{a.fingerprint()}-") for n in names)
    ask_a = Assistant(a, embedder=HashEmbedder(), generator=ScriptedGenerator())
    ask_b = Assistant(b, embedder=HashEmbedder(), generator=ScriptedGenerator())
    assert ask_a.retriever.store.count() == built.chunks
    hits = ask_a.search("How much does PrivGate reduce privacy leakage?").hits
    assert hits and "PrivGate" in hits[0].paper.abstract
    assert [h.paper.title for h in ask_b.search("zebra stripes").hits] == ["Zebra stripes in thermal imaging"]
    assert all("Zebra" not in h.paper.title for h in ask_a.search("zebra stripes thermal").hits)


def test_a_collection_missing_chunks_is_detected_at_open_with_the_fix(chroma_server: str, tmp_path: Path) -> None:
    s = make_settings(tmp_path / "a", **{"store.chroma_url": chroma_server})
    built = ingest(s, embedder=HashEmbedder())
    store = open_store(s, HashEmbedder(), create=False)
    gone = sorted(store.paper_ids())[:5]
    store.delete_papers(gone)  # as another folder's sweep did before collections were namespaced
    fix = r"5 of 38 papers have no chunks .*Run `python -m rag ingest` with the same --data-dir"
    with pytest.raises(StoreError, match=r"disagrees with its catalog .*" + fix):
        Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage")
    with pytest.raises(StoreError, match=fix):
        Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator()).ask("How much does PrivGate help?")
    repaired = ingest(s, embedder=HashEmbedder())  # the fix named
    assert (repaired.repaired, repaired.chunks) == (5, built.chunks)
    assert Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator()).search("privacy leakage").hits
