"""Ingest: source files -> papers -> chunks -> vectors -> Chroma + catalog + BM25, incrementally and idempotently.

Order of writes, chosen so that a process killed at any moment (SIGKILL included) converges on the next run, and so
that at every moment each paper in the catalog has all of its chunks in the store:
1. the papers are noted in the BM25 index's journal of rewritten papers (a retitled paper keeps its chunk ids), then
   chunk vectors are upserted into Chroma (by stable chunk id: a repeat overwrites, never duplicates), and chunks of
   those papers left from an older version (a higher chunk index) are deleted;
2. then the papers are committed to the catalog (one SQLite transaction per batch);
3. then the file's manifest row (content hash + paper ids) is committed;
4. papers are removed catalog first, chunks second (a chunk whose paper is not in the catalog is an orphan);
5. at the end, papers of removed files are dropped, orphans are deleted, papers whose chunks went missing are
   embedded again, and the BM25 index is rebuilt if anything changed (updated from its saved counts, re-reading only
   new and journaled chunks: `rebuild_lexical`).
A file whose hash matches its manifest row is not parsed again, so re-ingesting unchanged input embeds nothing.
The whole run holds the data folder's writer lock (one Chroma folder serves every index in it). `--rebuild` writes
a new generation beside the current one instead, published when whole; at the end of every run, old generations no
reader leases are collected (generations.py).

Not done here: parsing (parse.py), chunking (chunk.py), opening Chroma (store.py), the index's layout and opening it
for readers (index.py), BM25 upkeep (lexical_sync.py). A failing batch stops its file (reported as a skip, the file
is retried next run) and the run goes on with the other files.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import generations as G
from .catalog import Catalog
from .chunk import chunk_paper, embed_text
from .config import Settings
from .embed import Embedder, embed_documents
from .files import file_sha256
from .index import IndexPaths, collect_generations, ingest_command, open_store, other_indexes
from .lexical import LexicalIndex
from .lexical_sync import journal_path, note_rewritten, rebuild_lexical
from .lock import writer_lock
from .parse import PARSE_VERSION, ParseReport, Skip, find_files, read_papers
from .records import Chunk, IngestError, Paper, StoreError
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
    refreshed: int = 0  # known papers whose record changed (position, title, moved to another file)
    repaired: int = 0  # papers whose chunks were missing from the store, embedded again
    failed_batches: int = 0  # each is also in `skipped`; the next run retries those files
    skipped: list[Skip] = field(default_factory=list)
    notes: list[Skip] = field(default_factory=list)
    seconds: float = 0.0
    collection: str = ""


def _source_name(path: Path, root: Path) -> str:
    """The record's `source`: the path below the ingested folder (for the seeds, just the file name)."""
    return str(path.relative_to(root)) if root.is_dir() and path.is_relative_to(root) else path.name


def chunk_texts(paper: Paper, settings: Settings, embedder: Embedder) -> list[tuple[Chunk, str]]:
    """Each chunk of the paper with the text that is embedded for it, always within `chunking.max_tokens`.

    The chunker leaves a long title out of its budget; the embedded text then leaves it out too, e.g. a JSONL
    title of 300 words would otherwise push the window past the embedder's limit, where it is silently truncated.
    """
    out = []
    for c in chunk_paper(paper, settings.chunking, embedder.count_tokens):
        text = embed_text(paper.title, c.text)
        if text != c.text and embedder.count_tokens(text) > settings.chunking.max_tokens:
            text = c.text
        out.append((c, text))
    return out


def _index_batch(batch: list[Paper], settings: Settings, embedder: Embedder, store: ChunkStore,
                 catalog: Catalog) -> int:
    chunks, metas, texts = [], [], []
    for paper in batch:
        for c, text in chunk_texts(paper, settings, embedder):
            chunks.append(c)
            texts.append(text)
            metas.append({"source": paper.source, "has_code": paper.has_code})
    vectors = embed_documents(embedder, texts)
    note_rewritten(catalog.path.with_name("bm25"), [p.paper_id for p in batch])  # this generation's BM25
    store.upsert(chunks, vectors, metas)
    stale = store.chunk_ids([p.paper_id for p in batch]) - {c.chunk_id for c in chunks}
    if stale:  # an older version of a paper (another title) had more chunks
        store.delete_ids(sorted(stale))
    catalog.put_papers(batch)
    return len(chunks)


