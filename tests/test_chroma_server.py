"""Chroma client/server: a real `chroma run` on loopback, ingest and search through it, same hits as embedded.

The embedder is the deterministic fake (this is about the store, not the vectors), so both stores hold identical
vectors and must return identical rankings.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import free_port, make_settings, server_process
from fakes import HashEmbedder, ScriptedGenerator

from rag.pipeline import Assistant, ingest

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


def _hits(assistant: Assistant) -> list[list[tuple[str, float]]]:
    out = []
    for q in QUESTIONS:
        got = assistant.search(q, top_k=5)
        out.append([(h.paper.paper_id, round(h.best_similarity, 4)) for h in got.hits])
    return out


def test_server_store_matches_embedded_store(chroma_server: str, tmp_path: Path) -> None:
    embedded = make_settings(tmp_path / "embedded")
    served = make_settings(tmp_path / "served", **{"retrieval.chroma_url": chroma_server})
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
    assert _hits(a) == _hits(b)
