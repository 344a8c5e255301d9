"""What a question asks for, read once: its kind and the kind of answer it wants.

`read(question)` returns a frozen `Intent` that evidence selection, the answer rules and the pipeline read instead of
matching the question text again each on their own. The rules are plain patterns over English questions:

- kind: "summary" ("which papers ...", "summarize ...", "what work is there on ..."), "which" (one paper wanted:
  "which paper proposes ...?"), else "factoid";
- wants: "number" ("how much / how many / by what factor ..."), "expansion" ("what does X stand for"), "name"
  ("which dataset / benchmark / model ..."), "yesno" ("does / is / can ..."), or "" when nothing narrower is asked;
- refers_back: the question points at something said before ("it", "its", "they", "that paper", "the second one").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Only as the question's frame: "In the work on RL that ..., which ...?" asks about one paper.
SUMMARY = re.compile(r"^\s*(?:(?:and|also|so|then|now|ok|okay)\b[,\s]*)?(please\s+)?"
                     r"(summari[sz]e|give (me )?an overview|survey|list (the |all )?(papers|work)|"
                     r"(which|what) (papers|studies|works|articles|research)\b|what work|(are there|is there) (any )?"
                     r"(papers|work|research) (on|about)|papers (on|about))", re.IGNORECASE)
# "Which paper/work ...?" wants one paper named.
WHICH = re.compile(r"\b(which|what) (paper|work|study|article|method|approach)\b|\bis there (a |any )?(paper|work)",
                   re.IGNORECASE)
WANTS_NUMBER = re.compile(r"\b(how (much|many|large|big|fast|long|often|far|small)|by how|(what|which) (percentage|"
                          r"fraction|proportion|share|number|ratio|rate|factor|margin|size|accuracy|speed-?up|"
                          r"improvement|gain|reduction|increase)|"
                          r"by what|what (is|was) the (size|number|count))\b", re.IGNORECASE)
WANTS_EXPANSION = re.compile(r"\b(stand for|expan|acronym|abbreviat)", re.IGNORECASE)
WANTS_NAME = re.compile(r"\b(which|what) (\w+ ){0,2}(dataset|datasets|benchmark|benchmarks|model|models|families|"
                        r"line|method|baseline|baselines|metric|tasks?|collections?|architectures?)\b|\bname",
                        re.IGNORECASE)
YESNO = re.compile(r"^\s*(does|do|did|is|are|was|were|can|could|will|would|has|have|should)\b", re.IGNORECASE)
# Words that point back at what was said before. "the method" / "the paper" count only with a determiner that
# refers back ("that", "this", "the same"); "the second one", "the first two", "both", "them" count always.
_BACK = re.compile(r"\b(it|its|it's|they|their|them|theirs|both|either|these|those|this (paper|work|method|"
                   r"approach|model|one)|that (paper|work|method|approach|model|one)|the (same|former|latter) ?\w*|"
                   r"the (first|second|third|fourth|fifth|last|other) (one|two|three|paper|papers|work|method)s?|"
                   r"the (first|last) (two|three)|the (paper|method|approach|framework|model)|"
                   r"compare them|each of them|one of them)\b", re.IGNORECASE)
_CONTINUES = re.compile(r"^\s*(and|also|what about|how about|so|then)\b", re.IGNORECASE)
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4}
_ORDINAL = re.compile(r"\b(?:the )?(first|second|third|fourth|fifth|last)(?: (one|paper|work|method|approach))?\b",
                      re.IGNORECASE)
_FIRST_N = re.compile(r"\b(?:the )?(first|last|top) (two|three|2|3)\b", re.IGNORECASE)
# "the few-shot one", "the database paper": an earlier paper named by what it is about (not "the second one").
_DESCRIBED = re.compile(r"\bthe (?!(?:first|second|third|fourth|fifth|last|other|same|next|previous)\b)"
                        r"[\w\-]+(?: [\w\-]+)? (?:one|paper)\b", re.IGNORECASE)
_COUNTS = {"two": 2, "three": 3, "2": 2, "3": 3}


@dataclass(frozen=True)
class Intent:
    text: str
    kind: str  # "summary", "which" or "factoid"
    wants: str  # "number", "expansion", "name", "yesno" or ""
    refers_back: bool  # "it", "its", "that paper", "the second one", "compare them" ...
    described: bool  # names an earlier paper by what it is about: "the few-shot one", "the clinical paper"
    continues: bool  # opens like a continuation ("and ...", "what about ...")

    @property
    def summary(self) -> bool:
        return self.kind == "summary"

    @property
    def which(self) -> bool:
        return self.kind == "which"


def read(question: str) -> Intent:
    """e.g. read("By how much does it cut leakage?") -> Intent(kind="factoid", wants="number", refers_back=True)"""
    if SUMMARY.search(question):
        kind = "summary"
    elif WHICH.search(question):
        kind = "which"
    else:
        kind = "factoid"
    if WANTS_NUMBER.search(question):
        wants = "number"
    elif WANTS_EXPANSION.search(question):
        wants = "expansion"
    elif WANTS_NAME.search(question):
        wants = "name"
    elif YESNO.search(question):
        wants = "yesno"
    else:
        wants = ""
    described = bool(_DESCRIBED.search(question))
    return Intent(text=question, kind=kind, wants=wants, refers_back=bool(_BACK.search(question)) or described,
                  described=described, continues=bool(_CONTINUES.search(question)))


def pointed_at(question: str, count: int) -> list[int]:
    """Which of the `count` previously cited papers (0-based, in citation order) the question points at.

    "the second one" -> [1]; "the first two" -> [0, 1]; "the last one" -> [count - 1]; "it", "its", "that paper"
    -> [0]; "they", "them", "both", "compare them" -> all. e.g. pointed_at("What about the second one?", 3) -> [1]
    """
    if count <= 0:
        return []
    m = _FIRST_N.search(question)
    if m:
        n = min(_COUNTS[m.group(2).lower()], count)
        return list(range(count - n, count)) if m.group(1).lower() == "last" else list(range(n))
    m = _ORDINAL.search(question)
    if m and (m.group(2) or re.search(r"\b(paper|one|work|method)s?\b", question, re.IGNORECASE)):
        word = m.group(1).lower()
        i = count - 1 if word == "last" else _ORDINALS[word]
        return [i] if i < count else []
    if re.search(r"\b(they|their|them|theirs|both|these|those|each|either)\b", question, re.IGNORECASE):
        return list(range(count))
    return [0]
