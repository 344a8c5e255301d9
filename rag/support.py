"""Does the cited evidence state what an answer sentence says? Judged on content, not on style.

A sentence is supported by source n when
- every number in it occurs in paper n, and few of its content words are foreign to paper n (a tiny model's typical
  failure is a copied clause that ends in invented content), and
- it says what paper n says: either its embedding is close to one of paper n's sentences (a paraphrase), or all of
  its content words and numbers are found in one sentence of paper n (a terse answer: "7.08 points [1]" is
  supported by "... outperforms the strongest supervised VLM by 7.08 points ...", although its embedding is far
  from that sentence's).
A sentence that only restates the question (no number, name or content word the question did not already hold)
is not an answer, whatever it cites. A sentence supported by another given source than the one it
cites is re-pointed to it. The thresholds are settings (`config.Answering.support_*`). This module does not choose
which sentences the user sees; `compose` does.
"""

from __future__ import annotations

import re

import numpy as np

from .config import Answering
from .embed import Embedder
from .orders import addressed
from .records import CANNOT_ANSWER, Evidence, SentenceCheck
from .sanitize import sanitize_source
from .text import COUNTED_UNITS, MARKER, search_form, split_sentences, stem, tokens

NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Words that carry no content of their own in an answer sentence ("The paper shows that ...").
_FILLER = frozenset("approach approaches method methods framework model models propose proposes proposed introduce "
                    "introduces introduced present presents presented results result authors author achieve achieves "
                    "achieved reported reports report find finds found new novel one ones two main key answer named "
                    "called used uses use paper papers".split())


_CUT_TITLE = re.compile(r"(?<=…)\s+(?=[A-Z])")
# A marker the model wrote without a full stop, then a new sentence: "... 40% [1] In real-world Few-Shot Learning ...".
_MARKER_THEN_SENTENCE = re.compile(r"\[\d+(?:\s*[,;]\s*\d+)*\](?=\s+[A-Z][a-z]+\s)")


def _after_markers(part: str) -> list[str]:
    """`part` split after each marker that ends a sentence without a full stop; a marker opening it stays ("[1] X.")."""
    out, start = [], 0
    for m in _MARKER_THEN_SENTENCE.finditer(part):
        if part[start:m.start()].strip():
            out.append(part[start:m.end()].strip())
            start = m.end()
    return out + [part[start:].strip()]


_LEAD_MARKER = re.compile(r"^\s*(\[\d+(?:\s*[,;]\s*\d+)*\])\s*(\w.*)$", re.DOTALL)


def markers_in(text: str) -> list[int]:
    return [int(x) for m in MARKER.finditer(text) for x in re.split(r"\s*[,;]\s*", m.group(1))]


def answer_sentences(text: str) -> list[str]:
    """Sentences of the answer, a marker-only fragment ("[1].") attached to the sentence before it; a marker followed
    by a new sentence ends the one it cites ("... 40% [1] In real-world ..." is two)."""
    out: list[str] = []
    # A title cut with an ellipsis, copied in front of a sentence, ends where the ellipsis does: "It is known that
    # RandomShuffle, the without replacement version of Stochastic Gradient Descent… However, it requires ...".
    for s in (piece for whole in split_sentences(text) for part in _CUT_TITLE.split(whole)
              for piece in _after_markers(part) if piece.strip()):
        lead = _LEAD_MARKER.match(s)
        if lead and not MARKER.search(lead.group(2)):  # "[1] X." -> "X [1].": the marker cites what follows it
            s = f"{lead.group(2).rstrip(' .')} {lead.group(1)}."
        if out and not MARKER.sub("", s).strip(" .;,"):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def content_words(text: str) -> set[str]:
    return {t for t in tokens(MARKER.sub(" ", text)) if t not in _FILLER}


def numbers_in(text: str) -> list[str]:
    return NUMBER.findall(search_form(MARKER.sub(" ", text)))


# A number standing as a quantity: not inside a name ("R2G", "Qwen2.5", "Devstral-Small-2"), a longer number ("2026",
# "0.25") or an exponent or index ("SAH^2", "ε^(2+o(1))", "x_2").
_NOT_QUANTITY_BEFORE = r"(?<![\w.^_])(?<![A-Za-z]-)(?<!\^\()(?<!\^\{)(?<!_\{)"


