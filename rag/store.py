"""The Chroma adapter (the only module that imports chromadb): open, upsert, delete, query -> plain tuples.

One collection per index fingerprint (`chunks-<fingerprint>`), cosine space, vectors always supplied by our own
embedder: Chroma's default embedding function (which would download a model) is never used. The collection's
metadata records the embedding model and dimension; opening it with another model is a `StoreError` that says how
to fix it, never a dimension exception in the middle of a query.

The store is embedded (`PersistentClient` in the data folder) or, when `chroma_url` is set, a Chroma server
(`HttpClient`). Telemetry is off either way. Nothing outside this module sees a Chroma result object.

Chroma writes to its SQLite file even to read (it fails with "attempt to write a readonly database"), so an
embedded store in a folder this process cannot write (a read-only mount, a read-only copy of a data folder) is read
from a private copy made in a temporary folder, removed at exit; the original is never touched.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from .records import Chunk, StoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as the store returns it, with its cosine similarity to the query (1 = identical)."""

    chunk_id: str
    paper_id: str
    text: str
    similarity: float


def _chroma_settings() -> Any:
    from chromadb.config import Settings as ChromaSettings

    return ChromaSettings(anonymized_telemetry=False, allow_reset=False)


def paper_of(chunk_id: str) -> str:
    """The paper of a chunk id, "<paper_id>:<index>" (`upsert` refuses any other): "6480b13c:2" -> "6480b13c"."""
    return chunk_id.rsplit(":", 1)[0]


