"""Plain words -> the field's terms: what a question adds to its search when it describes a paper in other words.

A user who asks about "hidden causes that change the data along perpendicular directions" means "latent factors"
and "orthogonal" directions, words the abstract uses and the question does not; the embedder alone does not close
that gap for a small model (bench/RESULTS.md, "Plain words"). The glossary is a file of `plain words => field terms`
lines (`rag/glossary.txt`, for machine learning; `retrieval.glossary` names another or "off"), read once and checked:
a malformed line is refused at start-up naming the file and the line.

`Glossary.expand` returns the field terms for the plain words a question uses, leaving out those it already uses
and, given `known`, those the index never writes. The retriever searches them: BM25 at
`retrieval.glossary_weight` of a question word's weight, and appended to the text it embeds. This module does no
searching itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .records import ConfigError
from .text import tokens

BUILTIN = Path(__file__).resolve().parent / "glossary.txt"


# Plain words the question denies are not what it is about: "without looking inside the model" asks for no
# interpretability (a negation right before the match, or one word before it, within the clause).
_NEGATED = re.compile(r"\b(?:without|not|no|never|nor|\w+n't)\s+(?:\w+\s+)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Entry:
    plain: re.Pattern[str]
    terms: tuple[str, ...]  # lexical tokens of the field terms
    first: str  # the plain side's first word, lower-cased: a substring test before the pattern is tried


@dataclass(frozen=True)
class Glossary:
    entries: tuple[Entry, ...] = ()

    def expand(self, question: str, known: Callable[[str], bool] | None = None) -> tuple[str, ...]:
        """The field terms for the plain words the question uses, e.g. "hidden causes along perpendicular
        directions" -> ("latent", "factors", "orthogonal"); none the question already has, none `known` refuses."""
        have = set(tokens(question))
        lower = question.lower()
        out: dict[str, None] = {}
        for entry in self.entries:
            if entry.first in lower and any(not _NEGATED.search(question[:m.start()])
                                            for m in entry.plain.finditer(question)):
                out.update((t, None) for t in entry.terms if t not in have and (known is None or known(t)))
        return tuple(out)


def _entry(plain: str, terms: str) -> Entry:
    split = re.split(r"[\s\-]+", plain)
    *lead, last = split
    # the last word in either number: "new categories" also reads "new category", "picture" also "pictures"
    if last.endswith("ies"):
        last_pattern = re.escape(last[:-3]) + "(?:y|ies)"
    elif last.endswith("s") and not last.endswith("ss"):
        last_pattern = re.escape(last[:-1]) + "s?"
    else:
        last_pattern = re.escape(last) + "s?"
    words = [re.escape(w) for w in lead] + [last_pattern]
    pattern = r"(?<!\w)" + r"[\s\-]+".join(words) + r"(?!\w)"  # "picture-and-text" holds "picture"
    # Each term whole ("self-supervised", not also "supervised", the opposite of what it glosses).
    whole = (t[0] for t in map(tokens, terms.split()) if t)
    first = re.sub(r"(?:ies|s)$", "", split[0].lower())  # in either number, as the pattern reads it
    return Entry(re.compile(pattern, re.IGNORECASE), tuple(dict.fromkeys(whole)), first)


@lru_cache(maxsize=8)
def _read(path: Path) -> Glossary:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the glossary ({getattr(e, 'strerror', None) or e})") from None
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        plain, sep, terms = line.partition("=>")
        if not sep or not plain.strip() or not tokens(terms) or "=>" in terms:
            raise ConfigError(f"{path}, line {number}: expected 'plain words => field terms', got {line!r}")
        entries.append(_entry(plain.strip(), terms))
    return Glossary(tuple(entries))


def load_glossary(setting: str) -> Glossary:
    """`retrieval.glossary`: "builtin" (rag/glossary.txt), "off" (no expansion), or a glossary file's path."""
    if setting == "off":
        return Glossary()
    return _read(BUILTIN if setting == "builtin" else Path(setting).expanduser().resolve())
