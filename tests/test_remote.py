"""The OpenAI-compatible remote generator: event-stream parsing and errors on a mock transport (fast), then
llama-cpp-python's own server on loopback with the real SmolLM2 GGUF (slow)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import free_port, server_process

from rag.config import Generation, Settings
from rag.records import CANNOT_ANSWER, ModelError
from rag.remote import RemoteGenerator

MSGS = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2 + 2?"}]


def _sse(*events: object) -> bytes:
    lines = [f"data: {json.dumps(e) if not isinstance(e, str) else e}\r\n\r\n" for e in events]
    return (": ping\r\n\r\n" + "".join(lines)).encode()


def _mock(handler: dict[str, httpx.Response]) -> httpx.Client:
    def route(request: httpx.Request) -> httpx.Response:
        if request.url.path in handler:
            return handler[request.url.path]
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.Client(base_url="http://remote.test", transport=httpx.MockTransport(route))


def _delta(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def _settings(**kw: object) -> Generation:
    return Generation(remote_url="http://remote.test/v1", **kw)  # type: ignore[arg-type]


def test_streams_text_deltas_and_counts_with_the_server_tokenizer() -> None:
    client = _mock({
        "/v1/models": httpx.Response(200, json={"data": [{"id": "big-model"}]}),
        "/v1/chat/completions": httpx.Response(200, content=_sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}, _delta("Four"), _delta(" [1]."), "[DONE]",
            _delta("never read"))),
        "/extras/tokenize": httpx.Response(200, json={"tokens": list(range(17))}),
    })
    gen = RemoteGenerator(_settings(), client=client)
    assert gen.name == "big-model @ http://remote.test" and gen.n_ctx == Generation().n_ctx
    assert list(gen.stream(MSGS, 16, 0.0)) == ["Four", " [1]."]
    assert gen.count_tokens(MSGS) == 17 + 4 * len(MSGS)


def test_estimates_tokens_without_a_tokenize_endpoint_and_reads_n_ctx_from_props() -> None:
    client = _mock({"/props": httpx.Response(200, json={"default_generation_settings": {"n_ctx": 8192}})})
    gen = RemoteGenerator(_settings(remote_model="m"), client=client)
    assert gen.n_ctx == 8192
    text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in MSGS)
    assert gen.count_tokens(MSGS) == len(text.encode()) // 3 + 1 + 4 * len(MSGS)
    assert gen.count_tokens(MSGS) >= len(text) // 4  # never below a real tokenizer's typical count


@pytest.mark.parametrize("response, message", [
    (httpx.Response(500, text="model crashed"), "HTTP 500: model crashed"),
    (httpx.Response(200, content=_sse({"error": {"message": "context overflow"}})), "context overflow"),
    (httpx.Response(200, content=b"data: {not json\n\n"), "unreadable event"),
])
def test_server_failures_are_model_errors_naming_the_url(response: httpx.Response, message: str) -> None:
    gen = RemoteGenerator(_settings(remote_model="m"), client=_mock({"/v1/chat/completions": response}))
    with pytest.raises(ModelError, match=message) as err:
        list(gen.stream(MSGS, 16, 0.0))
    assert "http://remote.test" in str(err.value)


def test_unreachable_server_is_a_model_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    with pytest.raises(ModelError, match=f"127.0.0.1:{port}.*cannot reach"):
        RemoteGenerator(Generation(remote_url=f"http://127.0.0.1:{port}", remote_timeout_s=5.0))


def test_no_models_listed_asks_for_remote_model() -> None:
    client = _mock({"/v1/models": httpx.Response(200, json={"data": []})})
    with pytest.raises(ModelError, match="remote_model"):
        RemoteGenerator(_settings(), client=client)


# --- slow: llama-cpp-python's own server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # llama_cpp.server's dependencies are in pyproject's [test] extra: a missing one fails here, never skips.
    from rag.gguf import default_model_path

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"]
    with server_process(cmd, f"{url}/v1/models", tmp_path_factory.mktemp("llama-server") / "server.log", timeout=120):
        yield url


@pytest.mark.slow
def test_remote_generator_against_llama_cpp_server(llama_server: str) -> None:
    from rag.generate import LlamaGenerator

    gen = RemoteGenerator(Generation(remote_url=llama_server + "/v1"))
    assert gen.url == llama_server and gen.model
    pieces = list(gen.stream(MSGS, 24, 0.0))
    assert len(pieces) > 1 and "".join(pieces).strip()
    local = LlamaGenerator(Generation())
    # The server's tokenizer is the model's own: the count matches the in-process adapter's (special-token
    # handling may differ by a token or two).
    assert abs(gen.count_tokens(MSGS) - local.count_tokens(MSGS)) <= 2
    assert gen._tokenize is True


@pytest.mark.slow
def test_pipeline_answers_through_the_remote_server(llama_server: str, seeded: Settings) -> None:
    from rag.pipeline import Assistant

    settings = seeded.with_values({"generation.remote_url": llama_server})
    answer = Assistant(settings, generator=RemoteGenerator(settings.generation)).ask(
        "How much does PrivGate reduce privacy leakage?")
    assert answer.model.endswith(llama_server)
    # The question is answered by the seeds' PrivGate abstract: an answer (generated or quoted) citing it, never
    # an abstention.
    assert not answer.abstained and answer.mode in {"generated", "extractive"}, answer
    privgate = answer.hits[0].paper
    assert "PrivGate" in privgate.abstract
    assert answer.citations and {c.paper.paper_id for c in answer.citations} == {privgate.paper_id}
    assert answer.text != CANNOT_ANSWER and "62.6" in answer.text  # the figure asked for


def test_remote_module_is_the_only_http_client_user() -> None:
    root = Path(__file__).resolve().parent.parent / "rag"
    users = sorted(p.name for p in root.glob("*.py") if "import httpx" in p.read_text(encoding="utf-8"))
    assert users == ["remote.py"]


def test_remote_settings_come_from_the_environment() -> None:
    from rag.config import load

    s = load(env={"RAG_GENERATION_REMOTE_URL": "http://gpu-box:8000", "RAG_GENERATION_REMOTE_TIMEOUT_S": "30"})
    assert (s.generation.remote_url, s.generation.remote_timeout_s) == ("http://gpu-box:8000", 30.0)
    assert Settings().generation.remote_url == ""  # in-process GGUF by default
