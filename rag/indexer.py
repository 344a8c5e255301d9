"""Ingest: source files -> papers -> chunks -> vectors -> Chroma + catalog + BM25, incrementally and idempotently.

Order of writes, chosen so that a process killed at any moment converges on the next run:
1. chunk vectors are upserted into Chroma (by stable chunk id: a repeat overwrites, never duplicates);
2. then the papers are committed to the catalog (one SQLite transaction per batch);
3. then the file's manifest row (content hash + paper ids) is committed;
4. at the end, papers of removed files are dropped, chunks whose paper is not in the catalog (orphans of a
   killed run) are deleted, and the BM25 index is rebuilt if anything changed.
A file whose hash matches its manifest row is not parsed again, so re-ingesting unchanged input embeds nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .catalog import Catalog, writer_lock
from .chunk import chunk_paper, embed_text
from .config import Settings
from .embed import Embedder
from .ingest import ParseReport, Skip, find_files, read_papers
from .lexical import LexicalIndex
from .records import IngestError, Paper
from .store import ChunkStore

log = logging.getLogger(__name__)

Progress = Callable[[str, int], None]  # (what, how many more done): e.g. ("papers", 32)


@dataclass
class IngestSummary:
    papers: int = 0  # in the index after the run
    chunks: int = 0
    added: int = 0
    removed: int = 0
    unchanged_files: int = 0
    embedded_chunks: int = 0
    files: list[str] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    notes: list[Skip] = field(default_factory=list)
    seconds: float = 0.0
    collection: str = ""


@dataclass(frozen=True)
class IndexPaths:
    """Where one index's parts live under the data folder."""

    chroma: Path
    folder: Path
    collection: str

    @classmethod
    def of(cls, settings: Settings) -> IndexPaths:
        fp = settings.fingerprint()
        data = settings.paths.data_dir
        return cls(chroma=data / "chroma", folder=data / f"index-{fp}", collection=f"chunks-{fp}")

    @property
    def catalog(self) -> Path:
        return self.folder / "catalog.sqlite"

    @property
    def lexical(self) -> Path:
        return self.folder / "bm25"


def open_store(settings: Settings, embedder: Embedder, create: bool = True) -> ChunkStore:
    ip = IndexPaths.of(settings)
    c = settings.chunking
    stamp = {"fingerprint": settings.fingerprint(),
             "chunking": f"max_tokens={c.max_tokens}, overlap_sentences={c.overlap_sentences}"}
    return ChunkStore(ip.chroma, ip.collection, embedder.name, embedder.dim, url=settings.retrieval.chroma_url,
                      create=create, stamp=stamp)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _source_name(path: Path, root: Path) -> str:
    """The record's `source`: the path below the ingested folder (for the seeds, just the file name)."""
    return str(path.relative_to(root)) if root.is_dir() and path.is_relative_to(root) else path.name


def _index_batch(batch: list[Paper], settings: Settings, embedder: Embedder, store: ChunkStore,
                 catalog: Catalog) -> int:
    chunks, metas, texts = [], [], []
    for paper in batch:
        for c in chunk_paper(paper, settings.chunking, embedder.count_tokens):
            chunks.append(c)
            texts.append(embed_text(paper.title, c.text))
            metas.append({"source": paper.source, "has_code": paper.has_code})
    vectors = embedder.embed(texts)
    store.upsert(chunks, vectors, metas)
    catalog.put_papers(batch)
    return len(chunks)


