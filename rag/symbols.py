"""What an abstract's mathematical symbols stand for, read from the clause defining them: "..., where $S, A, H$, and
$T$ denote the number of states, the number of actions, the episode horizon, and the number of episodes,
respectively" -> H: "the episode horizon". A theory abstract states its bounds in symbols and defines them once; a
user asks "what does H stand for in their regret bound?"."""
from __future__ import annotations

import re

from .text import split_sentences

# One symbol: TeX between dollar signs ("$\mathcal{H}$", "$S, A, H$") or a lone letter.
_SYMBOL = r"(?:\$[^$]{1,80}\$|\b[A-Za-z]\b)"
_VERB = r"(?:denotes?|is|are|stands? for|represents?|refers? to)"
_WHERE = re.compile(r"\bwhere\s+(.+)$", re.DOTALL)
# "S, A, H, and T denote the ..." up to the next "and X is ...", a semicolon or the clause's end.
_ASSIGNMENT = re.compile(
    rf"(?P<symbols>{_SYMBOL}(?:\s*,\s*(?:and\s+)?{_SYMBOL}|\s+and\s+{_SYMBOL})*)\s*,?\s+{_VERB}\s+"
    rf"(?P<meanings>.+?)(?=,?\s+and\s+{_SYMBOL}\s*,?\s+{_VERB}\b|;|$)")
_TEX_WRAPPED = re.compile(r"\\[A-Za-z]+\s*\{([^{}]*)\}")  # "\mathcal{H}" -> "H"
_TEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_RESPECTIVELY = re.compile(r",?\s*respectively\s*$", re.IGNORECASE)


def _names(written: str) -> tuple[str, ...]:
    """The symbols a clause's subject writes, TeX taken off: "$S, A, H$, and $T$" -> ("S", "A", "H", "T")."""
    out = []
    for part in re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", written.replace("$", " , ")):
        name = _TEX_COMMAND.sub("", _TEX_WRAPPED.sub(r"\1", part)).strip(" {}^_")
        if name and name != "and" and len(name) <= 3 and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
            out.append(name)
    return tuple(out)


def meanings(text: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each definition of symbols in the text as (symbols, what they stand for), one meaning per symbol when the
    clause lists as many ("respectively"), else one meaning for them all ("S, A are the number of states and
    actions" -> (("S", "A"), ("the number of states and actions",)))."""
    found = []
    for sentence in split_sentences(text):
        where = _WHERE.search(sentence.rstrip(" ."))
        if not where:
            continue
        for m in _ASSIGNMENT.finditer(where.group(1)):
            names = _names(m.group("symbols"))
            said = _RESPECTIVELY.sub("", m.group("meanings")).strip(" ,.")
            if not names or not said or "$" in said:
                continue
            parts = tuple(p.strip() for p in re.split(r",\s*(?:and\s+)?", said) if p.strip())
            found.append((names, parts if len(parts) == len(names) else (said,)))
    return found


def stand_for(asked: tuple[str, ...], text: str) -> tuple[str, str] | None:
    """(the symbols asked, what they stand for) where the text defines every one of them: ("H",) ->
    ("H", "the episode horizon"); ("S", "A", "H", "T") -> ("S, A, H and T", "the number of states, the number of
    actions, the episode horizon and the number of episodes"). None when one of them is not defined."""
    said: dict[str, str] = {}
    for names, parts in meanings(text):
        shared = parts * len(names) if len(parts) == 1 else parts  # "S, A are the number of states and actions"
        for name, part in zip(names, shared):
            said.setdefault(name, part)
    if not asked or any(a not in said for a in asked):
        return None
    return _listed(list(asked)), _listed(list(dict.fromkeys(said[a] for a in asked)))


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