class ChunkStore:
    """Chunk vectors in one Chroma collection."""

    def __init__(self, path: Path, collection: str, model: str, dim: int, url: str = "",
                 create: bool = True, stamp: dict[str, str] | None = None, private: bool = False) -> None:
        """Open (or create) the collection; `stamp` is stored in its metadata (e.g. the chunking settings) so that
        a missing collection can be explained by what the store does hold.

        `private`: an embedded store gets a Chroma system of its own instead of the one chromadb shares per folder
        in a process. A system loads the vector index when it opens and never sees what another system (another
        process, or another private store) writes later, so a reader that reopens the index after an ingest needs a
        new one; `close` stops it and frees its memory (the reader's previous generation)."""
        import chromadb

        self.path, self.url, self.name = path, url, collection
        self._own: Any = None  # the private Chroma system, stopped by close()
        try:
            if url:
                parsed = urlparse(url)
                self._client = chromadb.HttpClient(host=parsed.hostname or "127.0.0.1", port=parsed.port or 8000,
                                                   ssl=parsed.scheme == "https", settings=_chroma_settings())
            else:
                opened = path
                if not create and path.is_dir() and not _writable(path):
                    opened = _private_copy(path)
                else:
                    path.mkdir(parents=True, exist_ok=True)
                if private:
                    self._client, self._own = _private_client(opened)
                else:
                    self._client = chromadb.PersistentClient(path=str(opened), settings=_chroma_settings())
            if create:
                self._col = self._client.get_or_create_collection(
                    collection, embedding_function=None,
                    metadata={"hnsw:space": "cosine", "embedding_model": model, "dim": dim, **(stamp or {})},
                )
            else:
                names = [c.name for c in self._client.list_collections()]
                if collection not in names:
                    raise StoreError(_missing(url or str(path), collection, self._client, names))
                self._col = self._client.get_collection(collection, embedding_function=None)
        except StoreError:
            self.close()
            raise
        except Exception as e:  # chromadb raises many types (sqlite, rust bindings, HTTP); name the store instead
            self.close()
            where = url or str(path)
            raise StoreError(f"{where}: cannot open the vector store ({type(e).__name__}: {e})") from None
        meta = self._col.metadata or {}
        if meta.get("embedding_model") != model or int(meta.get("dim", dim)) != dim:
            self.close()
            raise StoreError(
                f"{url or path}: collection {collection!r} was built with embedding model "
                f"{meta.get('embedding_model')!r} (dim {meta.get('dim')}), not {model!r} (dim {dim}); "
                f"re-ingest with `python -m rag ingest --rebuild` or use another --data-dir"
            )
        self.model, self.dim = model, dim

    def close(self) -> None:
        """Release the Chroma client: a private system is stopped; a shared one is stopped with its last client.
        The store is not used after this."""
        try:
            if self._own is not None:
                self._own.stop()
                self._own = None
            elif hasattr(self, "_client"):
                self._client.close()  # type: ignore[attr-defined]
        except Exception as e:  # closing twice, or a server gone: nothing left to release
            log.debug("closing %s: %s", self.name, e)

    def max_batch(self) -> int:
        try:
            return int(self._client.get_max_batch_size())
        except Exception:  # older servers do not say; Chroma's documented floor
            return 5000

    def count(self) -> int:
        return int(self._col.count())

    def upsert(self, chunks: Sequence[Chunk], vectors: np.ndarray, metas: Sequence[dict[str, Any]]) -> None:
        """Insert or replace chunks by id, in batches no larger than Chroma accepts."""
        if len(chunks) != len(vectors) or len(chunks) != len(metas):
            raise ValueError("chunks, vectors and metadata must have the same length")
        if len(vectors) and vectors.shape[1] != self.dim:
            raise StoreError(f"vector dimension {vectors.shape[1]} does not match the collection's {self.dim}")
        wrong = next((c.chunk_id for c in chunks if paper_of(c.chunk_id) != c.paper_id), None)
        if wrong is not None:  # `query` reads the paper id from the chunk id
            raise ValueError(f"chunk id {wrong!r} does not start with its paper id and ':'")
        step = self.max_batch()
        for i in range(0, len(chunks), step):
            part = chunks[i : i + step]
            self._col.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=vectors[i : i + step].tolist(),
                documents=[c.text for c in part],
                metadatas=[{"paper_id": c.paper_id, "index": c.index, **m} for c, m in zip(part, metas[i : i + step])],
            )

    def chunk_ids(self, paper_ids: Sequence[str]) -> set[str]:
        """Ids of the stored chunks of these papers."""
        out: set[str] = set()
        for i in range(0, len(paper_ids), 500):
            where: Any = {"paper_id": {"$in": list(paper_ids[i : i + 500])}}
            out.update(self._col.get(where=where, include=[])["ids"])
        return out

    def delete_ids(self, chunk_ids: Sequence[str]) -> None:
        step = self.max_batch()
        for i in range(0, len(chunk_ids), step):
            self._col.delete(ids=list(chunk_ids[i : i + step]))

    def set_metadata(self, paper_id: str, meta: dict[str, Any]) -> None:
        """Update the filterable metadata (e.g. `source`) of every chunk of one paper, keeping the vectors."""
        got = self._col.get(where={"paper_id": paper_id}, include=["metadatas"])
        if got["ids"]:
            metas = [{**(m or {}), **meta} for m in (got.get("metadatas") or [])]
            self._col.update(ids=got["ids"], metadatas=metas)  # type: ignore[arg-type]

    def delete_papers(self, paper_ids: Sequence[str]) -> None:
        step = 500
        for i in range(0, len(paper_ids), step):
            where: Any = {"paper_id": {"$in": list(paper_ids[i : i + step])}}
            self._col.delete(where=where)

    def paper_ids(self) -> set[str]:
        """The papers with a chunk in the store, from the chunk ids' prefix ("<paper_id>:<index>", checked by
        `upsert`): at 295k chunks 0.9 s, where reading every chunk's metadata 5,000 at a time took 19 s of each
        ingest's final sweep."""
        return {pid for page in self.iter_rows() for _, pid in page}

    def all_chunks(self) -> list[tuple[str, str, str]]:
        """(chunk_id, paper_id, text) of every stored chunk, for checks."""
        return [c for page in self.iter_chunks() for c in page]

    def iter_chunks(self, step: int = 5000) -> Iterator[list[tuple[str, str, str]]]:
        """Every stored chunk as (chunk_id, paper_id, text), `step` at a time, in the store's own order: what the
        lexical index is rebuilt from without holding every text at once."""
        for got in self._pages(["metadatas", "documents"], step):
            ids, metas, docs = got["ids"], got.get("metadatas") or [], got.get("documents") or []
            yield [(i, str(m["paper_id"]), d or "") for i, m, d in zip(ids, metas, docs)]

    def iter_rows(self, step: int = 100_000) -> Iterator[list[tuple[str, str]]]:
        """Every stored chunk as (chunk_id, paper_id), `step` at a time, in the order `iter_chunks` pages the
        chunks, read from the ids alone (the paper id is the chunk id's prefix: `paper_of`): what an update of the
        lexical index reads instead of every text.

        Ids alone are cheap in big pages: at 295k chunks 0.9 s in pages of 100k, where `iter_chunks` took 21 s in
        pages of 5,000 (12 s in pages of 30,000; a page with texts is bounded by SQLite's 32k variables). Each
        page re-scans the rows before its offset, so small pages cost even for ids: 10 s in pages of 5,000.
        """
        for got in self._pages([], step):
            yield [(cid, paper_of(cid)) for cid in got["ids"]]

    def _pages(self, include: list[str], step: int) -> Iterator[dict[str, Any]]:
        """Chroma `get` results of every stored chunk, `step` at a time (no empty page)."""
        offset = 0
        while True:
            got: dict[str, Any] = dict(self._col.get(include=include, limit=step, offset=offset))  # type: ignore[arg-type]
            if got["ids"]:
                yield got
            if len(got["ids"]) < step:
                return
            offset += step

    def query(self, vector: np.ndarray, k: int, where: dict[str, Any] | None = None,
              texts: bool = True) -> list[StoredChunk]:
        """The k nearest chunks to one query vector, best first; without `texts` each chunk's text is "" (read the
        ones needed with `texts_of`).

        Without texts only ids and distances are read, the paper id being the chunk id's prefix
        (`Chunk.chunk_id` is "<paper_id>:<index>", checked by `upsert`): reading metadata too made a query several
        times slower at 100k papers (bench/RESULTS.md), and filtering after an over-fetch reads many.
        """
        # No count() first: Chroma returns fewer than k results when the collection holds fewer (or none), and
        # counting costs about as much as the query at 295k chunks.
        include: list[Any] = ["distances", *(["metadatas", "documents"] if texts else [])]
        try:
            res = self._col.query(query_embeddings=[vector.tolist()], n_results=k, where=where or None,
                                  include=include)
        except Exception as e:
            raise StoreError(f"{self.url or self.path}: query failed ({type(e).__name__}: {e})") from None
        ids = res["ids"][0]
        docs = (res.get("documents") or [[]])[0] or [""] * len(ids)
        metas = (res.get("metadatas") or [[]])[0] or [{"paper_id": paper_of(i)} for i in ids]
        dists = (res.get("distances") or [[]])[0] or []
        return [
            StoredChunk(chunk_id=i, paper_id=str(m["paper_id"]), text=d or "", similarity=1.0 - float(dist))
            for i, d, m, dist in zip(ids, docs, metas, dists)
        ]

    def texts_of(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """chunk id -> stored text, for the given ids that exist."""
        if not chunk_ids:
            return {}
        try:
            got = self._col.get(ids=list(chunk_ids), include=["documents"])
        except Exception as e:
            raise StoreError(f"{self.url or self.path}: reading chunks failed ({type(e).__name__}: {e})") from None
        return {i: d or "" for i, d in zip(got["ids"], got.get("documents") or [])}

_SYSTEMS = threading.Lock()


def _private_client(folder: Path) -> tuple[Any, Any]:
    """(client, system) for an embedded store on a Chroma system nobody else in this process shares: chromadb keeps
    one system per folder in a class-level table; the one there is set aside while ours is made, then put back."""
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient as Shared

    key = str(folder)
    with _SYSTEMS:
        saved = (Shared._identifier_to_system.pop(key, None), Shared._identifier_to_refcount.pop(key, None))
        try:
            client = chromadb.PersistentClient(path=key, settings=_chroma_settings())
            system = Shared._identifier_to_system.pop(key)
            Shared._identifier_to_refcount.pop(key, None)
        finally:
            if saved[0] is not None:
                Shared._identifier_to_system[key] = saved[0]
                if saved[1] is not None:
                    Shared._identifier_to_refcount[key] = saved[1]
    return client, system


def _writable(folder: Path) -> bool:
    """Can this process write the folder and its SQLite file (a read-only mount says no, even to root)?"""
    db = folder / "chroma.sqlite3"
    return os.access(folder, os.W_OK) and (not db.exists() or os.access(db, os.W_OK))


def _private_copy(folder: Path) -> Path:
    """A copy of a read-only Chroma folder to open instead (Chroma writes even to read), removed at exit."""
    tmp = Path(tempfile.mkdtemp(prefix="rag-readonly-chroma-"))
    atexit.register(shutil.rmtree, tmp, True)
    copy = tmp / "chroma"
    shutil.copytree(folder, copy)
    for p in (copy, *copy.rglob("*")):  # the copy keeps read-only modes (a chmod'ed folder): make it writable
        p.chmod(p.stat().st_mode | 0o200)
    log.warning("%s is read-only: reading a private copy of the vector store in %s", folder, copy)
    return copy


def _missing(where: str, collection: str, client: Any, names: list[str]) -> str:
    """Why a collection is not there, naming what the store holds instead, and the fix."""
    held = []
    for name in names:
        try:
            meta = client.get_collection(name, embedding_function=None).metadata or {}
        except Exception:  # listed but unreadable: name it without details
            meta = {}
        details = ", ".join(f"{k} {meta[k]}" for k in ("embedding_model", "chunking") if k in meta)
        held.append(f"{name} ({details})" if details else name)
    if not held:
        return f"{where}: the store holds no index yet; run `python -m rag ingest` first"
    return (f"{where}: no index {collection!r} for these embedding/chunking settings; the store holds "
            f"{'; '.join(held)}. Run `python -m rag ingest` to build one for these settings, or use the settings "
            f"the existing one was built with")


def drop_collection(path: Path, collection: str, url: str = "") -> None:
    """Delete a collection (an old index generation's); missing is fine."""
    import chromadb

    client = (chromadb.HttpClient(host=urlparse(url).hostname or "127.0.0.1", port=urlparse(url).port or 8000,
                                  settings=_chroma_settings())
              if url else chromadb.PersistentClient(path=str(path), settings=_chroma_settings()))
    try:
        client.delete_collection(collection)
    except Exception:  # not there: nothing to drop
        log.debug("collection %s not present", collection)
    finally:
        client.close()  # type: ignore[attr-defined]
