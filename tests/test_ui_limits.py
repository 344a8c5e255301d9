"""Load limits of the app: a bounded queue that refuses with a busy answer, questions capped with a notice, and the
Settings values clamped to their ranges whatever a client sends (the catalog read from many threads at once is in
test_catalog.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import SEEDS, free_port

from rag.catalog import Catalog
from rag.config import Settings, load
from rag.parse import ParseReport, iter_papers
from rag.records import Answer, Hit
from rag.retrieve import Filters, Retrieved
from ui import app as U


class SlowAssistant:
    """Holds the first answer until released; records the settings each request ran with."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.compute = threading.RLock()
        self.catalog = Catalog(settings.paths.data_dir / "catalog.sqlite")
        self.catalog.put_papers(list(iter_papers([SEEDS], ParseReport()))[:5])
        self.release = threading.Event()
        self.started = threading.Event()
        self.questions: list[str] = []
        self.top_ks: list[int | None] = []
        self.options: list[tuple[Any, ...]] = []

    def stream(self, question: str, history: Any = None, filters: Filters | None = None, top_k: int | None = None,
               temperature: float | None = None, max_tokens: int | None = None) -> Iterator[Any]:
        self.questions.append(question)
        self.options.append((top_k, temperature, max_tokens))
        self.started.set()
        self.release.wait(60)
        yield Answer(question=question, text="ok", citations=(), hits=(), abstained=True, timings={}, model="m",
                     settings_fingerprint="x")

    def ask(self, question: str, history: Any = None, filters: Filters | None = None) -> Answer:
        return list(self.stream(question))[-1]  # type: ignore[no-any-return]

    def search(self, question: str, filters: Filters | None = None, top_k: int | None = None) -> Retrieved:
        self.questions.append(question)
        self.top_ks.append(top_k)
        paper = self.catalog.iter_papers().__next__()
        return Retrieved(hits=[Hit(paper, 0.5, why="dense #1")], timings={})


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load(flags={"paths.data_dir": tmp_path, "ui.queue_size": 2, "ui.max_question_chars": 100}, env={})


def _join(url: str, fn_index: int, session: str) -> httpx.Response:
    body = {"data": ["How much does PrivGate cut leakage?", None, None], "fn_index": fn_index, "session_hash": session,
            "event_data": None, "trigger_id": None}
    return httpx.post(f"{url}gradio_api/queue/join", json=body, timeout=10)


def test_a_full_queue_refuses_at_once_with_busy(settings: Settings) -> None:
    """One answer computing, `ui.queue_size` (2) waiting: the next request gets 503 "Queue is full" at once (the
    page shows Gradio's "This application is currently busy. Please try again.") and the app keeps serving."""
    fake = SlowAssistant(settings)
    app = U.build_app(fake, settings)  # type: ignore[arg-type]
    port = free_port()
    U.launch(app, settings, port=port, block=False)
    url = f"http://127.0.0.1:{port}/"
    try:
        fn = next(i for i, d in app.fns.items() if d.api_name == "chat")
        first = _join(url, fn, "s0")
        assert first.status_code == 200, first.text
        deadline = time.monotonic() + 30
        while not fake.started.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.started.is_set()  # the first request is running, holding the model's slot
        waiting = [_join(url, fn, f"s{i}") for i in (1, 2)]
        assert [r.status_code for r in waiting] == [200, 200]
        started = time.monotonic()
        refused = _join(url, fn, "s3")
        assert refused.status_code == 503 and "Queue is full" in refused.text, refused.text
        assert time.monotonic() - started < 5  # refused at once, not after waiting
        assert httpx.get(url, timeout=10).status_code == 200  # the page still loads
    finally:
        fake.release.set()
        app.close()


def test_questions_are_capped_with_a_notice(settings: Settings) -> None:
    fake = SlowAssistant(settings)
    fake.release.set()
    h = U.Handlers(fake, settings)  # type: ignore[arg-type]
    long = "privacy leakage " * 50  # 799 characters once stripped; the cap is 100
    chat, _, turns, _ = list(h.chat(long, [], None, 5, 0.0, 64, []))[-1]
    assert len(fake.questions[-1]) <= 100 and turns[-1]["q"] == fake.questions[-1]
    assert "799 characters long; only the first 100 were used" in chat[-1]["content"]
    assert long not in str(chat)  # the long text is not echoed back
    html = h.search(long, 5, [])
    assert len(fake.questions[-1]) <= 100 and "only the first 100 were used" in html
    assert len(h.search_api(long)["question"]) <= 100
    short = list(h.chat("what is PrivGate?", [], None, 5, 0.0, 64, []))[-1][0]
    assert "were used" not in short[-1]["content"]


