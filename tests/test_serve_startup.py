"""`python -m rag serve` listens before it loads (ui/startup.py): `/` answers 200 with a loading page at once, a
question sent meanwhile waits and is answered by the real app once loading ends, and a load that fails stops the
server with its error (requests that waited get 503). The real app over a real Chroma store in tmp_path, with the
fake embedder and a scripted generator; the slow tests in test_api.py and test_replicas.py run the real command."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import free_port, make_settings

from rag.config import Settings
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import ModelError
from ui import startup

QUESTION = "How much does PrivGate reduce privacy leakage?"
REPLY = ("End-to-end evaluations show that PrivGate achieves a 62.6% average relative reduction in privacy leakage "
         "with 15.9% token overhead [1].")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = make_settings(tmp_path_factory.mktemp("serve") / "data")
    build_index(settings, HashEmbedder())
    return settings


def _first_200(url: str, deadline_s: float = 30) -> httpx.Response:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            got = httpx.get(url, timeout=5)
            if got.status_code == 200:
                return got
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} gave no 200"
        time.sleep(0.02)


def _ask_in_thread(url: str, out: list[Any]) -> threading.Thread:
    def ask() -> None:
        out.append(httpx.post(f"{url}/v1/chat/completions", timeout=60,
                              json={"model": "scripted", "messages": [{"role": "user", "content": QUESTION}]}))

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


def test_the_page_answers_while_loading_and_a_question_waits_for_the_model(indexed: Settings) -> None:
    settings = indexed.with_values({"ui.port": free_port()})
    release, loading = threading.Event(), threading.Event()
    generator = ScriptedGenerator(["warm-up token", REPLY])
    assistant = Assistant(settings, embedder=HashEmbedder(), generator=generator)

    def load(s: Settings, gate: startup.Starting) -> None:
        loading.set()
        assert release.wait(60)  # the models are "loading" until the test says so
        startup.prepare(s, gate, assistant)  # the real start path: ingest check, index, warm-up, API, then UI

    running = startup.serve(settings, load=load, block=False)
    try:
        page = _first_200(running.url + "/")
        assert loading.is_set() and b"abstracts-qa is starting" in page.content
        assert httpx.head(running.url + "/", timeout=5).status_code == 200
        answers: list[Any] = []
        asked = _ask_in_thread(running.url, answers)
        asked.join(timeout=1.0)
        assert asked.is_alive() and not answers  # waits for the model instead of failing
        release.set()
        asked.join(timeout=60)
        reply = answers[0]
        assert reply.status_code == 200, reply.text
        message = reply.json()["choices"][0]["message"]
        assert "62.6" in message["content"] and "[1]" in message["content"]
        assert message["citations"][0]["title"].startswith("PrivGate")
        assert generator.prompts[0] == [{"role": "user", "content": "Hi"}]  # warmed before the question came
        assert httpx.get(running.url + "/config", timeout=60).status_code == 200  # waits for the UI part
        ui = httpx.get(running.url + "/", timeout=10)  # now the Gradio app itself
        assert ui.status_code == 200 and b"abstracts-qa is starting" not in ui.content and b"gradio" in ui.content
    finally:
        release.set()
        running.close()


def test_a_failed_load_stops_the_server_with_its_error(indexed: Settings) -> None:
    settings = indexed.with_values({"ui.port": free_port()})
    url = f"http://127.0.0.1:{settings.ui.port}"
    answers: list[Any] = []

    def load(s: Settings, gate: startup.Starting) -> None:
        _first_200(url + "/")
        asked = _ask_in_thread(url, answers)
        time.sleep(0.5)  # the question is waiting in the server
        assert asked.is_alive()
        raise ModelError("broken.gguf: llama.cpp could not load this model")

    with pytest.raises(ModelError, match="broken.gguf"):
        startup.serve(settings, load=load)  # blocks until the server stopped, then raises the load's error
    deadline = time.monotonic() + 10
    while not answers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answers and answers[0].status_code == 503
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/", timeout=2)


def test_an_exposed_host_without_a_login_never_opens_the_port(tmp_path: Path) -> None:
    from rag.records import ConfigError

    port = free_port()
    settings = make_settings(tmp_path / "data", **{"ui.host": "0.0.0.0", "ui.port": port})
    with pytest.raises(ConfigError, match="exposes the app"):
        startup.serve(settings, load=lambda s, gate: pytest.fail("loaded"), block=False)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)


def test_the_api_answers_before_the_ui_is_built(indexed: Settings) -> None:
    """The API part needs only the index and the model: it is installed first, while `/` still says loading and a
    UI request waits for the UI part."""
    settings = indexed.with_values({"ui.port": free_port()})
    ui_release = threading.Event()
    assistant = Assistant(settings, embedder=HashEmbedder(), generator=ScriptedGenerator(["warm-up", REPLY]))

    def load(s: Settings, gate: startup.Starting) -> None:
        from ui import api as API
        from ui import app as U

        gate.install(startup.API, API.create_api(assistant, s))
        assert ui_release.wait(60)
        gate.install(startup.UI, U.served_app(U.build_app(assistant, s), s, None))

    running = startup.serve(settings, load=load, block=False)
    try:
        assert b"is starting" in _first_200(running.url + "/").content
        answers: list[Any] = []
        asked = _ask_in_thread(running.url, answers)
        asked.join(timeout=60)
        assert answers and answers[0].status_code == 200 and "62.6" in answers[0].json()["choices"][0]["message"][
            "content"]
        assert b"is starting" in httpx.get(running.url + "/", timeout=5).content  # the UI is not in yet
        config: list[Any] = []
        waiting = threading.Thread(target=lambda: config.append(httpx.get(running.url + "/config", timeout=60)))
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and not config  # a UI request waits for the UI part
        ui_release.set()
        waiting.join(timeout=60)
        assert config[0].status_code == 200
        assert b"is starting" not in httpx.get(running.url + "/", timeout=10).content
    finally:
        ui_release.set()
        running.close()
