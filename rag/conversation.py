"""Follow-ups: which earlier papers a question points back at, and what retrieval should search for it.

A follow-up such as "And how large were its gains?" is about the paper the previous answer cited, not about the
previous question's words. So the papers the previous assistant turn cited are read back, in citation order:
from the `paper_ids` a client kept on that message (the chat and the API return them), else by locating each cited
sentence of that answer in the index (every answer sentence is stated by the paper it cites, so the sentence
finds its paper). The question's back-reference then picks among them: "it" the first, "the second one" the
second, "the first two" two, "they" / "compare them" all (`question.pointed_at`); "the two" / "both" the two
latest papers, reaching back past the last answer when it cited only one (`question.taken_together`). A follow-up
that names nothing ("By how much?", "On which benchmark?": `question.elliptical`) is about the first of them, as
"it" would be; one that asks which of them ("Which of them is about graphs?") is answered from those papers alone,
the evidence choice picking the one it describes. A follow-up
that describes its paper ("the clinical one", "And the paper on learnware specifications, what does it study?",
"For the optimization-modeling agent, which base model is it built on?") may mean one the last answer did not
list: the paper the question alone retrieves first joins the candidates, and the evidence choice picks the one
described.

A question without a back-reference is searched as it is, even after a long conversation: "and which papers use
diffusion?" is a new subject, and pinning it to the old paper would answer the wrong question; so is one that asks
for a paper of its own ("Something else: is there a paper on X, and what is its dataset?"), whose "its" is that
paper. The exception is a short question every word of which the paper under discussion uses ("What is the main
risk?" after the learnware paper), or whose other words no paper could be about (a typo no abstract writes, a word a
third of them write: "how much cheaper than startng over?"): it can only mean that paper. So does one whose words are
no other paper's subject, written in no title or opening sentence of the papers it finds alone ("zero-shot results?"
after SOLAR, though the object-discovery paper mentions zero-shot generalisation), unless it opens "what about ...".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import question as Q
from .support import markers_in
from .text import MARKER, split_sentences, tokens, written_in

Message = dict[str, Any]


@dataclass(frozen=True)
class Focus:
    """What a question is about once the conversation is read."""

    searched: str  # the query retrieval runs on
    papers: tuple[str, ...] = ()  # paper ids the question points at (empty: not pinned to earlier papers)
    described: bool = False  # the papers are candidates for one the question describes, not all of them
    side_by_side: bool = False  # the papers are compared: all of them, whatever the question describes
    in_order: bool = False  # the user gave the papers in this order ("AREW and the rollout-shaping paper"): keep it
    past: int = 0  # "the second one" when the last answer cited fewer papers: how many it cited


def _named_before(question: str, history: Sequence[Message]) -> bool:
    """Does the question speak of "the <noun>" the user's previous question named? "and what must the description
    never give away?" after "... every uploaded model comes with a published description ..." -> True."""
    last_user = next((m.get("content", "") for m in reversed(history) if m.get("role") == "user"), "")
    return bool(Q.definite_nouns(question) & set(tokens(last_user)))


def previous_citations(history: Sequence[Message], locate: Callable[[str], str | None],
                       at_least: int = 1) -> list[str]:
    """Paper ids the last assistant turn cited, in the order it first cited them; when that is fewer than
    `at_least`, the turns before it add theirs, the latest first ("How do the two differ?" after two answers on one
    paper each means those two papers)."""
    papers: list[str] = []
    for turn in (m for m in reversed(history) if m.get("role") == "assistant"):
        papers += [p for p in _cited(turn, locate) if p not in papers]
        if len(papers) >= at_least:
            break
    return papers


def latest_list(history: Sequence[Message], locate: Callable[[str], str | None]) -> list[str]:
    """The papers of the latest assistant turn that cited two or more, in citation order ([] when none did)."""
    for turn in (m for m in reversed(history) if m.get("role") == "assistant"):
        papers = _cited(turn, locate)
        if len(papers) >= 2:
            return papers
    return []


def _cited(last: Message, locate: Callable[[str], str | None]) -> list[str]:
    """Paper ids one assistant turn cited, in the order it first cited them."""
    kept = last.get("paper_ids")
    if isinstance(kept, list | tuple) and all(isinstance(p, str) for p in kept):
        return list(dict.fromkeys(kept))
    text = str(last.get("content") or "")
    pieces = [s for line in text.splitlines() for s in split_sentences(line)]
    found: dict[int, str] = {}
    for piece in pieces:
        for n in markers_in(piece):
            if n in found:
                continue
            plain = MARKER.sub(" ", piece).strip(" -*•:")
            paper = locate(plain) if len(plain.split()) >= 2 else None
            if paper:
                found[n] = paper
    return list(dict.fromkeys(found[n] for n in sorted(found, key=lambda n: _first_index(text, n))))