@pytest.mark.parametrize("given, want", [
    ((5, 0.3, 64), (5, 0.3, 64)),
    ((0, -1.0, 1), (1, 0.0, 16)),
    ((10_000, 99.0, 10**9), (10, 1.5, 512)),
    (("x", float("nan"), float("inf")), (5, 0.0, 120)),  # unusable values: the defaults
    ((None, None, None), (5, 0.0, 120)),
])
def test_request_options_are_clamped_to_the_sliders_ranges(settings: Settings, given: tuple[Any, ...],
                                                           want: tuple[Any, ...]) -> None:
    fake = SlowAssistant(settings)
    fake.release.set()
    h = U.Handlers(fake, settings)  # type: ignore[arg-type]
    assert tuple(h._options(*given)) == want
    list(h.chat("privacy?", [], None, *given, []))
    assert fake.options[-1] == want  # what the answer ran with: stream()'s own arguments
    h.search("privacy", given[0], [])
    assert h.assistant.top_ks[-1] == want[0]  # type: ignore[attr-defined]


def test_the_app_follows_a_finished_ingest_between_questions(tmp_path: Path, corpus: Path) -> None:
    """An ingest (here in-process, as another process would) publishes a new generation; the app's next search
    reloads and finds the new paper, without a restart; with nothing new it keeps its loaded index."""
    import json

    from fakes import HashEmbedder, ScriptedGenerator
    from helpers import make_settings

    from rag.indexer import build_index
    from rag.pipeline import Assistant

    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus})
    build_index(s, HashEmbedder())
    assistant = Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator())
    h = U.Handlers(assistant, s)
    question = "zebra stripes thermal imaging"
    assert "Zebra stripes" not in h.search(question, 5, [])
    loaded = assistant.retriever
    h.search("privacy leakage", 5, [])
    assert assistant.retriever is loaded  # nothing new: not reloaded
    (corpus / "new.jsonl").write_text(json.dumps({"title": "Zebra stripes in thermal imaging",
                                                  "abstract": "We study zebra stripes with thermal cameras."}) + "\n")
    build_index(s, HashEmbedder())
    assert "Zebra stripes in thermal imaging" in h.search(question, 5, [])
    assert assistant.retriever is not loaded and h.catalog is assistant.catalog
    assert [r[0] for r in h.library_rows(U.ALL_SOURCES, False, "zebra")] == ["Zebra stripes in thermal imaging"]


def test_a_rebuild_while_serving_never_leaves_the_app_without_an_index(tmp_path: Path, corpus: Path) -> None:
    """`ingest --rebuild` builds a new index generation beside the one the app reads: the app answers from the old
    one during the rebuild, follows the new one when it is published, and the old one (folder and collection) is
    kept while anything still holds its retriever, then collected by the next ingest."""
    import gc

    from fakes import HashEmbedder, ScriptedGenerator
    from helpers import make_settings

    from rag.index import IndexPaths
    from rag.indexer import build_index
    from rag.pipeline import Assistant
    from rag.store import ChunkStore

    # No background following (this test says when the app follows), no grace, no waiting for readers.
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus, "store.follow_s": 0, "store.retire_grace_s": 0,
                                            "store.retire_wait_s": 0})
    first = build_index(s, HashEmbedder())
    old = IndexPaths.of(s)
    assistant = Assistant(s, embedder=HashEmbedder(), generator=ScriptedGenerator())
    h = U.Handlers(assistant, s)
    question = "How much does PrivGate reduce privacy leakage?"
    assert "PrivGate" in h.search(question, 5, [])
    loaded = assistant.retriever
    during: list[str] = []

    class Midway(HashEmbedder):
        def embed(self, texts: list[str]) -> Any:
            if not during:  # the rebuild is under way: its new catalog holds nothing yet
                during.append(h.search(question, 5, []))
            return super().embed(texts)

    rebuilt = build_index(s, Midway(), rebuild=True)
    assert during and "PrivGate" in during[0] and 'class="error"' not in during[0]  # the old index answered
    assert assistant.retriever is loaded  # not reloaded while no new index was published
    assert rebuilt.collection != first.collection and rebuilt.papers == first.papers
    assert IndexPaths.of(s).folder != old.folder and old.catalog.exists()
    ChunkStore(old.chroma, first.collection, "fake-hash", 256, create=False).close()  # kept for readers
    assert "PrivGate" in h.search(question, 5, [])
    assert assistant.retriever is not loaded and assistant.retriever.store.name == rebuilt.collection
    kept = build_index(s, HashEmbedder())  # `loaded` (an answer in flight, say) still reads the old generation
    assert any("still read by 1 process" in str(n) for n in kept.notes) and old.catalog.exists()
    assert loaded.search(question).hits[0].paper.title.startswith("PrivGate")
    del loaded
    gc.collect()
    build_index(s, HashEmbedder())  # nothing holds it now: the next ingest collects it
    assert not old.folder.exists()
    with pytest.raises(Exception, match="no index"):
        ChunkStore(old.chroma, first.collection, "fake-hash", 256, create=False)
