"""`python -m rag serve`: listen at once, load behind it, then hand each request to the part of the app it is for.

uvicorn starts on the port before anything heavy is imported or loaded, serving `Starting`. The app has two parts:
the OpenAI-compatible API under /v1 (ui/api.py), installed once the index and the model are loaded, and the Gradio UI
with its own endpoints (`/chat`, `/search`) everywhere else (ui/app.py), installed once gradio is imported and the
page built. Until its part is in, `GET /` answers 200 with a page that says the app is loading (and reloads
itself), and every other request waits and is then handed over, so a question asked early is answered once the model
is in. A load that fails stops the server, and `serve` raises its error, as it did when loading came first.

Access rules are checked before the port opens (ui/access.py): an exposed app without a login stops here, before any
work; the loading page shows no data, and what waits is handed to the parts, which ask for the login (UI) and the
token (API) themselves.

Not here: the app's pages and handlers (ui/app.py), the API (ui/api.py), how answers are made (rag/pipeline.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import importlib
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rag.config import Settings

from . import access

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOADING_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="1">
<title>abstracts-qa (starting)</title></head>
<body style="font-family: system-ui, sans-serif; margin: 3em">
<h2>abstracts-qa is starting</h2>
<p>Loading the paper index, the language model and this page; it opens the app as soon as they are ready.</p>
<p>Questions sent now are answered once the model is loaded.</p>
</body></html>
"""


API, UI = "api", "ui"  # the two parts of the app: the OpenAI-compatible API under /v1, the Gradio UI elsewhere


def part(path: str) -> str:
    return API if path == "/v1" or path.startswith("/v1/") else UI


class Starting:
    """The ASGI app served from the first moment. Its two parts are installed as they are ready (the API, which needs
    only the index and the model, before the UI, which also needs gradio); until then `GET /` answers with a
    loading page and every other request waits for its part (503 if loading failed). uvicorn's lifespan events
    are passed on to the parts (Gradio starts its queue on them)."""

    def __init__(self) -> None:
        self.apps: dict[str, App] = {}
        self.failed = False
        self._ready = {API: asyncio.Event(), UI: asyncio.Event()}  # set on the server's loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = threading.Event()  # the server's loop is running (lifespan startup seen)
        self._state: dict[str, Any] = {}
        self._lifespans: list[_Lifespan] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        which = part(scope.get("path", "/"))
        if which not in self.apps and scope["type"] == "http" and scope["path"] == "/" \
                and scope["method"] in ("GET", "HEAD") and not self.failed:
            await _loading_page(scope, send)
            return
        await self._ready[which].wait()
        app = self.apps.get(which)
        if app is None:  # loading failed: the server is stopping
            await _unavailable(scope, send)
            return
        await app(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._state = scope.get("state", {})  # uvicorn copies it into every request's scope
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._loop = asyncio.get_running_loop()
                self._serving.set()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for inner in reversed(self._lifespans):
                    await inner.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def install(self, which: str, app: App, timeout: float = 60.0) -> None:
        """From a loading thread: start `app` (its lifespan) on the server's loop, then hand it its requests."""
        if not self._serving.wait(timeout):
            raise RuntimeError("the server did not start")
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._install(which, app), self._loop).result(timeout)

    async def _install(self, which: str, app: App) -> None:
        inner = _Lifespan(app, self._state)
        await inner.startup()
        self._lifespans.append(inner)
        self.apps[which] = app
        self._ready[which].set()

    def fail(self) -> None:
        """From a loading thread: loading failed; requests waiting for a part not installed get 503."""
        self.failed = True
        if self._loop is not None:
            for event in self._ready.values():
                self._loop.call_soon_threadsafe(event.set)


class _Lifespan:
    """An app's ASGI lifespan, driven by hand (uvicorn already ran its own startup with `Starting`)."""

    def __init__(self, app: App, state: dict[str, Any]) -> None:
        self.app, self.state = app, state
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        self._task: asyncio.Future[None] | None = None

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        self._task = asyncio.ensure_future(self.app(scope, self._to_app.get, self._from_app.put))
        await self._to_app.put({"type": "lifespan.startup"})
        reply = await self._from_app.get()
        if reply["type"] != "lifespan.startup.complete":
            raise RuntimeError(f"the app did not start: {reply.get('message', reply['type'])}")

    async def shutdown(self) -> None:
        await self._to_app.put({"type": "lifespan.shutdown"})
        await self._from_app.get()
        if self._task is not None:
            await self._task


async def _loading_page(scope: Scope, send: Send) -> None:
    headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
               (b"content-length", str(len(LOADING_PAGE)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else LOADING_PAGE})


