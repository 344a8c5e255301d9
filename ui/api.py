"""The OpenAI-compatible chat API, served with the Gradio UI on one port: `GET /v1/models`, `POST /v1/chat/completions`.

Any OpenAI client (the `openai` SDK, Open WebUI, LibreChat, editors) can ask the assistant:

    client = OpenAI(base_url="http://127.0.0.1:7860/v1", api_key="TOKEN or anything on loopback")
    client.chat.completions.create(model="qwen2.5-coder-0.5b", messages=[...],
                                   extra_body={"filters": {"has_code": True}})

What a request means:
- `messages`: the last one must be `user` (the question); earlier `user`/`assistant` turns are the history, which
  drives follow-ups exactly as the chat does ("and its overhead?" is searched with the previous question).
  `system`/`developer` messages are ignored: the assistant's prompt is fixed (it tells the model the abstracts are
  evidence, not instructions). `tool`/`function` messages and `n` > 1 are refused (400).
- `model`: the loaded model's id from `/v1/models` (404 for any other), `max_tokens` (or `max_completion_tokens`),
  `temperature` (0..2), `stream`, `stream_options.include_usage`. Other OpenAI fields are accepted and ignored.
- `filters` (an extra body field): `{"sources": [file names], "has_code": true|false, "paper_ids": [ids]}`.

What comes back, beyond OpenAI's fields (clients that do not know them ignore them):
- `choices[0].message.citations`: the cited papers, `[{n, paper_id, title, venue, source, position, links, abstract,
  supporting}]`; the answer text keeps its `[n]` markers. An abstention is an ordinary answer with `citations: []`.
- `rag` (top level): `{abstained, mode, notices, unsupported_sentences, searched, resolved_papers, more, timings,
  settings_fingerprint, prompt_version}`; `resolved_papers` are the ids of the earlier cited papers a follow-up was
  read as pointing at ("it", "the second one"); `more` holds a summary's papers on its topic past those it lists
  (the citations' shape, numbered on from them, not cited in the text); `timings.first_token_ms` is when the
  model's first token came.
- Streaming sends OpenAI `chat.completion.chunk` events and `data: [DONE]`; the last chunk with a choice carries
  `choices[0].delta.citations`, `finish_reason` and `rag`. The text streamed is the checked answer (markers
  re-pointed, unsupported sentences replaced by quoted evidence), so it is sent once the answer is checked: the
  model's raw draft can differ from what the checks keep, and a client cannot take back text it was sent.

Errors use OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`: 400 bad request, 401 missing or wrong
bearer token (required when `ui.api_token` is set), 404 unknown model or endpoint, 503 busy (more than
`ui.api_max_pending` answers admitted; with Retry-After) or index/model unavailable, 500 anything else. Messages
never carry paths or tracebacks (those go to the log).

Concurrency: each admitted answer runs `Assistant.stream` in a worker thread of its own (the pipeline takes the
compute lock itself and releases it in the thread that took it); the event loop only awaits the result, so the UI
stays responsive while answers queue for the model. A client that disconnects stops its generation. Before each
answer, an index an ingest has published since is reloaded (IndexFollower), so the API sees new papers too.
This module does not build the UI (ui/app.py) or decide how answers are made (rag/pipeline.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from rag.config import Settings
from rag.generate import Message
from rag.index import index_generation
from rag.pipeline import Assistant
from rag.records import Answer, ConfigError, ModelError, RagError, StoreError
from rag.retrieve import Filters

log = logging.getLogger(__name__)

OWNER = "abstracts-qa"
_IGNORED_ROLES = {"system", "developer"}
_PIECE = re.compile(r"\s*\S+")  # streamed pieces: words with the space before them, rejoined exactly


class ApiError(Exception):
    """A request the API answers with an OpenAI-shaped error."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


@dataclass(frozen=True)
class ChatRequest:
    """A checked `POST /v1/chat/completions` body."""

    model: str
    question: str
    history: list[Message]
    filters: Filters
    temperature: float
    max_tokens: int
    stream: bool = False
    include_usage: bool = False


def _bad(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, param=param)


