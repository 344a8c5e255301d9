"""Index generations: which one readers open (CURRENT), who reads which (leases), and collecting the rest.

Layout of one index, `index-<fingerprint>/` in the data folder:
    CURRENT        the current generation's folder name, one line, replaced atomically (written aside, renamed)
    g-<hex>/       a generation: catalog.sqlite, bm25/; its Chroma collection is `chunks-<fingerprint>-<hex>`
    readers/       leases: `<generation>.<host>.<pid>.<random>`, one per generation a reader process has open
An index made before generations has no CURRENT: its catalog and BM25 sit in `index-<fingerprint>/` itself
(generation "."), until `ingest --rebuild` replaces it with a g- folder.

Only `ingest --rebuild` makes a new generation: a folder and collection built beside the current one, published by
replacing CURRENT, so every reader has a whole index at every moment and one holding the old one goes on reading it.
An ordinary ingest writes the current generation in place, in an order that keeps each catalogued paper whole
(indexer.py), and publishes a new id in its catalog last (`index.index_generation`): readers poll it and reopen.

How a writer knows an old generation is no longer read: each reader process holds a lease file per generation it
has open, touched every `store.lease_refresh_s` by one daemon thread and deleted when it lets go (or at exit).
Writers collect, under the writer lock, at the end of every ingest (a rebuild first waits up to
`store.retire_wait_s` for readers to move on): a generation goes (its collection dropped, then its folder deleted)
when it is not current, no lease on it was touched within `store.lease_ttl_s` (a killed reader's lease goes stale)
and it was retired more than `store.retire_grace_s` ago; one that was never current (a killed rebuild's) at once.
The grace covers a reader that read CURRENT just before it changed: after leasing, a reader checks that its
generation is still current or was retired less than half the grace ago, else it lets go and reads CURRENT again,
so a writer never deletes what a reader has just leased. Readers never collect: that would take the writer lock
and make an `ingest` started at that moment fail. Timestamps are file mtimes compared with this machine's clock:
the processes sharing a data folder are assumed to share a clock.

Not here: what a generation holds and opening it (index.py), writing one (indexer.py), dropping a collection
(store.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CURRENT = "CURRENT"
LEGACY = "."  # the generation of an index made before generations: its parts in the index folder itself
RETIRED = "RETIRED"  # written into a generation just before CURRENT stops naming it; its mtime is when
_NAME = re.compile(r"g-[0-9a-f]{12}")
_LEGACY_PARTS = ("catalog.sqlite", "catalog.sqlite-journal", "catalog.sqlite-wal", "catalog.sqlite-shm", "bm25",
                 "bm25.rewritten", RETIRED)


def is_named(name: str) -> bool:
    """Is `name` a g- generation's folder name?"""
    return _NAME.fullmatch(name) is not None


def folder_of(home: Path, name: str) -> Path:
    return home if name == LEGACY else home / name


