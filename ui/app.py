"""The Gradio app: Chat (streamed, cited, checked), Search (no LLM), Library (every paper), Settings.

Handlers call only the pipeline (`Assistant`) and `ui.render`; every string from the model or the corpus reaches
the page through render's escaping. Named API endpoints for clients: `/chat` (question -> answer JSON) and
`/search` (question -> hits JSON). Library errors become a friendly line; nothing shows a traceback or a path.

Why the answer stream runs in its own thread: Gradio advances a sync generator with `next()` on whichever pool
thread is free, while `Assistant.stream` holds the compute lock (and llama.cpp's) across its yields. One worker
thread drives the pipeline's generator from start to end and hands events over a queue, so a stream's locks are
taken and released by one thread and a page that goes away stops the generation.
Importing this module loads no model; `python -m rag serve` (ui/startup.py) does, at start-up, and imports this
module (and gradio) while the models load.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: nothing phones home

import gradio as gr  # noqa: E402

from rag import presets  # noqa: E402
from rag.catalog import Catalog  # noqa: E402
from rag.config import Settings  # noqa: E402
from rag.index import index_generation  # noqa: E402
from rag.pipeline import Assistant  # noqa: E402  (cheap: models load in warm(), not at import)
from rag.records import Answer, ConfigError, ModelError, Paper, RagError, StoreError  # noqa: E402
from rag.retrieve import Filters  # noqa: E402

from . import access, api, evaluation  # noqa: E402
from . import render as R  # noqa: E402

log = logging.getLogger(__name__)

EXAMPLES = [
    "How much does PrivGate cut privacy leakage?",
    "Which papers study privacy?",
    "What does SOLAR stand for?",
    "Summarize the work on reinforcement learning for LLM agents",
]
MAX_LIBRARY_ROWS = 500  # a 10k-paper table is unusable in a browser anyway: refine the filter instead
MAX_SOURCE_CHOICES = 500  # source files offered in the filters; a folder of 100k files would bloat every page
ALL_SOURCES = "All sources"
MODEL = "model"  # concurrency group of every event that computes with the embedder or the LLM
# The Settings sliders' ranges; a request's values (from the page or a client that skips it) are clamped to them.
TOP_K_RANGE, TEMPERATURE_RANGE, MAX_TOKENS_RANGE = (1, 10), (0.0, 1.5), (16, 512)
_LINKED = re.compile(r'<a class="cite" href="#cite-(\d+)">\[\d+\]</a>')


def friendly(error: BaseException) -> str:
    """One line for the page: the kind of problem and what to do, never the library's message (it names paths)."""
    if isinstance(error, ModelError):
        return "The language model could not be loaded or run. Pick another model under Settings."
    if isinstance(error, StoreError):
        return "The paper index is not available. Run `python -m rag ingest` on the server, then reload."
    if isinstance(error, ConfigError):
        return "A setting has a value that cannot be used."
    if isinstance(error, RagError):
        return "The assistant could not handle this request."
    return "Something went wrong; the details are in the server log."