def _parse_version(digest: str) -> int:
    """The parser version in a manifest row's digest ("<sha256>/parse-2" -> 2; none -> 0)."""
    _, _, version = digest.rpartition("/parse-")
    return int(version) if version.isdigit() else 0


class _BatchFailed(Exception):
    pass


class _Run:
    """One ingest pass over some roots: the state its steps share."""

    def __init__(self, settings: Settings, embedder: Embedder, store: ChunkStore, catalog: Catalog,
                 summary: IngestSummary, batch_papers: int, tick: Progress) -> None:
        self.settings, self.embedder, self.store, self.catalog = settings, embedder, store, catalog
        self.summary, self.batch_papers, self.tick = summary, batch_papers, tick
        self.report = ParseReport()
        self.stored = catalog.ids()  # committed to the catalog
        self.seen: dict[str, str | None] = {}  # paper id -> where this run met it first ("a.txt#3"); None: in an
        # unchanged file, not parsed (the catalog knows where)
        self.refreshed: list[Paper] = []  # records to rewrite before the file's manifest row (one transaction)
        self.changed = False
        self.resplit = False  # the file being read was last read by an older parser (PARSE_VERSION)

    def file(self, path: Path, root: Path, source: str, vanished: set[str]) -> None:
        try:
            # The parser's version is part of the row, so records a newer parser reads differently (a better
            # derived title) replace the stored ones once; papers whose record is unchanged are not embedded again.
            digest = f"{file_sha256(path)}/parse-{PARSE_VERSION}"
        except OSError as e:
            self.report.skipped.append(Skip(source, f"cannot read ({e.strerror or e})"))
            return
        entry = self.catalog.file_entry(source)
        if entry and entry[0] == digest and set(entry[1]) <= self.stored:
            self.summary.unchanged_files += 1
            self.summary.files.append(source)
            for pid in entry[1]:
                self.seen.setdefault(pid, None)
            self.tick("papers", len(entry[1]))
            return
        ids: list[str] = []
        batch: list[Paper] = []
        self.refreshed = []
        self.resplit = entry is not None and _parse_version(entry[0]) < PARSE_VERSION
        try:
            for paper in read_papers(path, self.report, source=source):
                ids.append(paper.paper_id)
                if paper.paper_id in self.seen:
                    first = self.seen[paper.paper_id] or self._where(paper.paper_id)
                    self.report.skipped.append(Skip(f"{source}#{paper.position}",
                                                    f"duplicate of {first}; ingested once"))
                    continue
                self.seen[paper.paper_id] = f"{source}#{paper.position}"
                if paper.paper_id in self.stored and not self._refresh(paper, vanished):
                    continue
                batch.append(paper)
                if len(batch) >= self.batch_papers:
                    self._commit(batch, source, len(ids))
                    batch = []
            if batch:
                self._commit(batch, source, len(ids))
        except IngestError as e:
            self.report.skipped.append(Skip(e.path, e.reason, e.line))
            return  # the file's earlier manifest row (if any) stays: nothing stored is lost
        except _BatchFailed as e:
            self.report.skipped.append(Skip(source, str(e)))
            self.summary.failed_batches += 1
            return  # no manifest row: the next run reads the file again and embeds what is missing
        if self.refreshed:
            self.catalog.put_papers(self.refreshed)
        old_ids = set(entry[1]) if entry else set()
        if old_ids - set(ids):  # an edited file: papers no longer in it go, unless another file has them
            self.remove(old_ids - set(ids) - _ids_elsewhere(self.catalog, source))
        self.catalog.put_file(source, digest, ids, str(root.resolve()))
        self.summary.files.append(source)
        self.changed = True

    def _chunks_differ(self, paper: Paper) -> bool:
        want = {c.chunk_id: c.text for c in chunk_paper(paper, self.settings.chunking, self.embedder.count_tokens)}
        return self.store.texts_of(sorted(self.store.chunk_ids([paper.paper_id]))) != want

    def _where(self, paper_id: str) -> str:
        old = self.catalog.get(paper_id)
        return f"{old.source}#{old.position}" if old else "an earlier paper"

    def _refresh(self, paper: Paper, vanished: set[str]) -> bool:
        """A paper already stored, met again in a changed file: bring its record up to date. True when its
        chunks must be embedded again: the title, which is embedded with every chunk, or the readable abstract, which
        is split into them, changed (the id hashes the text with its spacing collapsed, so a newer parser that keeps
        a line break as a sentence end, or splits at "。", gives the same paper other chunks)."""
        old = self.catalog.get(paper.paper_id)
        if old is None:
            return False
        if old == paper:
            # Read by an older parser, the same record may split into other sentences (parser 3 splits after "。"
            # and before a sentence in a non-Latin script): embedded again, once, when the chunks the store holds
            # are not the ones this code makes.
            if self.resplit and old.source == paper.source and self._chunks_differ(paper):
                self.summary.refreshed += 1
                self.changed = True
                return True
            return False
        if old.source != paper.source and old.source not in vanished:
            # Stored from a file that is still there (or from another folder): a duplicate, ingested once.
            self.report.skipped.append(Skip(f"{paper.source}#{paper.position}",
                                            f"duplicate of {old.source}#{old.position}; ingested once"))
            return False
        self.summary.refreshed += 1
        self.changed = True
        if (old.title, old.abstract) != (paper.title, paper.abstract):
            return True
        # Moved to another file or position: chunk metadata now, the record before the manifest row (a crash in
        # between leaves the row old, so the next run does it again).
        if (old.source, old.has_code) != (paper.source, paper.has_code):
            self.store.set_metadata(paper.paper_id, {"source": paper.source, "has_code": paper.has_code})
        self.refreshed.append(paper)
        return False

    def _commit(self, batch: list[Paper], source: str, read: int) -> None:
        try:
            n = _index_batch(batch, self.settings, self.embedder, self.store, self.catalog)
        except Exception as e:  # an embedder or store failure: report it, keep what is stored, retry next run
            for p in batch:
                self.seen.pop(p.paper_id, None)
            raise _BatchFailed(
                f"storing {len(batch)} papers (read up to #{read} of the file) failed ({type(e).__name__}: {e}); "
                "the papers before them are stored, the rest are retried on the next run"
            ) from e
        new = [p for p in batch if p.paper_id not in self.stored]
        self.stored.update(p.paper_id for p in batch)
        self.summary.embedded_chunks += n
        self.summary.added += len(new)
        self.tick("papers", len(batch))
        self.changed = True

    def remove(self, paper_ids: set[str]) -> None:
        if paper_ids:
            self.catalog.delete_papers(paper_ids)  # catalog first: a chunk without its paper is a swept orphan
            self.store.delete_papers(sorted(paper_ids))
            self.stored -= paper_ids
            self.summary.removed += len(paper_ids)
            self.changed = True

    def sweep(self) -> None:
        """Orphans (chunks whose paper never reached the catalog, or was removed by a killed run) go; papers
        with no chunk in the store (never expected, but cheap to check) are embedded again."""
        in_store, in_catalog = self.store.paper_ids(), self.catalog.ids()
        orphans = in_store - in_catalog
        if orphans:
            self.store.delete_papers(sorted(orphans))
            self.changed = True
        missing = sorted(in_catalog - in_store)
        for i in range(0, len(missing), self.batch_papers):
            papers = list(self.catalog.get_many(missing[i : i + self.batch_papers]).values())
            self.summary.embedded_chunks += _index_batch(papers, self.settings, self.embedder, self.store,
                                                         self.catalog)
            self.summary.repaired += len(papers)
            self.changed = True
        if missing:
            self.report.notes.append(Skip(str(self.catalog.path), f"{len(missing)} papers had no chunks in the "
                                                                  "store; embedded again"))