def _free(number: str) -> re.Pattern[str]:
    # nor the first half of a compound ("2-wise independent", "k-wise"): "The speedup is 2" is not stated by it
    return re.compile(_NOT_QUANTITY_BEFORE + re.escape(number)
                      + r"(?!\.?\d)(?!-(?!(?:" + COUNTED_UNITS + r")\b)[A-Za-z])")


_PERCENT = re.compile(r"\s?(?:%|percent\b|per cent\b)", re.IGNORECASE)


def numbers_stated(sentence: str, text: str) -> bool:
    """Every number of `sentence` occurs in `text` the way the sentence uses it: a quantity ("is 2", "by 7.08
    points") only as a quantity, so "The sample complexity of RHI is 2" is not stated by "O(SAH^2 ε^(2+o(1)))";
    a number inside a name ("R2G") wherever the text holds it."""
    said, form = search_form(MARKER.sub(" ", sentence)), search_form(text)
    for m in NUMBER.finditer(said):
        free = _free(m.group())
        if not (free.search(form) if free.match(said, m.start()) else m.group() in form):
            return False
        # A percentage is stated only as one: "23%" is not "across 23 tasks".
        if _PERCENT.match(said, m.end()) and not re.search(free.pattern + _PERCENT.pattern, form):
            return False
    return True


def restates(sentence: str, question: str) -> bool:
    """The sentence adds nothing the question asked for: no content word or number the question lacks.

    A yes/no question is answered by an affirmation or a negation in its own words, so nothing restates it.
    e.g. restates("SOLAR is evaluated on a benchmark [1].", "On which benchmark is SOLAR evaluated?") -> True;
    restates("SOLAR is evaluated on M-BEIR [1].", ...) -> False
    """
    if re.match(r"^\s*(does|do|did|is|are|was|were|can|could|has|have|will|would)\b", question, re.IGNORECASE):
        return False
    asked = {stem(w) for w in content_words(question)}
    new = {w for w in content_words(sentence) if stem(w) not in asked}
    return not new and not set(numbers_in(sentence)) - set(numbers_in(question))


def short_name(title: str) -> str:
    """The name a title opens with ("SERA: Soft-Verified Efficient Repository Agents" -> "SERA"); "" for a title
    without one."""
    head, colon, _ = title.partition(":")
    return head.strip() if colon and 0 < len(head.split()) <= 3 else ""


# A name as papers write one: a capital after the first letter or a digit ("STT-LLM", "LiDAR", "GPT-4o", "R2G").
_NAMED = re.compile(r"\b[A-Za-z][\w-]*?(?:[A-Z]|\d)[\w-]*")


def invented_names(sentence: str, known: set[str]) -> list[str]:
    """The names in the sentence that `known` (tokens of the paper and the question) never writes: "We evaluate
    STT-LML on ..." when the paper names STT-LLM. A model's misspelt or invented name is never grounded, however few
    the sentence's other foreign words."""
    def written(token: str) -> bool:  # "LLMs" for "LLM", and back
        return token in known or token.removesuffix("s") in known or token + "s" in known
    return [m.group() for m in _NAMED.finditer(MARKER.sub(" ", sentence))
            if not all(written(t) for t in tokens(m.group(), drop_stopwords=False))]


def grounded(sentence: str, paper_text: str, policy: Answering, question: str = "") -> bool:
    """Every number of the sentence occurs in the paper, no name is foreign to it, and few of its other words are
    (nor to `question`: a word the question holds is restated, not invented)."""
    if not numbers_stated(sentence, paper_text):
        return False
    words = set(tokens(MARKER.sub(" ", sentence)))
    if not words:
        return True
    known = set(tokens(paper_text, drop_stopwords=False)) | set(tokens(question, drop_stopwords=False))
    if invented_names(sentence, known):
        return False
    return len(words - known) / len(words) <= policy.support_max_novelty


