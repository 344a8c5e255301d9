"""The live index across processes (slow: many processes), on the real embedded Chroma store and the fake embedder.

Two reader processes (each an `Assistant`, as an app process holds one) and writer processes (`build_index`, as
`python -m rag ingest` runs it) share one data folder:
- a paper ingested after the readers started is found by both within a few seconds, by its vector too (an embedded
  Chroma system never sees another process's writes: a reader opens a new one for each generation), no restart;
- during an `ingest --rebuild`, questions from a reader and `python -m rag search` processes always find an index
  and the papers in it; after it, the readers answer from the new generation within a few seconds;
- a retriever held across the rebuild (an answer in flight) keeps answering from its own generation, which the
  writers keep while it is held and collect (collection and folder) once it is let go;
- a reader killed with SIGKILL leaves a lease that goes stale: its generation is collected after `lease_ttl_s`.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing as mp
import os
import shutil
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

QUESTION = "How much does PrivGate reduce privacy leakage?"
ZEBRA = "Zebra stripes in thermal imaging"
# Short times so the test runs in seconds: readers look for a new index every 0.3 s and touch their leases every
# 0.2 s; a lease untouched for 3 s is stale; a replaced generation is kept 1 s at least; a rebuild waits 2 s at most
# for readers to let go.
TIMES = {"store.follow_s": 0.3, "store.lease_refresh_s": 0.2, "store.lease_ttl_s": 3.0, "store.retire_grace_s": 1.0,
         "store.retire_wait_s": 2.0}


def _settings(data: str, corpus: str, **times: float) -> Any:
    from helpers import make_settings

    return make_settings(Path(data), **{"paths.seeds_dir": Path(corpus), **TIMES, **times})


# --- in the child processes ----------------------------------------------------------------------------------------


def reader_child(data: str, corpus: str, conn: Connection) -> None:
    """An app process: one Assistant, commands from the parent, each answered ("ok", ...) or ("error", message)."""
    import gc

    from fakes import HashEmbedder, ScriptedGenerator

    from rag.pipeline import Assistant

    assistant = Assistant(_settings(data, corpus), embedder=HashEmbedder(), generator=ScriptedGenerator())
    held = None
    conn.send("ready")
    while True:
        cmd, arg = conn.recv()
        try:
            if cmd == "search":  # the titles found, how each matched, and the collection read
                hits = assistant.search(arg).hits
                conn.send(("ok", [(h.paper.title, h.why) for h in hits], assistant.retriever.store.name))
            elif cmd == "loop":  # search for `arg` seconds: (searches, errors, misses of PrivGate, collections)
                searches, errors, misses, seen = 0, [], 0, set()
                deadline = time.monotonic() + arg
                while time.monotonic() < deadline:
                    try:
                        hits = assistant.search(QUESTION).hits
                        seen.add(assistant.retriever.store.name)
                        misses += not (hits and hits[0].paper.title.startswith("PrivGate"))
                    except Exception as e:  # reported, not raised: the count is the finding
                        errors.append(f"{type(e).__name__}: {e}")
                    searches += 1
                conn.send(("ok", searches, errors, misses, sorted(seen)))
            elif cmd == "hold":  # keep this retriever, as an answer in flight does
                held = assistant.retriever
                conn.send(("ok", held.store.name))
            elif cmd == "search_held":
                assert held is not None
                conn.send(("ok", [h.paper.title for h in held.search(arg).hits], held.store.name))
            elif cmd == "drop":
                held = None
                gc.collect()
                conn.send(("ok",))
            elif cmd == "stop":
                conn.send(("ok",))
                return
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))


def ingest_child(data: str, corpus: str, rebuild: bool, slow: bool, times: dict[str, float],
                 conn: Connection) -> None:
    """`ingest` (or `ingest --rebuild`); `slow`: each embedding batch takes 0.1 s more, so a rebuild lasts seconds;
    `times` overrides TIMES for this process."""
    from fakes import HashEmbedder

    from rag.indexer import build_index

    class Slow(HashEmbedder):
        def embed(self, texts: list[str]) -> Any:
            time.sleep(0.1 if slow else 0.0)
            return super().embed(texts)

    conn.send("ready")
    summary = build_index(_settings(data, corpus, **times), Slow(), rebuild=rebuild, batch_papers=4)
    conn.send({"collection": summary.collection, "notes": [str(n) for n in summary.notes]})


def cli_search_child(data: str, conn: Connection) -> None:
    """`python -m rag search --json` (rag.cli.main in this process, the fake embedder in place of the real one)."""
    from fakes import HashEmbedder

    from rag import cli, pipeline

    pipeline.load_embedder = lambda *a, **kw: HashEmbedder()  # type: ignore[assignment]
    conn.send("ready")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["search", QUESTION, "--json", "--data-dir", data])
    conn.send((rc, out.getvalue(), err.getvalue()))


# --- the parent ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx() -> Any:
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["chromadb", "bm25s", "rag.pipeline", "rag.cli", "fakes", "helpers"])
    return context


class Child:
    """A child process and the parent's end of its pipe."""

    def __init__(self, ctx: Any, target: Any, *args: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=target, args=(*args, child))
        self.proc.start()
        child.close()
        assert self.conn.poll(60), f"{target.__name__} never got ready"
        assert self.conn.recv() == "ready"

    def ask(self, cmd: str, arg: Any = None, timeout: float = 60) -> Any:
        self.conn.send((cmd, arg))
        return self.result(timeout)

    def result(self, timeout: float = 120) -> Any:
        assert self.conn.poll(timeout), "no answer from the child"
        got = self.conn.recv()
        assert not (isinstance(got, tuple) and got[0] == "error"), got
        return got

    def close(self) -> None:
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _ingest(ctx: Any, data: Path, corpus: Path, rebuild: bool = False, slow: bool = False,
            **times: float) -> dict[str, Any]:
    child = Child(ctx, ingest_child, str(data), str(corpus), rebuild, slow, times)
    try:
        result: dict[str, Any] = child.result(300)
    finally:
        child.close()
    return result


