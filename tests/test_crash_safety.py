"""Crash safety: ingest killed with SIGKILL at random moments, then checked and converged in a fresh process.

Each trial starts an ingest (the real Chroma store, the fake embedder, batches of 3 papers so a kill lands between
or inside writes), kills it after a random delay, then a fresh process reopens the store (a corrupt index can crash
the opener, which would show as a negative exit code here, not as a crashed test run) and checks:
- it opens; every stored chunk is a chunk of a real paper with the right text; every paper in the catalog is a
  real paper with all of its chunks stored; a manifest row whose hash is current names only catalogued papers;
- a rerun of ingest converges to exactly the clean build: same chunk ids, texts, papers and counts, no duplicates,
  a BM25 index of the same chunks, each sampled chunk found first by its own vector; and a further rerun is a no-op.
Trial kinds: "fresh" (kill the first build), "double" (kill it, then kill the rerun), "update" (a built store, then
a file edited, one renamed, one removed, one added: kill the update, covering removal and the final sweep).

Processes come from a multiprocessing forkserver with chromadb preloaded, so a trial costs ~0.3 s of start-up
instead of ~1.5 s; each is still a separate process killed by the kernel. The seed is printed on failure.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import shutil
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("CRASH_TRIALS", "12"))  # more for a soak run
BATCH = 3
KINDS = ("fresh", "update", "double")
WORDS = ("model data learning network graph token attention robust sparse kernel policy reward gradient loss vision "
         "language retrieval memory privacy speech protein molecule agent planning benchmark dataset").split()


# --- the corpus --------------------------------------------------------------------------------------------------


def _abstract(rng: random.Random, i: int, salt: str = "") -> str:
    sents = []
    for s in range(rng.randint(4, 8)):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18)))
        sents.append(f"Method{i}{salt} {words} achieves {rng.randint(1, 99)}.{s}% gains.")
    return " ".join(sents)


def _write_jsonl(path: Path, rows: list[tuple[int, str]]) -> None:
    path.write_text("".join(json.dumps({"title": f"Paper {i}", "abstract": a}) + "\n" for i, a in rows),
                    encoding="utf-8")


def make_corpora(root: Path) -> tuple[Path, Path]:
    """v1: 4 JSONL files and a text file (90 papers, 2 of them also in a second file); v2: one file edited, one
    renamed, one removed, one added."""
    rng = random.Random(1234)
    n = 18
    papers = [(i, _abstract(rng, i)) for i in range(5 * n)]
    v1 = root / "v1"
    v1.mkdir()
    for f in range(4):
        _write_jsonl(v1 / f"part{f}.jsonl", papers[f * n : (f + 1) * n])
    (v1 / "more.txt").write_text("Venue\n\n" + "\n\n".join(a for _, a in papers[4 * n :] + papers[:2]) + "\n",
                                 encoding="utf-8")
    v2 = root / "v2"
    shutil.copytree(v1, v2)
    edited = [(i, _abstract(rng, i, "e") if i % 3 == 0 else a) for i, a in papers[n : 2 * n]]
    _write_jsonl(v2 / "part1.jsonl", edited)
    (v2 / "part2.jsonl").rename(v2 / "renamed.jsonl")
    (v2 / "part3.jsonl").unlink()
    _write_jsonl(v2 / "new.jsonl", [(100 + i, _abstract(rng, 100 + i)) for i in range(n)])
    return v1, v2


# --- in the child processes ----------------------------------------------------------------------------------------


def _thread_lock_for_tqdm() -> None:
    """bm25s makes a (disabled) tqdm bar, and tqdm's first bar creates a multiprocessing lock: a named semaphore a
    killed process cannot release, which multiprocessing then reports as leaked. A thread lock does here."""
    import threading

    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def _settings(data: Path, corpus: Path) -> Any:
    from helpers import make_settings

    return make_settings(data, **{"paths.seeds_dir": corpus})


def expected(corpus: Path) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, Any]]]:
    """What a clean build holds: chunk id -> (paper id, text), paper id -> record."""
    from fakes import HashEmbedder

    from rag.indexer import chunk_texts
    from rag.parse import ParseReport, iter_papers

    emb = HashEmbedder()
    s = _settings(Path("unused"), corpus)
    chunks: dict[str, tuple[str, str]] = {}
    papers: dict[str, dict[str, Any]] = {}
    for paper in iter_papers([corpus], ParseReport()):
        papers[paper.paper_id] = paper.to_dict()
        for c, _ in chunk_texts(paper, s, emb):
            chunks[c.chunk_id] = (c.paper_id, c.text)
    return chunks, papers


def _trace(path: Path) -> None:
    """Write "begin X" / "end X" around every store and catalog write, unbuffered, so the parent knows where
    its kill landed."""
    from rag import indexer
    from rag.catalog import Catalog
    from rag.store import ChunkStore

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def wrap(owner: Any, name: str) -> None:
        real = getattr(owner, name)

        def traced(*args: Any, **kwargs: Any) -> Any:
            os.write(fd, f"begin {name}\n".encode())
            out = real(*args, **kwargs)
            os.write(fd, f"end {name}\n".encode())
            return out

        setattr(owner, name, traced)

    for name in ("upsert", "delete_papers", "delete_ids", "set_metadata"):
        wrap(ChunkStore, name)
    for name in ("put_papers", "put_file", "delete_papers", "delete_file"):
        wrap(Catalog, name)
    wrap(indexer, "rebuild_lexical")


def ingest_child(data: str, corpus: str, trace: str, conn: Connection) -> None:
    from fakes import HashEmbedder

    from rag.indexer import build_index

    _thread_lock_for_tqdm()
    _trace(Path(trace))
    settings = _settings(Path(data), Path(corpus))
    conn.send("ready")
    started = time.perf_counter()
    build_index(settings, HashEmbedder(), batch_papers=BATCH)
    conn.send(time.perf_counter() - started)


def verify_child(data: str, corpus: str, versions: list[str], conn: Connection) -> None:
    _thread_lock_for_tqdm()
    try:
        conn.send(_verify(Path(data), Path(corpus), [Path(v) for v in versions]))
    except BaseException as e:  # report, do not hang the parent
        conn.send({"problems": [f"verify raised {type(e).__name__}: {e}"]})


def _verify(data: Path, corpus: Path, versions: list[Path]) -> dict[str, Any]:
    import hashlib

    from fakes import HashEmbedder

    from rag.catalog import Catalog
    from rag.chunk import embed_text
    from rag.index import IndexPaths, open_store
    from rag.indexer import build_index
    from rag.lexical import LexicalIndex
    from rag.lexical_sync import rebuild_lexical

    emb = HashEmbedder()
    s = _settings(data, corpus)
    ip = IndexPaths.of(s)
    problems: list[str] = []
    ok_chunks: dict[str, set[tuple[str, str]]] = {}
    ok_papers: dict[str, list[dict[str, Any]]] = {}
    chunks_of: dict[str, set[str]] = {}
    for v in versions:  # before the rerun the store may hold either version of a paper
        chunks, papers = expected(v)
        for cid, value in chunks.items():
            ok_chunks.setdefault(cid, set()).add(value)
            chunks_of.setdefault(value[0], set()).add(cid)
        for pid, record in papers.items():
            ok_papers.setdefault(pid, []).append(record)
    want_chunks, want_papers = expected(corpus)

    # 1. What the killed run left: it opens, and everything in it is right.
    pre = {"catalog": 0, "chunks": 0, "orphans": 0}
    if ip.catalog.exists():
        catalog = Catalog(ip.catalog)
        store = open_store(s, emb, create=False)
        stored = store.all_chunks()
        pre["chunks"] = len(stored)
        by_paper: dict[str, set[str]] = {}
        for cid, pid, text in stored:
            if (pid, text) not in ok_chunks.get(cid, set()):
                problems.append(f"before rerun: chunk {cid} of {pid} is not a chunk of any version of the corpus")
            by_paper.setdefault(pid, set()).add(cid)
        ids = catalog.ids()
        pre["catalog"], pre["orphans"] = len(ids), len(set(by_paper) - ids)
        for paper in catalog.iter_papers():
            if paper.to_dict() not in ok_papers.get(paper.paper_id, []):
                problems.append(f"before rerun: catalog paper {paper.paper_id} matches no version of the corpus")
            if not chunks_of.get(paper.paper_id, {""}) <= by_paper.get(paper.paper_id, set()):
                problems.append(f"before rerun: catalog paper {paper.paper_id} lacks chunks in the store")
        for source, (pids, _) in catalog.files().items():
            entry = catalog.file_entry(source)
            path = corpus / source
            if entry and path.exists() and entry[0] == hashlib.sha256(path.read_bytes()).hexdigest():
                if not set(pids) <= ids:
                    problems.append(f"before rerun: manifest row of {source} is current but names missing papers")
        catalog.close()

    # 2. A rerun converges to exactly the clean build.
    summary = build_index(s, emb, batch_papers=BATCH)
    ip = IndexPaths.of(s)  # a killed first build may have left no index: the rerun made and published one
    catalog = Catalog(ip.catalog)
    left = sorted(p.name for p in ip.home.iterdir() if p.name.startswith("g-"))
    if left != [ip.generation]:  # a killed first build's unpublished generation is collected by the rerun
        problems.append(f"after rerun: generation folders {left}, only the current {ip.generation} expected")
    store = open_store(s, emb, create=False)
    stored = store.all_chunks()
    got = {cid: (pid, text) for cid, pid, text in stored}
    if len(stored) != len(got) or store.count() != len(want_chunks):
        problems.append(f"after rerun: {store.count()} chunks stored, {len(want_chunks)} expected")
    if got != want_chunks:
        diff = set(got.items()) ^ set(want_chunks.items())
        problems.append(f"after rerun: {len(diff)} chunks differ from a clean build, e.g. {sorted(diff)[:2]}")
    texts = [text for _, text in got.values()]
    if len(texts) != len(set(texts)):
        problems.append("after rerun: the same chunk text is stored twice")
    papers = {p.paper_id: p.to_dict() for p in catalog.iter_papers()}
    if papers != want_papers:
        problems.append(f"after rerun: catalog has {len(papers)} papers, {len(want_papers)} expected "
                        f"({len(set(papers) ^ set(want_papers))} ids differ)")
    if (summary.papers, summary.chunks) != (len(want_papers), len(want_chunks)):
        problems.append(f"after rerun: summary says {summary.papers} papers, {summary.chunks} chunks")
    lexical = LexicalIndex.load(ip.lexical)
    if lexical is None or sorted(lexical.chunk_ids) != sorted(want_chunks):
        problems.append("after rerun: the BM25 index does not hold exactly the stored chunks")
    else:  # updated from saved counts (or built in full): either way it answers as a full rebuild does
        full = rebuild_lexical(store, catalog, None)
        for q in [*WORDS, "method7", "graph token", "privacy speech gains"]:
            if (lexical.search(q, 10), lexical.in_few_papers(q, 10, 2)) != (full.search(q, 10),
                                                                              full.in_few_papers(q, 10, 2)):
                problems.append(f"after rerun: the BM25 index answers {q!r} unlike a full rebuild from the store")
                break
    rng = random.Random(len(stored))
    for cid in rng.sample(sorted(got), min(20, len(got))):
        pid, text = got[cid]
        vec = emb.embed([embed_text(papers[pid]["title"], text)])[0]
        top = store.query(vec, 1)
        if not top or top[0].chunk_id != cid:
            problems.append(f"after rerun: chunk {cid} is not its own nearest neighbour ({top[:1]})")
    again = build_index(s, emb, batch_papers=BATCH)
    if (again.embedded_chunks, again.added, again.removed) != (0, 0, 0):
        problems.append(f"a second rerun did work: {again}")
    catalog.close()
    return {"problems": problems, "pre": pre, "rerun_embedded": summary.embedded_chunks}


# --- the parent ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ctx() -> Any:
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["chromadb", "bm25s", "rag.indexer", "rag.store", "fakes", "helpers"])
    return context


def _run(ctx: Any, target: Any, *args: Any, kill_after: float | None = None, timeout: float = 120) -> Any:
    """Run target(*args, conn) in a fresh process; SIGKILL it `kill_after` seconds after it says "ready"."""
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child))
    proc.start()
    child.close()
    result: Any = None
    try:
        if kill_after is not None:
            assert parent.poll(timeout), "the ingest process never got ready"
            assert parent.recv() == "ready"
            if parent.poll(kill_after):
                result = parent.recv()  # finished before the kill
            proc.kill()
        elif parent.poll(timeout):
            result = parent.recv()
    except EOFError:
        result = None
    proc.join(timeout)
    if kill_after is None:
        assert proc.exitcode == 0, f"{target.__name__} died with exit code {proc.exitcode} (a crash opening the store?)"
    return result


def _where(trace: Path) -> str:
    lines = trace.read_text().splitlines() if trace.exists() else []
    if not lines:
        return "before any write"
    verb, name = lines[-1].split(" ", 1)
    return f"inside {name}" if verb == "begin" else f"after {name}"


@pytest.fixture
def scratch(tmp_path: Path) -> Any:
    """A folder in RAM when there is one: a SIGKILL test needs no disk flushes (the page cache survives a killed
    process), and Chroma's fsyncs would otherwise double the time of every trial."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="crash-", dir=shm))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_sigkill_at_random_moments_then_converges(scratch: Path, ctx: Any) -> None:
    tmp_path = scratch
    seed = int(os.environ.get("CRASH_SEED", time.time_ns() % 100_000))
    rng = random.Random(seed)
    v1, v2 = make_corpora(tmp_path)
    corpus = tmp_path / "corpus"  # the folder ingested; its content is v1 or v2 (the manifest records its path)

    def use(version: Path) -> None:
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.copytree(version, corpus)

    # Clean builds: the base for "update" trials, and how long a build and an update take.
    use(v1)
    base = tmp_path / "base"
    build_s = _run(ctx, ingest_child, str(base), str(corpus), str(tmp_path / "base.trace"), kill_after=600)
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    use(v2)
    update_s = _run(ctx, ingest_child, str(probe), str(corpus), str(tmp_path / "probe.trace"), kill_after=600)
    assert isinstance(build_s, float) and isinstance(update_s, float)
    clean = _run(ctx, verify_child, str(probe), str(corpus), [str(v2)])
    assert clean["problems"] == [] and clean["rerun_embedded"] == 0, clean

    log = []
    for trial in range(TRIALS):
        kind = KINDS[trial % len(KINDS)]
        data = tmp_path / f"trial{trial}"
        versions = [v1, v2] if kind == "update" else [v1]
        use(versions[-1])
        if kind == "update":
            shutil.copytree(base, data)
        landed: list[str] = []
        for _ in range(2 if kind == "double" else 1):
            # Up to 90% of a clean run: runs vary, and one that finishes before the kill tests less.
            delay = rng.uniform(0.0, 0.9 * (update_s if kind == "update" else build_s))
            trace = tmp_path / f"trial{trial}.{len(landed)}.trace"
            finished = _run(ctx, ingest_child, str(data), str(corpus), str(trace), kill_after=delay)
            landed.append(f"{delay:.2f}s " + ("(finished first)" if finished is not None else _where(trace)))
            if finished is not None and kind != "double":  # the machine got faster: aim earlier from now on
                build_s, update_s = (build_s, min(update_s, finished)) if kind == "update" else (
                    min(build_s, finished), update_s)
        result = _run(ctx, verify_child, str(data), str(corpus), [str(v) for v in versions])
        log.append(f"trial {trial} {kind}: killed at {', '.join(landed)}; before rerun {result.get('pre')}, "
                   f"rerun embedded {result.get('rerun_embedded')} chunks")
        assert result["problems"] == [], f"seed {seed}, " + log[-1] + "\n" + "\n".join(result["problems"])
        shutil.rmtree(data)
    print(f"crash trials (seed {seed}, build {build_s:.2f}s, update {update_s:.2f}s):\n" + "\n".join(log))
    landed_mid = sum("finished first" not in line for line in log)
    assert landed_mid >= TRIALS // 2, "most kills should land mid-ingest:\n" + "\n".join(log)