def stated_in(sentence: str, paper_sentences: list[str], policy: Answering, terse: bool = True,
              besides: str = "") -> bool:
    """A (terse) sentence whose content words and numbers are (nearly) all in one sentence of the paper; with
    `besides` (the question), only its words the question does not hold count: "The 4D LiDAR generator uses a neural
    contourlet representation [2]." is stated by "... we introduce a neural contourlet representation ..."."""
    words = content_words(sentence)
    if besides:
        asked = {stem(w) for w in content_words(besides)}
        words = {w for w in words if stem(w) not in asked}
    nums = numbers_in(sentence)
    if not words and not nums:
        return False
    if terse and len(words) > policy.support_terse_words:
        return False
    cover = policy.support_terse_cover if terse else policy.support_stated_cover
    for s in paper_sentences:
        if not numbers_stated(sentence, s):
            continue
        have = set(tokens(s))
        if not words or len(words & have) / len(words) >= cover:
            return True
    return False


def _shingles(text: str, n: int = 6) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


# Words a finished sentence does not end on: "We study offline policy optimization over ... from [1]." broke off.
# (Particles that may end one, "the data they were trained on", are not among them.)
_DANGLING = frozenset("a an the and or but nor of from than whose via such".split())
# Two-word endings that need an object ("... explicit reasoning based on."). A lone preposition may close a relative
# clause ("the data they were trained on", "the VLM it is compared with"), so only these count.
_DANGLING_PAIRS = frozenset({"based on", "due to", "according to", "such as", "thanks to"})


# A sentence saying the sources hold no such paper or statement: "No, there is no paper on sustainable diet
# recommendation [1].", "The abstract does not mention the dataset [1]." Citing a source for it contradicts itself:
# the source cited is the one retrieval found on the subject.
_DENIES = re.compile(r"\b(?:there (?:is|are|was|were) no|no|not any|none of the)\s+(?:such\s+)?(?:papers?|works?|"
                     r"stud(?:y|ies)|research|articles?|abstracts?|mention|information|evidence|details?)\b|"
                     r"\b(?:does|do|did) not (?:mention|discuss|address|provide|state|specify|say|describe|exist)\b|"
                     r"\b(?:is|are|was|were) not (?:mentioned|discussed|addressed|provided|stated|specified|"
                     r"described|given)\b", re.IGNORECASE)


# "No, no.", "Yes [1].", "No, the answer is no.": a polarity and nothing the evidence could confirm (the default model
# opened every yes/no answer of a blind batch's dev half with "No", "No, FoundObj's agent is not trained with RL" too).
_BARE_POLARITY = re.compile(r"^\W*(?:yes|no)\b(?:\W*(?:yes|no|not|the|answer|is|it|does|do)\b)*\W*$", re.IGNORECASE)


# A negation in an answer sentence ("NITP cannot be used with MoE models"), and the wider set that lets a source state
# one ("without retraining", "label-free", "fails to").
_NEGATES = re.compile(r"\b(?:not|no|never|cannot|neither|nor|none)\b|n[’']t\b", re.IGNORECASE)
_POLARITY = re.compile(r"^\W*(?:yes|no)\b\W*", re.IGNORECASE)  # the answer's polarity, judged with `_BARE_POLARITY`
_NOT_ONLY = re.compile(r"\bnot (?:only|just|merely)\b", re.IGNORECASE)  # "not only X but also Y" negates nothing
_STATES_NEGATION = re.compile(_NEGATES.pattern + r"|\b(?:without|lacks?|lacking|fails?|failing|unable|absence|"
                              r"free|rather than|instead of|only)\b", re.IGNORECASE)


def negates_unstated(sentence: str, closest: str) -> bool:
    """Does the sentence negate where the source sentence closest to it states no negation of any kind? "No, NITP
    cannot be used with MoE models [1]." beside "across dense and MoE models ..., NITP consistently improves ..." does;
    "TIED needs no retraining" beside "... without retraining" does not, nor does an opening "No," alone."""
    said = _NOT_ONLY.sub(" ", _POLARITY.sub("", sentence))
    return bool(_NEGATES.search(said)) and not _STATES_NEGATION.search(closest)


