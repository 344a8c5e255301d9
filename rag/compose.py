"""The answer the user reads: the answer first, short, every sentence cited; evidence stays in the citations.

From the checked sentences of the model's output (`support.check`), the evidence blocks and what the question asks
for (`question.Question`):

- a factoid answer is the model's supported sentences (at most three), the one holding what was asked (a number
  for "how much ...?") first; a "which paper ...?" answer opens with the paper's title;
- when none survives, or none holds what was asked, the answer is the one evidence sentence that best holds it, cut
  to the clause that holds it when the sentence is long: "SOLAR outperforms the strongest supervised VLM by 7.08
  points [1]." rather than three pasted quotes. The sentence the model drew on (sharing its numbers) is preferred;
- a summary lists every evidence paper on a line of its own (title and citation, then the clause of its best
  sentence), then at most two of the model's supported sentences citing two or more of them.

Pure functions over records and strings: no model, no embedder.
"""

from __future__ import annotations

import re

from .config import Answering
from .evidence import answers_why, noun_kin, poses_problem, reports_finding
from .orders import addressed
from .question import Question, compound_parts, names_in, place_asked
from .question import read as read_question
from .records import CANNOT_ANSWER, Evidence, SentenceCheck
from .sanitize import sanitize_source
from .support import numbers_in
from .symbols import stand_for
from .text import (
    MARKER,
    chosen,
    continues,
    counts,
    expansion_of,
    has_quantity,
    names_model,
    names_work,
    proposes_work,
    speaks_of_itself,
    speaks_of_others,
    split_sentences,
    states_problem,
    tells_earlier_work,
    tokens,
)

_CLAUSE_CUT = re.compile(r"(?<=[,;:])\s+|\s+[—–]\s+|\s+\((?=[^)]{40,}\))")
_LEADING = re.compile(r"^(?:and|but|while|whereas|which|thereby|so|thus|hence|moreover|furthermore|additionally|"
                      r"in addition|specifically|notably|overall|finally|however|as a result)\b[,\s]*", re.IGNORECASE)
_WORD = re.compile(r"\w+")
# "The answer is: SeL [1].", "The paper is: ..." : the frame says nothing.
_SAID = re.compile(r"^(?:-\s*)?(?:the (?:answer|paper) is(?: about)?|answer)\s*:?\s*(?=\S)", re.IGNORECASE)
# Two sentences sharing this share of their words (Jaccard) say the same thing.
_REPEATED = 0.8
_NAME_WORDS = 4  # a title's part before its colon this short is a name ("STT-LLM", "Opt-Miner"), not a phrase
# "To address this challenge, we propose ...", "Leveraging this flexibility, we ...": an opening phrase pointing back
# at a sentence a summary line omits.
_PURPOSE = re.compile(r"^(?:[^,]{0,60}?\b(?:this|these|that|those|such)\b[^,]{0,30},\s*|in this (?:paper|work),\s*|"
                      r"here,\s*)(?=we\b)", re.IGNORECASE)


def answers_asked(intent: Question, sentence: str) -> bool:
    """Does the sentence hold the kind of thing asked for? e.g. a number for "how much ...?"."""
    plain = MARKER.sub(" ", sentence)
    if intent.wants == "number":
        # "an 18-person user study" answers "how many participants ...?" though "18-person" alone is no amount.
        return has_quantity(plain) or bool(intent.unit_heads) and counts(plain, intent.unit_heads, in_words=False)
    if intent.wants == "expansion":
        return bool(re.search(r"[A-Z][a-z]+ [a-zA-Z]+", plain))
    return True


def _cite(text: str, n: int) -> str:
    text = text.strip().rstrip(" .;,:")
    return f"{text} [{n}]."


# A question about a problem, a cause, a shortcoming or earlier work: a sentence stating a problem, or what earlier
# work does, may answer it.
_ASKS_BACKGROUND = re.compile(r"\b(?:prior|existing|previous|earlier|traditional|conventional|problems?|challeng\w*|"
                              r"issues?|limitation\w*|difficult\w*|gaps?|motivat\w*|why|bottlenecks?|drawbacks?|"
                              r"weakness\w*|suffer\w*|catch|downsides?|fail\w*|wrong|struggl\w*|open question|known|"
                              r"holds? back|holding back|hinder\w*|prevents?|obstacles?|shortcomings?|falls? short|"
                              r"(?:gets?|getting|got|stands?|standing) in the way|"
                              # what the paper builds on: "the geometric horizon models it generalizes"
                              r"(?:it|they|paper|method|work)\s+"
                              r"(?:generaliz\w*|extends?|extended|buil[dt]s? (?:up)?on))\b",
                              re.IGNORECASE)


def not_the_problem(intent: Question, sentences: list[str], strict: bool = False) -> list[int]:
    """Indices of the sentences that neither state a problem ("However, it often suffers from compounding errors";
    one the paper finds itself stays: "We study ... and show that schema-derived graphs suffer from ...") nor speak
    of earlier work ("However, current methods for building assistive agents ... often encourage ..."): such a
    sentence shares the question's words but answers what the paper does only when the question asks about a
    problem or earlier work; all of them when none is left, unless `strict`."""
    # "Is there work on ... the long tail of response lengths?" describes a paper by its problem: that sentence
    # shows it is the one.
    if intent.exists or _ASKS_BACKGROUND.search(intent.text):
        return list(range(len(sentences)))
    fit = [i for i, s in enumerate(sentences)
           if not ((states_problem(s) and not speaks_of_itself(s)) or speaks_of_others(s))]
    return fit if fit or strict else list(range(len(sentences)))


def earlier_work_first(intent: Question, sentences: list[str]) -> list[int]:
    """Indices of the sentences telling what earlier work or the usual practice does, when the question asks exactly
    that ("what did people usually do before ...?"); all of them when it does not or none does."""
    if "prior" not in intent.asks:
        return list(range(len(sentences)))
    fit = [i for i, s in enumerate(sentences) if tells_earlier_work(s)]
    return fit or list(range(len(sentences)))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def with_choice(text: str, choices: tuple[str, ...]) -> str:
    """An either/or question's answer opening with the alternative its first sentence names, when it names one only:
    ("We propose a model-free algorithm, RHI [1].", ("model-based", "model-free")) -> "Model-free: We propose ..."."""
    first = split_sentences(text)[:1]
    named = chosen(choices, first[0]) if first else []
    return f"{_capital(named[0])}: {text}" if len(named) == 1 else text