def build_index(
    settings: Settings,
    embedder: Embedder,
    paths: Iterable[Path] | None = None,
    keep_removed: bool = False,
    progress: Progress | None = None,
    batch_papers: int = 64,
) -> IngestSummary:
    """Bring the index up to date with the files under `paths` (default: the seeds folder)."""
    started = time.perf_counter()
    tick = progress or (lambda what, n: None)
    roots = [Path(p) for p in (paths or [settings.paths.seeds_dir])]
    ip = IndexPaths.of(settings)
    summary = IngestSummary(collection=ip.collection)
    with writer_lock(ip.folder):
        store = open_store(settings, embedder)
        catalog = Catalog(ip.catalog)
        try:
            report = ParseReport()
            known = catalog.ids()
            seen_sources: set[str] = set()
            changed = False
            for root in roots:
                for path in find_files([root], report):
                    source = _source_name(path, root)
                    seen_sources.add(source)
                    digest = _sha256(path)
                    entry = catalog.file_entry(source)
                    if entry and entry[0] == digest and set(entry[1]) <= known:
                        summary.unchanged_files += 1
                        summary.files.append(source)
                        tick("papers", len(entry[1]))
                        continue
                    ids: list[str] = []
                    batch: list[Paper] = []
                    try:
                        for paper in read_papers(path, report, source=source):
                            ids.append(paper.paper_id)
                            if paper.paper_id in known:
                                continue
                            known.add(paper.paper_id)
                            batch.append(paper)
                            if len(batch) >= batch_papers:
                                summary.embedded_chunks += _index_batch(batch, settings, embedder, store, catalog)
                                summary.added += len(batch)
                                tick("papers", len(batch))
                                batch = []
                        if batch:
                            summary.embedded_chunks += _index_batch(batch, settings, embedder, store, catalog)
                            summary.added += len(batch)
                            tick("papers", len(batch))
                    except IngestError as e:
                        report.skipped.append(Skip(e.path, e.reason, e.line))
                        continue  # the file's earlier manifest row (if any) stays: nothing stored is lost
                    old_ids = set(entry[1]) if entry else set()
                    if old_ids - set(ids):  # an edited file: papers no longer in it go
                        gone = old_ids - set(ids) - _ids_elsewhere(catalog, source)
                        _remove(gone, store, catalog)
                        summary.removed += len(gone)
                    catalog.put_file(source, digest, ids, str(root.resolve()))
                    summary.files.append(source)
                    changed = True
            # Files that were ingested from these roots before but are gone now.
            resolved_roots = {str(r.resolve()) for r in roots}
            for source, (ids, root_of) in catalog.files().items():
                if source in seen_sources or root_of not in resolved_roots:
                    continue
                if keep_removed:
                    report.notes.append(Skip(source, "file no longer present; its papers kept (--keep-removed)"))
                    continue
                gone = set(ids) - _ids_elsewhere(catalog, source)
                _remove(gone, store, catalog)
                catalog.delete_file(source)
                summary.removed += len(gone)
                report.notes.append(Skip(source, f"file no longer present; removed its {len(gone)} papers"))
                changed = True
            # Orphans: chunks whose paper never reached the catalog (a run killed between steps 1 and 2).
            orphans = store.paper_ids() - catalog.ids()
            if orphans:
                store.delete_papers(sorted(orphans))
                changed = True
            lexical = LexicalIndex.load(ip.lexical)
            if changed or lexical is None or len(lexical) != store.count():
                rebuild_lexical(store, catalog, ip.lexical)
            summary.skipped, summary.notes = report.skipped, report.notes
            summary.papers, summary.chunks = catalog.count(), store.count()
            catalog.set_meta("fingerprint", settings.fingerprint())
            catalog.set_meta("embedding_model", embedder.name)
        finally:
            catalog.close()
    summary.seconds = time.perf_counter() - started
    return summary


def _ids_elsewhere(catalog: Catalog, source: str) -> set[str]:
    return {i for s, (ids, _) in catalog.files().items() if s != source for i in ids}


def _remove(paper_ids: set[str], store: ChunkStore, catalog: Catalog) -> None:
    if paper_ids:
        store.delete_papers(sorted(paper_ids))
        catalog.delete_papers(paper_ids)


def rebuild_lexical(store: ChunkStore, catalog: Catalog, folder: Path) -> LexicalIndex:
    chunks = store.all_chunks()
    papers = catalog.get_many(pid for _, pid, _ in chunks)
    docs = [(cid, pid, embed_text(papers[pid].title if pid in papers else "", text)) for cid, pid, text in chunks]
    index = LexicalIndex.build(docs)
    index.save(folder)
    return index
