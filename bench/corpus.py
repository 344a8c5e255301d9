"""Deterministic synthetic corpora for the bench: abstract-like JSONL records recombined from the seed sentences.

A record takes an opening sentence of one seed abstract, then body sentences drawn from all seeds (shuffled), until
it reaches about `target_tokens` word pieces (default 256, the issue's ingest figure: ~1,100 characters), e.g.
  {"id": "synth-0000042", "title": "<a seed title>", "abstract": "<opening>. <body>. <body>. ...",
   "authors": "A. Author17, B. Author3", "year": 2021, "url": "https://github.com/synthetic/repo42"}
Titles repeat (one per seed paper), abstracts never do (a repeat is redrawn), ids are unique. About 30% of
records carry a code URL, so `has_code` filters select a realistic share. The same (size, seed) always gives the
same bytes; files are written once to a cache folder (outside git) and reused.

This module does not ingest or embed anything; `rag.parse` reads the files like any user's JSONL dump.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

from rag.chunk import approx_tokens
from rag.parse import ParseReport, iter_papers
from rag.text import split_sentences


def seed_pool(seeds_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """(opening sentences, all sentences, titles) of the seed abstracts, in file order."""
    openings, sentences, titles = [], [], []
    for paper in iter_papers([seeds_dir], ParseReport()):
        sents = split_sentences(paper.raw)
        if not sents:
            continue
        openings.append(sents[0])
        sentences.extend(sents)
        titles.append(paper.title)
    if not sentences:
        raise ValueError(f"{seeds_dir}: no seed abstracts to build a synthetic corpus from")
    return openings, sentences, titles


def records(n: int, seeds_dir: Path, seed: int = 0, target_tokens: int = 256) -> Iterator[dict[str, object]]:
    """n synthetic records, generated lazily (a 100,000-record corpus is never held in memory)."""
    openings, sentences, titles = seed_pool(seeds_dir)
    rng = random.Random(seed)
    seen: set[bytes] = set()  # 8-byte digests: 100k records = under 10 MB
    i = 0
    while i < n:
        first = rng.randrange(len(openings))
        parts = [openings[first]]
        used = approx_tokens(parts[0])
        while used < target_tokens:
            s = sentences[rng.randrange(len(sentences))]
            if s in parts:
                continue
            parts.append(s)
            used += approx_tokens(s) - 2
        abstract = " ".join(parts)
        digest = hashlib.blake2b(abstract.encode(), digest_size=8).digest()
        if digest in seen:
            continue  # a repeated abstract would be one paper (ids derive from content): draw again
        seen.add(digest)
        rec: dict[str, object] = {
            "id": f"synth-{i:07d}",
            "title": titles[first],
            "abstract": abstract,
            "authors": ", ".join(f"{chr(65 + rng.randrange(26))}. Author{rng.randrange(500)}"
                                 for _ in range(rng.randint(1, 4))),
            "year": 2015 + rng.randrange(12),
        }
        if rng.random() < 0.3:
            rec["url"] = f"https://github.com/synthetic/repo{i}"
        yield rec
        i += 1


def corpus_file(n: int, seeds_dir: Path, cache_dir: Path, seed: int = 0) -> Path:
    """The cached JSONL file of n records, written (atomically) on first use."""
    openings, sentences, _ = seed_pool(seeds_dir)
    pool = hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:8]
    path = cache_dir / f"synthetic-{n}-s{seed}-{pool}.jsonl"
    if path.is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as fh:
        for rec in records(n, seeds_dir, seed):
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path