_COUNT_WORDS = ("no", "one", "two", "three", "four", "five")


def past_the_list(intent: Question) -> str:
    """The reply to "the second one" when the last answer cited fewer papers: e.g. "The last answer cited only one
    paper, so there is no second one." (rather than "I cannot answer this from these abstracts.")."""
    n = intent.past
    count = _COUNT_WORDS[n] if n < len(_COUNT_WORDS) else str(n)
    return (f"The last answer cited only {count} paper{'' if n == 1 else 's'}, so there is no "
            f"{place_asked(intent.text) or 'such'} one.")


def declined(intent: Question) -> str:
    """What an abstention before any evidence is read says. For an existence question ("Is there any work on protein
    design?") it is the answer, "No", with why (the words no abstract uses, else that none is close); any other
    question cannot be answered from these abstracts."""
    if not (intent.exists or intent.exists_first):
        return CANNOT_ANSWER
    missing = intent.absent or intent.unmentioned
    if missing:
        return f"No: no abstract mentions {', '.join(missing)}."
    return "No: none of these abstracts is close to this topic."


def says_none(intent: Question, listing: bool, none_on_topic: bool) -> bool:
    """Does a listing open by saying no paper is on its topic? "Are there papers about quantum computing?" with none
    on it says no before the closest, as does a count; when no abstract uses a word of the topic, the pipeline has
    already said which ("No abstract mentions quantum; ...")."""
    return listing and none_on_topic and ("count" in intent.asks or (intent.exists and not intent.unmentioned))


def framed(text: str, intent: Question, listing: bool, listed: int, total: int = 0, saturated: bool = False,
           none_on_topic: bool = False) -> str:
    """The answer opened by what the question asks of it beyond its sentences: the alternative an either/or
    question's first sentence names ("Model-free: ..."), the size of the collection ("38 papers are indexed; in source
    order:"), or a count question's number of papers listed (`listed`, "8 papers on this topic:"; "At least" when
    every candidate was on the topic); "No paper is clearly on this topic; the closest:" when none was, for a count or
    an existence question."""
    if intent.choices and not listing:
        return with_choice(text, intent.choices)
    if intent.collection:
        return f"{total} {'paper is' if total == 1 else 'papers are'} indexed; in source order:\n{text}"
    if says_none(intent, listing, none_on_topic):
        return f"No paper is clearly on this topic; the closest:\n{text}"
    if "count" in intent.asks and listing:
        papers = "paper" if listed == 1 else "papers"
        return f"{'At least ' if saturated else ''}{listed} {papers} on this topic:\n{text}"
    return text


def clause(sentence: str, intent: Question, prefer: frozenset[str] | set[str] = frozenset(),
           knobs: Answering = Answering()) -> str:
    """The part of a long sentence that holds what was asked; a short sentence whole, and any sentence whole when what
    is asked is not a number or an expansion (a clause chosen by the question's words tends to be the one restating
    the question, not the one answering it).

    Pieces are cut at commas, semicolons, colons and dashes; a piece under five words joins its neighbour. The piece
    with the asked-for kind (a number), the most question words and the model's numbers (`prefer`) wins.
    """
    sentence = sentence.strip()
    if len(_WORD.findall(sentence)) <= knobs.long_sentence_words or intent.wants not in ("number", "expansion"):
        return sentence
    raw = [p for p in _CLAUSE_CUT.split(sentence) if p.strip()]
    pieces: list[str] = []
    for p in raw:
        if pieces and (len(_WORD.findall(p)) < 5 or len(_WORD.findall(pieces[-1])) < 5):
            pieces[-1] = f"{pieces[-1]} {p}"
        else:
            pieces.append(p)
    if len(pieces) < 2:
        return sentence
    asked = set(tokens(intent.text))

    def score(piece: str) -> float:
        s = len(asked & set(tokens(piece))) / (len(asked) or 1)
        if answers_asked(intent, piece) and intent.wants in ("number", "expansion"):
            s += 1.0
        s += 0.5 * len(prefer & set(numbers_in(piece)))
        return s

    best = max(pieces, key=score)
    best = _LEADING.sub("", best.strip()).rstrip(" ,;:")
    return _capital(best)


def _ranked(blocks: list[Evidence]) -> list[tuple[float, int, str]]:
    return sorted(((score, b.n, s) for b in blocks for s, score in zip(b.sentences, b.sentence_scores)),
                  key=lambda x: -x[0])


def best_sentence(blocks: list[Evidence], intent: Question, raw: str = "",
                  knobs: Answering = Answering()) -> tuple[int, str] | None:
    """The evidence sentence that best holds the answer: best scored in the best paper, preferring one that holds
    the asked-for kind and the numbers of the model's own (possibly unsupported) answer."""
    top_n = blocks[0].n if blocks else None  # evidence comes best paper first
    mine = [(score, n, s) for score, n, s in _ranked(blocks) if n == top_n and not addressed(s)] or \
        [(score, n, s) for score, n, s in _ranked(blocks) if n == top_n]
    if not mine:
        return None
    # "How much ...?" is answered by a sentence with a number in it, however well another restates the question.
    if intent.wants in ("number", "expansion"):
        mine = [m for m in mine if answers_asked(intent, m[2])] or mine
    # "Which base model is it built on?" likewise by a sentence naming a model ("Opt-Miner-Qwen3-8B achieves ...").
    if intent.model_asked:
        mine = [m for m in mine if names_model(m[2])] or mine
    # "Why does mixing hard and soft labels work better?" by a sentence stating a cause ("Instead, it comes from
    # reduced exposure bias"), however well another restates the finding asked about.
    if "reason" in intent.asks:
        mine = [m for m in mine if answers_why(intent, m[2]) or knobs.continuation_weight and
                answers_why(intent, continuation(blocks, m[1], m[2]))] or mine
    # Asked for a fix, the sentence stating the trouble does not answer, however many of the question's words it has.
    if "solution" in intent.asks and "reason" not in intent.asks:
        mine = [m for m in mine if not restates_trouble(m[2], (m[1],), blocks)] or mine
    mine = [mine[j] for j in not_the_problem(intent, [m[2] for m in mine])]
    mine = [mine[j] for j in earlier_work_first(intent, [m[2] for m in mine])]
    model_numbers = set(numbers_in(raw))
    # The words the model's answer adds to the question point at the sentence it drew on, even when the answer
    # itself did not survive the check (its numbers count above, once).
    added = {w for w in _stems(raw) - _stems(intent.text) - _stems(intent.searched) if not w[:1].isdigit()} \
        if knobs.model_words_bonus else set()

    def key(item: tuple[float, int, str]) -> float:
        score, _, s = item
        bonus = 0.0
        if model_numbers & set(numbers_in(s)):
            bonus += knobs.model_number_bonus
        if not answers_asked(intent, s):
            bonus -= knobs.wrong_kind_penalty
        if added:
            bonus += knobs.model_words_bonus * len(added & _stems(s)) / len(added)
        return score + bonus

    _, n, s = max(mine, key=key)
    return n, sanitize_source(s)


