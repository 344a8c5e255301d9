"""One index on disk as readers see it: where its parts live, opening it, and whether it is whole and current.

`IndexPaths` is the layout of the current generation (catalog, BM25 folder, the Chroma collection's name, the data
folder the writer lock is on; generations.py says what a generation is); `open_reader` opens the current
generation for a reader and leases it, so no writer collects it while it is open; `open_store` opens a
generation's collection and, for reading, checks it against the catalog first (`check_agrees`);
`index_generation` is the id an ingest publishes last, polled by readers that reopen between questions;
`lexical_for_reading` loads the saved BM25 index; `check_unlocked` tells a would-be writer at once that another
process holds the lock.

Not here: writing the index. The ingest run is indexer.py and keeping BM25 in step is lexical_sync.py; the writes
a reader makes are `lexical_for_reading` saving a BM25 index it had to rebuild (through lexical_sync.py), and
collecting a generation it was the last to read (`collect_generations`), each only when it can take the writer
lock.
"""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from . import generations as G
from .catalog import Catalog, read_meta, read_roots
from .config import Settings
from .embed import Embedder
from .lexical import LexicalIndex
from .lexical_sync import journal_path, rebuild_lexical
from .lock import check_unlocked as check_folder_unlocked
from .lock import writer_lock
from .records import StoreError
from .store import ChunkStore, drop_collection, paper_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexPaths:
    """Where one generation of an index lives under the data folder, and its Chroma collection's name.

    `home` is `index-<fingerprint>/`; `folder` the generation's own (`home/g-<hex>`, or `home` itself for an index
    made before generations: generations.py). The collection is `chunks-<fingerprint>-<namespace>`, the namespace
    a random id made with the generation and kept in its catalog's meta table, so data folders sharing one Chroma
    server never share a collection (each ingest's sweep deletes the chunks its own catalog does not know). An index
    built before the namespace existed has none in its catalog and keeps its collection `chunks-<fingerprint>`;
    `ingest --rebuild` (which re-reads every stored source) moves it to a namespaced one.
    """

    chroma: Path
    folder: Path
    base: str  # chunks-<fingerprint>
    home: Path
    generation: str  # "g-<hex>", or "." (generations.LEGACY): also when there is no index yet

    @classmethod
    def of(cls, settings: Settings, generation: str | None = None) -> IndexPaths:
        """The current generation's (CURRENT, read now), or the named one's."""
        fp = settings.fingerprint()
        data = settings.paths.data_dir
        home = data / f"index-{fp}"
        name = generation or G.current(home) or G.LEGACY
        return cls(chroma=data / "chroma", folder=G.folder_of(home, name), base=f"chunks-{fp}", home=home,
                   generation=name)

    @property
    def collection(self) -> str:
        """Read from the catalog each time (no catalog yet: the base name, or a new generation's own);
        StoreError if it is damaged."""
        namespace = read_meta(self.catalog, "namespace")
        if namespace is None and self.generation != G.LEGACY:
            namespace = G.namespace_of(self.generation)
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
               collection: str | None = None, paths: IndexPaths | None = None, private: bool = False) -> ChunkStore:
    """The collection of the current generation, or of `paths`' (or `collection`, for a new index whose catalog
    is not written yet). Opened for reading (`create=False`) with a catalog present, it is checked against the
    catalog first (`check_agrees`): a collection missing papers' chunks is a StoreError naming the fix. `private`:
    a Chroma client of its own (store.py), for a reader that keeps this generation open."""
    ip = paths or IndexPaths.of(settings)
    c = settings.chunking
    stamp = {"fingerprint": settings.fingerprint(),
             "chunking": f"max_tokens={c.max_tokens}, overlap_sentences={c.overlap_sentences}"}
    store = ChunkStore(ip.chroma, collection or ip.collection, embedder.name, embedder.dim,
                       url=settings.store.chroma_url, create=create, stamp=stamp, private=private)
    if not create and ip.catalog.is_file():
        try:
            check_agrees(store, ip.catalog)
        except StoreError:
            store.close()
            raise
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
    """An id that changes each time an ingest changes the index (None before the first): cheap to poll (CURRENT,
    then one meta row of its catalog)."""
    return read_meta(IndexPaths.of(settings).catalog, "generation")


def lexical_for_reading(settings: Settings, store: ChunkStore, catalog: Catalog,
                        paths: IndexPaths | None = None) -> LexicalIndex:
    """For the app: the saved BM25 index of the current generation (or `paths`'), or one rebuilt from the store
    when it is missing or stale, saved only if no other process is writing the data folder (the app never writes
    while `ingest` does)."""
    ip = paths or IndexPaths.of(settings)
    lexical = LexicalIndex.load(ip.lexical)
    # A journal left behind means an ingest wrote the store and did not save BM25 (killed, or running now): a
    # retitled paper keeps its chunk count, so the count alone would not tell.
    if lexical is not None and len(lexical) == store.count() and not journal_path(ip.lexical).exists():
        return lexical
    try:
        with writer_lock(ip.lock_folder):
            if G.current(ip.home) != ip.generation:  # replaced meanwhile: build this reader's copy in memory
                raise StoreError("not current")
            return rebuild_lexical(store, catalog, ip.lexical, incremental=True)
    except StoreError:  # another process writes (StoreLockedError), or the folder is read-only: build in memory
        return rebuild_lexical(store, catalog, None)