def build_index(
    settings: Settings,
    embedder: Embedder,
    paths: Iterable[Path] | None = None,
    keep_removed: bool = False,
    progress: Progress | None = None,
    batch_papers: int = 64,
    rebuild: bool = False,
    drop_others: bool = False,
) -> IngestSummary:
    """Bring the index up to date with the files under `paths` (default: the seeds folder).

    Raises StoreLockedError at once if another process is writing this data folder; `rebuild` builds a new
    generation of the index (collection, catalog, BM25) beside the current one and publishes it when whole; the
    old one is collected once no reader uses it (generations.py). A rebuild keeps what it had: without `paths` it
    re-reads every folder and file in the manifest; with `paths` that leave out stored sources, or when a stored
    source is gone (kept by `keep_removed`), it raises StoreError naming them, unless `drop_others`.
    """
    started = time.perf_counter()
    tick = progress or (lambda what, n: None)
    roots = [Path(p) for p in (paths or [settings.paths.seeds_dir])]
    summary = IngestSummary()
    with writer_lock(IndexPaths.of(settings).lock_folder):
        ip = IndexPaths.of(settings)
        if rebuild:
            roots = check_rebuild(settings, [Path(p) for p in paths] if paths else None, drop_others)
        store = None
        others: list[tuple[str, list[str]]] = []
        if rebuild or not ip.catalog.exists():
            # A new generation (generations.py). A rebuild's is built beside the current one, which readers go on
            # using, and published when whole; a first index is published at once and fills as before. Its folder,
            # then its collection, then its catalog (made aside with the namespace id and renamed into place), so
            # whenever the catalog exists so does its collection, and a killed run leaves a folder that names its
            # collection, collected as never published.
            namespace = G.namespace_of(G.new_generation(ip.home)) if rebuild else _new_namespace()
            if namespace:
                ip = IndexPaths.of(settings, generation=f"g-{namespace}")
                (ip.folder).mkdir(parents=True, exist_ok=True)
            else:  # the layout before generations and namespaces (tests build old indexes this way)
                ip = IndexPaths.of(settings, generation=G.LEGACY)
            store = open_store(settings, embedder, collection=f"{ip.base}-{namespace}" if namespace else ip.base,
                               paths=ip)
            _create_catalog(ip.catalog, namespace)
            if not rebuild and namespace:
                G.publish(ip.home, ip.generation)
            if not rebuild:  # a first index for these settings: those built here for others are not read now
                others = other_indexes(settings)
        catalog = Catalog(ip.catalog)
        try:
            if store is None:
                _ensure_namespace(catalog)
                store = open_store(settings, embedder, paths=ip)
            summary.collection = store.name
            run = _Run(settings, embedder, store, catalog, summary, batch_papers, tick)
            found = [(root, path, _source_name(path, root)) for root in roots
                     for path in find_files([root], run.report)]
            present = {source for _, _, source in found}
            resolved_roots = {str(r.resolve()) for r in roots}
            # Files ingested from these roots before but gone now.
            vanished = {source: ids for source, (ids, root_of) in catalog.files().items()
                        if root_of in resolved_roots and source not in present}
            for root, path, source in found:
                run.file(path, root, source, set(vanished))
            for source, ids in sorted(vanished.items()):
                if keep_removed:
                    run.report.notes.append(Skip(source, "file no longer present; its papers kept (--keep-removed)"))
                    continue
                gone = set(ids) - _ids_elsewhere(catalog, source)
                run.remove(gone)
                catalog.delete_file(source)
                run.report.notes.append(Skip(source, f"file no longer present; removed its {len(gone)} papers"))
                run.changed = True
            run.sweep()
            lexical = LexicalIndex.load(ip.lexical)
            stale = lexical is None or len(lexical) != store.count()
            del lexical  # not held while the new one is built (at 295k chunks, 250 MB)
            changed = run.changed or stale or journal_path(ip.lexical).exists() or rebuild
            if changed:
                rebuild_lexical(store, catalog, ip.lexical, incremental=True)
            summary.skipped, summary.notes = run.report.skipped, run.report.notes
            for name, old_roots in others:  # what this ingest did not read again
                rest = [r for r in old_roots if r not in resolved_roots]
                if rest:
                    summary.notes.append(Skip(name, "an index built with other chunking or embedding settings, left "
                                                    f"as it is; to index its papers here too: {ingest_command(rest)}"))
            summary.papers, summary.chunks = catalog.count(), store.count()
            catalog.set_meta("fingerprint", settings.fingerprint())
            catalog.set_meta("embedding_model", embedder.name)
            catalog.set_meta("chunks", str(summary.chunks))  # what `check_agrees` compares first
            if changed:
                # Published last, once catalog, collection and BM25 agree: readers that follow it (the app,
                # between questions) reopen then.
                catalog.set_meta("generation", uuid.uuid4().hex)
        finally:
            catalog.close()
            if store is not None:
                store.close()
        if rebuild:  # readers open the new generation from now on; the old one stays while one of them reads it
            G.publish(ip.home, ip.generation)
        # After a rebuild, readers that follow (every store.follow_s, or at their next question) let go of the old
        # generation within seconds: wait for that (store.retire_wait_s at most), then collect it.
        kept = collect_generations(settings, keep=frozenset({ip.generation}),
                                   wait_s=settings.store.retire_wait_s if rebuild else 0.0)
        for name, readers in kept.in_use.items():
            summary.notes.append(Skip(name, f"an older index generation, still read by {readers} process(es): "
                                            "collected once none reads it"))
    summary.seconds = time.perf_counter() - started
    return summary