def continuation(blocks: list[Evidence], n: int, sentence: str) -> str:
    """The evidence sentence of paper n that comes right after `sentence` in its abstract and goes on from it
    ("... cannot be explained by closer teacher matching." -> "Instead, it comes from reduced exposure bias."),
    sanitised; "" when there is none. The two are one statement: the answer reads them as one sentence."""
    block = next((b for b in blocks if b.n == n), None)
    if block is None:
        return ""
    paper = split_sentences(block.hit.paper.abstract)
    shown = {sanitize_source(x) for x in block.sentences}
    for here, after in zip(paper, paper[1:]):
        if sanitize_source(here) == sentence and continues(after) and not addressed(after) \
                and sanitize_source(after) in shown:
            return sanitize_source(after).rstrip(" .")
    return ""


def contribution(blocks: list[Evidence], n: int) -> str:
    """The sentence of paper n's abstract where it names what it contributes ("Motivated by these findings, we propose
    PBTO, the first persistent and targeted backdoor attack in CIL."), sanitised; "" when none does (a contribution
    without a name, "we propose new algorithms that ...", names no paper, so the answer stays as it was). For a paper
    without a real title it is what identifies the paper to a "which paper ...?" question."""
    block = next((b for b in blocks if b.n == n), None)
    if block is None:
        return ""
    paper = split_sentences(block.hit.paper.abstract)
    # A name the opening sentence (the field's background) already uses is the field's ("knowledge distillation
    # (KD)"), not the paper's own.
    found = [s for s in paper[1:] if names_work(s) and names_work(s) not in paper[0] and not addressed(s)]
    return sanitize_source(found[0]).rstrip(" .") if found else ""


def title_of(blocks: list[Evidence], n: int) -> str:
    return sanitize_source(next(b.hit.paper.title for b in blocks if b.n == n)).rstrip(" .")


def _title_head(blocks: list[Evidence], n: int) -> str:
    """The name a title opens with: "STT-LLM: a structural-temporal ..." -> "STT-LLM"."""
    return head_of(title_of(blocks, n))


def head_of(title: str) -> str:
    """A title's part before its colon, as a name: "SERA: Soft-Verified ..." -> "SERA"."""
    return title.split(":")[0].rstrip("…").strip()


def names_paper(blocks: list[Evidence], n: int, knobs: Answering) -> bool:
    """Does paper n's title name it, so a which-paper answer opens with it? A title made from the abstract's opening
    sentence ("Large Language Model (LLM) agents have shown signi…") does not, unless `lead_with_opening_title`."""
    if knobs.lead_with_opening_title:
        return True
    return not next(b.hit.paper for b in blocks if b.n == n).title_is_opening


def second_sentence(blocks: list[Evidence], n: int, shown: str, knobs: Answering = Answering()) -> str:
    """The next best evidence sentence of paper n that states something the answer does not (a number or name it
    lacks, or most of its words), cited; "" when there is none. The answer's own first sentence may miss the
    fact that the second-best sentence holds."""
    have = set(tokens(shown))
    # The answer's own sentences or clauses, long enough that one inside a paper sentence means it is that sentence.
    parts = [p.rstrip(" .") for p in split_sentences(MARKER.sub(" ", shown)) if len(p.split()) >= 5]
    for _, m, s in _ranked(blocks):
        # Not the sentence (or the clause of it) the answer already shows, nor a planted order.
        if m != n or any(p and p in s for p in parts) or addressed(s):
            continue
        words = set(tokens(s))
        if words and len(words - have) / len(words) >= knobs.added_sentence_novelty:
            return _cite(_capital(sanitize_source(s)), n)
    return ""


def _words(text: str) -> set[str]:
    return set(tokens(MARKER.sub(" ", text)))


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _words(text)}


def _share(words: set[str], text: str) -> float:
    """The share of `words` that `text` holds."""
    return len(words & set(tokens(text))) / len(words) if words else 0.0


def holds_noun(text: str, noun: str) -> bool:
    """Does the text name the noun a what/which question asks for, or one abstracts write for it ("which benchmarks
    ...?" -> "... benchmarks"; "which datasets?" -> "... and other noisy benchmarks")?"""
    return bool(noun) and bool(({noun[:5]} | noun_kin(noun)) & _stems(text))


# "The transform used to get frequency features is a Global Frequency Module [1]": the subject restates the question,
# so what the sentence answers is what follows the verb.
_COPULA = re.compile(r"\s(?:is|are|was|were)\s")


def _named_by(sentence: str, noun: str) -> list[str]:
    """The words around the noun where a sentence names it: "... employs a learnable Non-Uniform Discrete Fourier
    Transform (NUDFT) to ..." -> learnable, non, uniform, discrete, fourier, nudft, ..."""
    words = tokens(MARKER.sub(" ", sentence))
    out: list[str] = []
    for i, w in enumerate(words):
        if w[:5] == noun[:5]:
            out += words[max(0, i - 4):i] + words[i + 1:i + 2]
    return out