async def _unavailable(scope: Scope, send: Send) -> None:
    if scope["type"] != "http":  # a websocket: refuse it
        await send({"type": "websocket.close", "code": 1011})
        return
    body = b'{"error": {"message": "the server could not start", "type": "server_error", "code": "unavailable"}}'
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def prepare(settings: Settings, gate: Starting, assistant: Any = None) -> None:
    """Ingest if needed, load the index and the model, then install the API; build the UI and install it.
    `assistant`: an Assistant built elsewhere (tests: fake models); by default one from `settings`.

    Side by side where that helps on two cores: gradio (~2.5 s of imports, the longest step) is imported in a
    thread from the start, while this one checks the seeds and opens the index, then loads the GGUF and decodes the
    warm-up token (llama.cpp, mostly outside the GIL). Not the GGUF first: while llama-cpp-python loads a model it
    points file descriptors 1 and 2 at /dev/null (its `suppress_stdout_stderr`), which would swallow the index's
    warnings. The API needs no gradio, so it answers before the UI is built. The cyclic garbage collector is off
    meanwhile: start-up allocates much and frees little, and its passes cost ~15 % of gradio's import.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="serve-load") as pool:
            ui = pool.submit(importlib.import_module, "ui.app")
            from rag.pipeline import Assistant

            assistant = assistant or Assistant(settings)
            _open_index(settings, assistant)
            assistant.warm()  # the GGUF loaded, one token decoded: the first question pays no load cost
            from .api import create_api

            gate.install(API, create_api(assistant, settings))
            log.info("API ready")
            U = ui.result()
        gate.install(UI, U.served_app(U.build_app(assistant, settings), settings, None))
    finally:
        if collecting:
            gc.enable()


def _open_index(settings: Settings, assistant: Any) -> None:
    """The ingest `serve` has always started with (unchanged files are skipped, nothing embedded), then the index."""
    from rag.index import index_generation
    from rag.pipeline import ingest
    from rag.records import StoreLockedError

    try:
        summary = ingest(settings, embedder=assistant.embedder)
    except StoreLockedError:
        # Another process holds the writer lock: a replica starting at the same time, or an ingest job. With an
        # index already published this one serves it as a reader and follows the next one the writer publishes.
        if index_generation(settings) is None:
            raise
        log.warning("the index is being written by another process; serving the published one meanwhile")
    else:
        for note in summary.notes:  # e.g. papers whose chunks were missing from the collection, embedded again
            log.warning("index: %s", note)
        log.info("index ready: %d papers, %d chunks", summary.papers, summary.chunks)
    _ = assistant.retriever  # store, catalog, BM25


def serve(settings: Settings, load: Callable[[Settings, Starting], None] = prepare, block: bool = True) -> Running:
    """Listen on `ui.host:ui.port` at once and serve the loading page; `load(settings, gate)` in a thread installs
    the app's parts. Blocks until interrupted (or, `block=False`, returns at once: tests). A failed load stops the
    server, and then raises its error."""
    access.check_access(settings.ui)  # an exposed app without a login stops here, before any ingest or model load
    import uvicorn

    gate = Starting()
    server = uvicorn.Server(uvicorn.Config(gate, host=settings.ui.host, port=settings.ui.port, log_level="warning",
                                           timeout_graceful_shutdown=5))
    running = Running(gate, server, settings)
    if block:  # said before loading starts: llama.cpp silences stdout while it loads the GGUF (see prepare)
        print(f"Serving on http://{settings.ui.host}:{settings.ui.port} (UI) and /v1 (OpenAI-compatible API); "
              "loading the models", flush=True)
    threading.Thread(target=running.load, args=(load,), name="serve-load", daemon=True).start()
    if block:
        server.run()  # Ctrl+C stops it gracefully
        running.raise_error()
        return running
    running.thread = threading.Thread(target=server.run, name="serve", daemon=True)
    running.thread.start()
    return running


class Running:
    """A server started by `serve`: how its loading went, and close() to stop it (tests)."""

    def __init__(self, gate: Starting, server: Any, settings: Settings) -> None:
        self.gate, self.server, self.settings = gate, server, settings
        self.url = f"http://{settings.ui.host}:{settings.ui.port}"
        self.loaded = threading.Event()
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def load(self, load: Callable[[Settings, Starting], None]) -> None:
        try:
            load(self.settings, self.gate)
            log.info("ready: UI and API")
        except BaseException as e:  # handed to the thread that runs the server
            log.debug("loading failed", exc_info=True)
            self.error = e
            self.gate.fail()
            self.server.should_exit = True
        finally:
            self.loaded.set()

    def raise_error(self) -> None:
        """The load's error, if it failed."""
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=15)