def _text(content: Any, param: str) -> str:
    """A message's text: a string, or OpenAI's list of content parts of type "text"."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad("only text content parts are supported", param)
            texts.append(part["text"])
        return "\n".join(texts)
    raise _bad("content must be a string or a list of text parts", param)


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float, integer: bool) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise _bad(f"{name} must be {'an integer' if integer else 'a number'}, not {value!r}", name)
    if not low <= value <= high:
        raise _bad(f"{name} must be between {low:g} and {high:g}, not {value!r}", name)
    return value


def filters_from(raw: Any) -> Filters:
    """The `filters` object of a request as Filters; ApiError(400) naming a bad key or value."""
    if raw is None:
        return Filters()
    if not isinstance(raw, dict):
        raise _bad("filters must be an object like {\"sources\": [...], \"has_code\": true, \"paper_ids\": [...]}",
                   "filters")
    unknown = set(raw) - {"sources", "has_code", "paper_ids"}
    if unknown:
        raise _bad(f"unknown filter {sorted(unknown)[0]!r} (filters: sources, has_code, paper_ids)",
                   f"filters.{sorted(unknown)[0]}")
    lists: dict[str, frozenset[str]] = {}
    for name in ("sources", "paper_ids"):
        value = raw.get(name) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad(f"filters.{name} must be a list of strings", f"filters.{name}")
        lists[name] = frozenset(value)
    has_code = raw.get("has_code")
    if has_code is not None and not isinstance(has_code, bool):
        raise _bad("filters.has_code must be true, false or null", "filters.has_code")
    return Filters(sources=lists["sources"], has_code=has_code, paper_ids=lists["paper_ids"])


def turns_from(messages: Any, name: str = "messages") -> list[Message]:
    """OpenAI-style messages as the pipeline's history: user/assistant turns kept, system/developer dropped."""
    if not isinstance(messages, list):
        raise _bad(f"{name} must be a list of {{role, content}} objects", name)
    turns: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"{name}[{i}] must be an object with a role", f"{name}[{i}]")
        role = m["role"]
        if role in _IGNORED_ROLES:
            continue
        if role not in {"user", "assistant"}:
            raise _bad(f"{name}[{i}]: role {role!r} is not supported (user, assistant; system is ignored)",
                       f"{name}[{i}].role")
        turns.append({"role": role, "content": _text(m.get("content"), f"{name}[{i}].content")})
    return turns


def parse_request(body: Any, settings: Settings) -> ChatRequest:
    """Check a chat-completion body; raise ApiError(400) naming the offending field."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object", None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required (GET /v1/models lists it)", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages must be a non-empty list", "messages")
    turns = turns_from(messages)
    if not turns or turns[-1]["role"] != "user":
        raise _bad("the last message must be the user's question", "messages")
    question = turns[-1]["content"].strip()
    if not question:
        raise _bad("the question (the last user message) is empty", "messages")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("n must be 1: one answer per question", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise _bad("stream_options must be an object", "stream_options")
    gen = settings.generation
    name = "max_completion_tokens" if body.get("max_tokens") is None else "max_tokens"
    max_tokens = _number(body, name, gen.max_tokens, 1, gen.n_ctx, integer=True)
    temperature = _number(body, "temperature", gen.temperature, 0.0, 2.0, integer=False)
    return ChatRequest(model=model, question=question, history=turns[:-1], filters=filters_from(body.get("filters")),
                       temperature=float(temperature), max_tokens=int(max_tokens), stream=stream,
                       include_usage=bool(options.get("include_usage")))


# --- models -----------------------------------------------------------------------------------------------------


def presets() -> list[Any]:
    """The model presets listed by /v1/models beside the loaded model: the one place that reads them."""
    try:
        from rag import presets as P
    except ImportError:  # a checkout without presets lists the loaded model only
        return []
    return list(P.PRESETS.values())


def loaded_model_id(assistant: Assistant) -> str:
    """The id clients send as `model`: a preset's name when its file is loaded, else the GGUF's stem, or the remote
    server's model name; e.g. "qwen2.5-coder-0.5b" for the default GGUF."""
    gen = assistant.generator
    remote = getattr(gen, "model", None)  # RemoteGenerator: the name the server gave
    if isinstance(remote, str) and remote:
        return remote
    source = getattr(gen, "source", None)  # LlamaGenerator: the GGUF asked for (before any faster copy)
    if isinstance(source, Path):
        for preset in presets():
            if preset.file_name == source.name:
                return str(preset.name)
        return source.stem
    return str(gen.name)


def models_list(assistant: Assistant, settings: Settings) -> dict[str, Any]:
    loaded = loaded_model_id(assistant)
    data: list[dict[str, Any]] = [{"id": loaded, "object": "model", "created": 0, "owned_by": OWNER, "loaded": True,
                                   "name": assistant.generator.name}]
    for p in presets():
        if p.name == loaded:
            data[0]["description"] = p.description
            continue
        data.append({"id": p.name, "object": "model", "created": 0, "owned_by": OWNER, "loaded": False,
                     "description": p.description})
    return {"object": "list", "data": data}