def answered_part(sentence: str, question: str) -> str:
    """The part of a model sentence that answers: after "is/are" when the words before it are the question's own
    ("The transform used to get frequency features is a Global Frequency Module" -> "a Global Frequency Module"),
    else the whole sentence."""
    m = _COPULA.search(sentence)
    if m:
        head, asked = _stems(sentence[:m.start()]), _stems(question)
        if head and len(head & asked) / len(head) >= 0.8:
            return sentence[m.end():]
    return sentence


_NUMBER = re.compile(r"[\d.,%×x]+")
# Nouns that ask for a name without saying what kind of thing it names: "SeL [1]." answers "what is its name?".
_NAME_NOUNS = frozenset("name names title titles term terms acronym abbreviation".split())


def names_asked_noun(sentence: str, cites: tuple[int, ...], blocks: list[Evidence], intent: Question,
                     terse_words: int = 8) -> bool:
    """Does a model sentence name the noun a what/which question asks for, when the cited paper's evidence does?
    "TFMixer uses a Global Frequency Module (FFT) ..." does not answer "Which learnable transform ...?" while the
    paper's sentence "... a learnable Non-Uniform Discrete Fourier Transform (NUDFT) ..." names one, and neither does
    "The transform it uses is a Global Frequency Module", whose noun is only the question restated; nor does a bare
    "2 [1]." answer "What degree of independence ...?" beside "... 2-wise independent permutations". A terse answer
    (not a bare number) whose every word is in a sentence naming the noun names that thing ("Devstral-Small-2 [1]."
    for "which model ...?" beside "... matches Devstral-Small-2, an open-weight model"). A question whose noun no
    evidence sentence names (or that asks for a name) leaves the model's sentence as it is."""
    noun = intent.noun
    if not noun or noun in _NAME_NOUNS:
        return True
    if intent.model_asked:  # "Which base model ...?": a sentence naming one ("Qwen3-8B"), not any saying "model"
        naming = [s for b in blocks if b.n in cites for s in b.sentences if names_model(s)]
        return not naming or names_model(sentence)
    naming = [s for b in blocks if b.n in cites for s in b.sentences if holds_noun(s, noun)]
    answered = answered_part(sentence, intent.text)
    if answered != sentence:
        # The subject only restates the question: what follows must be the thing the evidence names ("a tree" for
        # "... into a tree structure"), not another ("a Global Frequency Module" for "... Fourier Transform").
        return not naming or holds_noun(answered, noun) or \
            bool(_words(answered) & {w for s in naming for w in _named_by(s, noun)} - _words(intent.text))
    if holds_noun(sentence, noun):
        return True
    words = _words(sentence)
    # A bare number names no thing ("2 [1]." is not "2-wise independent"), unless a number is what is asked for
    # ("What accuracy does it reach?" -> "93.1% [1].").
    terse = len(words) <= terse_words and (intent.wants == "number" or any(not _NUMBER.fullmatch(w) for w in words))
    return not naming or (terse and any(words <= set(tokens(s)) for s in naming))


def definition(blocks: list[Evidence], intent: Question) -> tuple[int, str, str] | None:
    """(n, name, expansion) where evidence paper n spells out the name an expansion question asks about ("What
    does GHM stand for?" -> "geometric horizon models (GHM)"; "what does H stand for?" -> "the episode horizon"), the
    best paper first; its whole abstract is read, not only the evidence sentences, and never a sentence addressed
    to an assistant."""
    if intent.wants != "expansion" or not (intent.acronym or intent.symbols):
        return None
    for b in blocks:
        text = " ".join(s for s in split_sentences(b.hit.paper.abstract) if not addressed(s))
        # A symbol of a bound ("what does H stand for?") is defined by a "where ... denote" clause.
        found = expansion_of(intent.acronym, text) if intent.acronym else stand_for(intent.symbols, text)
        if found:
            return b.n, sanitize_source(found[0]), sanitize_source(found[1])
    return None


def _holds_part(part: Question, text: str) -> bool | None:
    """Does the text hold what one part of a compound question asks: a number, a model, the noun asked for? None
    when that cannot be told from the words."""
    plain = MARKER.sub(" ", text)
    if part.wants == "number":
        return answers_asked(part, plain)
    if part.model_asked:
        return names_model(plain)
    if part.noun:
        return holds_noun(plain, part.noun)
    return None


def completed(text: str, blocks: list[Evidence], intent: Question) -> str:
    """A compound question's answer with, for each part it leaves out, the sentence of the cited paper that answers
    that part: "How many people took part in its user study, and how often did they pick the new helper?" answered
    "... an 18-person user study ... [1]." goes on with "... preferred our assistant 78% of the time [1]."."""
    parts = compound_parts(intent.text) if intent.compound else ()
    cited = [int(m.group(1)) for m in re.finditer(r"\[(\d+)\]", text)]
    block = next((b for b in blocks if cited and b.n == cited[0]), None)
    if len(parts) < 2 or block is None:
        return text
    sentences = split_sentences(block.hit.paper.abstract)
    for asked in parts:
        part = read_question(asked)
        if _holds_part(part, text) is not False:
            continue
        words = _stems(asked)
        found = [s for s in sentences if _holds_part(part, s) and s[:40] not in text]
        if found:
            best = max(found, key=lambda s: len(words & _stems(s)))
            text = f"{text} {_cite(sanitize_source(best), block.n)}"
    return text


def fallback(blocks: list[Evidence], intent: Question, raw: str = "", knobs: Answering = Answering()) -> str:
    """The evidence sentence (or its clause) that best holds the answer, then the next one that adds to it, cited;
    a which-paper question names the paper first. An expansion the evidence defines is the answer itself: "GHM
    stands for geometric horizon models [1]." A question asking more goes on with the evidence answer to the rest,
    which alone answers when it spells the name out too."""
    defined = definition(blocks, intent)
    if defined:
        n, name, words = defined
        text = _cite(f"{name} {'stand' if len(intent.symbols) > 1 else 'stands'} for {words}", n)
        if not intent.compound:
            return text
        rest = _from_evidence(blocks, intent, raw, knobs)
        # One evidence sentence spelling the name out and answering the rest answers both at once.
        return rest if words.lower() in rest.lower() else f"{text} {rest}".strip()
    return completed(_from_evidence(blocks, intent, raw, knobs), blocks, intent)


