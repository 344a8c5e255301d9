"""Whether to abstain: before any evidence is read (`gate`), and once the evidence papers are chosen
(`unanswerable_reason`). The pipeline and the eval's threshold sweep call the same two functions.

The gate abstains when the question names something no abstract contains ("GSM8K"), when nothing was found, or when
no chunk is close enough to the question (`retrieval.min_similarity`), unless a rare word of the question is in the
paper BM25 ranks first ("What does SOLAR stand for?" is short and far from every chunk, yet only one paper says
SOLAR) or the question points back at papers already cited ("and its gains?").

Retrieval also finds the paper a near-miss question is about ("How many milliseconds of latency does PrivGate
add?" finds PrivGate), so a similarity threshold cannot tell it from an answerable one. What gives it away is that
the thing asked for is not in the paper at all. Five checks, all about the evidence papers, never the whole corpus:

- a quantity question names its unit ("how many GPUs", "how much wall-clock speedup"): when none of the unit's
  words occurs in any evidence paper, no number there can be the answer;
- a question about who wrote a paper (authors, affiliations) when the records carry no author list;
- a percentage asked for ("By what percentage ...?") when no evidence paper gives any; a year likewise ("Which
  election year is the survey from?"), from the abstract or the record's venue;
- a question whether code, data or weights are available ("Is the code available?") when no evidence paper links
  any or says so: "yes" or "no" would be a guess;
- a question for a paper's own limitations ("What are the limitations of SERA?") when no evidence paper admits any
  ("limited to", "cannot", "at the cost of") nor states a difficulty of what the question names: its results pasted
  instead would not answer it.

All are deliberately narrow (eval/QA.md): a wrong abstention hides an answer the user could have had, and
questions describe what they ask for in their own words ("which surface", "what property").
A question of two parts is declined only when no part can be answered; the part that cannot is named under the
answer (`answerability`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .evidence import states_cause, topic_alternatives
from .question import Question, compound_parts, read
from .records import Hit, Paper
from .text import (
    counts,
    speaks_of_itself,
    split_sentences,
    states_availability,
    states_limitation,
    tokens,
    unit_stems,
)


def gate(question: Question, hits: Sequence[Hit], min_similarity: float) -> str | None:
    """Why to abstain before reading any evidence, or None to go on.

    e.g. (read("How much does NITP improve GSM8K accuracy?") in a corpus without GSM8K, ...) -> "the abstracts
    never mention GSM8K"
    """
    if question.absent:
        return "the abstracts never mention " + ", ".join(question.absent)
    if not hits:
        return "no paper matches the question"
    close = max(h.best_similarity for h in hits) >= min_similarity
    # The paper holding the question's words best is BM25's first, wherever the fusion put it among the hits.
    worded = next((h for h in hits if h.bm25_rank == 1), hits[0])
    if not close and not question.pinned and not question.distinctive(_words(worded.paper)) \
            and not _topic_found(question, hits):
        return "no abstract is close enough to the question"
    return None


def _topic_found(question: Question, hits: Sequence[Hit]) -> bool:
    """A listing whose topic, one word or a few, a retrieved paper holds in full: "Which papers are about
    efficiency?" is short and far from every chunk by cosine, yet several abstracts are about efficiency; which of
    them are on the topic is then decided per paper (`evidence.relevant_papers`)."""
    if question.kind != "summary":
        return False
    alternatives = topic_alternatives(question.text)
    return any(all(_holds(w, words) for w in alt) for alt in alternatives
               for words in (_words(h.paper) for h in hits))


# Training details an abstract rarely states, asked for by name.
_DETAIL = re.compile(r"\b(?:learning rates?|batch sizes?|weight decay|dropout rates?|random seeds?|privacy budgets?|"
                     r"warm-?up steps|optimi[sz]er settings)\b", re.IGNORECASE)


def _holds(term: str, words: set[str]) -> bool:
    """The paper writes the term itself, singular or plural ("efficiency"; "transformers" is not "transformation")."""
    return bool({term, term + "s", term.removesuffix("s")} & words)


def _words(paper: Paper) -> set[str]:
    return set(tokens(paper.raw + " " + paper.title))


def _mentions(term: str, words: set[str]) -> bool:
    """A word of the paper starts with the term's first five letters ("parameter" ~ "parameters", "parameterized"),
    or with another name of people for people ("participants" ~ "an 18-person study")."""
    stems = tuple(unit_stems((term,)))
    return any(p.startswith(stems) for w in words for p in w.split("-"))


_LIMIT_WORDS = frozenset("limitation limitations weakness weaknesses drawback drawbacks shortcoming shortcomings "
                         "downside downsides caveat caveats".split())


def _admits_limit(question: Question, paper: Paper) -> bool:
    """Does the paper state a limit of its own work ("our analysis is limited to ..."), or a difficulty of the very
    thing the question names beyond the paper's title ("What is the downside of uniformly permuting the input for
    RandomShuffle?" -> "RandomShuffle requires a random permutation ..., which is known to have high I/O complexity
    due to ...")?"""
    named = set(tokens(question.text)) - _LIMIT_WORDS - set(tokens(paper.title))
    for s in split_sentences(paper.abstract):
        if states_limitation(s) and speaks_of_itself(s):
            return True
        if (states_limitation(s) or states_cause(s)) and named & set(tokens(s)):
            return True
    return False

