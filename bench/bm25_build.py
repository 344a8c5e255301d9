"""The BM25 build alone, from an index already ingested: its time and the process's peak memory, streamed or at once.

    PYTHONHASHSEED=0 /usr/bin/time -v python -m bench.bm25_build /tmp/bm25work/data --method streamed --save OUT

`streamed` is what the indexer runs (`rag.lexical_sync.rebuild_lexical`: the store paged, chunks tokenized as they
come); `at-once` is the build before it (every chunk and title read, every token list handed to bm25s' `index`). Run
each in its own process, since peak RSS never goes down. With the same PYTHONHASHSEED the two saved indexes are the same
files byte for byte (`diff -r`): word ids follow a set's order, which follows string hashes.

The data folder is opened for writing (Chroma may touch its files): point it at a copy of an index you care about.
Only the store and catalog are read; no embedder is loaded, so the collection's dimension is given (`--dim`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rag.catalog import Catalog
from rag.chunk import embed_text
from rag.lexical import LexicalIndex
from rag.lexical_sync import rebuild_lexical
from rag.store import ChunkStore

from .measure import peak_rss_mb, rss_mb


def _at_once(store: ChunkStore, catalog: Catalog) -> LexicalIndex:
    """The build before streaming (rag/indexer.py before this module existed)."""
    chunks = store.all_chunks()
    papers = catalog.get_many(pid for _, pid, _ in chunks)
    docs = [(cid, pid, embed_text(papers[pid].title if pid in papers else "", text)) for cid, pid, text in chunks]
    return LexicalIndex.build_at_once(docs)


def measure(data: Path, method: str, dim: int, save: Path | None) -> dict[str, Any]:
    folders = sorted(p.parent for p in data.glob("index-*/catalog.sqlite"))
    if len(folders) != 1:
        raise SystemExit(f"{data}: expected one index-*/catalog.sqlite, found {len(folders)}")
    fp = folders[0].name.removeprefix("index-")
    catalog = Catalog(folders[0] / "catalog.sqlite")
    model = catalog.get_meta("embedding_model") or ""
    store = ChunkStore(data / "chroma", f"chunks-{fp}", model, dim, create=False)
    before = rss_mb()
    t = time.perf_counter()
    index = rebuild_lexical(store, catalog, None) if method == "streamed" else _at_once(store, catalog)
    build_s = time.perf_counter() - t
    out: dict[str, Any] = {"method": method, "chunks": len(index), "build_s": round(build_s, 1),
                           "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak_rss_mb(), 1)}
    if save is not None:
        t = time.perf_counter()
        index.save(save)
        out["save_s"] = round(time.perf_counter() - t, 1)
    catalog.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bm25_build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data_dir", type=Path, help="a data folder holding chroma/ and one index-*/ (use a copy)")
    p.add_argument("--method", choices=["streamed", "at-once"], default="streamed")
    p.add_argument("--dim", type=int, default=384, help="the collection's vector dimension (384: MiniLM)")
    p.add_argument("--save", type=Path, help="save the built index here, to compare the two methods' files")
    args = p.parse_args(argv)
    print(json.dumps(measure(args.data_dir, args.method, args.dim, args.save)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