def _until(what: str, check: Any, timeout: float = 10.0) -> float:
    """Seconds until `check()` holds (asserted within `timeout`)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.1)
    return time.monotonic() - started


def _collection_exists(data: Path, name: str) -> bool:
    from rag.records import StoreError
    from rag.store import ChunkStore

    try:
        ChunkStore(data / "chroma", name, "fake-hash", 256, create=False, private=True).close()
    except StoreError:
        return False
    return True


def test_readers_in_other_processes_follow_ingests_and_rebuilds(tmp_path: Path, corpus: Path, ctx: Any) -> None:
    from rag import generations as G
    from rag.index import IndexPaths

    data = tmp_path / "data"
    first = _ingest(ctx, data, corpus)
    readers = [Child(ctx, reader_child, str(data), str(corpus)) for _ in range(2)]
    try:
        for r in readers:
            _, hits, collection = r.ask("search", "zebra stripes thermal cameras")
            assert collection == first["collection"] and ZEBRA not in [t for t, _ in hits]

        # 1. A paper ingested after the readers started: found by both within seconds, by its vector too.
        (corpus / "zebra.jsonl").write_text(json.dumps({
            "title": ZEBRA, "abstract": "We photograph zebras with thermal cameras. Black stripes are up to 10 "
                                        "degrees warmer than white stripes at noon."}) + "\n")
        _ingest(ctx, data, corpus)
        for r in readers:
            waited = _until("a reader finds the new paper", lambda r=r: any(
                t == ZEBRA and "dense #" in why for t, why in r.ask("search", "zebra stripes thermal cameras")[1]))
            assert waited < 5

        # 2. A rebuild while reader 0 holds its retriever (an answer in flight) and reader 1 keeps asking, and
        # `python -m rag search` processes start one after another.
        old = IndexPaths.of(_settings(str(data), str(corpus)))
        _, held = readers[0].ask("hold")
        rebuild = Child(ctx, ingest_child, str(data), str(corpus), True, True, {})
        readers[1].conn.send(("loop", 6.0))
        searches = []
        while rebuild.proc.is_alive() and not rebuild.conn.poll(0):
            cli = Child(ctx, cli_search_child, str(data))
            rc, out, err = cli.result(60)
            cli.close()
            assert rc == 0 and json.loads(out)["hits"][0]["title"].startswith("PrivGate"), (rc, out, err)
            searches.append(json.loads(out)["hits"][0]["title"])
        rebuilt = rebuild.result(300)
        rebuild.close()
        _, n, errors, misses, seen = readers[1].result(60)
        assert errors == [] and misses == 0 and n > 10, (n, errors, misses)
        assert set(seen) <= {held, rebuilt["collection"]} and held in seen
        assert len(searches) >= 2, "the rebuild was over before two `search` processes ran"
        assert any("still read by 1 process" in note for note in rebuilt["notes"]), rebuilt  # reader 0's retriever
        new = IndexPaths.of(_settings(str(data), str(corpus)))
        assert new.generation != old.generation and rebuilt["collection"] != held

        # 3. Both readers answer from the new generation within seconds; the held retriever still answers from
        # the old one, which an ingest keeps while it is held and collects once it is let go.
        for r in readers:
            _until("a reader opens the rebuilt index",
                   lambda r=r: r.ask("search", QUESTION)[2] == rebuilt["collection"])
        _, titles, collection = readers[0].ask("search_held", QUESTION)
        assert collection == held and titles[0].startswith("PrivGate")
        _ingest(ctx, data, corpus)
        assert old.catalog.exists() and _collection_exists(data, held)
        readers[0].ask("drop")
        _ingest(ctx, data, corpus)
        assert not old.folder.exists() and not _collection_exists(data, held)

        # 4. A reader killed while it holds the current generation: after a rebuild its lease goes stale, and the
        # generation goes with the ingest after that.
        readers[1].proc.kill()
        readers[1].proc.join(10)
        # The rebuild judges leases with a ttl far longer than it can take, so under any load the killed reader's
        # lease is fresh when the rebuild collects: with the test's 3 s the rebuild's own start and 2 s wait for
        # readers left about a second of margin, which a loaded CI machine used up.
        _ingest(ctx, data, corpus, rebuild=True, **{"store.lease_ttl_s": 120.0})
        assert new.catalog.exists()  # its lease was fresh during the rebuild's wait
        time.sleep(TIMES["store.lease_ttl_s"] + 0.5)
        _ingest(ctx, data, corpus)
        assert not new.folder.exists() and not _collection_exists(data, rebuilt["collection"])
        _until("reader 0 follows again", lambda: readers[0].ask("search", QUESTION)[2] != rebuilt["collection"])
        home = new.home
        assert sorted(p.name for p in home.iterdir() if G.is_named(p.name)) == [G.current(home)]
        assert [p.name.split(".")[0] for p in (home / "readers").iterdir()] == [G.current(home)]  # reader 0's
        readers[0].ask("stop")
    finally:
        for r in readers:
            if r.proc.is_alive():
                r.proc.kill()
            r.close()
    shutil.rmtree(data, ignore_errors=True)
    assert os.path.exists(tmp_path)