def denies_sources(sentence: str, cited_text: str = "") -> bool:
    """Does the sentence say that no paper or statement on the subject exists ("No, there is no paper on ...")? Not
    when the cited text says so itself ("we find no evidence of ...")."""
    found = _DENIES.search(sentence)
    return found is not None and found.group(0).lower() not in cited_text.lower()


# "This question requires a detailed explanation of ...", "The question asks about ...": the model talking about the
# question, which no source states, however close its words come to one (the user study is not the question).
_ABOUT_QUESTION = re.compile(r"^\W*(?:(?:the )?answer to )?(?:this|the|your) question\b|^\W*you(?: are|'re)? asking\b",
                             re.IGNORECASE)


def about_the_question(sentence: str) -> bool:
    """Does the sentence speak of the question rather than of the papers ("This question is about ...")?"""
    return bool(_ABOUT_QUESTION.match(MARKER.sub(" ", sentence)))


def copies_cut_title(sentence: str, title: str) -> bool:
    """Is the sentence a paper's title cut short, copied whole without its ellipsis ("AREW: a simple yet effective
    Advantage Reweighting method that uses [1]." of the title "AREW: ... method that uses…")? It breaks off where
    the title was cut."""
    if not title.endswith("…"):
        return False
    said = re.sub(r"\s+", " ", MARKER.sub(" ", sentence)).strip(" .!?").lower()
    return bool(said) and said == re.sub(r"\s+", " ", title.rstrip("…")).strip().lower()


def unfinished(sentence: str) -> bool:
    """Does the sentence break off: cut with an ellipsis, ending on a colon or inside a hyphenated word, or its last
    word an article, a conjunction or a preposition that needs its object ("... action spaces from [1].", "...
    reasoning based on.")?"""
    text = MARKER.sub(" ", sentence).strip()
    if re.search(r"(?:\.\.\.|…|:)\s*[.!?]?$", text):  # "... Stochastic Gradient Descent… [1]." too
        return True
    if re.search(r"\w-\s*[.!?]?$", text):  # a word cut at its hyphen: "To enable efficient on- [1]."
        return True
    plain = text.rstrip(".!? ")
    if not plain:
        return False
    words = [w.strip("\"'”’),;").lower() for w in plain.split()[-2:]]
    return words[-1] in _DANGLING or " ".join(words) in _DANGLING_PAIRS


_HEADER_LINE = re.compile(r"^\s*\[(\d+)\]\s*(.+?)\s*$")


def source_header(block: Evidence) -> str:
    """The line heading an evidence block in the prompt ("[1] RHI: Robust Halpern Iteration"); a model may copy it."""
    return f"[{block.n}] {sanitize_source(block.hit.paper.title)}"


def _without_headers(text: str, by_n: dict[int, Evidence]) -> str:
    """The model's text without the lines copying an evidence block's header, "[1] RHI: Robust Halpern Iteration",
    above a sentence of its own: with no full stop, the line would be glued to the sentence after it as one sentence
    that the cited paper supports. A header alone on the last line may be the answer ("Which paper ...?")."""
    def header(line: str) -> bool:
        m = _HEADER_LINE.match(line)
        block = by_n.get(int(m.group(1))) if m else None
        if not m or block is None or len(m.group(2)) < 3:
            return False
        copied = f"[{block.n}] {m.group(2).rstrip(' .…')}"
        return source_header(block).lower().startswith(copied.lower())
    lines = text.split("\n")
    return "\n".join(line for i, line in enumerate(lines)
                     if not (header(line) and any(x.strip() for x in lines[i + 1:])))