# A percentage asked for ("By what percentage does X cut inference cost?"), and one given ("62.6%", "31 percent").
_PERCENTAGE_ASKED = re.compile(r"\b(?:what|which|how (?:many|much|big|large|high) (?:a )?)\s*(?:percentage|percent)\b",
                               re.IGNORECASE)
_PERCENTAGE_GIVEN = re.compile(r"\d\s?(?:\\?%|percent\b|per cent\b)", re.IGNORECASE)
# A year asked for ("Which election year is the survey from?", "In what year ...?"), which only a year written in the
# abstract answers, or the record's venue ("ICML 2026") when the year asked is the paper's own (`_PUBLISHED`).
_YEAR_ASKED = re.compile(r"\b(?:which|what)\s+(?:[\w\-]+\s+){0,2}year\b", re.IGNORECASE)
_YEAR_GIVEN = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_PUBLISHED = re.compile(r"\b(?:publish\w*|appear\w*|venue|conference|accepted)\b", re.IGNORECASE)


def answerability(question: Question, papers: Sequence[Paper]) -> tuple[str | None, str | None]:
    """(why these papers cannot answer the question, why one part of it cannot be answered while another can);
    each None when there is no such reason. The pipeline declines on the first and notes the second under the
    answer.

    e.g. (read("How many milliseconds of latency does PrivGate add?"), [PrivGate]) -> ("the abstracts found never
    mention milliseconds of latency", None)

    A question of two parts is declined only when neither part can be answered: "how are the moves fed to the
    network, and how many stacked stages does the net have?" still gets its first part ("a real vector space")
    although "stages" is nowhere. A part of one or two words ("Is the code out, and where?") answers nothing alone.
    """
    reason = _reason(question, papers)
    if reason and _part_answerable(question, papers):
        return None, reason
    return reason, None


# A reason said of the abstracts found, said of one paper's abstract: "the abstracts found never mention X" -> "never
# mentions X".
_OF_ONE = (("never mention ", "never mentions "), ("never give ", "never gives "), ("say nothing ", "says nothing "),
           ("state no limitation of their own work", "states no limitation of its own work"))


def of_one(reason: str) -> str | None:
    """What a reason about the abstracts found says of a single abstract, its subject left out ("the abstracts found
    never give a number of images" -> "never gives a number of images"); None for a reason that is not about what
    the abstracts write ("these records carry no author ... information")."""
    said = reason.removeprefix("the abstracts found ").removeprefix("the abstracts ")
    for many, one in _OF_ONE:
        if said.startswith(many):
            return one + said[len(many):]
    return None


def unanswerable_reason(question: Question, papers: Sequence[Paper]) -> str | None:
    """Why these papers cannot answer the question, or None when they may (`answerability`'s first)."""
    return answerability(question, papers)[0]


def _part_answerable(question: Question, papers: Sequence[Paper]) -> bool:
    parts = compound_parts(question.text)
    return len(parts) > 1 and any(len(tokens(p)) >= 2 and _reason(read(p), papers) is None for p in parts)


def _reason(question: Question, papers: Sequence[Paper]) -> str | None:
    if not papers:
        return None
    if question.authors and not any(p.authors for p in papers):
        return "these records carry no author or affiliation information (only the abstracts)"
    if question.availability and not any(p.has_code or states_availability(p.abstract) for p in papers):
        return "the abstracts found say nothing about code, data or weights being available"
    if question.limitations and not any(_admits_limit(question, p) for p in papers):
        return "the abstracts found state no limitation of their own work"
    detail = _DETAIL.search(question.text)
    if detail and not any(all(_holds(w, _words(p)) for w in tokens(detail.group(0))) for p in papers):
        # "What learning rate was used to train UHM?": abstracts rarely give a training detail; when none found
        # writes it, no sentence there answers.
        return f"the abstracts found never mention {detail.group(0).lower()}"
    if _PERCENTAGE_ASKED.search(question.text) and not any(_PERCENTAGE_GIVEN.search(p.abstract) for p in papers):
        # "... cut inference cost?" of "... often reducing inference cost" across "23 tasks": no percentage to give.
        return "the abstracts found never give a percentage"
    own_year = bool(_PUBLISHED.search(question.text))
    if _YEAR_ASKED.search(question.text) and not any(
            _YEAR_GIVEN.search(f"{p.abstract} {p.venue if own_year else ''}") for p in papers):
        return "the abstracts found never give a year"
    if question.unit:
        words = {w for p in papers for w in tokens(p.title + " " + p.abstract)}
        if not any(_mentions(t, words) for t in question.unit):
            return f"the abstracts found never mention {question.unit_phrase}"
        # "How many athletes ...?" of a paper evaluated on "datasets from athletes": named, never counted. Only for
        # a count ("how much compute" may be answered "negligible").
        if question.counted and not any(counts(p.abstract, question.unit, near=True) for p in papers):
            return f"the abstracts found never give a number of {question.unit_phrase}"
    return None
