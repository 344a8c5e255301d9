"""The OpenAI-compatible API (ui/api.py) through the official `openai` client, on the same port as the UI.

Fast tests: the real pipeline over a real Chroma store in tmp_path with the fake embedder and a scripted generator,
served by the real app (FastAPI + Gradio mounted, uvicorn) on 127.0.0.1. The slow test starts `python -m rag serve`
on the seeded index with the real default model and asks it plain, streamed and follow-up questions.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fakes import HashEmbedder, ScriptedGenerator
from gradio_client import Client
from helpers import SEEDS, free_port, make_settings, server_process

from rag.config import Settings
from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import CANNOT_ANSWER
from rag.retrieve import Filters
from ui import api as API
from ui import app as U

PRIVGATE = "6480b13cf7654701"
QUESTION = "How much does PrivGate reduce privacy leakage?"
REPLY = ("End-to-end evaluations show that PrivGate achieves a 62.6% average relative reduction in privacy leakage "
         "with 15.9% token overhead [1].")
OVERHEAD = "PrivGate has a 15.9% token overhead [1]."
OTHER_SOURCE = "003_fcd762a5da0c7c9c.txt"  # a seed file without PrivGate


class Server:
    """The real app on a free port over one Assistant whose scripted replies each test queues."""

    def __init__(self, settings: Settings, embedder: HashEmbedder) -> None:
        self.settings = settings
        self.generator = ScriptedGenerator()
        self.assistant = Assistant(settings, embedder=embedder, generator=self.generator)
        served = U.launch(U.build_app(self.assistant, settings), settings, port=free_port(), block=False,
                          assistant=self.assistant)
        assert served is not None
        self.served = served
        self.url = served.url

    def client(self, key: str = "unused-on-loopback") -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=60)

    def direct(self, question: str, reply: str, history: list[dict[str, str]] | None = None,
               filters: Filters | None = None) -> Any:
        """The same question asked of the pipeline directly, as the chat does: the reference for the API."""
        self.generator.replies = [reply]
        return self.assistant.ask(question, history=history, filters=filters)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, HashEmbedder]:
    settings = make_settings(tmp_path_factory.mktemp("api") / "data")
    embedder = HashEmbedder()
    build_index(settings, embedder)
    return settings, embedder


@pytest.fixture(scope="module")
def server(index: tuple[Settings, HashEmbedder]) -> Iterator[Server]:
    s = Server(*index)
    yield s
    s.served.close()


def _ask(server: Server, reply: str, **kwargs: Any) -> Any:
    server.generator.replies = [reply]
    kwargs.setdefault("model", "scripted")
    return server.client().chat.completions.create(**kwargs)


def test_models_lists_the_loaded_model_and_the_presets(server: Server) -> None:
    models = server.client().models.list().data
    assert models[0].id == "scripted" and models[0].model_extra["loaded"] is True
    presets = {p.name for p in API.presets()}
    assert {m.id for m in models[1:]} == presets and not any(m.model_extra["loaded"] for m in models[1:])


def test_plain_answer_keeps_markers_and_carries_the_cited_papers(server: Server) -> None:
    reference = server.direct(QUESTION, REPLY)
    got = _ask(server, REPLY, messages=[{"role": "system", "content": "Answer in French."},
                                        {"role": "user", "content": QUESTION}])
    message = got.choices[0].message
    assert message.content == reference.text and "[1]" in message.content
    assert [c["paper_id"] for c in message.citations] == [PRIVGATE] == [c.paper.paper_id for c in reference.citations]
    assert message.citations[0]["n"] == 1 and message.citations[0]["source"] == "000_938f08ec0059db85.txt"
    assert got.rag["abstained"] is False and got.rag["mode"] == "generated"
    assert got.usage.prompt_tokens > 0 and got.usage.completion_tokens == len(REPLY.split(" "))
    # The system message is ignored: the model got the same prompt as the pipeline asked directly.
    assert server.generator.prompts[-1] == server.generator.prompts[-2]


def test_streamed_answer_is_the_same_answer_in_chunks(server: Server) -> None:
    plain = _ask(server, REPLY, messages=[{"role": "user", "content": QUESTION}])
    stream = _ask(server, REPLY, messages=[{"role": "user", "content": QUESTION}], stream=True,
                  stream_options={"include_usage": True})
    chunks = list(stream)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert len(deltas) > 3 and "".join(d.content or "" for d in deltas) == plain.choices[0].message.content
    last = next(c for c in reversed(chunks) if c.choices)
    assert last.choices[0].finish_reason == "stop"
    assert [p["paper_id"] for p in last.choices[0].delta.citations] == [PRIVGATE]
    assert last.rag["abstained"] is False
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_the_raw_stream_is_server_sent_events_ending_in_done(server: Server) -> None:
    server.generator.replies = [REPLY]
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"


def test_follow_up_with_only_its_is_answered_from_the_history(server: Server) -> None:
    follow = "What is its token overhead?"
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": REPLY}]
    reference = server.direct(follow, OVERHEAD, history=history)
    got = _ask(server, OVERHEAD, messages=[*history, {"role": "user", "content": follow}])
    assert server.generator.prompts[-1] == server.generator.prompts[-2]  # exactly the chat's prompt
    assert got.choices[0].message.content == reference.text
    assert [c["paper_id"] for c in got.choices[0].message.citations] == [PRIVGATE]
    # "its" was read with the previous turn, as the pipeline reads it for the chat
    assert got.rag["searched"] == reference.searched != follow
    # ... and resolved to the paper the previous answer cited, which the API returns as the chat shows it
    assert got.rag["resolved_papers"] == list(reference.focus) == [PRIVGATE] and got.rag["more"] == []
    assert got.rag["declined"] is False  # it answers
    asked = len(server.generator.prompts)
    alone = _ask(server, OVERHEAD, messages=[{"role": "user", "content": follow}])
    assert alone.rag["searched"] == follow  # without the history "its" is not resolved
    assert all(QUESTION not in str(p) for p in server.generator.prompts[asked:])


def test_a_follow_up_naming_nothing_is_resolved_through_the_api_as_in_the_chat(server: Server) -> None:
    follow = "On which benchmark?"
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": REPLY}]
    reference = server.direct(follow, OVERHEAD, history=history)
    got = _ask(server, OVERHEAD, messages=[*history, {"role": "user", "content": follow}])
    assert got.rag["resolved_papers"] == list(reference.focus) == [PRIVGATE]
    assert got.rag["searched"] == reference.searched != follow
    assert [c["paper_id"] for c in got.choices[0].message.citations] == [PRIVGATE]


def test_filters_restrict_what_is_cited(server: Server) -> None:
    only = Filters(sources=frozenset({OTHER_SOURCE}))
    reference = server.direct(QUESTION, REPLY, filters=only)
    got = _ask(server, REPLY, messages=[{"role": "user", "content": QUESTION}],
               extra_body={"filters": {"sources": [OTHER_SOURCE]}})
    message = got.choices[0].message
    assert message.content == reference.text
    assert PRIVGATE not in {c["paper_id"] for c in message.citations}
    assert all(c["source"] == OTHER_SOURCE for c in message.citations)
    scoped = _ask(server, REPLY, messages=[{"role": "user", "content": QUESTION}],
                  extra_body={"filters": {"paper_ids": [PRIVGATE]}})
    assert [c["paper_id"] for c in scoped.choices[0].message.citations] == [PRIVGATE]


def test_abstention_is_an_ordinary_answer_without_citations(server: Server) -> None:
    got = _ask(server, REPLY, messages=[{"role": "user", "content": "zucchini lasagna oven recipe?"}])
    assert got.choices[0].message.content == CANNOT_ANSWER
    assert got.choices[0].message.citations == [] and got.rag["abstained"] is True


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": [{"role": "user", "content": QUESTION}], "temperature": 5}, "temperature"),
    ({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "x"}]}, "messages"),
    ({"messages": [{"role": "tool", "content": "x"}, {"role": "user", "content": QUESTION}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": QUESTION}], "filters": {"venue": "x"}}, "filters.venue"),
    ({"messages": [{"role": "user", "content": QUESTION}], "n": 2}, "n"),
    ({"messages": [{"role": "user", "content": "   "}]}, "messages"),
])
def test_bad_requests_get_openai_errors_naming_the_field(server: Server, body: dict[str, Any], param: str) -> None:
    extra = {k: v for k, v in body.items() if k not in {"messages", "temperature", "max_tokens", "n"}}
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(
            model="scripted", messages=body["messages"], temperature=body.get("temperature"),
            max_tokens=body.get("max_tokens"), n=body.get("n"), extra_body=extra or None)
    assert caught.value.status_code == 400
    error = caught.value.body
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_unknown_model_endpoint_and_body_errors_have_the_openai_shape(server: Server) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        _ask(server, REPLY, model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    assert caught.value.body["code"] == "model_not_found" and "'scripted'" in caught.value.body["message"]
    r = httpx.get(f"{server.url}/v1/embeddings")
    assert r.status_code == 404 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = httpx.post(f"{server.url}/v1/chat/completions", content=b"{not json")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_the_ui_and_gradio_client_share_the_port(server: Server) -> None:
    page = httpx.get(f"{server.url}/")
    assert page.status_code == 200 and "abstracts-qa" in page.text
    client = Client(f"{server.url}/", verbose=False)
    server.generator.replies = [REPLY]
    single = client.predict(QUESTION, api_name="/chat")  # the single-question call still works
    assert [c["paper_id"] for c in single["citations"]] == [PRIVGATE]
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": REPLY}]
    server.generator.replies = [OVERHEAD]
    follow = client.predict("What is its token overhead?", history, None, api_name="/chat")
    assert follow["searched"] != "What is its token overhead?"  # read with the history
    assert [c["paper_id"] for c in follow["citations"]] == [PRIVGATE]
    server.generator.replies = [REPLY]
    only = client.predict(QUESTION, None, {"sources": [OTHER_SOURCE]}, api_name="/chat")
    assert PRIVGATE not in {h["paper_id"] for h in only["hits"]}
    with pytest.raises(Exception, match="unknown filter 'venue'"):
        client.predict(QUESTION, None, {"venue": "x"}, api_name="/chat")


def test_a_token_is_required_when_set_and_busy_is_503(index: tuple[Settings, HashEmbedder]) -> None:
    settings, embedder = index
    settings = settings.with_values({"ui.api_token": "s3cret-token", "ui.api_max_pending": 1})
    s = Server(settings, embedder)
    try:
        for key in ("wrong", "s3cret"):
            with pytest.raises(openai.AuthenticationError) as caught:
                s.client(key).models.list()
            assert caught.value.status_code == 401 and caught.value.body["code"] == "invalid_api_key"
        assert httpx.post(f"{s.url}/v1/chat/completions", json={}).status_code == 401
        assert s.client("s3cret-token").models.list().data[0].id == "scripted"
        # One answer admitted and waiting for the model (its lock held here): the next one is told to come back.
        s.generator.replies = [REPLY]
        results: list[Any] = []
        with s.assistant.compute:
            first = threading.Thread(target=lambda: results.append(s.client("s3cret-token").chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": QUESTION}])))
            first.start()
            deadline = time.monotonic() + 30
            while s.served.app.state.admitted < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            r = httpx.post(f"{s.url}/v1/chat/completions", headers={"Authorization": "Bearer s3cret-token"},
                           json={"model": "scripted", "messages": [{"role": "user", "content": QUESTION}]})
            assert r.status_code == 503 and r.json()["error"]["code"] == "server_busy" and r.headers["retry-after"]
        first.join(timeout=60)
        assert results and results[0].choices[0].message.citations[0]["paper_id"] == PRIVGATE
    finally:
        s.served.close()


# --- slow: `rag serve` with the real default model ----------------------------------------------------------------


@pytest.mark.slow
def test_rag_serve_answers_the_openai_client(seeded: Settings, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    for var, value in {"RAG_SEEDS_DIR": str(SEEDS), "RAG_UI_API_TOKEN": "slow-test-token"}.items():
        monkeypatch.setenv(var, value)  # the server process inherits them
    cmd = [sys.executable, "-m", "rag", "serve", "--data-dir", str(seeded.paths.data_dir), "--port", str(port)]
    ready = f"http://127.0.0.1:{port}/"
    with server_process(cmd, ready, tmp_path / "serve.log", timeout=300):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="slow-test-token", max_retries=0,
                               timeout=300)
        model = client.models.list().data[0].id
        assert model == "qwen2.5-coder-0.5b"
        plain = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}])
        text = plain.choices[0].message.content
        assert "62.6" in text and "[1]" in text
        assert [c["paper_id"] for c in plain.choices[0].message.citations] == [PRIVGATE]
        streamed = client.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}],
                                                  stream=True)
        chunks = list(streamed)
        # The same checked answer, streamed in pieces. Not always the same words: this second ask finds its whole
        # prompt in llama.cpp's cache and evaluates only its last token again, and on some CPUs (AVX2 without
        # VNNI) a one-token evaluation rounds differently from the batch that made the first answer, so greedy
        # decoding may take another path ("62.6% [1]." beside the sentence stating it).
        streamed_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert "62.6" in streamed_text and "[1]" in streamed_text
        cited = [c.choices[0].delta.citations for c in chunks if c.choices and getattr(c.choices[0].delta,
                                                                                       "citations", None)]
        assert [c["paper_id"] for c in cited[-1]] == [PRIVGATE]
        follow = client.chat.completions.create(model=model, messages=[
            {"role": "user", "content": QUESTION}, {"role": "assistant", "content": text},
            {"role": "user", "content": "What is its token overhead?"}])
        assert "15.9" in follow.choices[0].message.content
        assert [c["paper_id"] for c in follow.choices[0].message.citations] == [PRIVGATE]
        assert httpx.get(ready).status_code == 200  # the UI on the same port


def test_the_api_follows_a_finished_ingest(tmp_path: Path, corpus: Path) -> None:
    """An ingest after the server started (here in-process, as another process would) publishes a new index; the
    API's next answer reloads it and cites the new paper, without a restart."""
    # BM25 only: its index is a file rebuilt by the ingest, so a server that did not reload could not find the paper
    # (the dense side reads the live collection either way).
    settings = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus, "retrieval.mode": "bm25"})
    embedder = HashEmbedder()
    build_index(settings, embedder)
    s = Server(settings, embedder)
    try:
        question = "What do zebra stripes look like in thermal imaging?"
        reply = "Zebra stripes differ in temperature under thermal cameras [1]."
        before = _ask(s, reply, messages=[{"role": "user", "content": question}])
        assert "Zebra" not in json.dumps(before.choices[0].message.citations)
        (corpus / "new.jsonl").write_text(json.dumps({
            "title": "Zebra stripes in thermal imaging",
            "abstract": "We study zebra stripes in thermal imaging: black stripes are up to 10 degrees warmer than "
                        "white stripes under thermal cameras."}) + "\n")
        build_index(settings, embedder)
        after = _ask(s, reply, messages=[{"role": "user", "content": question}])
        assert [c["title"] for c in after.choices[0].message.citations] == ["Zebra stripes in thermal imaging"]
    finally:
        s.served.close()
