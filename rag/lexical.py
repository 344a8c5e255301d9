"""The BM25 adapter (the only module that imports bm25s): build, save, load, search.

Dense embeddings blur exact strings: "PBTO", "R2G", "9.7x" are rare tokens a user types precisely because they are
distinctive. BM25 over our own tokens (`text.tokens`, which keeps "9.7x" and "mm2mm" whole) catches them; the
retriever fuses both rankings. The index lives beside the Chroma store and is rebuilt after every ingest that
changed anything, written to a temporary folder and renamed into place, so a crash never leaves half an index.
"""

from __future__ import annotations

import bisect
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from .text import tokens

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG on its own handler


class LexicalIndex:
    """BM25 over chunk texts, answering with (chunk_id, paper_id, score)."""

    def __init__(self, chunk_ids: list[str], paper_ids: list[str], model: object | None) -> None:
        self.chunk_ids, self.paper_ids, self._bm25 = chunk_ids, paper_ids, model
        vocab = getattr(model, "vocab_dict", None) or {}
        self._vocab = sorted(str(t) for t in vocab)

    def knows(self, term: str) -> bool:
        """Does any indexed word equal the term or start with it? ("mllm" is known through "mllms")."""
        i = bisect.bisect_left(self._vocab, term)
        return i < len(self._vocab) and self._vocab[i].startswith(term)

    @classmethod
    def build(cls, docs: Sequence[tuple[str, str, str]]) -> LexicalIndex:
        """docs: (chunk_id, paper_id, text to index)."""
        import bm25s

        if not docs:
            return cls([], [], None)
        model = bm25s.BM25()
        # An empty token list would break the index; "_" stands in for a chunk with no searchable word.
        model.index([tokens(text) or ["_"] for _, _, text in docs], show_progress=False)
        return cls([d[0] for d in docs], [d[1] for d in docs], model)

    def save(self, folder: Path) -> None:
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self._bm25 is not None:
            self._bm25.save(str(tmp / "bm25"))  # type: ignore[attr-defined]
        (tmp / "ids.json").write_text(json.dumps({"chunk_ids": self.chunk_ids, "paper_ids": self.paper_ids}))
        old = folder.with_name(folder.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
        shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex | None:
        """The saved index, or None when there is none (or it is unreadable: the caller rebuilds it)."""
        if not folder.exists():
            return None
        try:
            ids = json.loads((folder / "ids.json").read_text())
            model = None
            if ids["chunk_ids"]:
                import bm25s

                model = bm25s.BM25.load(str(folder / "bm25"), mmap=False)
            return cls(ids["chunk_ids"], ids["paper_ids"], model)
        except (OSError, ValueError, KeyError) as e:
            log.warning("lexical index at %s unreadable (%s); it will be rebuilt", folder, e)
            return None

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def search(self, query: str, k: int, allowed: set[str] | None = None) -> list[tuple[str, str, float]]:
        """Best chunks for the query with a positive score, optionally only of the allowed paper ids."""
        if self._bm25 is None or not self.chunk_ids:
            return []
        q = tokens(query)
        if not q:
            return []
        # Ask for more when filtering, since filtered-out chunks are dropped after scoring.
        want = len(self.chunk_ids) if allowed is not None else min(k, len(self.chunk_ids))
        docs, scores = self._bm25.retrieve([q], k=want, show_progress=False)  # type: ignore[attr-defined]
        out: list[tuple[str, str, float]] = []
        for idx, score in zip(docs[0], scores[0]):
            if score <= 0:
                break
            pid = self.paper_ids[int(idx)]
            if allowed is not None and pid not in allowed:
                continue
            out.append((self.chunk_ids[int(idx)], pid, float(score)))
            if len(out) >= k:
                break
        return out
