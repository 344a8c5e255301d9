"""One index on disk as readers see it: where its parts live, opening it, and whether it is whole and current.

`IndexPaths` is the layout (catalog, BM25 folder, the Chroma collection's name, the data folder the writer lock is
on); `open_store` opens the index's collection and, for reading, checks it against the catalog first
(`check_agrees`); `index_generation` is the id an ingest publishes last, polled by readers that reload between
questions; `lexical_for_reading` loads the saved BM25 index; `check_unlocked` tells a would-be writer at once that
another process holds the lock.

Not here: writing the index. The ingest run is indexer.py and keeping BM25 in step is lexical_sync.py; the one
write a reader makes is `lexical_for_reading` saving a BM25 index it had to rebuild (through lexical_sync.py), and
only when it can take the writer lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .catalog import Catalog, read_meta
from .config import Settings
from .embed import Embedder
from .lexical import LexicalIndex
from .lexical_sync import journal_path, rebuild_lexical
from .lock import check_unlocked as check_folder_unlocked
from .lock import writer_lock
from .records import StoreError
from .store import ChunkStore, paper_of


@dataclass(frozen=True)
class IndexPaths:
    """Where one index's parts live under the data folder, and its Chroma collection's name.

    The collection is `chunks-<fingerprint>-<namespace>`, the namespace a random id made with the catalog and kept
    in its meta table, so data folders sharing one Chroma server never share a collection (each ingest's sweep
    deletes the chunks its own catalog does not know). An index built before the namespace existed has none in its
    catalog and keeps its collection `chunks-<fingerprint>`; `ingest --rebuild` (which re-reads every stored
    source) moves it to a namespaced one.
    """

    chroma: Path
    folder: Path
    base: str  # chunks-<fingerprint>

    @classmethod
    def of(cls, settings: Settings) -> IndexPaths:
        fp = settings.fingerprint()
        data = settings.paths.data_dir
        return cls(chroma=data / "chroma", folder=data / f"index-{fp}", base=f"chunks-{fp}")

    @property
    def collection(self) -> str:
        """Read from the catalog each time (no catalog yet: the base name); StoreError if it is damaged."""
        namespace = read_meta(self.catalog, "namespace")
        return f"{self.base}-{namespace}" if namespace else self.base

    @property
    def catalog(self) -> Path:
        return self.folder / "catalog.sqlite"

    @property
    def lexical(self) -> Path:
        return self.folder / "bm25"

    @property
    def lock_folder(self) -> Path:
        """The data folder: its Chroma folder holds every index, so one writer at a time for all of them."""
        return self.chroma.parent


def check_unlocked(settings: Settings) -> None:
    """Fail fast (StoreLockedError) if another process is writing this data folder: call it before loading the
    embedder, so a second `ingest` says so in a second instead of after the model has loaded."""
    check_folder_unlocked(IndexPaths.of(settings).lock_folder)


def open_store(settings: Settings, embedder: Embedder, create: bool = True,
               collection: str | None = None) -> ChunkStore:
    """The index's collection (or `collection`, for a new index whose catalog is not written yet). Opened for
    reading (`create=False`) with a catalog present, it is checked against the catalog first (`check_agrees`): a
    collection missing papers' chunks is a StoreError naming the fix."""
    ip = IndexPaths.of(settings)
    c = settings.chunking
    stamp = {"fingerprint": settings.fingerprint(),
             "chunking": f"max_tokens={c.max_tokens}, overlap_sentences={c.overlap_sentences}"}
    store = ChunkStore(ip.chroma, collection or ip.collection, embedder.name, embedder.dim,
                       url=settings.store.chroma_url, create=create, stamp=stamp)
    if not create and ip.catalog.is_file():
        check_agrees(store, ip.catalog)
    return store


def check_agrees(store: ChunkStore, catalog_path: Path) -> None:
    """Raise StoreError when catalogued papers have no chunk in the collection (e.g. another data folder's ingest
    swept them from a shared server, or the collection was emptied).

    Fast path: the chunk count the last completed ingest recorded, with no ingest since (no BM25 journal). Otherwise
    the papers are compared: an ingest keeps every catalogued paper's chunks in the store at every moment (chunks
    before catalog rows, catalog rows before chunks on removal), so even a killed or running ingest passes; the
    catalog is read before the store, and papers found missing are checked again, against a concurrent removal.
    """
    recorded = read_meta(catalog_path, "chunks")
    journal = journal_path(catalog_path.parent / "bm25")
    if recorded is not None and not journal.exists() and int(recorded) == store.count():
        return
    catalog = Catalog(catalog_path)
    try:
        catalogued = catalog.ids()
        missing = catalogued - store.paper_ids()
        if missing:
            missing = (catalog.ids() & missing) - {paper_of(c) for c in store.chunk_ids(sorted(missing))}
    finally:
        catalog.close()
    if missing:
        where = store.url or str(store.path)
        raise StoreError(
            f"{where}: collection {store.name!r} disagrees with its catalog {catalog_path}: {len(missing)} of "
            f"{len(catalogued)} papers have no chunks ({store.count()} chunks stored). Run `python -m rag ingest` "
            "with the same --data-dir to embed them again (or `ingest --rebuild`, which re-reads every source)")


def index_generation(settings: Settings) -> str | None:
    """An id that changes each time an ingest changes the index (None before the first): cheap to poll."""
    return read_meta(IndexPaths.of(settings).catalog, "generation")


def lexical_for_reading(settings: Settings, store: ChunkStore, catalog: Catalog) -> LexicalIndex:
    """For the app: the saved BM25 index, or one rebuilt from the store when it is missing or stale, saved only
    if no other process is writing the data folder (the app never writes while `ingest` does)."""
    ip = IndexPaths.of(settings)
    lexical = LexicalIndex.load(ip.lexical)
    # A journal left behind means an ingest wrote the store and did not save BM25 (killed, or running now): a
    # retitled paper keeps its chunk count, so the count alone would not tell.
    if lexical is not None and len(lexical) == store.count() and not journal_path(ip.lexical).exists():
        return lexical
    try:
        with writer_lock(ip.lock_folder):
            return rebuild_lexical(store, catalog, ip.lexical, incremental=True)
    except StoreError:  # another process writes (StoreLockedError), or the folder is read-only: build in memory
        return rebuild_lexical(store, catalog, None)
