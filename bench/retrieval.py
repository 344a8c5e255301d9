"""Retrieval figures: p50/p95 of query embedding, dense top-k, BM25 and fusion; HNSW recall; filter strategies.

Latencies come from `rag.retrieve.Retriever.search`'s own timings (embed_ms, dense_ms, bm25_ms, fuse_ms, where
fuse includes the catalog look-up and the distinctive-term check), over the QA set's questions, each repeated.

The HNSW checks talk to Chroma directly (the one bench module importing chromadb, because it reads every stored
vector and changes `ef_search`, which `rag.store` deliberately does not expose): recall@k of Chroma's approximate
search against exact search over the same vectors (numpy, brute force), for several `ef_search` values, and a
`where` filter inside Chroma against over-fetching and filtering afterwards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag.catalog import Catalog
from rag.config import Settings
from rag.embed import Embedder
from rag.index import IndexPaths, open_store
from rag.lexical import LexicalIndex
from rag.retrieve import Retriever

from .measure import median, summary

PARTS = ("embed_ms", "dense_ms", "bm25_ms", "fuse_ms", "retrieve_ms")


def questions(qa_file: Path, limit: int = 30) -> list[str]:
    """The first `limit` questions of the QA set (or fallbacks when it is missing)."""
    out: list[str] = []
    if qa_file.is_file():
        for line in qa_file.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append(str(json.loads(line)["question"]))
            if len(out) >= limit:
                break
    return out or ["How much faster is training with mixed hard and soft labels?",
                   "Which method recovers inverse transformations on Lie groups?"]


def open_retriever(settings: Settings, embedder: Embedder) -> Retriever:
    ip = IndexPaths.of(settings)
    store = open_store(settings, embedder, create=False)
    return Retriever(embedder, store, LexicalIndex.load(ip.lexical), Catalog(ip.catalog), settings.retrieval)


def latency(settings: Settings, embedder: Embedder, qs: list[str], repeats: int = 5) -> dict[str, Any]:
    """Percentiles (ms) of each retrieval stage over len(qs) * repeats searches, after one untimed pass."""
    t = time.perf_counter()
    retriever = open_retriever(settings, embedder)
    first = retriever.search(qs[0])  # the first query loads the HNSW index and BM25 arrays
    open_ms = (time.perf_counter() - t) * 1000
    for q in qs:
        retriever.search(q)
    samples: dict[str, list[float]] = {p: [] for p in PARTS}
    for _ in range(repeats):
        for q in qs:
            timings = retriever.search(q).timings
            for p in PARTS:
                samples[p].append(timings.get(p, 0.0))
    return {"papers": retriever.catalog.count(), "chunks": retriever.store.count(), "queries": len(qs),
            "repeats": repeats, "open_and_first_query_ms": round(open_ms, 1),
            "first_query_ms": {k: round(v, 2) for k, v in first.timings.items()},
            **{p: summary(samples[p]) for p in PARTS}}


def _collection(settings: Settings) -> Any:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    ip = IndexPaths.of(settings)
    client = chromadb.PersistentClient(path=str(ip.chroma), settings=ChromaSettings(anonymized_telemetry=False))
    return client.get_collection(ip.collection, embedding_function=None)


def _all_vectors(col: Any) -> tuple[list[str], np.ndarray, list[bool]]:
    ids: list[str] = []
    vecs: list[np.ndarray] = []
    code: list[bool] = []
    offset, step = 0, 5000
    while True:
        got = col.get(include=["embeddings", "metadatas"], limit=step, offset=offset)
        ids.extend(got["ids"])
        vecs.append(np.asarray(got["embeddings"], dtype=np.float32).reshape(len(got["ids"]), -1))
        code.extend(bool((m or {}).get("has_code")) for m in got["metadatas"])
        if len(got["ids"]) < step:
            break
        offset += step
    return ids, np.concatenate(vecs), code


def hnsw(settings: Settings, embedder: Embedder, qs: list[str], ks: tuple[int, ...] = (10, 40),
         efs: tuple[int, ...] = (10, 20, 40, 100, 200), repeats: int = 3) -> dict[str, Any]:
    """Recall@k of Chroma's HNSW vs exact search, per ef_search, with the query latency at each setting."""
    col = _collection(settings)
    ids, matrix, code = _all_vectors(col)
    qv = embedder.embed(qs)
    exact: dict[int, list[set[str]]] = {k: [] for k in ks}
    exact_ms: list[float] = []
    for q in qv:
        t = time.perf_counter()
        scores = matrix @ q
        top = np.argpartition(-scores, max(ks))[: max(ks)]
        top = top[np.argsort(-scores[top])]
        exact_ms.append((time.perf_counter() - t) * 1000)
        for k in ks:
            exact[k].append({ids[i] for i in top[:k]})
    out: dict[str, Any] = {"chunks": len(ids), "queries": len(qs), "exact_numpy_ms": summary(exact_ms),
                           "by_ef_search": {}}
    default_ef = int((col.configuration_json or {}).get("hnsw", {}).get("ef_search") or 100)
    out["default_ef_search"] = default_ef
    try:
        for ef in efs:
            col.modify(configuration={"hnsw": {"ef_search": ef}})
            col = _collection(settings)  # reopen so the new setting is the one queried
            row: dict[str, Any] = {}
            times: list[float] = []
            for k in ks:
                recalls = []
                for qi, q in enumerate(qv):
                    got: list[str] = []
                    for _ in range(repeats):
                        t = time.perf_counter()
                        got = col.query(query_embeddings=[q.tolist()], n_results=k, include=[])["ids"][0]
                        times.append((time.perf_counter() - t) * 1000)
                    recalls.append(len(set(got) & exact[k][qi]) / k)
                row[f"recall@{k}"] = round(float(np.mean(recalls)), 4)
            row["query_ms"] = summary(times)
            out["by_ef_search"][str(ef)] = row
    finally:
        col.modify(configuration={"hnsw": {"ef_search": default_ef}})
    out["filter"] = _filters(col, qv, code, k=40)
    return out


def _filters(col: Any, qv: np.ndarray, code: list[bool], k: int) -> dict[str, Any]:
    """has_code=True: a Chroma `where` filter vs fetching more without one and filtering afterwards."""
    share = max(0.01, sum(code) / max(1, len(code)))
    over = int(np.ceil(k / share * 1.5))  # e.g. k=40 at a 40% share: fetch 150, expect ~60 matches
    where_ms, post_ms, overlap, short = [], [], [], 0
    for q in qv:
        t = time.perf_counter()
        a = col.query(query_embeddings=[q.tolist()], n_results=k, where={"has_code": True}, include=[])["ids"][0]
        where_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        res = col.query(query_embeddings=[q.tolist()], n_results=over, include=["metadatas"])
        b = [i for i, m in zip(res["ids"][0], res["metadatas"][0]) if (m or {}).get("has_code")][:k]
        post_ms.append((time.perf_counter() - t) * 1000)
        short += len(b) < k
        overlap.append(len(set(a) & set(b)) / k)
    return {"k": k, "has_code_share": round(share, 3), "post_filter_fetch": over,
            "where_ms": summary(where_ms), "post_filter_ms": summary(post_ms),
            "overlap": round(median(overlap), 3), "post_filter_short_queries": short}
