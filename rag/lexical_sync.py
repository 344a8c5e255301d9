"""The BM25 index kept in step with the chunk store: built in full or updated from its saved counts, and the
journal of rewritten papers that makes an update safe.

A chunk keeps its id when its paper's title changes, so saved counts alone cannot tell a rewritten chunk from an
unchanged one: the ingest run journals papers before it writes their chunks (`note_rewritten`), and
`rebuild_lexical` re-reads those and the chunks it has not counted, then clears the journal.

Not here: tokenizing, scoring and the saved format (lexical.py, bm25_counts.py); deciding when to rebuild (the
ingest run, indexer.py, and the reader's repair, `index.lexical_for_reading`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .catalog import Catalog
from .chunk import embed_text
from .lexical import LexicalIndex
from .store import ChunkStore

log = logging.getLogger(__name__)


def rebuild_lexical(store: ChunkStore, catalog: Catalog, folder: Path | None, page: int = 5000,
                    incremental: bool = False) -> LexicalIndex:
    """BM25 over every stored chunk (its title and text, as embedded), saved to `folder` (None: in memory only).

    In full, chunks are read `page` at a time with their papers' titles and tokenized as they come, so memory holds
    one page of texts and the index's compact counts, never every text (bench/RESULTS.md has the peaks), with the
    same index.

    `incremental` reuses the counts saved with the index in `folder` (`LexicalIndex.update`): only the chunk ids are
    read from the store, then the texts and titles of the chunks it has not counted and of
    the papers in the journal of rewritten papers (`note_rewritten`), since a paper whose title changed keeps its
    chunk ids with new text. Without usable counts or journal it builds in full. Saving clears the journal.
    Callers that write the store themselves (benches) and so keep no journal rebuild in full, the default.
    """
    def docs() -> Iterator[tuple[str, str, str]]:
        for chunks in store.iter_chunks(page):
            papers = catalog.get_many(pid for _, pid, _ in chunks)
            for cid, pid, text in chunks:
                yield cid, pid, embed_text(papers[pid].title if pid in papers else "", text)

    def texts(rows: list[tuple[str, str]]) -> Iterator[tuple[str, str, str]]:
        for i in range(0, len(rows), page):
            part = rows[i : i + page]
            got = store.texts_of([cid for cid, _ in part])
            papers = catalog.get_many(pid for _, pid in part)
            for cid, pid in part:
                if cid in got:  # gone meanwhile: `update` notices the missing row and the build is done in full
                    yield cid, pid, embed_text(papers[pid].title if pid in papers else "", got[cid])

    started = time.perf_counter()
    index = None
    if incremental and folder is not None:
        rewritten = _read_journal(folder)
        if rewritten is not None:
            rows = [row for page in store.iter_rows() for row in page]
            index = LexicalIndex.update(folder, rows, rewritten, texts)
    how = "updated" if index is not None else "built in full"
    if index is None:
        index = LexicalIndex.build(docs())
    if folder is not None:
        index.save(folder)
        journal_path(folder).unlink(missing_ok=True)  # after the save: a crash between only re-reads those papers
    log.info("BM25 index of %d chunks %s in %.1f s", len(index), how, time.perf_counter() - started)
    return index


def journal_path(lexical: Path) -> Path:
    """Papers whose chunks were (or were about to be) written since the BM25 index in `lexical` was saved."""
    return lexical.with_name(lexical.name + ".rewritten")


def note_rewritten(lexical: Path, paper_ids: list[str]) -> None:
    """Journal these papers before their chunks are written: a chunk keeps its id when its paper's title changes,
    so the saved counts cannot tell a rewritten chunk from an unchanged one, and a run killed after the write
    would otherwise leave the next update counting the old text. Each note starts on a new line, so one cut short
    by a kill never runs into the next ("abc" + "\ndef" reads as "abc" and "def")."""
    path = journal_path(lexical)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write("\n" + "\n".join(paper_ids) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _read_journal(lexical: Path) -> set[str] | None:
    """The journaled paper ids (none without a journal), or None when it cannot be read (build in full)."""
    try:
        return {line for line in journal_path(lexical).read_text(encoding="utf-8").splitlines() if line}
    except FileNotFoundError:
        return set()
    except (OSError, UnicodeDecodeError) as e:
        log.warning("journal of rewritten papers unreadable (%s): the BM25 index is built in full", e)
        return None
