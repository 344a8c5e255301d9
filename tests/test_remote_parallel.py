"""Generation on another box without a global lock: with a remote generator the pipeline releases its compute lock
while the server generates, and at most `generation.remote_parallel` streams run at once.

The real pipeline over a real Chroma store in tmp_path (fake embedder) and the real RemoteGenerator over an httpx
mock transport standing in for the server; a barrier in the server proves that answers overlap, a counter that the
bound holds. bench/remote_parallel.py measures the same against a real llama.cpp server.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import make_settings

from rag.config import Settings
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.remote import RemoteGenerator

PRIVGATE = "6480b13cf7654701"
QUESTION = "How much does PrivGate reduce privacy leakage?"
REPLY = ("End-to-end evaluations show that PrivGate achieves a 62.6% average relative reduction in privacy leakage "
         "with 15.9% token overhead [1].")


class FakeServer:
    """/v1/chat/completions that waits at a barrier (when given) and counts how many streams it serves at once."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier, self.active, self.most = barrier, 0, 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "remote-model"}]})
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404, json={"detail": "Not Found"})
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            if self.barrier is not None:
                self.barrier.wait(timeout=20)  # broken (an error) unless that many answers generate at once
            else:
                self.release.wait(timeout=0.3)  # long enough for the other callers to arrive
        finally:
            with self.lock:
                self.active -= 1
        events = [{"choices": [{"index": 0, "delta": {"content": w if i == 0 else " " + w}}]}
                  for i, w in enumerate(REPLY.split(" "))]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, HashEmbedder]:
    settings = make_settings(tmp_path_factory.mktemp("remote-parallel") / "data")
    embedder = HashEmbedder()
    build_index(settings, embedder)
    return settings, embedder


def _remote(settings: Settings, server: FakeServer, parallel: int) -> tuple[Settings, RemoteGenerator]:
    s = settings.with_values({"generation.remote_url": "http://gpu-box.test:8000",
                              "generation.remote_parallel": parallel})
    client = httpx.Client(base_url="http://gpu-box.test:8000", transport=httpx.MockTransport(server))
    return s, RemoteGenerator(s.generation, client=client)


def _ask_all(assistant: Assistant, n: int) -> list[Any]:
    answers: list[Any] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            answers.append(assistant.ask(QUESTION))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return answers


def test_remote_answers_generate_at_once_without_the_compute_lock(index: tuple[Settings, HashEmbedder]) -> None:
    settings, embedder = index
    server = FakeServer(threading.Barrier(2))
    s, generator = _remote(settings, server, parallel=2)
    assistant = Assistant(s, embedder=embedder, generator=generator)
    answers = _ask_all(assistant, 2)  # each waits in the server until the other is generating too
    assert len(answers) == 2 and server.most == 2
    assert all([c.paper.paper_id for c in a.citations] == [PRIVGATE] and not a.abstained for a in answers)
    assert assistant.compute.acquire(blocking=False)  # released at the end
    assistant.compute.release()


def test_remote_parallel_bounds_the_streams(index: tuple[Settings, HashEmbedder]) -> None:
    settings, embedder = index
    server = FakeServer()
    s, generator = _remote(settings, server, parallel=2)
    answers = _ask_all(Assistant(s, embedder=embedder, generator=generator), 5)  # type: ignore[arg-type]
    assert len(answers) == 5 and server.most == 2


def test_a_local_generator_still_generates_under_the_compute_lock(index: tuple[Settings, HashEmbedder]) -> None:
    settings, embedder = index
    held: list[bool] = []

    class Local(ScriptedGenerator):
        def stream(self, *args: Any, **kwargs: Any) -> Any:
            held.append(assistant.compute.locked())
            yield from super().stream(*args, **kwargs)

    assistant = Assistant(settings, embedder=embedder, generator=Local([REPLY]))
    assert [c.paper.paper_id for c in assistant.ask(QUESTION).citations] == [PRIVGATE]
    assert held == [True]


def test_remote_generation_releases_the_lock_while_streaming(index: tuple[Settings, HashEmbedder]) -> None:
    settings, embedder = index
    s, generator = _remote(settings, FakeServer(), parallel=1)
    assistant = Assistant(s, embedder=embedder, generator=generator)
    held = []
    for event in assistant.stream(QUESTION):
        if isinstance(event, str):
            held.append(assistant.compute.locked())
    assert held and not any(held)
