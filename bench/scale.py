"""A 100,000-paper index made from a built 10,000-paper one, for retrieval figures when a real ingest does not fit.

Each paper of the source index is copied `factor` times under new ids (`<id>~r3`), its chunks with it; copy r of a
chunk vector is the real vector plus deterministic Gaussian noise (sigma 0.05 per dimension before renormalising:
cosine ~0.7 to the original, so copies are near neighbours but not ties), and its text is the original text.
Everything then goes through the real adapters (`rag.store.ChunkStore.upsert`, `rag.catalog.Catalog`,
`rag.lexical_sync.rebuild_lexical`), so `rag.retrieve.Retriever` searches it exactly as it searches a real index.

What this does not reproduce: the vocabulary and vector spread of 100,000 distinct abstracts (BM25 sees each text
`factor` times; HNSW sees clusters of `factor` near-duplicates). Figures from it are labelled "replicated".
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from rag.catalog import Catalog
from rag.config import Settings
from rag.embed import Embedder
from rag.index import IndexPaths, open_store
from rag.lexical_sync import rebuild_lexical
from rag.records import Chunk

from .measure import dir_size_mb, peak_rss_mb


def _stored(settings: Settings, embedder: Embedder) -> tuple[list[str], list[str], list[str], np.ndarray, list[dict]]:
    from .retrieval import _collection

    col = _collection(settings)
    ids: list[str] = []
    pids: list[str] = []
    docs: list[str] = []
    metas: list[dict] = []
    vecs = []
    offset, step = 0, 5000
    while True:
        got = col.get(include=["embeddings", "metadatas", "documents"], limit=step, offset=offset)
        ids.extend(got["ids"])
        metas.extend(dict(m or {}) for m in got["metadatas"])
        pids.extend(str(m["paper_id"]) for m in got["metadatas"])
        docs.extend(d or "" for d in got["documents"])
        vecs.append(np.asarray(got["embeddings"], dtype=np.float32).reshape(len(got["ids"]), -1))
        if len(got["ids"]) < step:
            break
        offset += step
    return ids, pids, docs, np.concatenate(vecs), metas


def replicate(source: Settings, target: Settings, embedder: Embedder, factor: int = 10,
              sigma: float = 0.05) -> dict[str, Any]:
    """Build target's index as `factor` noisy copies of source's (see the module doc); returns how long it took."""
    t0 = time.perf_counter()
    ids, pids, docs, vecs, metas = _stored(source, embedder)
    src_catalog = Catalog(IndexPaths.of(source).catalog)
    papers = src_catalog.get_many(dict.fromkeys(pids))
    src_catalog.close()
    ip = IndexPaths.of(target)
    store = open_store(target, embedder)
    catalog = Catalog(ip.catalog)
    rng = np.random.default_rng(0)
    store_s = 0.0
    for r in range(factor):
        suffix = f"~r{r}"
        noisy = vecs + rng.normal(0.0, sigma, vecs.shape).astype(np.float32) if r else vecs.copy()
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        chunks = [Chunk(chunk_id=f"{pid}{suffix}:{cid.rsplit(':', 1)[1]}", paper_id=f"{pid}{suffix}",
                        index=int(m.get("index", 0)), text=doc, first_sentence=0, n_sentences=1)
                  for cid, pid, doc, m in zip(ids, pids, docs, metas)]
        extra = [{k: v for k, v in m.items() if k not in {"paper_id", "index"}} for m in metas]
        t = time.perf_counter()
        store.upsert(chunks, noisy, extra)
        store_s += time.perf_counter() - t
        catalog.put_papers(replace(p, paper_id=f"{p.paper_id}{suffix}", position=p.position + r * 1_000_000)
                           for p in papers.values())
    t = time.perf_counter()
    rebuild_lexical(store, catalog, ip.lexical)
    bm25_s = time.perf_counter() - t
    catalog.set_meta("fingerprint", target.fingerprint())
    out = {"factor": factor, "sigma": sigma, "papers": catalog.count(), "chunks": store.count(),
           "seconds": round(time.perf_counter() - t0, 1), "chroma_upsert_chunks_per_s": round(len(ids) * factor /
                                                                                               store_s, 1),
           "bm25_build_s": round(bm25_s, 1), "peak_rss_mb": round(peak_rss_mb(), 1),
           "store_mb": {"chroma": round(dir_size_mb(ip.chroma), 1), "index": round(dir_size_mb(ip.folder), 1)},
           "vectors": "replicated"}
    catalog.close()
    return out
