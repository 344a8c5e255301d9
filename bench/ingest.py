"""Ingest figures: papers/s and chunks/s for parse, embed and store separately, peak RSS, store size on disk.

The real `rag.indexer.build_index` runs once on a fresh data folder, with the embedder wrapped to time its calls:
- parse = reading + chunking (with the embedder's tokenizer), timed in a separate streaming pass first over at
  most `parse_sample` papers (default 5,000; the rate is applied to the whole corpus);
- embed = time inside `Embedder.embed` during the build;
- store = the rest of the build (Chroma upserts, catalog commits, BM25 rebuild), i.e. total - parse - embed;
  the BM25 rebuild alone is timed once more afterwards and reported on its own.
Peak RSS is this process's, so the CLI runs each ingest in a fresh worker process.

`SentenceMeanEmbedder` stands in for the real embedder on corpora too big to embed on two cores in a session: a
chunk's vector is the normalised mean of the real embeddings of its sentences (each distinct sentence embedded once,
for real). The vectors live in the real model's space, so real query embeddings retrieve sensibly, but they are
not what the model would give for the whole chunk: figures from such a build are labelled "approx_vectors".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from rag.chunk import chunk_paper
from rag.config import Settings
from rag.embed import Embedder, embed_documents
from rag.index import IndexPaths, open_store
from rag.indexer import build_index
from rag.lexical_sync import rebuild_lexical
from rag.parse import ParseReport, find_files, read_papers
from rag.text import split_sentences

from .measure import Stopwatch, dir_size_mb, median, peak_rss_mb, rss_mb


class TimedEmbedder:
    """An embedder that adds the seconds spent in embed() and count_tokens() to a stopwatch."""

    def __init__(self, inner: Embedder, sw: Stopwatch) -> None:
        self.inner, self.sw = inner, sw
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        with self.sw.time("embed"):
            return self.inner.embed(texts)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """What the indexer calls for stored chunks (the inner embedder's own batch size for them, if it has one)."""
        self.texts += len(texts)
        with self.sw.time("embed"):
            return embed_documents(self.inner, texts)

    def count_tokens(self, text: str) -> int:
        with self.sw.time("count_tokens"):
            return self.inner.count_tokens(text)


class SentenceMeanEmbedder:
    """Approximate chunk vectors: the mean of the real vectors of the chunk's sentences (see the module doc)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        split = [split_sentences(t) or [t] for t in texts]
        missing = list(dict.fromkeys(s for parts in split for s in parts if s not in self._cache))
        if missing:
            for s, v in zip(missing, self.inner.embed(missing)):
                self._cache[s] = v
        out = np.stack([np.mean([self._cache[s] for s in parts], axis=0) for parts in split]).astype(np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def parse_pass(settings: Settings, paths: list[Path], embedder: Embedder, limit: int) -> dict[str, float]:
    """Read and chunk up to `limit` papers (streamed), as the indexer will: seconds, papers, chunks."""
    report = ParseReport()
    t = time.perf_counter()
    papers = chunks = 0
    for path in find_files(paths, report):
        for paper in read_papers(path, report):
            papers += 1
            chunks += len(chunk_paper(paper, settings.chunking, embedder.count_tokens))
            if papers >= limit:
                return {"seconds": time.perf_counter() - t, "papers": papers, "chunks": chunks}
    return {"seconds": time.perf_counter() - t, "papers": papers, "chunks": chunks}


def _rate(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0


def ingest_figures(settings: Settings, paths: list[Path], embedder: Embedder, approx: bool = False,
                   progress: Any = None, parse_sample: int = 5000) -> dict[str, Any]:
    """Build a fresh index of `paths` under settings.paths.data_dir and return the figures (see module doc)."""
    base_rss = rss_mb()
    sw = Stopwatch()
    inner: Embedder = SentenceMeanEmbedder(embedder) if approx else embedder
    sample = parse_pass(settings, paths, inner, parse_sample)
    timed = TimedEmbedder(inner, sw)
    t = time.perf_counter()
    summary = build_index(settings, timed, paths=paths, progress=progress)
    total = time.perf_counter() - t
    ip = IndexPaths.of(settings)
    store = open_store(settings, embedder, create=False)
    from rag.catalog import Catalog

    catalog = Catalog(ip.catalog)
    t = time.perf_counter()
    rebuild_lexical(store, catalog, ip.lexical)
    bm25_s = time.perf_counter() - t
    catalog.close()
    embed_s = sw.seconds.get("embed", 0.0)
    papers, chunks = summary.papers, summary.chunks
    parse = {"seconds": sample["seconds"] * papers / max(1, sample["papers"]), "sampled_papers": sample["papers"]}
    store_s = max(0.0, total - parse["seconds"] - embed_s)
    return {
        "papers": papers, "chunks": chunks, "approx_vectors": approx, "embedding_backend": settings.embedding.backend,
        "chunks_per_paper": round(chunks / papers, 2) if papers else 0.0,
        "parse": {"seconds": round(parse["seconds"], 2), "papers_per_s": _rate(papers, parse["seconds"]),
                  "chunks_per_s": _rate(chunks, parse["seconds"]), "sampled_papers": parse["sampled_papers"]},
        "embed": {"seconds": round(embed_s, 2), "papers_per_s": _rate(papers, embed_s),
                  "chunks_per_s": _rate(chunks, embed_s), "texts_embedded": timed.texts},
        "store": {"seconds": round(store_s, 2), "papers_per_s": _rate(papers, store_s),
                  "chunks_per_s": _rate(chunks, store_s), "bm25_rebuild_s": round(bm25_s, 2)},
        "total": {"seconds": round(total, 2), "papers_per_s": _rate(papers, total),
                  "chunks_per_s": _rate(chunks, total)},
        "peak_rss_mb": round(peak_rss_mb(), 1), "rss_after_model_load_mb": round(base_rss, 1),
        "store_mb": {"chroma": round(dir_size_mb(ip.chroma), 1), "index": round(dir_size_mb(ip.folder), 1)},
        "skipped": len(summary.skipped),
    }


def embed_sweep(make: Any, texts: list[str], question: str, batches: tuple[int, ...] = (8, 16, 32, 64, 128),
                repeats: int = 3) -> dict[str, Any]:
    """Chunks/s per embedding batch size, and single-query latency with torch on 1 thread vs all cores.

    make(batch_size) -> Embedder. Texts are real chunk texts (title-prefixed windows), so padding is realistic.
    """
    import torch

    from .measure import repeat, summary

    out: dict[str, Any] = {"texts": len(texts), "batch": {}}
    for b in batches:
        sized: Embedder = make(b)
        seconds = median(repeat(lambda: sized.embed(texts), repeats))  # noqa: B023 (called right here)
        out["batch"][str(b)] = round(len(texts) / seconds, 1)
    emb = make(batches[0])
    threads = torch.get_num_threads()
    try:
        for n in sorted({1, threads}):
            torch.set_num_threads(n)
            out[f"query_ms_threads_{n}"] = summary([s * 1000 for s in repeat(lambda: emb.embed([question]), 30)])
    finally:
        torch.set_num_threads(threads)
    return out
