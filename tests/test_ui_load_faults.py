"""The real app under load and under internal faults: one launched app (real embedder, Chroma, the default model) on a
free 127.0.0.1 port, driven through gradio_client.

Load: 16 chats and 50 searches at once all complete, never more than one generation runs at a time, the process keeps
serving, and its memory growth is reported. Faults (retrieval raising, the index missing, the model file deleted
after start) reach the client as one friendly line, with no traceback and no path, and the app keeps serving.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import running_app

from rag.config import Settings
from rag.records import ModelError
from ui import app as U

pytestmark = pytest.mark.slow

CHAT_QUESTIONS = [
    *U.EXAMPLES,
    "What does PrivGate gate?",
    "What is the best recipe for lasagna?",
    "Which papers release code?",
    "What is knowledge distillation used for?",
    "How does SOLAR retrieve multimodal content?",
    "Which papers study reinforcement learning?",
    "What benchmark results are reported for retrieval?",
    "How is privacy leakage measured?",
    "What is the capital of France?",
    "Which papers are about language model agents?",
    "What datasets are used for evaluation?",
    "How much faster is the proposed method?",
]
SEARCH_QUERIES = [f"{topic} {n}" for n in range(10) for topic in
                  ("privacy leakage", "multimodal retrieval", "reinforcement learning agents", "knowledge distillation",
                   "code release")]


@pytest.fixture(scope="module")
def served(seeded: Settings) -> Iterator[tuple[str, Any, Settings]]:
    """(url, the app's Assistant, settings): the app over the session's seeded index, answers capped at 48 tokens,
    its queue long enough for the load test's requests all at once (past it a request is refused as busy)."""
    with running_app(seeded, max_tokens=48, queue_size=len(CHAT_QUESTIONS) + len(SEARCH_QUERIES)) as served_app:
        yield served_app


@pytest.fixture(scope="module")
def client(served: tuple[str, Any, Settings]) -> Any:
    from gradio_client import Client

    return Client(served[0], verbose=False)


def _assert_friendly(message: str, settings: Settings, expected: str) -> None:
    assert expected in message, message
    for leak in ("Traceback", "/secret/path", str(settings.paths.data_dir), 'File "', ".py"):
        assert leak not in message, (leak, message)


def _error_of(call: Any) -> str:
    with pytest.raises(Exception) as info:
        call()
    return str(info.value)


def test_load_one_generation_at_a_time_and_still_serving(served: tuple[str, Any, Settings], client: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    _, assistant, _ = served
    generator = assistant.generator  # the real LlamaGenerator
    real_stream = generator.stream
    guard = threading.Lock()
    state = {"now": 0, "max": 0, "calls": 0}

    def counted(*args: Any, **kwargs: Any) -> Iterator[str]:
        with guard:
            state["now"] += 1
            state["calls"] += 1
            state["max"] = max(state["max"], state["now"])
        try:
            yield from real_stream(*args, **kwargs)
        finally:
            with guard:
                state["now"] -= 1

    monkeypatch.setattr(generator, "stream", counted)
    proc = psutil.Process()
    rss_before = proc.memory_info().rss
    t0 = time.monotonic()
    chats = [client.submit(q, api_name="/chat") for q in CHAT_QUESTIONS]
    searches = [client.submit(q, api_name="/search") for q in SEARCH_QUERIES]
    chat_results = [job.result(timeout=600) for job in chats]
    search_results = [job.result(timeout=600) for job in searches]
    elapsed = time.monotonic() - t0
    rss_after = proc.memory_info().rss

    assert [r["question"] for r in chat_results] == CHAT_QUESTIONS
    assert all(r["answer"] for r in chat_results)
    assert [r["question"] for r in search_results] == SEARCH_QUERIES
    assert all(r["hits"] for r in search_results)
    assert state["calls"] >= 1  # some questions reached the model (the rest abstained before generating)
    assert state["max"] == 1, state
    assert state["now"] == 0  # every stream was closed
    assert client.predict("SOLAR", api_name="/search")["hits"]  # still serving
    growth = rss_after - rss_before
    print(f"\nload: {len(chats)} chats + {len(searches)} searches in {elapsed:.1f} s; generations={state['calls']}, "
          f"max in flight={state['max']}; RSS before={rss_before / 2**20:.0f} MiB after={rss_after / 2**20:.0f} MiB "
          f"growth={growth / 2**20:+.0f} MiB")
    assert growth < 1.5 * 2**30


def test_retrieval_fault_is_friendly_and_the_app_recovers(served: tuple[str, Any, Settings], client: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _, assistant, settings = served

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom /secret/path")

    monkeypatch.setattr(assistant.retriever, "search", boom)
    for api in ("/chat", "/search"):
        message = _error_of(lambda api=api: client.predict("How much does PrivGate cut privacy leakage?",
                                                           api_name=api))
        _assert_friendly(message, settings, "details are in the server log")
    monkeypatch.undo()
    assert client.predict("SOLAR", api_name="/search")["hits"]
    assert client.predict("What does SOLAR stand for?", api_name="/chat")["answer"]


def test_missing_index_is_friendly_and_the_app_recovers(served: tuple[str, Any, Settings], client: Any,
                                                        tmp_path: Path) -> None:
    """The running app's Assistant pointed at an empty data folder: its retriever raises StoreError naming it."""
    _, assistant, settings = served
    empty = settings.with_values({"paths.data_dir": tmp_path / "empty-data"})
    (tmp_path / "empty-data").mkdir()
    saved = assistant.settings, assistant._retriever
    assistant.settings, assistant._retriever = empty, None
    try:
        for api in ("/search", "/chat"):
            message = _error_of(lambda api=api: client.predict("What does SOLAR stand for?", api_name=api))
            _assert_friendly(message, empty, "paper index is not available")
            assert str(tmp_path) not in message
    finally:
        assistant.settings, assistant._retriever = saved
    assert client.predict("SOLAR", api_name="/search")["hits"]


def test_model_file_removed_after_start(served: tuple[str, Any, Settings], client: Any, tmp_path: Path) -> None:
    """Weights already loaded keep answering after the file goes; loading it again is a clean ModelError."""
    from rag.generate import LlamaGenerator
    from rag.gguf import default_model_path

    _, assistant, settings = served
    models = tmp_path / "models"
    models.mkdir()
    copy = models / "copied-smollm2.gguf"
    shutil.copyfile(default_model_path(), copy)
    generation = settings.generation.model_copy(update={"model_path": str(copy)})
    gen = LlamaGenerator(generation)
    copy.unlink()
    original = assistant.generator
    assistant.use_generator(gen)
    try:
        r = client.predict("How much does PrivGate cut privacy leakage?", api_name="/chat")
        assert r["answer"] and not r["abstained"], r
        pieces = list(gen.stream([{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0.0))
        assert "".join(pieces).strip()
    finally:
        assistant.use_generator(original)
    with pytest.raises(ModelError) as info:
        LlamaGenerator(generation)
    assert str(copy) in str(info.value) and "not found" in str(info.value)
    shown = U.friendly(info.value)
    assert str(tmp_path) not in shown and "could not be loaded" in shown
    assert client.predict("SOLAR", api_name="/search")["hits"]  # the app still serves on its own model
