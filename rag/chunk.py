"""Paper -> Chunks: windows of whole sentences that fit the embedder, overlapping by a sentence.

all-MiniLM-L6-v2 silently truncates past 256 word pieces and was trained on 128, while the seeds' abstracts are
145-318 word pieces: embedding a long abstract whole would drop its end (where the numbers usually are). So each
paper becomes a few windows of consecutive sentences, each within `max_tokens` (128 by default), consecutive windows
sharing `overlap_sentences`, so every sentence is embedded at least once and a fact near a boundary keeps its
context. Windows of 256 (half the seeds then fit one) embed 1.4 times fewer tokens, and measured mixed on
retrieval (bench/RESULTS.md, "Chunks of a whole abstract").

Each window is embedded as "title. window" (the title names the method, which later sentences often only call
"our method"); the title's tokens count against the budget.

Pure and deterministic: token counting is injected (the real embedder's tokenizer, or a fake in tests).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .config import Chunking
from .records import Chunk, Paper
from .text import split_sentences

CountTokens = Callable[[str], int]


def _split_long(sentence: str, budget: int, count: CountTokens) -> list[str]:
    """Split one over-long sentence into word runs within budget; a word longer than the budget is cut by
    characters (`_cut_word`).

    Costs add up word by word (a word-piece tokenizer splits at spaces first), so this stays linear even for a
    megabyte-long line: e.g. count("a b") - 2 == (count("a") - 2) + (count("b") - 2).
    """
    specials = count("")
    pieces: list[str] = []
    current: list[str] = []
    used = specials
    for word in sentence.split():
        cost = count(word) - specials
        if cost + specials > budget:
            if current:
                pieces.append(" ".join(current))
                current, used = [], specials
            pieces.extend(_cut_word(word, budget, count))
            continue
        if current and used + cost > budget:
            pieces.append(" ".join(current))
            current, used = [], specials
        current.append(word)
        used += cost
    if current:
        pieces.append(" ".join(current))
    return pieces


def _cut_word(word: str, budget: int, count: CountTokens) -> list[str]:
    """Cut a word into character runs that each fit the budget.

    A WordPiece tokenizer gives at most one piece per character, so runs of `budget - specials` characters fit and
    each is counted once; a tokenizer that can give more (a fake counting punctuation twice: "::::" is 1 + 4 pieces)
    gets the run halved until it fits, so the budget holds whatever the counter.
    """
    specials = count("")
    step = max(1, budget - specials)
    out: list[str] = []
    i = 0
    while i < len(word):
        n = step
        while n > 1 and count(word[i : i + n]) > budget:
            n //= 2
        out.append(word[i : i + n])
        i += n
    return out


def embed_text(title: str, window: str) -> str:
    """What is embedded and BM25-indexed for a chunk."""
    return f"{title}. {window}" if title and not window.startswith(title) else window


def chunk_paper(paper: Paper, settings: Chunking, count: CountTokens) -> list[Chunk]:
    """Windows of whole sentences; each `embed_text(title, chunk.text)` fits `settings.max_tokens`."""
    # Each distinct text counted once: sentences are counted to split them and again to fill the windows, "" at
    # every step (16 tokenizer calls a paper were 7 % of an ingest).
    count = functools.cache(count)
    title = paper.title
    # Leave room for the title, but never let a long title eat more than half the window.
    title_cost = count(title + ". ") if title else 0
    if title_cost > settings.max_tokens // 2:
        title, title_cost = "", 0
    budget = settings.max_tokens - title_cost
    units: list[str] = []
    for sentence in split_sentences(paper.abstract):
        units.extend([sentence] if count(sentence) <= budget else _split_long(sentence, budget, count))
    units = [u for u in units if u.strip()]

    windows: list[tuple[int, int]] = []  # (first unit, end unit exclusive)
    start = 0
    specials = count("")
    costs = [count(u) - specials for u in units]
    while start < len(units):
        end, used = start + 1, specials + costs[start]
        while end < len(units) and used + costs[end] <= budget:
            used += costs[end]
            end += 1
        windows.append((start, end))
        if end >= len(units):
            break
        start = max(end - settings.overlap_sentences, start + 1)
    return [
        Chunk(
            chunk_id=f"{paper.paper_id}:{i}",
            paper_id=paper.paper_id,
            index=i,
            text=" ".join(units[a:b]),
            first_sentence=a,
            n_sentences=b - a,
        )
        for i, (a, b) in enumerate(windows)
    ]


def approx_tokens(text: str) -> int:
    """A cheap word-piece estimate for tests and fakes: ~4 characters a piece, punctuation apart, +2 specials.
    Additive over words like the real tokenizer: approx_tokens("a b") - 2 == sum(approx_tokens(w) - 2 for w)."""
    n = 2
    for word in text.split():
        n += max(1, (len(word) + 3) // 4) + sum(not c.isalnum() for c in word)
    return n