def _from_evidence(blocks: list[Evidence], intent: Question, raw: str, knobs: Answering) -> str:
    picked = best_sentence(blocks, intent, raw, knobs)
    if picked is None:
        return ""
    n, s = picked
    cut = clause(s, intent, set(numbers_in(raw)), knobs)
    if "overview" in intent.asks:
        # What the paper does, without the phrase pointing back at a sentence the answer does not show ("To address
        # this issue, we propose ..." -> "We propose ...").
        cut = _capital(_PURPOSE.sub("", cut))
    follow = continuation(blocks, n, s) if knobs.continuation_weight and cut == s else ""
    text = _cite(f"{s.rstrip(' .;:')}; {follow[:1].lower()}{follow[1:]}" if follow else cut, n)
    # A number or an expansion asked for and found, or a long first sentence (unless two things are asked):
    # complete without a second one.
    done = (intent.wants in ("number", "expansion") and answers_asked(intent, text)) or \
        (len(_WORD.findall(text)) >= knobs.complete_answer_words and not intent.compound) or \
        (knobs.noun_completes and (names_model(text) if intent.model_asked else holds_noun(text, intent.noun)))
    # A sentence read with its continuation is two of the paper's sentences already.
    more = "" if done or follow else second_sentence(blocks, n, text, knobs)
    # A which-paper question, or one asking what the method is called, is answered by the paper's name.
    named = intent.which or "method_name" in intent.asks
    if named and names_paper(blocks, n, knobs):
        # A title derived from this very sentence names the paper already: the sentence alone, not it twice.
        return text if _opens_with(text, title_of(blocks, n)) else named_first(text, blocks, n, intent)
    if named and knobs.which_opens_with_contribution:
        # Without a real title, the paper's own statement of what it contributes names it, then the sentence that
        # matched the question (when another).
        own = contribution(blocks, n)
        if own and own not in text:
            return f"{_cite(own, n)} {text}"
    # Without a real title the sentence naming the method answers, and the next one stays: "is there a paper that
    # ..., and what is its dataset called?" is answered there.
    return f"{text} {more}".strip()


def named_first(text: str, blocks: list[Evidence], n: int, intent: Question) -> str:
    """A which-paper answer with paper n's name first. Asked only which, its title is the first sentence ("TIED:
    Transformation-Inverting Energy Diffusion [1]. ..."); asked something more ("which of them is the sports one? what
    job is that analysis meant to support"), the name leads the sentence answering the rest, so that the first
    sentence answers both ("STT-LLM: In sports anti-doping, biological profiles are analyzed to support ... [1].")."""
    head = _title_head(blocks, n)
    if len(compound_parts(intent.text)) > 1 and 0 < len(head.split()) <= _NAME_WORDS:
        return text if head.lower() in next(iter(split_sentences(text)), "").lower() else f"{head}: {text}"
    return f"{_cite(title_of(blocks, n), n)} {text}"


def _opens_with(text: str, title: str) -> bool:
    """Does the text open with the title (a derived title: the sentence's start, cut with an ellipsis)?"""
    head = title.rstrip("…").strip().lower()
    return bool(head) and text.lower().startswith(head)


def restates_finding(sentence: str, cites: tuple[int, ...], blocks: list[Evidence]) -> bool:
    """Does the sentence give a number, or restate (half its words) a cited sentence reporting a finding ("Empirical
    results demonstrate that SIVS achieves 87% ...")?"""
    words = _words(sentence)
    return has_quantity(MARKER.sub(" ", sentence)) or any(
        reports_finding(s) and _share(words, s) >= 0.5 for b in blocks if b.n in cites for s in b.sentences)


def _source_score(sentence: str, cites: tuple[int, ...], blocks: list[Evidence]) -> float:
    """The score of the evidence sentence the answer sentence restates (its cited papers' sentence holding most of
    its words, at least half of them); -inf when none does."""
    words = _words(sentence)
    return max((score for b in blocks if b.n in cites for s, score in zip(b.sentences, b.sentence_scores)
                if _share(words, s) >= 0.5), default=float("-inf"))


def _restates_weak(kept: tuple[str, SentenceCheck], blocks: list[Evidence], margin: float) -> bool:
    """Does the model sentence restate an evidence sentence scored `margin` or more below the best of its cited
    papers' sentences? (A paraphrase restating none is not judged.)"""
    sentence, check = kept
    source = _source_score(sentence, check.cites, blocks)
    best = max((x for b in blocks if b.n in check.cites for x in b.sentence_scores), default=source)
    return source > float("-inf") and best - source >= margin


def new_names(sentence: str, intent: Question) -> set[str]:
    """The names the sentence writes ("R-GRPO", "OGBench") that the question does not."""
    return set(names_in(MARKER.sub(" ", sentence))) - set(names_in(intent.text)) - set(names_in(intent.searched))


# A sentence going on about the one before it: "This exposes a critical research gap: ...".
_THIS = re.compile(r"^\W*(?:this|these|such)\b", re.IGNORECASE)


def restates_trouble(sentence: str, cites: tuple[int, ...], blocks: list[Evidence]) -> bool:
    """Does the sentence restate (half its words) a cited abstract's sentence stating the trouble the paper takes
    on rather than its fix: a problem (`states_problem`), earlier work (`speaks_of_others`), what the next sentence
    sets out to solve (`poses_problem`) or calls a problem?"""
    words = _words(sentence)
    for b in blocks:
        if b.n not in cites:
            continue
        paper = split_sentences(b.hit.paper.abstract)
        shares = [_share(words, x) for x in paper]
        if not shares or max(shares) < 0.5:
            continue
        i = shares.index(max(shares))
        source = paper[i]
        # (or one the next sentence calls a problem: "... relies on an implicit assumption ..." then "This exposes
        # a critical research gap")
        follows = paper[i + 1] if i + 1 < len(paper) else ""
        if not proposes_work(source) and (states_problem(source) or speaks_of_others(source)
                                          or i in poses_problem([(x, 0.0) for x in paper])
                                          or (_THIS.match(follows) is not None and states_problem(follows))):
            return True
    return False