def _new_namespace() -> str:
    """A first index's generation id, which also names its collection ("" = the layout before generations)."""
    return uuid.uuid4().hex[:12]


def _create_catalog(path: Path, namespace: str) -> None:
    """An empty catalog holding its namespace id, written aside and renamed into place (atomic)."""
    aside = path.with_name(f"{path.name}.new-{os.getpid()}")
    aside.unlink(missing_ok=True)
    catalog = Catalog(aside)
    try:
        if namespace:
            catalog.set_meta("namespace", namespace)
    finally:
        catalog.close()
    os.replace(aside, path)


def _ensure_namespace(catalog: Catalog) -> None:
    """An existing catalog without a namespace id: an empty one gets one now; one that holds papers was built
    before namespaces and keeps its collection's old name (`IndexPaths.collection`)."""
    if catalog.get_meta("namespace") is None and catalog.count() == 0 and not catalog.files():
        namespace = _new_namespace()
        if namespace:
            catalog.set_meta("namespace", namespace)


def check_rebuild(settings: Settings, paths: list[Path] | None, drop_others: bool = False) -> list[Path]:
    """The roots `build_index(rebuild=True)` would re-read, or StoreError naming the stored sources it would drop:
    call it before loading the embedder, so a refused rebuild says so at once (`build_index` checks again under
    the writer lock)."""
    ip = IndexPaths.of(settings)
    default = [settings.paths.seeds_dir]
    given = [Path(p) for p in paths] if paths else None
    if not ip.catalog.exists():
        return given or default
    try:
        catalog = Catalog(ip.catalog)
    except StoreError as e:
        # A damaged catalog names no sources: rebuilding it from what is given is the fix its error names.
        log.warning("%s; rebuilding from %s", e, ", ".join(str(r) for r in given or default))
        return given or default
    try:
        files = catalog.files()
    finally:
        catalog.close()
    return _rebuild_roots(files, given, default, drop_others)