# --- answering ----------------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    answer: Answer
    pieces: int  # pieces the model generated (about one token each)
    created: int = field(default_factory=lambda: int(time.time()))
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")


class IndexFollower:
    """Between answers: when an ingest has published a new index since, have the assistant open it
    (`Assistant.follow_index`, which also runs every `store.follow_s` on its own: this makes it at once)."""

    def __init__(self, assistant: Assistant, settings: Settings) -> None:
        self.assistant, self.settings = assistant, settings
        self.lock = threading.Lock()
        self.seen = self._generation()

    def _generation(self) -> str | None:
        try:
            return index_generation(self.settings)
        except RagError:  # a damaged catalog: the answer that follows says so
            return None

    def __call__(self) -> None:
        with self.lock:
            generation = self._generation()
            if generation is None or generation == self.seen:
                return  # None: no generation id published yet: keep the loaded index
            # Opened beside the loaded one, swapped in under the compute lock (no retrieval is cut); a no-op when the
            # assistant's own follower or the UI opened it already.
            self.assistant.follow_index()
            log.info("index changed (generation %s): the API answers from it", generation)
            self.seen = generation


def _run(assistant: Assistant, req: ChatRequest, top_k: int, stop: threading.Event,
         follow: IndexFollower | None = None) -> Outcome | None:
    """Drive `assistant.stream` from start to end in this one thread; None when the client went away."""
    if follow is not None:
        follow()
    events: Iterator[str | Answer] = assistant.stream(req.question, req.history, req.filters, top_k,
                                                      req.temperature, req.max_tokens)
    pieces = 0
    try:
        for event in events:
            if stop.is_set():
                return None
            if isinstance(event, Answer):
                return Outcome(event, pieces)
            pieces += 1
    finally:
        getattr(events, "close", lambda: None)()  # releases the pipeline's locks in this thread
    raise RuntimeError("the pipeline ended without an answer")


def _translate(error: BaseException) -> ApiError:
    """A library error as an HTTP error: no paths, no tracebacks (logged instead)."""
    if isinstance(error, StoreError):
        return ApiError(503, "the paper index is not available; run `python -m rag ingest` on the server",
                        "server_error", code="index_unavailable")
    if isinstance(error, ModelError):
        return ApiError(503, "the language model could not be loaded or run", "server_error",
                        code="model_unavailable")
    if isinstance(error, ConfigError):
        return ApiError(400, "a setting has a value that cannot be used", param=None)
    return ApiError(500, "the assistant failed; the details are in the server log", "server_error")


def _extras(answer: Answer) -> dict[str, Any]:
    d = answer.to_dict()
    keys = ("abstained", "declined", "mode", "notices", "unsupported_sentences", "searched", "resolved_papers", "more",
            "timings", "settings_fingerprint", "prompt_version")
    return {k: d[k] for k in keys}