def restates_opening(sentence: str, cites: tuple[int, ...], blocks: list[Evidence], cover: float = 0.0) -> bool:
    """Is the sentence the opening sentence of a cited abstract said again (the paper sentence holding most of its
    words, at least half, is the first, and the sentence holds at least `cover` of that one's words)? An abstract
    opens with its field's background ("Outdoor LiDAR generation has shown strong potential ..."), which rarely
    answers a question about the paper; a phrase taken from it ("Contextual Integrity (CI) [1]." out of "Securing
    Contextual Integrity (CI) is critical for privacy-preserving ... agent execution") may."""
    words = _words(sentence)
    for b in blocks:
        paper = split_sentences(b.hit.paper.abstract)
        if b.n not in cites or len(paper) < 2:
            continue
        shares = [_share(words, x) for x in paper]
        if shares[0] >= 0.5 and shares[0] == max(shares) and _share(_words(paper[0]), sentence) >= cover:
            return True
    return False


def counts_the_unit(sentence: str, cites: tuple[int, ...], blocks: list[Evidence], intent: Question) -> bool:
    """For "how many <unit> ...?", is one of the sentence's numbers a count of that unit: the unit is named in the
    sentence, or in the cited paper's sentence that holds the number? "26x [1]." answers "how many trajectories?" no
    more than "26x cheaper" counts trajectories; "200,000 [1]." does when the paper says "200,000 trajectories"."""
    if intent.wants != "number" or not intent.unit:
        return True
    # The head noun counts: "26x cheaper than synthetic data methods" names "synthetic" without counting trajectories.
    units = {w[:5] for w in intent.unit_heads}
    nums = set(numbers_in(sentence))
    if not nums:
        return False
    return bool(units & _stems(sentence)) or any(
        nums & set(numbers_in(x)) and units & _stems(x)
        for b in blocks if b.n in cites for x in split_sentences(b.hit.paper.abstract))


def _terse(sentence: str) -> bool:
    """A sentence of at most three words besides its markers: "40% [1]", "Two [1]."."""
    return len(_WORD.findall(MARKER.sub(" ", sentence))) <= 3


# A question asking for several things: "which datasets ...?", "on which two tasks ...?", "both ...".
_SEVERAL = re.compile(r"\b(?:two|three|four|both|several|all the)\b", re.IGNORECASE)


def _asks_several(intent: Question) -> bool:
    noun = intent.noun.lower()
    return bool(_SEVERAL.search(intent.asked) or (noun.endswith("s") and not noun.endswith(("ss", "us", "is"))))


def part_of_its_source(sentence: str, cites: tuple[int, ...], blocks: list[Evidence], intent: Question) -> bool:
    """Does the answer give one piece of a cited evidence sentence that holds more of what was asked? A terse
    "BBBC021 [1]." for "which benchmark datasets ...?" from "tested on two popular benchmarking datasets, BBBC021 and
    RxRx3-core" (one item of the list asked for); "31% [1]." for "what share of the time did participants prefer
    it?" from "Participants preferred our assistant 78% of the time (p=0.015), with a 31% higher acceptance rate."
    (one amount, not the one asked: `_amount_asked`); or fewer amounts than the names of a "respectively" list it
    names. The evidence then answers."""
    plain = MARKER.sub(" ", sentence).strip().rstrip(" .;,:")
    if not (cites and plain):
        return False
    cited = [x for b in blocks if b.n in cites for x in b.sentences]
    if intent.wants == "number":  # one amount: "31% higher acceptance rate [1]."
        mine = set(numbers_in(plain))
        for x in cited:
            theirs = set(numbers_in(x))
            if not mine & theirs:
                continue
            paired = _RESPECTIVELY.search(x)
            if paired:  # "25.0% improvements in FRD, MMD, and JSD [1]." of "3.3%, 25.0%, 17.8% improvements in FRD,
                # MMD, and JSD, respectively": fewer amounts than the names it pairs them with
                listed = x[min((at for n in theirs if (at := x.find(n)) >= 0), default=0):paired.start()]
                names = set(names_in(listed))
                if len(mine & theirs) < len(set(names_in(plain)) & names):
                    return True
                # "25.0% [1]." to "how much better?": amounts of the list paired with none of its names, when the
                # question picks none of them either
                amounts = set(numbers_in(listed)) & theirs
                if mine & amounts and len(mine & amounts) < len(amounts) and \
                        not names & (set(names_in(plain)) | set(names_in(intent.text))):
                    return True
            elif len(mine) == 1 and (asked := _amount_asked(x, intent, _kind(next(iter(mine)), plain))) \
                    and asked not in mine:
                return True
        return False
    sources = [x for x in cited if plain.lower() in x.lower()]
    if not _terse(sentence) or not _asks_several(intent) or re.search(r",|\band\b", plain):
        return False
    item = re.escape(plain.lower())
    in_list = re.compile(rf"(?:,|\band|\bor)\s+{item}\b|{item}\s*(?:,|\band\b|\bor\b)")
    return any(in_list.search(x.lower()) for x in sources)


_RESPECTIVELY = re.compile(r"\brespectively\b", re.IGNORECASE)
_UNIT_AFTER = r"\s*(%|×|x\b|percent\b|points?\b|pp\b|fold\b)"


def _kind(number: str, text: str) -> str:
    """What an amount is written as in `text`: "%", "x" (or "×", "fold"), "point", or "" (a bare number, a count)."""
    m = re.search(rf"(?<![\d.]){re.escape(number)}{_UNIT_AFTER}", text, re.IGNORECASE)
    unit = m.group(1).lower() if m else ""
    return {"percent": "%", "×": "x", "fold": "x", "points": "point", "pp": "point"}.get(unit, unit)


