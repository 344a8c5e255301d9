"""The incremental BM25 rebuild is the full one: after any sequence of ingests, the same search results.

`LexicalIndex.update` takes unchanged chunks' word counts from the file saved with the index and tokenizes only new
or rewritten chunks. Word ids follow first use, so they differ from a full build's; everything a reader sees is
compared instead: the chunks and paper ids in order, the vocabulary, each word's column (chunks and float32 scores),
`search` (ids, order, scores) and `in_few_papers`.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder
from helpers import make_settings
from test_lexical_build import QUERIES, _corpus

from rag import indexer
from rag.bm25_counts import FILE
from rag.catalog import Catalog
from rag.config import Settings
from rag.index import IndexPaths, lexical_for_reading, open_store
from rag.indexer import build_index
from rag.lexical import LexicalIndex
from rag.lexical_sync import journal_path, rebuild_lexical


def columns(index: LexicalIndex) -> dict[str, tuple[list[int], list[float]]]:
    """word -> (chunks containing it, their scores): what a word id stands for, whatever the id."""
    model: Any = index._bm25
    if model is None:
        return {}
    s = model.scores
    out = {}
    for word, i in model.vocab_dict.items():
        if word:  # bm25s' empty word has no column
            lo, hi = s["indptr"][i], s["indptr"][i + 1]
            out[word] = (s["indices"][lo:hi].tolist(), s["data"][lo:hi].tolist())
    return out


def assert_same_answers(got: LexicalIndex, want: LexicalIndex, queries: list[str]) -> None:
    assert got.chunk_ids == want.chunk_ids and got.paper_ids == want.paper_ids
    assert columns(got) == columns(want)  # same words, each with the same chunks and float32 scores
    assert got._vocab == want._vocab
    for q in queries:
        assert got.knows(q) == want.knows(q), q
        for k in (1, 5, 40, max(1, len(want))):
            assert got.search(q, k) == want.search(q, k), (q, k)
            assert got.in_few_papers(q, k, 2) == want.in_few_papers(q, k, 2), (q, k)
        papers = sorted(set(want.paper_ids))[:3]
        assert got.search(q, 10, allowed=set(papers)) == want.search(q, 10, allowed=set(papers)), q


def _texts(docs: dict[str, str]) -> Any:
    def texts(rows: list[tuple[str, str]]) -> Any:
        return ((cid, pid, docs[cid]) for cid, pid in rows)
    return texts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_update_after_adds_rewrites_and_removals_is_the_full_build(seed: int, tmp_path: Path) -> None:
    """Random rounds of new chunks (some inserted mid-order), rewritten ones (same id, new text), removed ones."""
    rng = random.Random(seed)
    docs = {cid: text for cid, _, text in _corpus(300)}
    order = list(docs)
    folder = tmp_path / "bm25"
    LexicalIndex.build((cid, cid.split(":")[0], docs[cid]) for cid in order).save(folder)
    words = ["solar", "cell", "neutrino", "qubit", "9.7x", "llm-based", "zeta"] + [f"w{i}" for i in range(150)]
    for round_ in range(6):
        rewritten: set[str] = set()
        for _ in range(rng.randint(0, 25)):  # new chunks, new papers, some new words
            cid = f"n{round_}_{rng.randint(0, 10**6)}:0"
            docs[cid] = " ".join(rng.choice(words + [f"new{round_}"]) for _ in range(rng.randint(0, 40)))
            docs[cid] += f" only{len(docs)}"  # a word of this chunk alone: gone from the vocabulary with it
            order.insert(rng.randint(0, len(order)), cid)
        for cid in rng.sample(order, min(len(order), rng.randint(0, 20))):  # removed: their words may go
            order.remove(cid)
        for cid in rng.sample(order, min(len(order), rng.randint(0, 10))):  # rewritten under the same id
            docs[cid] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 30)))
            rewritten.add(cid.split(":")[0])
        rows = [(cid, cid.split(":")[0]) for cid in order]
        got = LexicalIndex.update(folder, rows, rewritten, _texts(docs), batch=rng.choice([3, 50, 10_000]))
        assert got is not None
        want = LexicalIndex.build_at_once([(cid, pid, docs[cid]) for cid, pid in rows])
        assert_same_answers(got, want, QUERIES + ["neutrino qubit", "new0", "new3 zeta", "w7 w8", "only305", "only"])
        got.save(folder)
        loaded = LexicalIndex.load(folder)
        assert loaded is not None
        assert_same_answers(loaded, want, ["solar cell", "w1 w2", "zeta"])


def test_update_reads_only_new_and_rewritten_chunks(tmp_path: Path) -> None:
    docs = {cid: text for cid, _, text in _corpus(60)}
    LexicalIndex.build((cid, cid.split(":")[0], t) for cid, t in docs.items()).save(tmp_path / "bm25")
    docs["new:0"] = "solar neutrino"
    asked: list[list[tuple[str, str]]] = []

    def texts(rows: list[tuple[str, str]]) -> Any:
        asked.append(rows)
        return _texts(docs)(rows)

    rows = [(cid, cid.split(":")[0]) for cid in docs if not cid.startswith("p3:")]
    assert LexicalIndex.update(tmp_path / "bm25", rows, {"p5"}, texts) is not None
    assert asked == [[("p5:0", "p5"), ("p5:1", "p5"), ("p5:2", "p5"), ("new:0", "new")]]


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage", "other format", "other size", "bad ids"])
def test_unusable_saved_counts_mean_a_full_build(damage: str, tmp_path: Path) -> None:
    docs = {cid: text for cid, _, text in _corpus(60)}
    folder = tmp_path / "bm25"
    LexicalIndex.build((cid, cid.split(":")[0], t) for cid, t in docs.items()).save(folder)
    path = folder / FILE
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not a zip at all")
    elif damage in ("other format", "other size"):
        with np.load(path) as f:
            arrays = dict(f)
        if damage == "other format":
            arrays["format"] = np.array([0])
        else:
            arrays["lengths"] = arrays["lengths"][:-1]
        np.savez(path, **arrays)
    else:
        (folder / "ids.json").write_text("{not json")
    rows = [(cid, cid.split(":")[0]) for cid in docs]
    assert LexicalIndex.update(folder, rows, set(), _texts(docs)) is None


# --- through the indexer: ingests of files, as a user runs them ---------------------------------------------------


def _write(folder: Path, name: str, papers: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"title": t, "abstract": a}) for t, a in papers]
    (folder / name).write_text("\n".join(lines) + "\n")


def _abstract(rng: random.Random, topic: str) -> str:
    words = ["solar", "cell", "graph", "neural", "network", "qubit", "decoder", "9.7x", "llm-based", "sparse",
             "attention", "lattice", "protein", "folding", "benchmark", "latency"]
    return " ".join(f"{topic} " + " ".join(rng.choice(words) for _ in range(rng.randint(8, 30))) + "."
                    for _ in range(rng.randint(1, 6)))


def _check(s: Settings, emb: HashEmbedder) -> None:
    """The saved index answers as a full rebuild from the store does."""
    ip = IndexPaths.of(s)
    store, catalog = open_store(s, emb, create=False), Catalog(ip.catalog)
    try:
        want = rebuild_lexical(store, catalog, None)
        got = LexicalIndex.load(ip.lexical)
        assert got is not None
        assert_same_answers(got, want, ["solar cell", "qubit", "graph neural network", "zebrafish", "topic3",
                                        "retitled", "9.7x llm-based", "latency benchmark"])
        assert not journal_path(ip.lexical).exists()
    finally:
        catalog.close()


def test_ingests_update_the_index_as_a_full_rebuild_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(3)
    corpus = tmp_path / "corpus"
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus})
    emb = HashEmbedder()
    a = [(f"Paper A{i} topic{i % 5}", _abstract(rng, f"topic{i % 5}")) for i in range(30)]
    b = [(f"Paper B{i} zebrafish", _abstract(rng, "zebrafish")) for i in range(12)]
    _write(corpus, "a.jsonl", a)
    caplog.set_level(logging.INFO, logger="rag.lexical_sync")

    def ingest(how: str) -> None:
        caplog.clear()
        build_index(s, emb, paths=[corpus], batch_papers=8)
        assert any(how in r.getMessage() for r in caplog.records if "BM25 index of" in r.getMessage()), how
        _check(s, emb)

    ingest("built in full")  # the first ingest: nothing saved yet
    _write(corpus, "b.jsonl", b)
    ingest("updated")  # a new file
    a[3] = ("Retitled paper three", a[3][1])  # same abstract, so the same paper and chunk ids, with a new title
    a[7] = (a[7][0], _abstract(rng, "topic2"))  # a new abstract: a new paper id, the old paper goes
    _write(corpus, "a.jsonl", a)
    ingest("updated")
    (corpus / "b.jsonl").unlink()  # a removed file: its papers go
    ingest("updated")

    # Killed after the store was written but before the index was: the journal tells the next run what to re-read
    # (its files are unchanged by then, so nothing else says the index is stale; the count is the same).
    a[5] = ("Retitled again: paper five", a[5][1])
    _write(corpus, "a.jsonl", a)
    real = indexer.rebuild_lexical

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(indexer, "rebuild_lexical", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(s, emb, paths=[corpus], batch_papers=8)
    monkeypatch.setattr(indexer, "rebuild_lexical", real)
    ingest("updated")

    # An index saved without counts (by an older version): the next rebuild is a full one, then updates again.
    (IndexPaths.of(s).lexical / FILE).unlink()
    _write(corpus, "b.jsonl", b[:4])
    ingest("built in full")
    _write(corpus, "b.jsonl", b[:6])
    ingest("updated")


def test_the_app_repairs_an_index_left_stale_by_a_killed_ingest(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A retitled paper keeps its chunk count, so after a kill between the store write and the BM25 save only the
    journal says the saved index is stale: the app, opening the index with no ingest running, updates it."""
    rng = random.Random(5)
    corpus = tmp_path / "corpus"
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus})
    emb = HashEmbedder()
    a = [(f"Paper A{i} topic{i % 3}", _abstract(rng, f"topic{i % 3}")) for i in range(10)]
    _write(corpus, "a.jsonl", a)
    build_index(s, emb, paths=[corpus], batch_papers=4)
    a[2] = ("Kiwifruit retitled", a[2][1])
    _write(corpus, "a.jsonl", a)

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    real = indexer.rebuild_lexical
    monkeypatch.setattr(indexer, "rebuild_lexical", killed)
    with pytest.raises(KeyboardInterrupt):
        build_index(s, emb, paths=[corpus], batch_papers=4)
    monkeypatch.setattr(indexer, "rebuild_lexical", real)
    ip = IndexPaths.of(s)
    stale = LexicalIndex.load(ip.lexical)
    assert stale is not None and not stale.knows("kiwifruit") and journal_path(ip.lexical).exists()

    store, catalog = open_store(s, emb, create=False), Catalog(ip.catalog)
    try:
        got = lexical_for_reading(s, store, catalog)
        assert got.knows("kiwifruit")
        assert_same_answers(got, rebuild_lexical(store, catalog, None), ["kiwifruit", "topic1", "paper a2"])
        assert not journal_path(ip.lexical).exists()  # repaired and saved
        again = LexicalIndex.load(ip.lexical)
        assert again is not None and again.knows("kiwifruit")
    finally:
        catalog.close()


def test_a_first_ingest_builds_in_full_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nothing saved yet is the normal first run, not damage: the user sees no warning."""
    corpus = tmp_path / "corpus"
    _write(corpus, "a.jsonl", [("Solar cells", "Perovskite solar cells reach 30% efficiency."),
                               ("Graph networks", "Message passing on molecular graphs.")])
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus})
    caplog.set_level(logging.INFO, logger="rag")
    build_index(s, HashEmbedder(), paths=[corpus])
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("built in full" in r.getMessage() for r in caplog.records)