def check(text: str, question: str, blocks: list[Evidence], embedder: Embedder,
          paper_sentences: dict[str, tuple[list[str], np.ndarray]],
          policy: Answering = Answering(), instructions: str = "") -> tuple[list[str], list[SentenceCheck]]:
    """Each answer sentence (citations re-pointed where another source supports it) and its check. A sentence that
    repeats six words in a row of `instructions` (the system prompt) is the model reciting its rules, not an answer."""
    by_n = {b.n: b for b in blocks}
    sentences = answer_sentences(_without_headers(text, by_n))
    plain = [MARKER.sub("", s).strip() for s in sentences]
    if not sentences:
        return [], []
    vecs = embedder.embed(plain)
    out: list[str] = []
    checks: list[SentenceCheck] = []
    rules = _shingles(instructions)
    besides = question if policy.judge_beyond_question == "on" else ""
    for s, p, v in zip(sentences, plain, vecs):
        cited = [n for n in markers_in(s) if n in by_n]
        if CANNOT_ANSWER.lower().rstrip(".") in p.lower():
            continue
        unanswering = "a bare yes or no, which no source states" if _BARE_POLARITY.match(p) else \
            "speaks of the question, not of the papers" if about_the_question(p) else ""
        if unanswering:
            checks.append(SentenceCheck(sentence=MARKER.sub("", s).strip(), cites=tuple(markers_in(s)),
                                        supported=False, similarity=0.0, note=unanswering))
            out.append(s)
            continue
        support: dict[int, float] = {}
        closest: dict[int, str] = {}  # paper n's sentence nearest to this one
        for n, b in by_n.items():
            sents, svecs = paper_sentences.get(b.hit.paper.paper_id, ([], np.zeros((0, len(v)))))
            # An order planted in the paper supports nothing: copying it is obeying it, not citing a finding.
            keep = [i for i, x in enumerate(sents) if not addressed(x)]
            if len(keep) < len(sents):
                sents, svecs = [sents[i] for i in keep], svecs[keep]
            if not grounded(p, b.hit.paper.abstract + " " + b.hit.paper.title, policy, besides):
                continue
            sims = svecs @ v
            sim = float(np.max(sims)) if len(sents) else 0.0
            # the one sentence a negation must be stated in (the two closest let an unrelated "no" in)
            closest[n] = sents[int(np.argmax(sims))] if len(sents) else ""
            if sim >= policy.support_similarity or stated_in(p, sents + [b.hit.paper.title], policy,
                                                             besides=besides):
                support[n] = max(sim, policy.support_similarity)  # stated outright counts as the threshold
            else:
                support[n] = sim
        ok = [n for n in cited if support.get(n, 0.0) >= policy.support_similarity]
        best = max(support, key=lambda n: support[n], default=None)
        if not ok and best is not None and support[best] >= policy.support_similarity:
            # Cited the wrong source or none: point at the source that supports it.
            s = re.sub(r"\s*" + MARKER.pattern, "", s).rstrip()
            end = s[-1] if s and s[-1] in ".!?" else ""
            s = f"{s[:-1] if end else s} [{best}]{end or '.'}"
            ok = [best]
        note = ""
        if ok and addressed(p):  # copied from a planted order: never an answer, whatever the source says
            ok, note = [], "an instruction, not a finding"
        elif ok and rules & _shingles(p):
            ok, note = [], "repeats the instructions"
        elif not ok:
            note = "not stated by the cited source" if support else "a number or words the sources do not give"
        elif denies_sources(p, " ".join(by_n[n].hit.paper.abstract for n in ok)):
            ok, note = [], "says the sources do not hold what it cites them for"
        elif all(negates_unstated(p, closest.get(n, "")) for n in ok):
            ok, note = [], "negates what its source states"
        elif restates(p, question):
            ok, note = [], "restates the question"
        elif unfinished(p) or any(copies_cut_title(p, by_n[n].hit.paper.title) for n in ok):
            ok, note = [], "breaks off unfinished"
        sim = max((support.get(n, 0.0) for n in (ok or cited or list(support))), default=0.0)
        stated = bool(ok) and any(
            stated_in(p, [x for x in paper_sentences.get(by_n[n].hit.paper.paper_id, ([], None))[0]
                          if not addressed(x)], policy, terse=False,
                      besides=besides)
            for n in ok)
        checks.append(SentenceCheck(sentence=MARKER.sub("", s).strip(), cites=tuple(markers_in(s)),
                                    supported=bool(ok), similarity=round(sim, 4), note=note, stated=stated))
        out.append(s)
    return out, checks