def _amount_asked(sentence: str, intent: Question, kind: str | None = None) -> str:
    """The amount of `sentence` with the most words of what is asked around it ("how often did users prefer it?":
    "Participants preferred our assistant 78% of the time ..., with a 31% higher acceptance rate" -> "78"); "" when two
    have as many or none has any, or the amounts pair with names by their order ("3.3%, 25.0%, 17.8% improvements in
    FRD, MMD, and JSD, respectively"). With `kind` only amounts written that way are weighed: an answer's "18%" is one
    of the sentence's percentages, not of its "41 stations"."""
    if _RESPECTIVELY.search(sentence):
        return ""
    words = sentence.split()

    def at(stems: set[str]) -> list[int]:
        return [i for i, w in enumerate(words) if any(t[:5] in stems for t in tokens(w))]

    def around(i: int, found: list[int]) -> float:
        # words within four of the amount, those after it counting double: "26x cheaper than reinforcement learning
        # and 57x cheaper than ..." puts "reinforcement" after 26x and before 57x
        return sum(1.0 if 0 < j - i <= 4 else 0.5 if 0 < i - j <= 4 else 0.0 for j in found)

    units, near = at({u[:5] for u in intent.unit_heads}), at({w[:5] for w in tokens(intent.asked)})
    # each amount by the words of the unit asked, then of the question, around it: "how many fewer parameters than
    # the strongest supervised VLM?" asks "50x fewer model parameters", not "by 7.08 points"
    found = sorted(((-around(i, units), -around(i, near)), n) for i, w in enumerate(words) for n in numbers_in(w)
                   if kind is None or _kind(n, " ".join(words[i:i + 2])) == kind)
    if not found or found[0][0] == (0, 0) or len(found) > 1 and found[0][0] == found[1][0] \
            and found[0][1] != found[1][1]:
        return ""
    return found[0][1]


def names_only(sentence: str, intent: Question) -> bool:
    """Is a short answer only a name (and its spelled-out words) that says nothing asked: "R2G: Repel-to-Grokking
    [1]." to the yes/no "did they only try the R2G loss on algorithmic toy tasks", "SGD (Stochastic Gradient Descent)
    [1]." to "What is the without-replacement variant of SGD called?" (a name the question already gives)?"""
    words = [w.strip(".,:;()\"'") for w in MARKER.sub(" ", sentence).split()]
    words = [w for w in words if w]
    if intent.choices or intent.which or not (0 < len(words) <= 5 and all(w[:1].isupper() for w in words)
                                              and words[0].lower() not in {"yes", "no"}):
        return False  # "Does it use PrivGate or SERA?", "Which paper is cheaper, PrivGate or SERA?": a name answers
    names = set(names_in(" ".join(words)))
    return bool(names) and (intent.wants == "yesno"
                            or names <= set(names_in(intent.text)) | set(names_in(intent.searched)))


def names_subject(sentence: str, cites: tuple[int, ...], blocks: list[Evidence]) -> bool:
    """Is a terse sentence only words of its paper's title: "Graph Neural Networks [1]." of the paper titled "Graph
    Neural Networks (GNNs) are increasingly deployed on…"? It names the subject, not an answer."""
    words = _words(MARKER.sub(" ", sentence))
    return bool(_terse(sentence) and cites and words) and \
        words <= _words(next((b.hit.paper.title for b in blocks if b.n == cites[0]), ""))


def _unframed(sentence: str) -> str:
    """A model sentence without the frame a small model puts around a copied span: 'The paper is: "TFMixer, a joint
    time-frequency modeling framework" [1].' -> 'TFMixer, a joint time-frequency modeling framework [1].'."""
    plain = _SAID.sub("", sentence.strip())
    plain = re.sub(r"[\"“”]", "", plain).strip()
    # "[1] Diffusion models are used." -> "Diffusion models are used [1]."
    plain = re.sub(r"^((?:\[\d+\]\s*)+)(\S.*?)\s*\.?$", lambda m: f"{m.group(2)} {m.group(1).strip()}.", plain)
    # "200,000+ synthetic trajectories. [1]." -> "200,000+ synthetic trajectories [1]."
    plain = re.sub(r"(?<!\bal)\s*\.\s*((?:\[\d+\]\s*)+)\.?$", lambda m: f" {m.group(1).strip()}.", plain)
    if plain and plain[-1] not in ".!?":  # "40% [1]" ends as a sentence does
        plain += "."
    return _capital(plain) if plain else sentence.strip()


def _distinct(kept: list[tuple[str, SentenceCheck]]) -> list[tuple[str, SentenceCheck]]:
    """The model's sentences without one that repeats an earlier one nearly word for word (a small model says
    "The Opt-Miner framework proposes a novel tree-guided ..." twice, once without "novel")."""
    out: list[tuple[str, SentenceCheck]] = []
    for s, c in kept:
        words = _words(s)
        if not any(words and len(words & _words(t)) / len(words | _words(t)) >= _REPEATED for t, _ in out):
            out.append((s, c))
    return out


