"""The streamed BM25 build is bm25s' own index: same vocabulary, same CSC arrays bit for bit, same search results.

The reference, `LexicalIndex.build_at_once`, is what `build` did before it streamed: every chunk's token list handed
to `bm25s.BM25().index` at once. Word ids follow a set's iteration order (string hashes), so both are built in the same
process and compared directly.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import HashEmbedder
from helpers import make_settings

from rag.catalog import Catalog
from rag.chunk import embed_text
from rag.index import IndexPaths, open_store
from rag.indexer import build_index
from rag.lexical import LexicalIndex
from rag.lexical_sync import rebuild_lexical


def _corpus(n: int = 600) -> list[tuple[str, str, str]]:
    """Repeated words, chunks with no token at all, unicode and hyphenated words, short and long chunks."""
    rng = random.Random(7)
    words = ["solar", "cell", "the", "of", "naïve", "béton", "Ωmega", "日本語", "9.7x", "mm2mm", "llm-based", "R2G",
             "x"] + [f"w{i}" for i in range(150)]
    docs = []
    for i in range(n):
        size = rng.choice([0, 1, 2, 5, 30, 120])
        text = " ".join(rng.choice(words) for _ in range(size))
        if i % 23 == 0:
            text = "— ... !!!"  # punctuation only: no token, indexed as "_"
        docs.append((f"p{i // 3}:{i % 3}", f"p{i // 3}", text))
    return docs


QUERIES = ["solar", "solar cell", "the of", "naïve béton", "Ωmega 日本語", "9.7x mm2mm", "llm-based", "llm", "r2g",
           "w1 w2 w3 w3", "absent", "x"]


def assert_same_index(got: LexicalIndex, want: LexicalIndex) -> None:
    assert got.chunk_ids == want.chunk_ids and got.paper_ids == want.paper_ids
    g: Any = got._bm25
    w: Any = want._bm25
    assert list(g.vocab_dict.items()) == list(w.vocab_dict.items())  # same words, same ids, same order
    for key in ("data", "indices", "indptr"):
        assert g.scores[key].dtype == w.scores[key].dtype, key
        # Bit for bit, not just allclose: the streamed build does bm25s' arithmetic in bm25s' float types.
        assert np.array_equal(g.scores[key], w.scores[key]), key
    assert g.scores["num_docs"] == w.scores["num_docs"]
    assert g.nonoccurrence_array is None and w.nonoccurrence_array is None
    for q in QUERIES:
        for k in (1, 10, len(want)):
            assert got.search(q, k) == want.search(q, k), (q, k)


@pytest.mark.parametrize("batch", [1, 7, 250, 10_000])
def test_streamed_build_is_bm25s_index(batch: int, tmp_path: Path) -> None:
    docs = _corpus()
    want = LexicalIndex.build_at_once(docs)
    got = LexicalIndex.build(iter(docs), batch=batch)  # a one-pass iterator, scored `batch` chunks at a time
    assert_same_index(got, want)
    got.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded is not None
    for q in QUERIES:
        assert loaded.search(q, 10) == want.search(q, 10), q
        assert loaded.in_few_papers(q, 10, 3) == want.in_few_papers(q, 10, 3), q


def test_streamed_build_of_one_empty_chunk_and_of_nothing() -> None:
    assert_same_index(LexicalIndex.build([("p:0", "p", "")]), LexicalIndex.build_at_once([("p:0", "p", "")]))
    empty = LexicalIndex.build(iter([]))
    assert len(empty) == 0 and empty.search("solar", 5) == []


def test_rebuild_from_the_store_in_pages_is_the_old_build(tmp_path: Path) -> None:
    """The seeds, read from the store 7 chunks a page with their titles: the index bm25s built from all of them."""
    s = make_settings(tmp_path / "data")
    emb = HashEmbedder()
    build_index(s, emb)
    ip = IndexPaths.of(s)
    store, catalog = open_store(s, emb, create=False), Catalog(ip.catalog)
    chunks = store.all_chunks()
    papers = catalog.get_many(pid for _, pid, _ in chunks)
    want = LexicalIndex.build_at_once([(cid, pid, embed_text(papers[pid].title, text)) for cid, pid, text in chunks])
    assert len(want) > 7 * 3
    assert_same_index(rebuild_lexical(store, catalog, None, page=7), want)
    saved = LexicalIndex.load(ip.lexical)  # what the ingest itself saved
    assert saved is not None
    for q in QUERIES + ["transformer attention", "graph neural network"]:
        assert saved.search(q, 20) == want.search(q, 20), q
    catalog.close()


def test_idf_counts_papers_not_chunks() -> None:
    """A word's idf is BM25's formula over the papers holding it, so it is the same however the abstracts are cut:
    the summary's topic words (`answer.summary_min_idf`) do not change with `chunking.max_tokens`."""
    cut = LexicalIndex.build([("a:0", "a", "diffusion model"), ("a:1", "a", "diffusion sampling"),
                              ("a:2", "a", "diffusion again"), ("b:0", "b", "graph networks"),
                              ("c:0", "c", "graph model")])
    whole = LexicalIndex.build([("a:0", "a", "diffusion model diffusion sampling diffusion again"),
                                ("b:0", "b", "graph networks"), ("c:0", "c", "graph model")])
    words = ["diffusion", "graph", "model", "sampling", "unknown"]
    want = {"diffusion": np.log(1 + 2.5 / 1.5), "graph": np.log(1 + 1.5 / 2.5), "model": np.log(1 + 1.5 / 2.5),
            "sampling": np.log(1 + 2.5 / 1.5)}
    for index in (cut, whole):
        got = index.idf(words)
        assert got.keys() == want.keys()  # an unknown word is left out
        assert all(abs(got[w] - want[w]) < 1e-12 for w in want), got
        assert index.idf(["diffusion"]) == {"diffusion": got["diffusion"]}  # remembered, the same


