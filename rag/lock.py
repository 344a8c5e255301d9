"""The one-writer lock of a data folder: an `flock` on `write.lock` in it.

The kernel drops an `flock` when its holder dies, so a crash never leaves a stale lock, and a second writer fails at
once with a message (StoreLockedError) instead of waiting. Readers never take it, except to save a repair they may
skip (`index.lexical_for_reading`). What is written under the lock, and in what order, is the ingest run's business
(indexer.py), not this module's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .records import StoreError, StoreLockedError


def check_unlocked(folder: Path) -> None:
    """Raise StoreLockedError now if another process is writing, e.g. before loading a model for minutes only to
    find the store busy. Advisory: the writer still takes `writer_lock`, which is what guarantees one writer."""
    with writer_lock(folder):
        pass


@contextlib.contextmanager
def writer_lock(folder: Path) -> Iterator[None]:
    """Hold the index's write lock, or raise StoreLockedError at once if another process holds it."""
    path = folder / "write.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:  # e.g. a read-only or full disk: nothing can be written, so say so before trying
        raise StoreError(f"{folder}: cannot write to the data folder ({e.strerror or e}); "
                         "check its permissions and free space, or use another --data-dir") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise StoreLockedError(
                f"{folder}: the index is being written by {holder}; wait for it to finish or use another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
