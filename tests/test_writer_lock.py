"""One writer at a time: a second ingest (another process, the CLI, the same process) fails fast naming the writer,
and runs once the writer is gone; a reader whose BM25 index is missing builds it in memory instead of writing under a
running ingest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import HashEmbedder
from helpers import ROOT, consistent_counts, corpus_settings, make_settings

from rag.catalog import Catalog
from rag.index import IndexPaths, check_unlocked, open_store
from rag.indexer import build_index
from rag.records import StoreLockedError

PY = sys.executable


_HOLDER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = sys.argv[1:3]
    from pathlib import Path
    from helpers import make_settings
    from fakes import HashEmbedder
    from rag.indexer import build_index

    class Slow(HashEmbedder):
        def embed(self, texts):
            print("writing", flush=True)
            time.sleep(600)

    build_index(make_settings(Path(sys.argv[3]), **{"paths.seeds_dir": Path(sys.argv[4])}), Slow())
""")


_SECOND = textwrap.dedent("""
    import sys, time
    sys.path[:0] = sys.argv[1:3]
    from pathlib import Path
    from helpers import make_settings
    from fakes import HashEmbedder
    from rag.indexer import build_index
    from rag.records import StoreLockedError

    flags = {"paths.seeds_dir": Path(sys.argv[4]), "chunking.max_tokens": int(sys.argv[5])}
    t = time.perf_counter()
    try:
        build_index(make_settings(Path(sys.argv[3]), **flags), HashEmbedder())
        print("built", flush=True)
    except StoreLockedError as e:
        print(f"locked after {time.perf_counter() - t:.3f}s: {e}", flush=True)
""")


def _python(script: str, *args: object, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-c", script, str(ROOT / "tests"), str(ROOT), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_second_writer_fails_fast_with_a_clear_message(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    holder = _python(_HOLDER, data, corpus)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "writing"
        # Same index, and another chunking (another collection in the same Chroma folder): both refused at once.
        for max_tokens in (128, 96):
            t = time.perf_counter()
            out, err = _python(_SECOND, data, corpus, max_tokens).communicate(timeout=60)
            assert out.startswith("locked after "), err
            assert f"being written by process {holder.pid}; wait for it to finish or use another --data-dir" in out
            assert float(out.split()[2].rstrip("s:")) < 1.0 and time.perf_counter() - t < 15
        with pytest.raises(StoreLockedError, match=f"process {holder.pid}"):  # the check before loading models
            check_unlocked(make_settings(data, **{"paths.seeds_dir": corpus}))
    finally:
        holder.kill()  # SIGKILL: the kernel drops the lock with the process
        holder.wait()
    out, err = _python(_SECOND, data, corpus, 128).communicate(timeout=120)
    assert out.strip() == "built", err
    assert consistent_counts(make_settings(data, **{"paths.seeds_dir": corpus}))[0] == 38


@pytest.mark.slow
def test_the_cli_refuses_to_ingest_while_another_process_writes(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    holder = _python(_HOLDER, data, corpus)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "writing"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t = time.perf_counter()
        done = subprocess.run([PY, "-m", "rag", "ingest", str(corpus), "--data-dir", str(data)], env=env,
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        seconds = time.perf_counter() - t
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {data}: the index is being written by process {holder.pid}; wait for it to finish or use another "
        "--data-dir")
    assert seconds < 120, f"took {seconds:.0f}s"


def test_writer_lock_in_process_is_exclusive_and_reentrant_after_release(tmp_path: Path, corpus: Path) -> None:
    from rag.lock import writer_lock

    s = corpus_settings(tmp_path, corpus)
    with writer_lock(IndexPaths.of(s).lock_folder):
        with pytest.raises(StoreLockedError, match="being written by process"):
            build_index(s, HashEmbedder())
    assert build_index(s, HashEmbedder()).papers == 38


def test_the_app_rebuilds_bm25_in_memory_while_ingest_writes(tmp_path: Path, corpus: Path) -> None:
    from rag.index import lexical_for_reading
    from rag.lock import writer_lock

    s = corpus_settings(tmp_path, corpus)
    build_index(s, HashEmbedder())
    ip = IndexPaths.of(s)
    shutil.rmtree(ip.lexical)  # missing (or stale): the app has to rebuild it
    store, catalog = open_store(s, HashEmbedder(), create=False), Catalog(ip.catalog)
    with writer_lock(ip.lock_folder):  # an ingest is running
        assert len(lexical_for_reading(s, store, catalog)) == store.count()
        assert not ip.lexical.exists()  # nothing written under the writer's feet
    assert len(lexical_for_reading(s, store, catalog)) == store.count() and ip.lexical.exists()