def test_a_topic_word_the_index_lacks_weighs_as_its_commonest_kin() -> None:
    """A blind dev listing asked for papers "verifying" machine-generated data; the abstracts write "verifiers" and
    "Soft-Verified", so `idf` left the word out and the topic lost it. `idf_or_kin` weighs it as the commonest
    indexed word sharing its first five letters, never more than that word; a short or kinless word stays out."""
    index = LexicalIndex.build([("a:0", "a", "verifiers check synthetic data"), ("b:0", "b", "soft verified code"),
                                ("c:0", "c", "verification of verified agents"), ("d:0", "d", "graph model"),
                                ("e:0", "e", "graph networks")])
    known = index.idf(["verified", "verifiers", "verification", "graph"])
    got = index.idf_or_kin(["verifying", "graph", "gra", "unknownword"])
    assert got == {"verifying": known["verified"], "graph": known["graph"]}
    assert known["verified"] == min(known[w] for w in ("verified", "verifiers", "verification"))
    assert index.idf_or_kin(["verifiers"]) == {"verifiers": known["verifiers"]}  # a known word keeps its own


def test_a_query_word_also_finds_its_other_number() -> None:
    """"which paper would help me make my VLM faster?" found SOLAR ("the strongest supervised VLM") and not the paper
    on "Vision-Language Models (VLMs)": the index held the plural, the user typed the singular."""
    index = LexicalIndex.build([("a:0", "a", "VLMs suffer from high inference latency"),
                                ("b:0", "b", "SOLAR surpasses the strongest supervised VLM"),
                                ("c:0", "c", "Graph neural networks (GNNs) leak links"),
                                ("d:0", "d", "unrelated words only")])
    assert {pid for _, pid, _ in index.search("VLM latency", 5)} == {"a", "b"}
    assert [pid for _, pid, _ in index.search("VLM latency", 5)][0] == "a"
    assert {pid for _, pid, _ in index.search("GNN", 5)} == {"c"}
    assert index.search("class", 5) == []  # "clas" is no singular of it


def test_a_word_is_respelt_as_the_abstracts_spell_it_and_only_then() -> None:
    """British and American spellings: a question's word the abstracts never write, but write in its other
    spelling, is searched their way ("generalisation" over abstracts writing "generalization", and back); a word the
    abstracts write, or whose other spelling they do not write either, stays as typed."""
    from rag.text import spellings

    assert spellings("generalisation") == ["generalization"] and spellings("behavior") == ["behaviour"]
    assert spellings("modelling") == ["modeling"] and spellings("four") == [] and spellings("7b") == []
    american = LexicalIndex.build([("a:0", "a", "Models generalization under distribution shift; modeling behavior."),
                                   ("b:0", "b", "An analyse of the optimisation landscape.")])
    assert american.respelt("Which papers study Generalisation and modelling of behaviour?") == (
        "Which papers study Generalization and modeling of behavior?")
    assert american.respelt("the analyze of optimization, and the colour of tokens") == (
        "the analyse of optimisation, and the colour of tokens")
