"""A generator backed by an OpenAI-compatible server (the only module that imports an HTTP client, httpx).

Serve a bigger GGUF on a GPU box and point the assistant at it:
    gpu-box$ python -m llama_cpp.server --model big.gguf --n_gpu_layers -1 --n_ctx 8192 --interrupt_requests False \
                 --host 0.0.0.0 --port 8000
(`--interrupt_requests False`: by default llama-cpp-python's server cuts off the answer it is streaming when
another request arrives, so concurrent answers come back empty or truncated; with it they wait their turn.)
    laptop$  RAG_GENERATION_REMOTE_URL=http://gpu-box:8000 python -m rag serve
The answer streams over server-sent events from `POST /v1/chat/completions` (`"stream": true`), one
`data: {json}` line per piece and `data: [DONE]` at the end; only the text deltas leave this module.

Token counts (the prompt budget) use the server's `POST /extras/tokenize` (llama-cpp-python's server) when it
has one; otherwise a deliberately high estimate of one token per 3 bytes (English BPE averages ~4 characters a
token, so the budget errs towards dropping evidence, never towards overflowing the context), e.g. 1,200 bytes ->
400 tokens. The context size comes from llama.cpp's `GET /props` when offered, else `generation.n_ctx`.

Generation runs on the server, so it needs no local lock: up to `generation.remote_parallel` streams run at once
(a semaphore; match the server's parallel slots, e.g. llama.cpp's `--n_parallel`), and `runs_elsewhere` tells the
pipeline it may release its compute lock while this streams.

Every failure (no server, HTTP error, an error event in the stream) is a `ModelError` naming the URL. This module
does not start or manage servers.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx

from .config import Generation
from .generate import Message
from .records import ModelError

log = logging.getLogger(__name__)

BYTES_PER_TOKEN_ESTIMATE = 3
TOKENS_PER_MESSAGE = 4  # role markers and separators added by a chat template


class RemoteGenerator:
    """Chat completions from a server at `generation.remote_url` (with or without a trailing /v1)."""

    def __init__(self, settings: Generation, client: httpx.Client | None = None) -> None:
        base = settings.remote_url.rstrip("/")
        self.url = base[:-3] if base.endswith("/v1") else base
        # At most remote_parallel streams at once. A semaphore, not a lock: a stream may be resumed, and so release
        # its slot, from a thread other than the one that took it.
        self.slots = threading.BoundedSemaphore(settings.remote_parallel)
        self.runs_elsewhere = True  # see the module docstring
        self._client = client or httpx.Client(base_url=self.url, timeout=httpx.Timeout(settings.remote_timeout_s))
        self._tokenize: bool | None = None  # whether /extras/tokenize works; found out on first use
        self.model = settings.remote_model or self._first_model()
        self.name = f"{self.model} @ {self.url}"
        self.n_ctx = self._server_n_ctx() or settings.n_ctx

    def _get(self, path: str) -> Any:
        try:
            r = self._client.get(path)
        except httpx.HTTPError as e:
            raise ModelError(f"{self.url}: cannot reach the remote model server ({type(e).__name__}: {e})") from None
        return r.json() if r.status_code == 200 else None

    def _first_model(self) -> str:
        data = self._get("/v1/models")
        models = (data or {}).get("data") or []
        if not models:
            raise ModelError(f"{self.url}: the server lists no model at /v1/models; set generation.remote_model")
        return str(models[0].get("id", "default"))

    def _server_n_ctx(self) -> int | None:
        try:
            props = self._get("/props")
            n = (props or {}).get("default_generation_settings", {}).get("n_ctx")
            return int(n) if n else None
        except (ModelError, ValueError, AttributeError):
            return None

    def count_tokens(self, messages: list[Message]) -> int:
        # The same rendering as the local adapter's count, so budgets match between backends.
        text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
        extra = TOKENS_PER_MESSAGE * len(messages)
        if self._tokenize is not False:
            try:
                r = self._client.post("/extras/tokenize", json={"input": text, "model": self.model})
                if r.status_code == 200:
                    self._tokenize = True
                    return len(r.json()["tokens"]) + extra
                self._tokenize = False
                log.info("%s has no /extras/tokenize (HTTP %s); estimating token counts", self.url, r.status_code)
            except (httpx.HTTPError, ValueError, KeyError) as e:
                self._tokenize = False
                log.info("%s: /extras/tokenize failed (%s); estimating token counts", self.url, e)
        return len(text.encode("utf-8")) // BYTES_PER_TOKEN_ESTIMATE + 1 + extra

    def stream(self, messages: list[Message], max_tokens: int, temperature: float,
               stop: list[str] | None = None) -> Iterator[str]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                                "temperature": temperature, "stream": True}
        if stop:
            body["stop"] = stop
        with self.slots:
            try:
                with self._client.stream("POST", "/v1/chat/completions", json=body) as r:
                    if r.status_code != 200:
                        detail = r.read().decode("utf-8", "replace")[:300]
                        raise ModelError(f"{self.url}: chat completion failed (HTTP {r.status_code}: {detail})")
                    yield from _sse_pieces(r.iter_lines(), self.url)
            except httpx.HTTPError as e:
                raise ModelError(f"{self.url}: the remote model server failed ({type(e).__name__}: {e})") from None


def _sse_pieces(lines: Iterator[str], url: str) -> Iterator[str]:
    """Text deltas of an OpenAI chat-completion event stream, e.g. 'data: {"choices":[{"delta":{"content":"Hi"}}]}'."""
    for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, ": ping" comments, "event:" lines
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            event = json.loads(data)
        except ValueError:
            raise ModelError(f"{url}: unreadable event in the stream: {data[:120]!r}") from None
        if "error" in event:
            raise ModelError(f"{url}: the server reported an error: {str(event['error'])[:300]}")
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                yield str(piece)