@dataclass
class Reader:
    """One generation opened for reading, and the lease that keeps writers from collecting it until `close`."""

    paths: IndexPaths
    store: ChunkStore
    catalog: Catalog
    lexical: LexicalIndex
    generation: str | None  # the id published when it was opened (`index_generation`)
    lease: G.Lease

    def close(self) -> None:
        """Let go: the private Chroma client, then the lease (a writer may collect this generation from now on, if
        it is no longer current). The catalog's connections close with the Catalog object: a Library page may still
        be reading it."""
        self.store.close()
        self.lease.release()


def open_reader(settings: Settings, embedder: Embedder, attempts: int = 5) -> Reader:
    """The current generation, leased, its collection opened with a Chroma client of its own (an embedded store
    shows a reader the vectors as of this open: a later reader, or this one after `close`, sees newer ones), its
    catalog and BM25. StoreError when there is no index (or it disagrees with its catalog)."""
    for _ in range(attempts):
        ip = IndexPaths.of(settings)
        if not ip.catalog.is_file():
            raise StoreError(no_index_message(settings))
        lease = G.Lease(ip.home, ip.generation, settings.store.lease_refresh_s)
        if not G.usable(ip.home, ip.generation, settings.store.retire_grace_s):
            lease.release()  # replaced between reading CURRENT and leasing it, long enough ago: read CURRENT again
            continue
        try:
            generation = read_meta(ip.catalog, "generation")  # before the data: never newer than what is loaded
            store = open_store(settings, embedder, create=False, paths=ip, private=True)
            catalog = Catalog(ip.catalog)
            try:
                lexical = lexical_for_reading(settings, store, catalog, paths=ip)
            except BaseException:
                catalog.close()
                store.close()
                raise
        except BaseException:
            lease.release()
            raise
        return Reader(ip, store, catalog, lexical, generation, lease)
    raise StoreError(f"{settings.paths.data_dir}: the index changed {attempts} times while it was being opened; "
                     "try again")


def other_indexes(settings: Settings) -> list[tuple[str, list[str]]]:
    """(folder name, the inputs it was ingested from) of each index in the data folder built with other chunking or
    embedding settings (an older default, say), newest first: these settings do not read them."""
    data = settings.paths.data_dir
    own = f"index-{settings.fingerprint()}"
    homes = sorted((h for h in data.glob("index-*") if h.is_dir() and "." not in h.name and h.name != own),
                   key=lambda h: h.stat().st_mtime, reverse=True)
    out = []
    for home in homes:
        catalog = G.folder_of(home, G.current(home) or G.LEGACY) / "catalog.sqlite"
        if catalog.is_file():
            out.append((home.name, read_roots(catalog)))
    return out


def ingest_command(roots: list[str]) -> str:
    """`python -m rag ingest <roots>`, quoted for a shell, at most five named."""
    named = " ".join(shlex.quote(r) for r in roots[:5]) + (" ..." if len(roots) > 5 else "")
    return f"python -m rag ingest {named or 'PATHS'}"


def no_index_message(settings: Settings) -> str:
    """Why there is nothing to read, and what to run."""
    data = settings.paths.data_dir
    others = other_indexes(settings)
    if others:
        name, roots = others[0]
        return (f"{data}: no index for these chunking and embedding settings yet (fingerprint "
                f"{settings.fingerprint()}); the one here ({name}) was built with others, and is left as it is: run "
                f"`{ingest_command(roots)}` to build one for these settings, or set the settings it was built with")
    return f"{data}: no index yet; run `python -m rag ingest` first"


def collect_generations(settings: Settings, keep: frozenset[str] = frozenset(), wait_s: float = 0.0) -> G.Collected:
    """Collect the generations of this index that no reader uses (generations.collect); hold the writer lock.
    `wait_s`: while some are still read or in their grace, look again (every 0.2 s) for up to this long."""
    ip = IndexPaths.of(settings)
    url = settings.store.chroma_url
    live = ip.collection if ip.catalog.is_file() else None

    def drop(name: str, namespace: str | None) -> None:
        if namespace is None and G.is_named(name):
            namespace = G.namespace_of(name)
        collection = f"{ip.base}-{namespace}" if namespace else ip.base
        if collection != live:  # never the current generation's, whatever a damaged catalog says
            drop_collection(ip.chroma, collection, url)

    deadline = time.monotonic() + wait_s
    while True:
        got = G.collect(ip.home, drop, settings.store.lease_ttl_s, settings.store.retire_grace_s, keep)
        if not (got.in_use or got.waiting) or time.monotonic() >= deadline:
            return got
        time.sleep(0.2)

