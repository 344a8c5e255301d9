"""Questions the abstracts cannot answer even though the right paper was found.

Retrieval finds the paper a near-miss question is about ("How many milliseconds of latency does PrivGate add?"
finds PrivGate), so a similarity threshold cannot tell it from an answerable one. What gives it away is that the
thing asked for is not in the paper at all. Two checks, both about the evidence papers, never the whole corpus:

- a quantity question names its unit ("how many GPUs", "how much wall-clock speedup"): when none of the unit's
  words occurs in any evidence paper, no number there can be the answer;
- a question about who wrote a paper (authors, affiliations) when the records carry no author list.

Both were calibrated on the eval's unanswerable questions and checked against every answerable one (see
eval/QA.md); they are deliberately narrow, because a wrong abstention hides an answer the user could have had.
A broader rule ("every word after *which* must occur in the paper") abstained on 33 of 159 answerable questions:
questions describe what they ask for in their own words ("which surface", "what property").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .records import Paper
from .text import tokens

# "how many <unit words> <verb/preposition/end>": e.g. "How many parameters did ..." -> "parameters".
_STOP = (r"(?:does|do|did|is|are|was|were|has|have|had|can|could|will|would|should|must|might|may|in|of|for|on|to|"
         r"at|by|from|with|that|which|who|when|where|per|across|between|used|reported|achieved|than|it|they|their)")
_QUANTITY = re.compile(r"\bhow (?:many|much)\s+((?:(?!" + _STOP + r"\b)[\w\-]+(?:\s+|(?=[?.,;:]|$))){1,4}?)"
                       r"(?=" + _STOP + r"\b|[?.,;:]|$)", re.IGNORECASE)
# Words that say "more/less of something" rather than naming the unit.
_NOT_UNIT = frozenset("more less fewer larger smaller higher lower faster slower extra additional overall total "
                      "absolute relative average better worse quick small large fast slow big little".split())
_AUTHORS = re.compile(r"\b(who (?:are|were|is|was) the authors?|who (?:wrote|authored|published)|authors? of|"
                      r"(?:written|authored) by|affiliat\w*|which (?:university|universities|institution|lab|company))",
                      re.IGNORECASE)


def quantity_unit(question: str) -> list[str]:
    """The unit words of a quantity question: "How many GPUs and hours were used?" -> ["gpus", "hours"]."""
    m = _QUANTITY.search(question)
    if not m:
        return []
    return [t for t in tokens(m.group(1)) if len(t) >= 3 and not t.isdigit() and t not in _NOT_UNIT]


def _mentions(term: str, words: set[str]) -> bool:
    """A word of the paper starts with the term's first five letters ("parameter" ~ "parameters", "parameterized")."""
    stem = term[:5]
    return any(w.startswith(stem) for w in words)


def unanswerable_reason(question: str, papers: Sequence[Paper]) -> str | None:
    """Why these papers cannot answer the question, or None when they may.

    e.g. ("How many milliseconds of latency does PrivGate add?", [PrivGate]) -> "the abstracts found never mention
    milliseconds"
    """
    if not papers:
        return None
    if _AUTHORS.search(question) and not any(p.authors for p in papers):
        return "these records carry no author or affiliation information (only the abstracts)"
    unit = quantity_unit(question)
    if unit:
        words = {w for p in papers for w in tokens(p.title + " " + p.abstract)}
        if not any(_mentions(t, words) for t in unit):
            m = _QUANTITY.search(question)
            assert m is not None
            return f"the abstracts found never mention {m.group(1).strip()}"
    return None