def factoid(sentences: list[str], checks: list[SentenceCheck], blocks: list[Evidence], intent: Question,
            raw: str, knobs: Answering = Answering()) -> tuple[str, str, list[SentenceCheck]]:
    """(text, mode, the checks of the sentences shown) for a single-answer question."""
    kept = [(s, c) for s, c in zip(sentences, checks) if c.supported]
    # The first sentence is the model's only when one sentence of the paper states it: a supported paraphrase
    # can still drift ("on a sphere" for "on the unit sphere"); then the evidence sentence answers first.
    holding = [i for i, (s, c) in enumerate(kept) if answers_asked(intent, s) and c.stated
               and not (knobs.opening_sentence_penalty and intent.wants not in ("expansion", "definition")
                        and restates_opening(s, c.cites, blocks, knobs.opening_restated_cover))
               and (not knobs.number_needs_unit or counts_the_unit(s, c.cites, blocks, intent))]
    defined = definition(blocks, intent)
    if defined:  # an expansion the evidence spells out: the model's sentence answers only when it holds it
        holding = [i for i in holding if defined[2].lower() in kept[i][0].lower()]
    if knobs.model_names_noun:
        holding = [i for i in holding
                   if names_asked_noun(kept[i][0], kept[i][1].cites, blocks, intent, knobs.support_terse_words)]
    # "BBBC021 [1]." for "which datasets ...?" when its sentence lists two; "31% [1]." from a sentence with 78% too.
    holding = [i for i in holding if not part_of_its_source(kept[i][0], kept[i][1].cites, blocks, intent)
               and not names_only(kept[i][0], intent)]
    if not (intent.which or intent.asks & {"name", "method_name", "expansion"}):
        # "... what sensitive kinds of data do they give as examples?": the model's "Graph Neural Networks [1]." names
        # what the paper is about (its title's words), not what was asked.
        holding = [i for i in holding if not names_subject(kept[i][0], kept[i][1].cites, blocks)]
    if intent.wants == "name" and any(new_names(s, intent) for b in blocks for s in b.sentences):
        # "What RL algorithm does Opt-Miner propose?": the model's "The Opt-Miner framework proposes a novel
        # tree-guided data synthesis pipeline ..." names nothing the question did not, while the evidence names R-GRPO.
        holding = [i for i in holding if new_names(kept[i][0], intent)]
    if "reason" in intent.asks and any(answers_why(intent, s) for b in blocks for s in b.sentences):
        # "Why are intra-class links harder to infer?": a model sentence stating no cause ("The diagnostic
        # correction reveals that leakage is under-measured") does not answer when the evidence states one.
        holding = [i for i in holding if answers_why(intent, kept[i][0])]
    if "solution" in intent.asks and "reason" not in intent.asks and any(
            proposes_work(s) for b in blocks for s in b.sentences):
        # "How can a backdoor keep working while the model learns new classes?": the model's "The paper reveals that
        # the most advanced existing attack relies on an implicit assumption ..." restates the trouble, not the fix.
        holding = [i for i in holding if not restates_trouble(kept[i][0], kept[i][1].cites, blocks)]
    if "finding" in intent.asks:
        # "What is the headline result of SIVS?": the model's "The headline result of SIVS is that it provides a
        # geometric criterion ..." restates a sentence of method, not of result.
        holding = [i for i in holding if restates_finding(kept[i][0], kept[i][1].cites, blocks)]
    if holding:  # "what I/O cost does it get?" opens with the paper's own result, not the problem it solves
        # (when the model's only sentences holding what was asked state the problem, the evidence answers)
        fit = not_the_problem(intent, [kept[i][0] for i in holding], strict=True)
        holding = [holding[j] for j in fit]
        holding = [holding[j] for j in earlier_work_first(intent, [kept[i][0] for i in holding])]
    if not holding:
        return fallback(blocks, intent, raw, knobs), "extractive", []
    # Of the model's sentences holding what was asked, the one restating the evidence sentence that ranks highest
    # for the question answers first (the model often copies the paper's framing sentence before the answer);
    # a sentence restating none keeps the model's order.
    first = max(holding, key=lambda i: (_source_score(kept[i][0], kept[i][1].cites, blocks), -i)) \
        if knobs.reorder_by_evidence else holding[0]
    if knobs.weak_restatement_margin and _restates_weak(kept[first], blocks, knobs.weak_restatement_margin):
        # "what did they vary in their experiments?": the model copied "A primary difference between them lies in
        # ..." while the paper's best sentence for the question ("We conduct experiments on various baseline models,
        # model sizes and training datasets") is the answer.
        return fallback(blocks, intent, raw, knobs), "extractive", []
    if intent.which:
        # "Which paper adapts chatbot-style models to anti-doping?" is answered by the sentence naming the paper
        # ("STT-LLM: a structural-temporal tokenization framework ..."), not by the one its description restates.
        naming = [i for i in holding if kept[i][1].cites and names_paper(blocks, kept[i][1].cites[0], knobs)
                  and _title_head(blocks, kept[i][1].cites[0]).lower() in kept[i][0].lower()]
        first = first if first in naming or not naming else naming[0]
    rest = kept[:first] + kept[first + 1:]
    stated = set(numbers_in(kept[first][0]))
    if _terse(kept[first][0]) and stated:
        # "40% [1]" alone: the sentence stating that number comes next, wherever the model put it.
        rest.sort(key=lambda k: not stated & set(numbers_in(k[0])))
    # "… up to 40% … [1]." first: a bare "40% [1]" after it says nothing more.
    rest = [k for k in rest if not (_terse(k[0]) and set(numbers_in(k[0])) <= stated)]
    kept = [kept[first]] + rest
    kept = _distinct(kept)[:knobs.answer_sentences]
    text = " ".join(_unframed(s) for s, _ in kept)
    if knobs.evidence_after_answer and len(kept) == 1 and not (intent.wants == "number"
                                                               and answers_asked(intent, text)):
        # One short model sentence: the best evidence sentence that adds to it follows, so a fact the model
        # phrased away is still in the answer.
        if kept[0][1].cites:
            text = f"{text} {second_sentence(blocks, kept[0][1].cites[0], text, knobs)}".strip()
    if intent.which:
        cited = [n for c in (c for _, c in kept) for n in c.cites]
        if cited and names_paper(blocks, cited[0], knobs) and _title_head(blocks, cited[0]).lower() not in text.lower():
            text = named_first(text, blocks, cited[0], intent)
    return completed(text, blocks, intent), "generated", [c for _, c in kept]


def summary(checks: list[SentenceCheck], blocks: list[Evidence], intent: Question,
            knobs: Answering = Answering()) -> tuple[str, bool]:
    """One line per evidence paper, then at most two supported sentences citing several papers.

    Returns (text, whether a model-written sentence is in it).
    """
    lines = []
    for b in blocks:
        ranked = sorted(zip(b.sentence_scores, b.sentences), key=lambda x: -x[0])
        what = clause(sanitize_source(ranked[0][1]), intent, knobs=knobs) if ranked else ""
        title = title_of(blocks, b.n)
        if what and (_opens_with(what, title) or b.hit.paper.title_is_opening):
            # A title derived from this very sentence, or from an opening sentence that names nothing (the line's
            # sentence then says what the paper does, `evidence.relevant_papers`): the sentence alone.
            lines.append(f"- {_capital(_PURPOSE.sub('', what)).rstrip(' .')} [{b.n}].")
            continue
        # "To address this issue, we propose ..." points back at a sentence the line does not show.
        lines.append(f"- {title} [{b.n}]" + (f": {_capital(_PURPOSE.sub('', what)).rstrip(' .')}." if what else ""))
    synthesis = [f"{c.sentence.rstrip(' .')} " + "".join(f"[{n}]" for n in dict.fromkeys(c.cites)) + "."
                 for c in checks if c.supported and len(set(c.cites)) >= 2][:knobs.summary_synthesis]
    return "\n".join(lines) + ("\n\n" + " ".join(synthesis) if synthesis else ""), bool(synthesis)