def current(home: Path) -> str | None:
    """The current generation's name ("g-<hex>", or "." for an index made before generations), None when none."""
    try:
        name = (home / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return LEGACY if (home / "catalog.sqlite").is_file() else None
    return name if _NAME.fullmatch(name) else None


def new_generation(home: Path) -> str:
    """A new, empty generation folder (not current yet); its hex also names its collection."""
    name = f"g-{uuid.uuid4().hex[:12]}"
    (home / name).mkdir(parents=True)
    return name


def namespace_of(name: str) -> str:
    """The collection suffix of a g- generation (its hex): "g-0123456789ab" -> "0123456789ab"."""
    return name[2:]


def publish(home: Path, name: str) -> None:
    """Make `name` the current generation: the one it replaces is marked retired first, then CURRENT is replaced
    in one rename (fsynced), so a reader reads either the old name or the new one, never neither."""
    old = current(home)
    if old == name:
        return
    if old is not None:
        _touch(folder_of(home, old) / RETIRED)
    aside = home / f"{CURRENT}.new-{os.getpid()}"
    with aside.open("w", encoding="utf-8") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(aside, home / CURRENT)
    _fsync_dir(home)
    log.info("published index generation %s (was %s)", name, old)


def usable(home: Path, name: str, grace_s: float) -> bool:
    """After leasing `name`: may a reader use it? Yes while it is current or was retired less than half the grace
    ago (a writer waits the whole grace, and sees the lease by then)."""
    if not (folder_of(home, name) / "catalog.sqlite").is_file():
        return False
    if current(home) == name:
        return True
    try:
        retired = (folder_of(home, name) / RETIRED).stat().st_mtime
    except FileNotFoundError:
        return False
    return time.time() - retired < grace_s / 2


# --- leases ----------------------------------------------------------------------------------------------------


class Lease:
    """One reader process's claim on one generation, kept fresh by the keeper thread until `release`."""

    def __init__(self, home: Path, name: str, refresh_s: float) -> None:
        self.home, self.name = home, name
        tag = "legacy" if name == LEGACY else name
        self.path = home / "readers" / f"{tag}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _touch(self.path)
        except OSError as e:  # a read-only data folder: no writer can collect anything from it either
            log.debug("no lease on %s: %s", name, e)
            return
        _KEEPER.add(self, refresh_s)

    def release(self) -> None:
        _KEEPER.discard(self)
        self.path.unlink(missing_ok=True)


@dataclass
class _Keeper:
    """The daemon thread that touches this process's leases."""

    leases: set[Lease] = field(default_factory=set)
    every: float = 5.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def add(self, lease: Lease, refresh_s: float) -> None:
        with self.lock:
            self.leases.add(lease)
            self.every = min(self.every, refresh_s)
            self._start()

    def discard(self, lease: Lease) -> None:
        with self.lock:
            self.leases.discard(lease)

    def _start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._loop, name="rag-index-leases", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        while True:
            with self.lock:
                leases, pause = list(self.leases), self.every
            for lease in leases:
                try:
                    _touch(lease.path)
                except OSError as e:  # e.g. a read-only data folder: nothing can collect from it either
                    log.debug("lease %s not refreshed: %s", lease.path, e)
            time.sleep(pause)

    def release_all(self) -> None:
        with self.lock:
            leases, self.leases = list(self.leases), set()
        for lease in leases:
            lease.path.unlink(missing_ok=True)

    def reset_after_fork(self) -> None:
        """A forked child holds none of its parent's leases (the parent still does) and has no keeper thread."""
        self.leases, self.thread, self.lock = set(), None, threading.Lock()


_KEEPER = _Keeper()
atexit.register(_KEEPER.release_all)
os.register_at_fork(after_in_child=_KEEPER.reset_after_fork)


# --- collecting --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collected:
    dropped: list[str]  # generations whose folder and collection are gone
    in_use: dict[str, int]  # generation -> fresh leases on it (kept)
    waiting: dict[str, float]  # generation -> when its grace ends (kept)


def collect(home: Path, drop: Callable[[str, str | None], None], lease_ttl_s: float, grace_s: float,
            keep: frozenset[str] = frozenset()) -> Collected:
    """Collect the generations under `home` that no reader uses (see the module's docstring); call it holding the
    writer lock. `drop(name, catalog_namespace_or_None)` drops a generation's collection; it runs before the folder
    is deleted, so a kill in between leaves the folder, and the next collection drops it again (missing is fine).
    Also collects the `index-<fingerprint>.retired-*` folders an earlier version's rebuild set aside."""
    now = time.time()
    cur = current(home)
    names = sorted(p.name for p in home.iterdir() if p.is_dir() and _NAME.fullmatch(p.name)) if home.is_dir() else []
    if cur not in (None, LEGACY) and (home / "catalog.sqlite").exists():
        names.append(LEGACY)
    leases = _leases(home, now, lease_ttl_s)
    out = Collected([], {}, {})
    for name in names:
        if name == cur or name in keep:
            continue
        if leases.get(name):
            out.in_use[name] = leases[name]
            continue
        folder = folder_of(home, name)
        try:
            retired = (folder / RETIRED).stat().st_mtime
        except FileNotFoundError:
            retired = None  # never current: no reader could have opened it
        if retired is not None and now - retired < grace_s:
            out.waiting[name] = retired + grace_s
            continue
        drop(name, _namespace(folder / "catalog.sqlite"))
        if name == LEGACY:
            for part in _LEGACY_PARTS:
                path = home / part
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        out.dropped.append(name)
        log.info("collected index generation %s and its collection", name)
    for old in sorted(home.parent.glob(f"{home.name}.retired-*")) if home.parent.is_dir() else []:
        if old.is_dir():
            drop(str(old), _namespace(old / "catalog.sqlite"))
            shutil.rmtree(old, ignore_errors=True)
            out.dropped.append(old.name)
    return out


def _leases(home: Path, now: float, ttl_s: float) -> dict[str, int]:
    """Fresh leases per generation; stale ones (a reader killed, or stuck past the TTL) are deleted."""
    fresh: dict[str, int] = {}
    folder = home / "readers"
    for path in folder.iterdir() if folder.is_dir() else []:
        tag = path.name.split(".", 1)[0]
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > ttl_s:
            path.unlink(missing_ok=True)
            continue
        name = LEGACY if tag == "legacy" else tag
        fresh[name] = fresh.get(name, 0) + 1
    return fresh


def _namespace(catalog: Path) -> str | None:
    from .catalog import read_meta
    from .records import StoreError

    try:
        return read_meta(catalog, "namespace")
    except StoreError:  # damaged: the caller names the collection from the folder instead
        return None


def _touch(path: Path) -> None:
    with path.open("a"):
        pass
    os.utime(path)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
