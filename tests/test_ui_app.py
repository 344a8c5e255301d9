"""The Gradio app: fast tests on a fake assistant; slow tests on one real launched app (real embedder, GGUF, Chroma)
shared by the API, file-route and browser tests, which talk to 127.0.0.1 only."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from helpers import running_app

from rag.catalog import Catalog
from rag.config import Settings, load
from rag.records import CANNOT_ANSWER, Answer, Citation, Hit, Paper, StoreError
from rag.retrieve import Filters, Retrieved
from ui import app as U

CHROMIUM = Path(os.environ.get("CHROMIUM") or "/usr/bin/chromium")  # scripts/test.sh installs it
PAPERS = [
    Paper(paper_id="a", title="PrivGate", venue="V", source="s1.txt", position=0, raw="",
          abstract="PrivGate cuts privacy leakage by 62.6%.", links=("https://github.com/x/y",)),
    Paper(paper_id="b", title="SOLAR", venue="V", source="s2.txt", position=0, raw="", abstract="SOLAR retrieves."),
]


# --- fast: a fake assistant ---------------------------------------------------------------------------------------


class FakeAssistant:
    """Holds an RLock across its yields, like the real one; can be told to fail with a path in the message."""

    def __init__(self, settings: Settings, fail: Exception | None = None) -> None:
        self.settings, self.fail = settings, fail
        self.compute = threading.RLock()
        self.catalog = Catalog(settings.paths.data_dir / "ui-test-catalog.sqlite")  # a real one: stdlib SQLite
        self.catalog.put_papers(PAPERS)
        self.seen: list[tuple[str, list[dict[str, str]], Filters, tuple[Any, ...]]] = []

    def stream(self, question: str, history: list[dict[str, str]] | None = None, filters: Filters | None = None,
               top_k: int | None = None, temperature: float | None = None,
               max_tokens: int | None = None) -> Iterator[str | Answer]:
        self.seen.append((question, list(history or []), filters or Filters(), (top_k, temperature, max_tokens)))
        with self.compute:
            if self.fail:
                raise self.fail
            yield from ["PrivGate cuts ", "leakage by 62.6% ", "[1]."]
            yield Answer(question=question, text="PrivGate cuts leakage by 62.6% [1].",
                         citations=(Citation(1, PAPERS[0], ("PrivGate cuts privacy leakage by 62.6%.",)),),
                         hits=(Hit(PAPERS[0], 0.03), Hit(PAPERS[1], 0.01)), abstained=False,
                         timings={"first_token_ms": 5.0, "total_ms": 9.0}, model="fake", settings_fingerprint="x")

    def search(self, question: str, filters: Filters | None = None, top_k: int | None = None) -> Retrieved:
        return Retrieved(hits=[Hit(PAPERS[1], 0.03, why="dense #1")], timings={"retrieve_ms": 1.0})

    def use_model(self, model_path: str) -> None:
        """Loads the model as the real Assistant does (a broken file fails the same way), then drops it."""
        from rag.pipeline import Assistant

        Assistant(self.settings).use_model(model_path)


@pytest.fixture
def fake_settings(tmp_path: Path) -> Settings:
    return load(flags={"paths.data_dir": tmp_path}, env={})


def test_stream_in_thread_survives_pool_threads(fake_settings: Settings) -> None:
    """Gradio calls next() from different threads; the pipeline's lock must still be taken and released by one."""
    fake = FakeAssistant(fake_settings)
    events = U.stream_in_thread(fake, "q", [], Filters(), U.Options(5, 0.0, 64))  # type: ignore[arg-type]
    got: list[Any] = []
    for _ in range(5):  # 3 pieces, the Answer, then the end
        t = threading.Thread(target=lambda: got.append(next(events, None)))
        t.start()
        t.join()
    assert got.pop() is None
    assert "".join(x for x in got if isinstance(x, str)) == "PrivGate cuts leakage by 62.6% [1]."
    assert isinstance(got[-1], Answer)
    assert fake.compute.acquire(blocking=False)  # released: another thread can take it


