"""Retrieval's shortcuts return what the slow way returns: rare-term checks from the BM25 postings instead of a
search per term, filters applied after an over-fetch instead of Chroma's `where`, and chunk texts read only for the
passages shown."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder
from helpers import ROOT, make_settings

from rag.catalog import Catalog
from rag.index import IndexPaths, open_store
from rag.indexer import build_index
from rag.lexical import LexicalIndex
from rag.question import read
from rag.records import Passage
from rag.retrieve import Filters, Retriever
from rag.store import ChunkStore, StoredChunk
from rag.text import tokens


def _few_by_search(index: LexicalIndex, query: str, k: int, limit: int) -> bool:
    """The definition `in_few_papers` answers without searching."""
    return 0 < len({pid for _, pid, _ in index.search(query, k, number_forms=False)}) <= limit


def _toy_index() -> LexicalIndex:
    """40 papers of 1-8 chunks; common, rare and hyphenated words; one paper holding most "burst" chunks."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    docs = []
    for p in range(40):
        for c in range(1 + p % 8):
            text = " ".join(rng.sample(words, 5))
            if p == 7:
                text += " burst"
            if p in {3, 30} and c == 0:
                text += " burst solo llm-based"
            docs.append((f"p{p}:{c}", f"p{p}", text))
    return LexicalIndex.build(docs)


def test_in_few_papers_matches_a_search_for_every_word_k_and_limit(tmp_path: Path) -> None:
    built = _toy_index()
    built.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded is not None
    for index in (built, loaded):
        search = index.search
        queries = [f"w{i}" for i in range(30)] + ["burst", "solo", "llm-based", "llm", "absent", "w1 w2", "the"]
        for q in queries:
            for limit in (1, 2, 3, 6, 20, 50):
                for k in (1, 3, 8, 20, 60, 500, limit * 4 + 8):
                    want = _few_by_search(index, q, k, limit)
                    index.search = _no_search  # type: ignore[method-assign]
                    got = index.in_few_papers(q, k, limit)
                    index.search = search  # type: ignore[method-assign]
                    assert got == want, (q, k, limit)