def _clamp(value: Any, bounds: tuple[float, float], default: float) -> float:
    """`value` as a number within `bounds`; anything that is not a finite number gives `default` (clamped too)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float(default)
    if number != number or number in (float("inf"), float("-inf")):  # NaN or infinite
        number = float(default)
    return min(max(number, bounds[0]), bounds[1])


class Options(NamedTuple):
    """A request's values from the Settings panel, each clamped to its slider's range; `Assistant.stream` takes them
    per call, so one request's values never reach another's answer."""

    top_k: int
    temperature: float
    max_tokens: int


def stream_in_thread(assistant: Assistant, question: str, history: list[dict[str, str]], filters: Filters,
                     options: Options) -> Iterator[str | Answer]:
    """`assistant.stream` driven by one thread (see the module docstring), with this request's options."""
    events: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    done = object()

    def work() -> None:
        try:
            gen = assistant.stream(question, history, filters, top_k=options.top_k, temperature=options.temperature,
                                   max_tokens=options.max_tokens)
            try:
                for event in gen:
                    events.put(event)
                    if stop.is_set():  # the page went away: stop generating
                        break
            finally:
                getattr(gen, "close", lambda: None)()  # releases the locks in this thread
        except BaseException as e:  # handed to the page's thread, which translates it
            events.put(e)
        finally:
            events.put(done)

    threading.Thread(target=work, name="ui-answer", daemon=True).start()
    try:
        while (item := events.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _unlink(html: str) -> str:
    """An older answer's citation links point at cards that are gone: keep the [n] as text."""
    return _LINKED.sub(lambda m: f"&#91;{m.group(1)}&#93;", html)


def _messages(turns: list[dict[str, str]]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for i, t in enumerate(turns):
        html = t["html"] if i == len(turns) - 1 else _unlink(t["html"])
        out += [{"role": "user", "content": R.safe_text(t["q"])}, {"role": "assistant", "content": html}]
    return out


def _history(turns: list[dict[str, str]]) -> list[dict[str, str]]:
    """Plain text of earlier turns for the model (never the HTML shown on the page)."""
    out: list[dict[str, str]] = []
    for t in turns:
        if t.get("a"):
            out += [{"role": "user", "content": t["q"]}, {"role": "assistant", "content": t["a"]}]
    return out


def model_choices(settings: Settings) -> dict[str, str]:
    """Dropdown label -> model path or preset name ("" = the default GGUF). Labels are file or preset names: the
    page never sees a path.
    With `generation.remote_url` the server's model is the only choice: local files would not be what answers."""
    if settings.generation.remote_url:
        return {f"{settings.generation.remote_model or 'the model'} on the remote server": ""}
    default = Path(settings.generation.model_path).name if settings.generation.model_path else presets.DEFAULT
    choices = {f"{default} (default)": settings.generation.model_path}
    models_dir = settings.paths.models_dir
    if models_dir.is_dir():
        for path in sorted(models_dir.glob("*.gguf")):
            if str(path) != settings.generation.model_path:
                choices.setdefault(path.name, str(path))
    # The other installed presets by name: SmolLM2 from its package, those installed into the environment (`models
    # install NAME --env`); one in the models folder is listed above by its file.
    for preset in presets.PRESETS.values():
        found = presets.installed_path(preset, None)
        if found is not None and preset.name not in (default, settings.generation.model_path) \
                and found.parent != models_dir:
            choices.setdefault(preset.name, preset.name)
    return choices


class Handlers:
    """Event handlers over one Assistant; per-session state lives in gr.State values passed in and out."""

    def __init__(self, assistant: Assistant, settings: Settings) -> None:
        self.assistant, self.settings = assistant, settings
        self.model_switch = access.model_switch_allowed(settings.ui) and not settings.generation.remote_url
        self.models = model_choices(settings)
        self.model_label = next(iter(self.models))
        # Records stay in the catalog (SQLite) and are read per request: a million papers would not fit the page or
        # the process. Source files are listed for the filters, the first MAX_SOURCE_CHOICES of them.
        self.generation = self._generation()
        every = self.catalog.sources()
        self.sources: list[str] = every[:MAX_SOURCE_CHOICES]
        self.more_sources = len(every) - len(self.sources)

    def _generation(self) -> str | None:
        try:
            return index_generation(self.settings)
        except RagError:  # a damaged catalog: the question that follows says so
            return None

    def follow_index(self) -> None:
        """Between questions: when an ingest has published a new index since, have the assistant open it (BM25,
        collection, catalog) beside the loaded one and swap it in under the compute lock, so no retrieval is cut;
        an answer already generating keeps what it retrieved. The assistant also does this every
        `store.follow_s` on its own; here it is at once."""
        generation = self._generation()
        if generation is None or generation == self.generation:
            return  # None: no generation id published yet: keep answering from the loaded index
        self.assistant.follow_index()
        log.info("index changed (generation %s): answering from it", generation)
        self.generation = generation

    @property
    def catalog(self) -> Catalog:
        """The catalog of the generation the assistant reads now (the Library follows the index too)."""
        return self.assistant.catalog

    def _options(self, top_k: Any, temperature: Any, max_tokens: Any) -> Options:
        """This request's options, each clamped to its slider's range (a client can send anything)."""
        gen = self.settings.generation
        return Options(top_k=self._top_k(top_k), temperature=_clamp(temperature, TEMPERATURE_RANGE, gen.temperature),
                       max_tokens=int(_clamp(max_tokens, MAX_TOKENS_RANGE, gen.max_tokens)))

    def _top_k(self, top_k: Any) -> int:
        return int(_clamp(top_k, TOP_K_RANGE, self.settings.retrieval.top_k))

    def _capped(self, question: str) -> tuple[str, str]:
        """(the question cut to `ui.max_question_chars`, a notice when it was cut)."""
        cap = self.settings.ui.max_question_chars
        if len(question) <= cap:
            return question, ""
        return question[:cap].rstrip(), (f"Your question was {len(question):,} characters long; only the first "
                                         f"{cap:,} were used.")

    @staticmethod
    def _filters(sources: list[str] | None, scope: str | None) -> Filters:
        return Filters(sources=frozenset(sources or ()), paper_ids=frozenset([scope]) if scope else frozenset())

    # --- chat -----------------------------------------------------------------------------------------------

    def chat(self, question: str, turns: list[dict[str, str]], scope: str | None, top_k: float,
             temperature: float, max_tokens: float, sources: list[str] | None) -> Iterator[tuple[Any, ...]]:
        question, cut = self._capped((question or "").strip())
        if not question:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        history = _history(turns)
        asked = question
        paper = self.catalog.get(scope) if scope else None
        if paper is not None:
            # Scoped to one paper: name it in the question, or a short question ("what is the overhead?") scores
            # under the corpus-wide abstain threshold although the user picked the paper.
            asked = f"{question} (about the paper: {paper.title.rstrip('…')})"
        turn = {"q": question, "a": "", "html": "<em>Searching the abstracts…</em>"}
        turns = [*turns, turn]
        yield _messages(turns), R.message("Retrieving papers…"), turns, ""
        streamed, last = "", 0.0
        try:
            self.follow_index()
            options = self._options(top_k, temperature, max_tokens)
            for event in stream_in_thread(self.assistant, asked, history, self._filters(sources, scope), options):
                if isinstance(event, str):
                    streamed += event
                    if time.monotonic() - last > 0.04:  # ~25 updates a second is plenty for the eye
                        last = time.monotonic()
                        turn["html"] = R.render_stream(streamed)
                        yield _messages(turns), gr.skip(), turns, gr.skip()
                    continue
                answer = event
                valid = {c.n for c in answer.citations}
                # Checks describe the model's text; an extractive answer replaced it with quoted evidence.
                generated = answer.mode == "generated"
                unsupported = [c.sentence for c in answer.checks if generated and not c.supported]
                body = R.render_answer(answer.text, valid, unsupported)
                turn.update(a=answer.text, html=body + R.small_print(answer) + (R.message(cut) if cut else ""))
                yield _messages(turns), R.sources_panel(answer), turns, gr.skip()
        except Exception as e:
            log.exception("chat failed")
            turn.update(a="", html=f'<span class="error">{R.safe_text(friendly(e))}</span>')
            yield _messages(turns), R.message(friendly(e), "error"), turns, gr.skip()

    def chat_api(self, question: str, history: list[dict[str, Any]] | None = None,
                 filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer one question: {"answer", "abstained", "mode", "citations", "hits", "timings", ...}.

        `history`: earlier turns, [{"role": "user" | "assistant", "content": "..."}] (a follow-up such as "and its
        overhead?" is read with them, as in the chat); `filters`: {"sources": [file names], "has_code": bool,
        "paper_ids": [ids]}. Both optional: `predict("question", api_name="/chat")` still works.
        """
        question, _ = self._capped((question or "").strip())
        if not question:
            raise gr.Error("Ask a question.")
        try:
            turns, only = api.turns_from(history or [], "history"), api.filters_from(filters or None)
        except api.ApiError as e:
            raise gr.Error(e.message) from None
        try:
            self.follow_index()
            return self.assistant.ask(question.strip(), history=turns, filters=only).to_dict()
        except Exception as e:
            log.exception("chat api failed")
            raise gr.Error(friendly(e)) from None

    # --- search ---------------------------------------------------------------------------------------------

    def search(self, question: str, top_k: float, sources: list[str] | None) -> str:
        question, cut = self._capped((question or "").strip())
        if not question:
            return R.message("Type a question to search the abstracts.")
        try:
            self.follow_index()
            got = self.assistant.search(question, self._filters(sources, None), top_k=self._top_k(top_k))
        except Exception as e:
            log.exception("search failed")
            return R.message(friendly(e), "error")
        return (R.message(cut) if cut else "") + R.search_results(got.hits, got.timings)

    def search_api(self, question: str) -> dict[str, Any]:
        """Retrieve papers without the language model: {"question", "hits": [{rank, title, score, why, ...}]}."""
        question, _ = self._capped((question or "").strip())
        if not question:
            raise gr.Error("Ask a question.")
        try:
            self.follow_index()
            got = self.assistant.search(question)
        except Exception as e:
            log.exception("search api failed")
            raise gr.Error(friendly(e)) from None
        return {"question": question, "hits": R.hits_json(got.hits),
                "timings": {k: round(v, 2) for k, v in got.timings.items()}}

    # --- library --------------------------------------------------------------------------------------------

    def library_rows(self, source: str | None, has_code: bool, text: str) -> list[list[Any]]:
        papers = self.catalog.find(None if not source or source == ALL_SOURCES else source, bool(has_code),
                                   text or "", MAX_LIBRARY_ROWS)
        return [[p.title, p.venue, p.source, p.position, "yes" if p.has_code else ""] for p in papers]

    def sources_label(self, label: str) -> str:
        """A filter's label, saying when only the first source files are offered."""
        if not self.more_sources:
            return label
        return f"{label}; the first {len(self.sources)} of {len(self.sources) + self.more_sources:,} files"

    def _paper_at(self, source: Any, position: Any) -> Paper | None:
        try:
            return self.catalog.at(str(source), int(position))
        except (TypeError, ValueError):  # a row value the table did not send
            return None

    def open_paper(self, evt: gr.SelectData) -> tuple[str, str | None]:
        row = evt.row_value or []
        paper = self._paper_at(row[2], row[3]) if len(row) >= 4 else None
        if paper is None:
            return R.message("Select a row to open its paper."), None
        return R.paper_card(paper), paper.paper_id

    def scope_to(self, paper_id: str | None) -> tuple[Any, ...]:
        paper = self.catalog.get(paper_id) if paper_id else None
        if paper is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        badge = R.message(f"Questions are now about: {paper.title}")
        return paper.paper_id, gr.update(value=badge, visible=True), gr.update(visible=True), gr.Tabs(selected="chat")

    # --- settings -------------------------------------------------------------------------------------------

    def rescan_models(self) -> Any:
        """GGUF files added to the models folder since start-up show up when the dropdown is opened."""
        self.models = {**model_choices(self.settings), **self.models}
        return gr.update(choices=list(self.models))

    def change_model(self, label: str) -> Iterator[tuple[Any, str]]:
        if not self.model_switch:  # the picker is not offered; a request that comes anyway changes nothing
            yield self.model_label, ("The remote server's model answers here (generation.remote_url)."
                                     if self.settings.generation.remote_url else
                                     "Switching the model is off here (an admin setting: ui.model_switch).")
            return
        if label == self.model_label or label not in self.models:
            yield gr.skip(), gr.skip()
            return
        yield gr.skip(), f"Loading {label}…"
        try:
            self.assistant.use_model(self.models[label])  # local GGUF, or the remote server when one is set
        except Exception as e:
            log.exception("model load failed")
            yield self.model_label, f"Could not load {label}: {friendly(e)} Still using {self.model_label}."
            return
        self.model_label = label
        yield gr.skip(), f"Model: {label} (loaded)"


def build_app(assistant: Assistant, settings: Settings) -> gr.Blocks:
    h = Handlers(assistant, settings)
    with gr.Blocks(title="abstracts-qa") as app:
        gr.Markdown("## abstracts-qa\nCited answers from research-paper abstracts, computed on this machine.")
        turns = gr.State([])
        scope = gr.State(None)
        selected = gr.State(None)
        with gr.Tabs() as tabs:
            with gr.Tab("Chat", id="chat"):
                with gr.Row():
                    with gr.Column(scale=3):
                        chatbot = gr.Chatbot(elem_id="chatbot", height=520, label="Answers", latex_delimiters=[],
                                             sanitize_html=True, allow_tags=False, feedback_options=None,
                                             buttons=["copy", "copy_all"])
                        with gr.Row():
                            scope_badge = gr.HTML(visible=False)
                            unscope = gr.Button("Ask about all papers", visible=False, size="sm", scale=0)
                        with gr.Row():
                            msg = gr.Textbox(placeholder="Ask about the papers…", show_label=False, scale=5,
                                             elem_id="question", max_lines=4,
                                             max_length=settings.ui.max_question_chars)
                            ask = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                            clear = gr.Button("Clear", scale=0)
                        gr.Examples(EXAMPLES, inputs=msg, label="Examples")
                    with gr.Column(scale=2):
                        panel = gr.HTML(R.message("The papers an answer cites appear here."), elem_id="sources",
                                        max_height=640, padding=True)
            with gr.Tab("Search", id="search"):
                with gr.Row():
                    query = gr.Textbox(placeholder="Find papers (no language model)…", show_label=False, scale=5)
                    find = gr.Button("Search", variant="primary", scale=1)
                results = gr.HTML(elem_id="search-results")
            with gr.Tab("Library", id="library"):
                with gr.Row():
                    lib_source = gr.Dropdown([ALL_SOURCES, *h.sources], value=ALL_SOURCES,
                                             label=h.sources_label("Source file"))
                    lib_code = gr.Checkbox(label="Has a code link", value=False)
                    lib_text = gr.Textbox(label="Text filter", placeholder="words in the title or abstract")
                table = gr.Dataframe(h.library_rows(None, False, ""), headers=["Title", "Venue", "Source", "#", "Code"],
                                     interactive=False, wrap=True, max_height=420, elem_id="library")
                about = gr.Button("Ask about this paper")
                card = gr.HTML(R.message("Select a paper to open its card."))
            eval_outputs = evaluation.tab()
        with gr.Accordion("Settings", open=False):
            with gr.Row():
                model_pick = gr.Dropdown(list(h.models), value=h.model_label, interactive=h.model_switch,
                                         label="Model (shared by all users)" if h.model_switch else
                                         "Model (set by generation.remote_url)" if settings.generation.remote_url
                                         else "Model (switching is an admin setting: ui.model_switch)")
                model_status = gr.Markdown(f"Model: {h.model_label}")
            with gr.Row():
                top_k = gr.Slider(*TOP_K_RANGE, value=h._top_k(settings.retrieval.top_k), step=1,
                                  label="Papers retrieved (top-k)")
                temperature = gr.Slider(*TEMPERATURE_RANGE, value=settings.generation.temperature, step=0.05,
                                        label="Temperature")
                max_tokens = gr.Slider(*MAX_TOKENS_RANGE, value=settings.generation.max_tokens, step=8,
                                       label="Max tokens")
            only = gr.CheckboxGroup(h.sources, label=h.sources_label("Only these source files (none = all)"))

        # Events that use the models share one concurrency group of size 1: one request computes, the rest queue
        # (and the page shows their position). UI events are private; clients use the two gr.api endpoints.
        # Registered first so they get the plain names /chat and /search.
        gr.api(h.chat_api, api_name="chat", concurrency_id=MODEL, concurrency_limit=1)
        gr.api(h.search_api, api_name="search", concurrency_id=MODEL, concurrency_limit=1)
        app.load(evaluation.load, None, eval_outputs, api_visibility="private")
        chat_in = [msg, turns, scope, top_k, temperature, max_tokens, only]
        chat_out = [chatbot, panel, turns, msg]
        for trigger in (msg.submit, ask.click):
            trigger(h.chat, chat_in, chat_out, api_visibility="private", concurrency_id=MODEL, concurrency_limit=1)
        for trigger in (query.submit, find.click):
            trigger(h.search, [query, top_k, only], results, api_visibility="private", concurrency_id=MODEL,
                    concurrency_limit=1)
        if h.model_switch:
            model_pick.input(h.change_model, model_pick, [model_pick, model_status], api_visibility="private",
                             concurrency_id=MODEL, concurrency_limit=1)
        # The rest touch no model and skip the queue.
        for trigger in (clear.click, chatbot.clear):
            trigger(lambda: ([], [], R.message("The papers an answer cites appear here.")), None,
                    [chatbot, turns, panel], api_visibility="private", queue=False)
        unscope.click(lambda: (None, gr.update(visible=False), gr.update(visible=False)), None,
                      [scope, scope_badge, unscope], api_visibility="private", queue=False)
        model_pick.focus(h.rescan_models, None, model_pick, api_visibility="private", queue=False)
        for control in (lib_source, lib_code, lib_text):
            control.change(h.library_rows, [lib_source, lib_code, lib_text], table, api_visibility="private",
                           queue=False)
        table.select(h.open_paper, None, [card, selected], api_visibility="private", queue=False)
        about.click(h.scope_to, selected, [scope, scope_badge, unscope, tabs], api_visibility="private", queue=False)
    return app


def _ui_options(settings: Settings, logins: list[tuple[str, str]] | None) -> dict[str, Any]:
    """Gradio's options as `launch` and `served_app` share them: local only, no file routes into the data folder,
    the models or the seeds, no share link, no MCP or server-side rendering; `logins` when exposed."""
    blocked = [str(p.resolve()) for p in (settings.paths.data_dir, settings.paths.models_dir, settings.paths.seeds_dir)]
    if settings.generation.model_path:
        blocked.append(str(Path(settings.generation.model_path).resolve()))
    return dict(allowed_paths=[], blocked_paths=blocked, show_error=False, css=R.CSS, head=R.HEAD, mcp_server=False,
                ssr_mode=False, auth=logins)


def served_app(app: gr.Blocks, settings: Settings, assistant: Assistant | None, port: int | None = None) -> Any:
    """The UI mounted at "/" of a FastAPI app, the queue bounded as in `launch`: with `assistant`, the app of the
    OpenAI-compatible API (ui/api.py), so both share a port; without, an app of its own (`python -m rag serve` puts
    the API in front of it itself, ui/startup.py). Either way the API is served too, so an exposed app needs its
    token as well as a login."""
    from fastapi import FastAPI

    logins = access.check_access(settings.ui, api=True)
    # Bounded: past `queue_size` waiting requests a new one is refused at once with Gradio's "This application is
    # currently busy. Please try again." (HTTP 503 to clients) instead of waiting behind an unbounded line.
    app.queue(default_concurrency_limit=1, max_size=settings.ui.queue_size)
    parent = (api.create_api(assistant, settings) if assistant is not None
              else FastAPI(title="abstracts-qa", docs_url=None, redoc_url=None, openapi_url=None))
    return gr.mount_gradio_app(parent, app, path="/", server_name=settings.ui.host,
                               server_port=port or settings.ui.port, **_ui_options(settings, logins))


def launch(app: gr.Blocks, settings: Settings, port: int | None = None, block: bool = True,
           assistant: Assistant | None = None) -> api.Served | None:
    """Queue and start the app in this process (tests, notebooks; `serve` is ui/startup.py).

    With `assistant`, the OpenAI-compatible API shares the port (`served_app`, run by uvicorn); unblocked, the
    returned handle's close() stops it. Without, Gradio serves the UI alone.
    """
    port = port or settings.ui.port
    if assistant is not None:
        both = served_app(app, settings, assistant, port)
        if block:
            print(f"Serving on http://{settings.ui.host}:{port} (UI) and /v1 (OpenAI-compatible API)", flush=True)
        return api.run(both, settings.ui.host, port, block)
    # A login is required when the app is exposed (ConfigError, saying how to set one, when there is none).
    logins = access.check_access(settings.ui, api=False)
    app.queue(default_concurrency_limit=1, max_size=settings.ui.queue_size)
    app.launch(server_name=settings.ui.host, server_port=port, share=False, prevent_thread_lock=not block,
               quiet=not block, **_ui_options(settings, logins))
    return None