def test_chat_streams_then_links_citations(fake_settings: Settings) -> None:
    fake = FakeAssistant(fake_settings)
    h = U.Handlers(fake, fake_settings)  # type: ignore[arg-type]
    outs = list(h.chat("How much?", [], "a", 3, 0.0, 64, ["s1.txt"]))
    streamed = [o[0][-1]["content"] for o in outs[1:-1]]
    assert streamed and all("<a " not in s for s in streamed)
    chat, panel, turns, _ = outs[-1]
    assert '<a class="cite" href="#cite-1">[1]</a>' in chat[-1]["content"]
    assert 'id="cite-1"' in panel and "<mark>" in panel and "Retrieved but not cited (1)" in panel
    question, history, filters, options = fake.seen[0]
    assert filters == Filters(sources=frozenset({"s1.txt"}), paper_ids=frozenset({"a"})) and options == (3, 0.0, 64)
    assert fake.settings == fake_settings  # per-request options are stream() arguments: the settings stay as they are
    # a follow-up gets the plain-text history, and the older answer loses its (now stale) links
    outs = list(h.chat("and then?", turns, None, 5, 0.0, 64, []))
    assert fake.seen[1][1] == [{"role": "user", "content": "How much?"},
                               {"role": "assistant", "content": "PrivGate cuts leakage by 62.6% [1]."}]
    chat = outs[-1][0]
    assert "href" not in chat[1]["content"] and 'href="#cite-1"' in chat[3]["content"]


def test_errors_are_friendly_without_paths(fake_settings: Settings) -> None:
    fake = FakeAssistant(fake_settings, fail=StoreError("/secret/data/index: no index yet"))
    h = U.Handlers(fake, fake_settings)  # type: ignore[arg-type]
    chat, panel, _, _ = list(h.chat("q", [], None, 5, 0.0, 64, []))[-1]
    for html in (chat[-1]["content"], panel):
        assert "/secret" not in html and "Traceback" not in html and "index is not available" in html
    fake.fail = RuntimeError("boom at /secret/x.py line 3")
    chat, panel, _, _ = list(h.chat("q", [], None, 5, 0.0, 64, []))[-1]
    assert "/secret" not in panel and "server log" in panel


def test_library_filters_and_scope(fake_settings: Settings) -> None:
    h = U.Handlers(FakeAssistant(fake_settings), fake_settings)  # type: ignore[arg-type]
    assert len(h.library_rows(U.ALL_SOURCES, False, "")) == 2
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, True, "")] == ["PrivGate"]
    assert [r[0] for r in h.library_rows("s2.txt", False, "")] == ["SOLAR"]
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, False, "leakage")] == ["PrivGate"]
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, False, "LEAKAGE")] == ["PrivGate"]  # case-folded
    assert h.library_rows(U.ALL_SOURCES, True, "retrieves") == []  # filters combine
    assert h._paper_at("s2.txt", "0").title == "SOLAR" and h._paper_at("s2.txt", "x") is None  # type: ignore[union-attr]
    scope, *_ = h.scope_to("a")
    assert scope == "a"
    assert h.scope_to("missing") == (U.gr.skip(),) * 4  # an unknown id changes nothing