def _no_search(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("in_few_papers searched: the postings answer it")


def _few_by_bm25s(index: LexicalIndex, query: str, k: int, limit: int) -> bool:
    """The definition again, from bm25s' own scores of every chunk (no code of ours between)."""
    q = [t for t in tokens(query) if t in index._word_ids]  # bm25s' get_scores rejects an empty query
    ranked = _reference(index, q)[:k] if q else []
    return 0 < len({index.paper_ids[d] for d, _ in ranked}) <= limit


def test_in_few_papers_edge_cases_agree_with_the_brute_force_definition() -> None:
    """Words in 0 papers, in exactly `limit` papers, prefixes of other words, one paper holding many chunks of a
    word, scores tied at the cut, repeated and hyphenated words: remembered answers equal fresh ones."""
    docs = []
    for p in range(12):
        for c in range(1 + (p % 3)):
            text = f"filler{c} common"
            if p < 3:
                text += " solar"  # exactly 3 papers
            if p == 5:
                text += " sol"  # a prefix of "solar", of "solarx": counted on its own
            if p in {6, 7}:
                text += " solarx"
            if c == 0:
                text += " tie"  # the same score in chunk 0 of every paper: ties cut by position
            docs.append((f"p{p}:{c}", f"p{p}", text))
    # One paper with 30 chunks dense in "burst" (its best chunks), and 8 papers mentioning it once in long chunks.
    docs += [(f"big:{c}", "big", "burst burst burst") for c in range(30)]
    docs += [(f"q{p}:0", f"q{p}", "burst " + " ".join(f"pad{i}" for i in range(20))) for p in range(8)]
    index = LexicalIndex.build(docs)
    queries = ["solar", "sol", "solarx", "sola", "tie", "burst", "common", "absent", "the", "", "burst burst burst",
               "solar-sol", "tie solar", "common-tie-burst"]
    for query in queries:
        for limit in (1, 2, 3, 4, 12, 21):
            for k in (1, 2, 3, 5, 12, 29, 30, 31, 40, 1000):
                want = _few_by_bm25s(index, query, k, limit)
                assert want == _few_by_search(index, query, k, limit), (query, k, limit)
                fresh = LexicalIndex.build(docs)  # nothing remembered yet
                assert fresh.in_few_papers(query, k, limit) == want, (query, k, limit)
                assert index.in_few_papers(query, k, limit) == want, (query, k, limit)  # remembered from before
    assert index.in_few_papers("solar", 10, 3) and not index.in_few_papers("solar", 10, 2)
    assert index.in_few_papers("burst", 30, 1) and not index.in_few_papers("burst", 31, 1)  # 30 big chunks first
    assert not index.in_few_papers("absent", 10, 3) and not index.in_few_papers("solar", 0, 3)


def test_in_few_papers_on_an_empty_index() -> None:
    assert not LexicalIndex.build([]).in_few_papers("solar", 10, 2)


QUESTIONS = [json.loads(line)["question"] for line in (ROOT / "eval" / "qa.jsonl").read_text().splitlines()[:40]
             if line.strip()]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    s = make_settings(tmp_path_factory.mktemp("retrieve") / "data")
    emb = HashEmbedder()
    build_index(s, emb)
    ip = IndexPaths.of(s)
    return Retriever(emb, open_store(s, emb, create=False), LexicalIndex.load(ip.lexical), Catalog(ip.catalog),
                     s.retrieval)


def _with(r: Retriever, **changes: Any) -> Retriever:
    return Retriever(r.embedder, r.store, r.lexical, r.catalog, r.settings.model_copy(update=changes))


class ExactStore:
    """The `ChunkStore` query interface by brute force, ties broken by chunk id: post-filtering and `where` must
    then agree exactly (Chroma's HNSW is approximate and its graph differs from build to build)."""

    def __init__(self, store: ChunkStore, catalog: Catalog, embedder: HashEmbedder) -> None:
        chunks = store.all_chunks()
        papers = catalog.get_many(pid for _, pid, _ in chunks)
        self.ids = [cid for cid, _, _ in chunks]
        self.text = {cid: text for cid, _, text in chunks}
        self.meta = [{"paper_id": pid, "source": papers[pid].source, "has_code": papers[pid].has_code}
                     for _, pid, _ in chunks]
        self.vectors = embedder.embed([text for _, _, text in chunks])
        self.wheres: list[dict[str, Any] | None] = []

    def query(self, vector: Any, k: int, where: dict[str, Any] | None = None, texts: bool = True) -> list[StoredChunk]:
        self.wheres.append(where)
        sims = self.vectors @ vector
        order = sorted(range(len(self.ids)), key=lambda i: (-float(sims[i]), self.ids[i]))
        out = [StoredChunk(self.ids[i], self.meta[i]["paper_id"], self.text[self.ids[i]] if texts else "",
                           float(sims[i])) for i in order if _matches(where, self.meta[i])]
        return out[:k]

    def texts_of(self, chunk_ids: list[str]) -> dict[str, str]:
        return {i: self.text[i] for i in chunk_ids if i in self.text}


def _matches(where: dict[str, Any] | None, meta: dict[str, Any]) -> bool:
    if not where:
        return True
    if "$and" in where:
        return all(_matches(w, meta) for w in where["$and"])
    ((key, cond),) = where.items()
    return meta[key] in cond["$in"] if isinstance(cond, dict) else meta[key] == cond


def _filters(cat: Catalog) -> list[Filters]:
    some = frozenset(sorted(cat.ids())[:3])
    return [Filters(has_code=True), Filters(has_code=False), Filters(sources=frozenset(cat.sources()[:1])),
            Filters(paper_ids=some), Filters(paper_ids=frozenset(sorted(cat.ids())[:1])),
            Filters(sources=frozenset(cat.sources()[:2]), has_code=False)]


def test_filters_after_an_over_fetch_equal_where(retriever: Retriever) -> None:
    exact = ExactStore(retriever.store, retriever.catalog, HashEmbedder())
    fake: Any = exact
    widened = 0
    for candidates in (3, 10, 40):
        post = Retriever(retriever.embedder, fake, retriever.lexical, retriever.catalog,
                         retriever.settings.model_copy(update={"candidates": candidates}))
        where = Retriever(retriever.embedder, fake, retriever.lexical, retriever.catalog,
                          retriever.settings.model_copy(update={"candidates": candidates,
                                                                      "filter_fetch_max": 0}))  # always `where`
        for f in _filters(retriever.catalog):
            allowed = retriever.catalog.ids_where(f.sources, f.has_code, f.paper_ids)
            for q in QUESTIONS[:12]:
                exact.wheres.clear()
                a = post.search(q, f)
                used_where = any(w is not None for w in exact.wheres)
                widened += len(exact.wheres) > 1
                # only a filter keeping too small a share for filter_fetch_max falls back to `where`
                assert used_where == (len(allowed) / 38 < candidates * 1.5 / retriever.settings.filter_fetch_max)
                exact.wheres.clear()
                b = where.search(q, f)
                assert exact.wheres == [f.where()]
                assert a.hits and [(h.paper.paper_id, h.score, h.passages, h.why) for h in a.hits] == \
                    [(h.paper.paper_id, h.score, h.passages, h.why) for h in b.hits], (q, f, candidates)
                assert all(h.paper.paper_id in allowed for h in a.hits)
    assert widened  # some over-fetches came up short and were doubled


def test_chroma_where_and_the_catalog_select_the_same_papers(retriever: Retriever) -> None:
    vector = HashEmbedder().embed(["privacy leakage"])[0]
    for f in _filters(retriever.catalog):
        found = {c.paper_id for c in retriever.store.query(vector, 1000, where=f.where(), texts=False)}
        assert found == retriever.catalog.ids_where(f.sources, f.has_code, f.paper_ids), f


def test_passages_are_the_best_dense_chunks_of_each_paper_with_their_texts(retriever: Retriever) -> None:
    for q in QUESTIONS:
        got = retriever.search(q)
        assert got.query_vector is not None
        dense = retriever.store.query(got.query_vector, retriever.settings.candidates)  # texts included
        assert all(c.text for c in dense)
        for hit in got.hits:
            want = sorted((Passage(c.chunk_id, c.text, c.similarity) for c in dense
                           if c.paper_id == hit.paper.paper_id), key=lambda p: -p.score)[:3]
            assert hit.passages == tuple(want)


def test_distinctive_terms_are_those_a_search_per_term_finds_in_few_papers(retriever: Retriever) -> None:
    lexical = retriever.lexical
    assert lexical is not None
    limit = max(2, retriever.catalog.count() // 200)
    found = 0
    for q in QUESTIONS + ["What does SOLAR stand for?", "What is PrivGate?"]:
        top = retriever.search(q).hits[0].paper
        words = set(tokens(top.raw + " " + top.title))
        rare = retriever.rare_terms(q)
        assert rare == tuple(t for t in dict.fromkeys(tokens(q)) if len(t) >= 3
                             and _few_by_search(lexical, t, limit * 4 + 8, limit)), q
        want = tuple(t for t in rare if t in words)
        assert read(q).in_corpus((), rare).distinctive(words) == want, q
        found += bool(want)
    assert found  # some questions do have distinctive terms


def _reference(index: LexicalIndex, q: list[str]) -> list[tuple[int, float]]:
    """bm25s' own scores for every chunk, positive ones only, by score then chunk position."""
    model: Any = index._bm25
    full = model.get_scores(q)
    return sorted(((i, float(s)) for i, s in enumerate(full) if s > 0), key=lambda x: (-x[1], x[0]))


def test_bm25_top_k_has_bm25s_scores_and_a_fixed_tie_order() -> None:
    index = _toy_index()
    model: Any = index._bm25
    queries = [["w1"], ["w1", "w2"], ["w3", "w3", "burst"], ["burst", "llm-based", "llm"], ["absent"], ["w4", "absent"]]
    for q in queries:
        ref = _reference(index, q)
        for k in (1, 5, 17, len(index)):
            docs, scores = index._top(q, k)
            assert list(zip(docs.tolist(), scores.tolist())) == ref[:k], (q, k)
            # The same score list as bm25s' retrieve (which may order equal scores differently).
            _, want_scores = model.retrieve([q], k=k, show_progress=False)
            assert scores.tolist() == [s for s in want_scores[0].tolist() if s > 0][: len(scores)], (q, k)
    assert any(a[1] == b[1] for a, b in zip(ref, ref[1:]))  # the toy index does have ties to order


def test_the_bm25_ceiling_bounds_every_chunk_and_a_rare_word_reaches_more_of_it_than_common_ones() -> None:
    index = _toy_index()
    for q in ("w1", "w1 w2", "burst solo", "w3 burst llm-based", "w1 w2 w3 w4 w5 w6"):
        ceiling = index.ceiling(q)
        scores = [s for _, _, s in index.search(q, len(index))]
        assert scores and max(scores) <= ceiling + 1e-6, q
        if len(tokens(q)) == 1:  # one word: its best chunk is the ceiling
            assert max(scores) == pytest.approx(ceiling), q
    assert index.ceiling("absent") == 0.0

    def share(q: str) -> float:
        return index.search(q, 1)[0][2] / index.ceiling(q)

    # Six common words are never all in one chunk; "solo", in two papers, comes with "burst" wherever it is.
    assert share("w1 w2 w3 w4 w5 w6") < share("burst solo")


def test_filtered_bm25_search_keeps_the_order_of_the_full_ranking() -> None:
    index = _toy_index()
    for q in ("w1 w2", "burst w3", "llm-based", "absent"):
        ranking = _reference(index, tokens(q))
        for allowed in ({"p1", "p7", "p30"}, {f"p{i}" for i in range(0, 40, 3)}, set(), {"nope"}):
            for k in (1, 4, 40):
                want = [(index.chunk_ids[d], index.paper_ids[d], s) for d, s in ranking
                        if index.paper_ids[d] in allowed][:k]
                assert index.search(q, k, allowed=allowed) == want, (q, allowed, k)


def test_hybrid_fusions_score_papers_from_both_retrievers_best_chunks(retriever: Retriever) -> None:
    """'score': best cosine (the lowest cosine read, for a paper only BM25 found) + weight * best BM25 / the best
    BM25; 'rrf': 1 / (rrf_k + dense rank) + bm25_weight / (rrf_k + BM25 rank). Recomputed here from the two
    retrievers' own results, for every returned paper, on the question's own words (the glossary off: what it adds
    is checked in tests/test_glossary.py)."""
    lexical = retriever.lexical
    assert lexical is not None
    k = 6  # few candidates, so that papers found by one retriever only are among those returned
    both = only_bm25 = 0
    for q in QUESTIONS[:20]:
        dense = retriever.store.query(retriever.embedder.embed([q])[0], k, texts=False)
        cos: dict[str, float] = {}
        for c in dense:
            cos[c.paper_id] = max(cos.get(c.paper_id, -1.0), c.similarity)
        bm25: dict[str, float] = {}
        for _, pid, score in lexical.search(q, k):
            bm25[pid] = max(bm25.get(pid, 0.0), score)
        floor, best = min(c.similarity for c in dense), max(bm25.values())
        for share_of, top in (("ceiling", lexical.ceiling(q)), ("best", best)):
            scored = _with(retriever, fusion="score", bm25_score_weight=0.3, bm25_share_of=share_of,
                           candidates=k, glossary="off").search(q, top_k=10).hits
            for h in scored:
                pid = h.paper.paper_id
                assert h.score == pytest.approx(cos.get(pid, floor) + 0.3 * bm25.get(pid, 0.0) / top), q
                only_bm25 += pid not in cos
            assert [h.score for h in scored] == sorted((h.score for h in scored), reverse=True)
        dense_rank = {p: i + 1 for i, p in enumerate(dict.fromkeys(c.paper_id for c in dense))}
        bm25_rank = {p: i + 1 for i, p in
                     enumerate(dict.fromkeys(pid for _, pid, _ in lexical.search(q, k)))}
        for h in _with(retriever, fusion="rrf", bm25_weight=2.0, rrf_k=60, candidates=k,
                       glossary="off").search(q, top_k=10).hits:
            pid = h.paper.paper_id
            want = (1 / (60 + dense_rank[pid]) if pid in dense_rank else 0.0) + \
                (2.0 / (60 + bm25_rank[pid]) if pid in bm25_rank else 0.0)
            assert h.score == pytest.approx(want), q
            both += pid in dense_rank and pid in bm25_rank
    assert both and only_bm25  # papers found by both retrievers were fused, and by BM25 alone