def _rebuild_roots(files: dict[str, tuple[list[str], str]], given: list[Path] | None, default: list[Path],
                   drop_others: bool) -> list[Path]:
    """What a rebuild re-reads: the given paths, or every root in the manifest (the default roots when it has
    none). Raises StoreError, naming them, when stored sources would not be read again, unless `drop_others`."""
    if given is None:
        roots = sorted({Path(root) for _, root in files.values() if root}) or default
    else:
        roots = given
    resolved = {str(r.resolve()) for r in roots}
    lost: list[str] = []
    for source, (ids, root) in sorted(files.items()):
        file = Path(root) / source if Path(root).is_dir() else Path(root)
        if root not in resolved:
            lost.append(f"{source} ({len(ids)} papers, from {root or 'an unrecorded folder'})")
        elif not file.is_file():
            lost.append(f"{source} ({len(ids)} papers; {file} is gone)")
    if lost and not drop_others:
        shown = "; ".join(lost[:10]) + (f"; and {len(lost) - 10} more" if len(lost) > 10 else "")
        raise StoreError(f"ingest --rebuild would drop the papers of {len(lost)} source(s) it does not read again: "
                         f"{shown}. Give their folders too, run `ingest --rebuild` without paths to re-read "
                         "every stored source, or add --drop-others to drop them")
    return roots


def _ids_elsewhere(catalog: Catalog, source: str) -> set[str]:
    return {i for s, (ids, _) in catalog.files().items() if s != source for i in ids}