def test_library_reads_the_catalog_per_request_and_caps_sources(fake_settings: Settings,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The handlers hold no copy of the records; a paper ingested later shows up, and thousands of source files
    are offered as the first MAX_SOURCE_CHOICES with the total in the label."""
    fake = FakeAssistant(fake_settings)
    monkeypatch.setattr(U, "MAX_SOURCE_CHOICES", 2)
    fake.catalog.put_papers([Paper(paper_id=f"z{i}", title=f"Über {i}", venue="V", source=f"z{i:02d}.txt",
                                   position=0, raw="", abstract="Later.") for i in range(5)])
    h = U.Handlers(fake, fake_settings)  # type: ignore[arg-type]
    assert not hasattr(h, "papers")
    assert h.sources == ["s1.txt", "s2.txt"] and h.more_sources == 5
    assert h.sources_label("Source file") == "Source file; the first 2 of 7 files"
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, False, "über 3")] == ["Über 3"]  # folded beyond ASCII
    fake.catalog.put_papers([Paper(paper_id="late", title="Late", venue="V", source="s3.txt", position=0, raw="",
                                   abstract="Ingested after the app started.")])
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, False, "after the app")] == ["Late"]


def test_app_exposes_only_chat_and_search(fake_settings: Settings) -> None:
    app = U.build_app(FakeAssistant(fake_settings), fake_settings)  # type: ignore[arg-type]
    public = {d["api_name"] for d in app.get_config_file()["dependencies"] if d.get("api_visibility") == "public"}
    assert public == {"chat", "search"}


def test_a_broken_model_file_is_refused_with_a_friendly_status(tmp_path: Path) -> None:
    settings = load(flags={"paths.data_dir": tmp_path}, env={})
    settings.paths.models_dir.mkdir(parents=True)
    (settings.paths.models_dir / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 100)  # truncated
    fake = FakeAssistant(settings)
    h = U.Handlers(fake, settings)  # type: ignore[arg-type]
    before = h.model_label
    steps = list(h.change_model("broken.gguf"))
    assert steps[0][1] == "Loading broken.gguf…"
    reverted, status = steps[-1]
    assert reverted == before and "could not be loaded" in status and str(tmp_path) not in status
    assert h.model_label == before


def test_use_model_builds_the_generator_the_settings_name(tmp_path: Path) -> None:
    """Assistant.use_model (the UI's picker): with generation.remote_url the remote server's model, as at start-up,
    never a local GGUF; a model that cannot be loaded changes neither the generator nor the settings."""
    from fakes import ScriptedGenerator
    from helpers import free_port

    from rag.pipeline import Assistant
    from rag.records import ModelError
    from rag.remote import RemoteGenerator

    remote = load(flags={"paths.data_dir": tmp_path, "generation.remote_url": f"http://127.0.0.1:{free_port()}",
                         "generation.remote_model": "m"}, env={})  # nothing listens there: nothing is asked
    a = Assistant(remote, generator=ScriptedGenerator())
    a.use_model(str(tmp_path / "other.gguf"))
    assert isinstance(a.generator, RemoteGenerator) and a.generator.model == "m"
    assert a.settings.generation.model_path == str(tmp_path / "other.gguf")

    local = load(flags={"paths.data_dir": tmp_path}, env={})
    original = ScriptedGenerator()
    b = Assistant(local, generator=original)
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 100)  # truncated
    with pytest.raises(ModelError):
        b.use_model(str(tmp_path / "broken.gguf"))
    assert b.generator is original and b.settings == local


def test_model_choices_show_names_not_paths(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"GGUF")
    choices = U.model_choices(load(flags={"paths.data_dir": tmp_path}, env={}))
    # the default, the folder's files, then the other installed presets by name (SmolLM2 inside its package)
    assert list(choices) == ["qwen2.5-coder-0.5b (default)", "tiny.gguf", "smollm2"]
    assert choices["tiny.gguf"] == str(models / "tiny.gguf") and choices["smollm2"] == "smollm2"
    assert all(not label.startswith("/") for label in choices)
    # With SmolLM2 the model in use, it is the default's line and the installed default preset is offered instead.
    small = U.model_choices(load(flags={"paths.data_dir": tmp_path, "generation.model_path": "smollm2"}, env={}))
    assert list(small) == ["smollm2 (default)", "tiny.gguf", "qwen2.5-coder-0.5b"]


def test_with_a_remote_server_the_picker_offers_only_its_model(tmp_path: Path) -> None:
    """Local GGUF files are not what answers when generation.remote_url is set: they are not offered, and a
    request to switch anyway changes nothing."""
    settings = load(flags={"paths.data_dir": tmp_path, "generation.remote_url": "http://127.0.0.1:9",
                           "generation.remote_model": "big"}, env={})
    settings.paths.models_dir.mkdir(parents=True)
    (settings.paths.models_dir / "tiny.gguf").write_bytes(b"GGUF")
    assert list(U.model_choices(settings)) == ["big on the remote server"]
    fake = FakeAssistant(settings)
    h = U.Handlers(fake, settings)  # type: ignore[arg-type]
    assert not h.model_switch
    label, status = list(h.change_model("tiny.gguf"))[-1]
    assert label == "big on the remote server" and "remote server's model" in status and fake.settings == settings


def test_importing_the_app_loads_no_model() -> None:
    code = ("import sys, ui.app; heavy = {'llama_cpp', 'sentence_transformers', 'torch', 'chromadb'}; "
            "sys.exit(sorted(heavy & set(sys.modules)) or 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# --- slow: one real app for the rest of the module ----------------------------------------------------------------


@pytest.fixture(scope="module")
def served(seeded: Settings) -> Iterator[tuple[str, Settings]]:
    """The app on a free 127.0.0.1 port, over the session's seeded index (conftest), with its own Assistant."""
    # 64 tokens keep the eight-question test short; answers here are one or two sentences anyway.
    with running_app(seeded, max_tokens=64) as (url, _, settings):
        yield url, settings


@pytest.fixture(scope="module")
def client(served: tuple[str, Settings]) -> Any:
    from gradio_client import Client

    return Client(served[0], verbose=False)


@pytest.mark.slow
def test_chat_api_cites_privgate(client: Any) -> None:
    r = client.predict("How much does PrivGate reduce privacy leakage?", api_name="/chat")
    assert not r["abstained"]
    privgate = [c for c in r["citations"] if c["title"].startswith("PrivGate")]
    assert privgate, r
    assert "62.6%" in r["answer"] or any("62.6%" in c["abstract"] for c in privgate)


@pytest.mark.slow
def test_search_api_ranks_solar_first(client: Any) -> None:
    r = client.predict("symmetric multimodal-to-multimodal retrieval", api_name="/search")
    assert r["hits"][0]["title"].startswith("SOLAR"), r["hits"][0]
    assert {"score", "why", "passages"} <= set(r["hits"][0])


@pytest.mark.slow
def test_out_of_corpus_question_abstains(client: Any) -> None:
    r = client.predict("What is the best recipe for lasagna?", api_name="/chat")
    assert r["abstained"] and r["answer"] == CANNOT_ANSWER and r["citations"] == []


@pytest.mark.slow
def test_eight_questions_at_once_all_complete(client: Any) -> None:
    questions = [*U.EXAMPLES, "What does PrivGate gate?", "What is the best recipe for lasagna?",
                 "Which papers release code?", "What is knowledge distillation used for?"]
    jobs = [client.submit(q, api_name="/chat") for q in questions]
    results = [job.result(timeout=600) for job in jobs]
    assert [r["question"] for r in results] == questions
    assert all(r["answer"] for r in results)
    assert client.predict("SOLAR", api_name="/search")["hits"]  # still serving


def _get(url: str, path: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1"
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", path)  # sent as written: no client-side normalisation of .. or %2e
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.mark.slow
def test_file_routes_serve_no_local_files(served: tuple[str, Settings]) -> None:
    from rag.gguf import resolve_model

    url, settings = served
    chroma = next(settings.paths.data_dir.rglob("chroma.sqlite3"))
    targets = {"/etc/passwd": b"root:", str(chroma): b"SQLite format 3",
               str(resolve_model(settings.generation)): b"GGUF"}
    for target, content in targets.items():
        rel = target.lstrip("/")
        for prefix in ("/file=", "/gradio_api/file="):
            for path in (prefix + target, prefix + "../" * 12 + rel, prefix + "%2e%2e%2f" * 12 + rel,
                         prefix + "/tmp/gradio/../../" + rel, prefix + "..%2f" * 12 + rel):
                status, body = _get(url, path)
                assert status != 200 or content not in body[:4096], (path, status)


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no {CHROMIUM} (apt-get install -y chromium); a failure under CI")
def test_browser_streams_and_links_citation(served: tuple[str, Settings], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, settings = served
    artifacts = Path(os.environ.get("TEST_ARTIFACTS") or tmp_path / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--headless", "--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url)
            # a question whose draft runs to a sentence (the default model drafts "62.6% [1]" for the leakage one,
            # six pieces, too quick to be seen in steps)
            page.fill("#question textarea", "How does PrivGate decide when to reason explicitly?")
            page.click("#ask")
            bot = page.locator("#chatbot .bot").last
            seen: list[str] = []
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not page.locator("#chatbot a.cite").count():
                text = bot.inner_text() if page.locator("#chatbot .bot").count() else ""
                if text and (not seen or seen[-1] != text):
                    seen.append(text)
                time.sleep(0.03)
            # Besides the placeholder, at least two texts were seen before the linked answer (the loop stops once
            # it is there, so at most the last one can be it): the answer streamed in steps.
            streamed = [s for s in seen if "Searching the abstracts" not in s]
            assert len(streamed) >= 2, seen
            marker = page.locator("#chatbot a.cite").first
            expect(marker).to_have_attribute("href", "#cite-1")
            marker.click()
            card = page.locator("#cite-1")
            expect(card).to_be_in_viewport()
            expect(card.locator("mark").first).to_be_visible()
            page.screenshot(path=str(artifacts / "ui-chat.png"), full_page=True)
            html = page.content()
            assert str(settings.paths.data_dir) not in html and "Traceback" not in html
        finally:
            browser.close()
    hosts = {urlsplit(u).hostname for u in requests if urlsplit(u).scheme in {"http", "https", "ws", "wss"}}
    assert hosts <= {"127.0.0.1", "localhost"}, hosts