def _usage(outcome: Outcome) -> dict[str, int]:
    prompt = int(outcome.answer.timings.get("prompt_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": outcome.pieces, "total_tokens": prompt + outcome.pieces}


def completion(outcome: Outcome, model: str) -> dict[str, Any]:
    a = outcome.answer
    message = {"role": "assistant", "content": a.text, "citations": [c.to_dict() for c in a.citations]}
    return {"id": outcome.id, "object": "chat.completion", "created": outcome.created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(outcome), "system_fingerprint": a.settings_fingerprint, "rag": _extras(a)}


def chunks(outcome: Outcome, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The answer as OpenAI stream chunks: the role, the text in word pieces, then citations and finish_reason."""
    a = outcome.answer
    head = {"id": outcome.id, "object": "chat.completion.chunk", "created": outcome.created, "model": model,
            "system_fingerprint": a.settings_fingerprint}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _PIECE.findall(a.text):
        yield chunk({"content": piece})
    yield chunk({"citations": [c.to_dict() for c in a.citations]}, "stop", rag=_extras(a))
    if include_usage:
        yield {**head, "choices": [], "usage": _usage(outcome)}


def _sse(events: Iterator[dict[str, Any]]) -> Iterator[str]:
    for event in events:
        yield f"data: {json.dumps(event, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


# --- the app ------------------------------------------------------------------------------------------------------


def create_api(assistant: Assistant, settings: Settings) -> FastAPI:
    """A FastAPI app with the /v1 routes; ui/app.py mounts the Gradio UI on it at "/"."""
    app = FastAPI(title="abstracts-qa", docs_url=None, redoc_url=None, openapi_url=None)
    # Worker threads of our own: Gradio's handlers use anyio's pool, and answers waiting for the model must not
    # take its threads. One per admitted answer, so an admitted answer never waits for a thread.
    pool = concurrent.futures.ThreadPoolExecutor(settings.ui.api_max_pending, thread_name_prefix="api-answer")
    app.state.admitted = 0  # answers admitted and not finished; touched on the event loop only
    token = settings.ui.api_token
    follow = IndexFollower(assistant, settings)

    def check_auth(request: Request) -> None:
        if not token:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise ApiError(401, "a valid API key is required: send `Authorization: Bearer <ui.api_token>`",
                           code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})

    async def answer(req: ChatRequest, request: Request) -> Outcome:
        if app.state.admitted >= settings.ui.api_max_pending:
            raise ApiError(503, f"busy: {app.state.admitted} answers are already queued; retry shortly",
                           "server_error", code="server_busy", headers={"Retry-After": "2"})
        app.state.admitted += 1
        stop = threading.Event()
        try:
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(pool, _run, assistant, req, settings.retrieval.top_k, stop, follow)
            while True:
                done, _ = await asyncio.wait({future}, timeout=0.5)
                if done:
                    break
                if await request.is_disconnected():  # stop generating for nobody
                    stop.set()
                    raise ApiError(499, "the client closed the request")
            try:
                outcome = future.result()
            except Exception as e:
                log.exception("API answer failed")
                raise _translate(e) from None
            if outcome is None:
                raise ApiError(499, "the client closed the request")
            return outcome
        finally:
            stop.set()  # a no-op once the answer is done; stops it when this request was cancelled
            app.state.admitted -= 1

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.get("/v1/models")
    async def list_models(request: Request) -> JSONResponse:
        check_auth(request)
        return JSONResponse(models_list(assistant, settings))

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str, request: Request) -> JSONResponse:
        check_auth(request)
        for entry in models_list(assistant, settings)["data"]:
            if entry["id"] == model_id:
                return JSONResponse(entry)
        raise ApiError(404, f"model {model_id!r} does not exist", param="model", code="model_not_found")

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        check_auth(request)
        try:
            body = json.loads(await request.body() or b"null")
        except (ValueError, UnicodeDecodeError):
            raise _bad("the request body is not valid JSON", None) from None
        req = parse_request(body, settings)
        loaded = loaded_model_id(assistant)
        if req.model != loaded:
            listed = any(p.name == req.model for p in presets())
            why = " (it is a preset, but not the loaded model)" if listed else ""
            raise ApiError(404, f"model {req.model!r} is not served here{why}; this server answers with {loaded!r}",
                           param="model", code="model_not_found")
        outcome = await answer(req, request)
        if not req.stream:
            return JSONResponse(completion(outcome, loaded))
        return StreamingResponse(_aiter(_sse(chunks(outcome, loaded, req.include_usage))),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.api_route("/v1/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown(rest: str, request: Request) -> JSONResponse:
        check_auth(request)
        raise ApiError(404, f"unknown endpoint {request.method} /v1/{rest} (this server offers GET /v1/models and "
                       "POST /v1/chat/completions)", code="unknown_url")

    app.state.answer_pool = pool  # shut down by Served.close
    return app


async def _aiter(items: Iterator[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


# --- serving ------------------------------------------------------------------------------------------------------


class Served:
    """A server started in a thread (tests, notebooks): its URL, and close() to stop it and free the port."""

    def __init__(self, server: Any, thread: threading.Thread, app: FastAPI, url: str) -> None:
        self._server, self._thread, self.app, self.url = server, thread, app, url

    def close(self) -> None:
        for route in self.app.routes:  # the mounted UI: end its open event streams and its queue first
            mounted: Any = getattr(route, "app", None)
            if hasattr(mounted, "stop_event") and hasattr(mounted, "get_blocks"):
                mounted.stop_event.set()
                mounted.get_blocks()._queue.close()
        self._server.should_exit = True
        self._thread.join(timeout=15)
        pool = getattr(self.app.state, "answer_pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def run(app: FastAPI, host: str, port: int, block: bool = True) -> Served | None:
    """Serve `app` with uvicorn on host:port; block until interrupted, or return a Served handle at once."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           timeout_graceful_shutdown=5))
    if block:
        server.run()  # Ctrl+C stops it gracefully
        return None
    thread = threading.Thread(target=server.run, name="api-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:  # e.g. the port is taken: uvicorn logged why
            server.should_exit = True
            raise OSError(f"could not serve on {host}:{port}")
        time.sleep(0.02)
    return Served(server, thread, app, f"http://{host}:{port}")