def _first_index(text: str, n: int) -> int:
    m = re.search(rf"\[(?:\d+\s*[,;]\s*)*{n}(?:\s*[,;]\s*\d+)*\]", text)
    return m.start() if m else len(text)


def resolve(question: str, intent: Q.Question, history: Sequence[Message],
            locate: Callable[[str], str | None], first: Callable[[str], str | None] = lambda text: None,
            words: Callable[[str], set[str]] = lambda paper_id: set(),
            named: Callable[[str], str | None] = lambda name: None,
            topical: Callable[[str], bool] = lambda word: True,
            close: Callable[[str], bool] = lambda text: True,
            titled: Callable[[str, set[str], str], bool] = lambda text, words, paper_id: True) -> Focus:
    """The query to search and the earlier papers the question points at; `first` gives the paper a text alone
    retrieves first, a candidate for a question that describes its paper; `words` a paper's words; `named` the paper
    a name few papers use belongs to; `topical` whether a word could name what a paper is about; `close` whether a
    text alone retrieves a paper close enough to answer from; `titled` whether a paper other than the given one, among
    the first few a text alone retrieves, has the given words in its title or opening sentence (they are its
    subject). A comparison naming two papers ("SOLAR vs NAEViT", "How does SOLAR differ from NAEViT?"), or a
    question about two papers at once ("what do AREW and the rollout-shaping paper each report?",
    `question.paper_pair`), sets both side by side, with or without history.

    e.g. ("And how large were its gains?", after an answer citing [1] AREW) -> Focus(searched="And how large
    were its gains?", papers=(AREW's id,)); a question without "it/its/they/the second one" -> Focus(question),
    unless it is short and every word it names is in the paper under discussion ("What is the main risk?" after the
    learnware paper, which says "risk"), or the paper writes one of them and alone the question finds no paper close
    enough ("any comparison with human experts?" after STT-LLM, whose abstract says "expert assessments": searched
    alone, it was declined).
    """
    if intent.compares:
        # the papers it names ("SOLAR", "R2G", "Opt-Miner": a rare word written as a name), even with "they" ("AREW
        # versus Opt-Miner: how do they ...?") or a description ("the GNN link-stealing paper"); a paper described by
        # what it does ("the method that ..., by comparing small pieces of the pictures, ...") names none of its own
        papers = [next((p for name in Q.names_in(part) if (p := named(name))), None)
                  for part in Q.compared_parts(question)]
        both = tuple(dict.fromkeys(p for p in papers if p))
        if len(both) >= 2:
            return Focus(question, both, side_by_side=True)
    pair = Q.paper_pair(question) if not intent.summary else None
    if pair:
        # "what gains do AREW and the rollout-shaping paper each report?": each reference's paper, by its name or as
        # the reference alone retrieves it first, side by side in the order the question gives them
        found = [next((p for name in Q.names_in(part) if (p := named(name))), None) or first(part) for part in pair]
        if found[0] and found[1] and found[0] != found[1]:
            return Focus(question, (found[0], found[1]), side_by_side=True, in_order=True)
    if not history or intent.new_subject or len(question.split()) > 30:
        return Focus(question)
    side = Q.other_side(question) if intent.compares and not intent.refers_back else ""
    if side:
        # "compare w/ the disentanglement paper", "compare with NAEViT": the paper under discussion is the other side
        # ("versus which existing designs?" asks what it is set against, and names no other paper).
        cited = previous_citations(history, locate)
        other = first(side)
        if len(cited) == 1 and other and other != cited[0]:
            return Focus(question, (cited[0], other), side_by_side=True)
    if not intent.refers_back:
        asked = Q.named_words(question)
        if intent.continues and intent.kind == "factoid" and _named_before(question, history):
            # "and what must the description never give away?" after a question on "a published description": the
            # thing the user named is in the paper under discussion.
            cited = previous_citations(history, locate)
            if cited:
                return Focus(question, (cited[0],))
        if intent.summary or not asked or not Q.short(question):
            return Focus(question)
        cited = previous_citations(history, locate)
        written = words(cited[0]) if cited else set()
        # (a word no abstract writes, a typo among them, or one a third of them write names no other paper: "how much
        # cheaper than startng over?")
        # ... and a short question whose words are no other paper's subject either: "zero-shot results?" after
        # SOLAR, "hardware needed?" after SERA ask it of the paper under discussion, though another paper writes
        # them in passing; "contrastive learning?" is another paper's subject, and "what about robotics?" changes it
        other = next((p for name in Q.names_in(question) if (p := named(name)) and p != cited[0]), None) \
            if cited else None
        on_it = cited and not other and (all(written_in(w, written) or not topical(w) for w in asked)
                           or (any(written_in(w, written) for w in asked) and not close(question))
                           or not Q.what_about(question)
                           and not titled(question, {w for w in asked if topical(w)}, cited[0]))
        return Focus(question, (cited[0],)) if on_it else Focus(question)
    name = Q.leading_name(question)
    lead = named(name) if name else None
    if lead:  # "and SERA, what training does it use instead of RL?": "it" is the paper the question opens with
        return Focus(question, (lead,))
    together = Q.taken_together(question)
    # "compare them" after two answers on one paper each compares those two (after a listing, all it listed).
    several = 2 if intent.compares and Q.points_at_several(question) else 1
    cited = previous_citations(history, locate, at_least=together or several)
    if len(cited) < 2 and Q.by_position(question):
        # "And the first one?" after a drill-down into the second paper of a list: the places are the list's.
        cited = latest_list(history, locate) or cited
    if not cited and intent.described:  # "for the one sneaking a backdoor into ..., where ...?" says which itself
        return Focus(question)
    if not cited:  # nothing was cited before (an abstention): the previous question says what "it" was
        last_user = next((m["content"] for m in reversed(history) if m.get("role") == "user"), "")
        return Focus(f"{question} (previous question: {last_user[:300]})" if last_user else question)
    if intent.selects and intent.compares and together >= 2 and len(cited) >= together:
        # "which of these two is cheaper to run?" weighs the two: side by side, each with what it says on that (not
        # "which of the two has released code?", which picks one out: below)
        return Focus(question, tuple(cited[:together]), side_by_side=True)
    if intent.selects and len(cited) > 1:  # "Which of them ...?": one of those, never a paper the question alone
        return Focus(question, tuple(cited), described=True)  # would retrieve
    # ... unless the list held one paper: "which of them has robots in it?" after a listing that found one is
    # answered by that paper or the one the description finds, whichever the description fits (below)
    describes = intent.described or intent.selects
    # ("... differ from the paper on X? both lean on orthogonality right": "both" is the two being compared, when the
    # last answer cited one)
    # (what it is compared with is a paper: named, "the ... paper/one/work", or one of "the two"; "what does it get by
    # without, compared with the usual alignment recipes?" compares it with common practice, not with a paper)
    if intent.compares and (not together or len(cited) < together) and \
            Q.names_another(question, one_cited=len(cited) == 1) and \
            (Q.points_at_several(question) or Q.speaks_of_a_paper(question)
             or any(named(name) for name in Q.names_in(question))):
        # "How does it differ from NAEViT?", "Compare it with the learnware paper.": the paper pointed at and the one
        # the question names, side by side (two pinned papers not told apart are a summary of both).
        base = tuple(cited[i] for i in Q.pointed_at(question, len(cited)))
        other = first(question)
        if other in base:  # the question's words found the paper it points at: the other one, searched alone
            other = first(" ".join(Q.compared_parts(question)[1:]))
        if len(base) == 1 and other and other not in base:
            return Focus(question, base + (other,), side_by_side=True)
    if describes:
        picked = tuple(cited)
    elif together >= 2 and len(cited) >= 2:
        picked = tuple(cited[:together])
    else:
        picked = tuple(cited[i] for i in Q.pointed_at(question, len(cited)))
        if not picked and Q.by_position(question):  # "the second one" after an answer citing one paper
            return Focus(question, past=len(cited))
    # "the few-shot one", "For the X agent, ... it ...?"; not "the first one — what loss do they propose?", whose
    # paper is the one in that place
    if describes or (intent.ask and len(picked) == 1 and not Q.by_position(question)):
        # the paper the question retrieves first, and the one its description alone does ("ok and the conjoint
        # experiments one — what real data do they test on?": "real data" found the synthetic-data paper discussed)
        description = question.replace(intent.ask, " ") if intent.ask else ""
        extra = tuple(p for p in dict.fromkeys((first(question), first(description) if tokens(description) else None))
                      if p and p not in picked)
        if extra:
            return Focus(question, picked + extra, described=True)
    return Focus(question, picked, described=describes)
