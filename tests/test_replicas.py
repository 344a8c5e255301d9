"""Replicas: two `python -m rag serve` on one data folder and one real `chroma run`, started while an ingest job holds
the writer lock, come up as readers, answer through the OpenAI-compatible API, and both see a paper ingested after
they started (slow: real embedder, real GGUF, real Chroma server, three processes on loopback)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import openai
import pytest
from helpers import free_port, server_process

from rag.config import load
from rag.index import IndexPaths
from rag.lock import writer_lock

PRIVGATE = "6480b13cf7654701"


def _chroma_cli() -> str:
    found = Path(sys.executable).parent / "chroma"
    cli = str(found) if found.exists() else (shutil.which("chroma") or "")
    assert cli, f"no `chroma` command next to {sys.executable} or on PATH: reinstall with `bash scripts/install.sh`"
    return cli


def _ask(port: int, question: str) -> tuple[str, list[str]]:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="loopback", max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    got = client.chat.completions.create(model=model, messages=[{"role": "user", "content": question}])
    message = got.choices[0].message
    return str(message.content), [c["title"] for c in message.citations]


@pytest.mark.slow
def test_two_replicas_start_as_readers_and_follow_a_new_ingest(tmp_path: Path, corpus: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    chroma_port = free_port()
    chroma = [_chroma_cli(), "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port",
              str(chroma_port)]
    data = tmp_path / "data"
    for var, value in {"RAG_CHROMA_URL": f"http://127.0.0.1:{chroma_port}", "RAG_SEEDS_DIR": str(corpus),
                       "RAG_DATA_DIR": str(data), "RAG_GENERATION_MAX_TOKENS": "64"}.items():
        monkeypatch.setenv(var, value)  # every process below inherits them
    with contextlib.ExitStack() as stack:
        stack.enter_context(server_process(chroma, f"http://127.0.0.1:{chroma_port}/api/v2/heartbeat",
                                           tmp_path / "chroma.log", timeout=60))
        ingest = [sys.executable, "-m", "rag", "ingest"]
        subprocess.run(ingest, check=True, capture_output=True, timeout=600)
        ports = [free_port(), free_port()]
        # An ingest job holds the writer lock while both start: neither may take it, both must serve.
        with writer_lock(IndexPaths.of(load(env=os.environ)).lock_folder):
            for i, port in enumerate(ports):
                cmd = [sys.executable, "-m", "rag", "serve", "--port", str(port)]
                stack.enter_context(server_process(cmd, f"http://127.0.0.1:{port}/v1/models",
                                                   tmp_path / f"serve{i}.log", timeout=300))
        for i, port in enumerate(ports):
            assert "serving the published one" in (tmp_path / f"serve{i}.log").read_text()
            text, cited = _ask(port, "How much does PrivGate reduce privacy leakage?")
            assert "62.6" in text and any(t.startswith("PrivGate") for t in cited)
        (corpus / "zebra.jsonl").write_text(json.dumps({
            "title": "Zebra stripes in thermal imaging",
            "abstract": "We photograph zebras with thermal cameras. Black stripes are up to 10 degrees warmer than "
                        "white stripes at noon, which drives small convection currents above the coat."}) + "\n")
        subprocess.run(ingest, check=True, capture_output=True, timeout=600)
        for port in ports:
            _, cited = _ask(port, "How much warmer are black zebra stripes than white stripes in thermal images?")
            assert "Zebra stripes in thermal imaging" in cited
