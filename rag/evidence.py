"""Evidence selection: inside the retrieved papers, the few sentences that bear on the question.

A 135M model handed five whole abstracts copies one of them; handed three sentences it phrases an answer. So each
sentence of each retrieved paper is scored against the question:

    score = cosine(question, sentence) + lexical_weight * (share of the question's terms the sentence contains)
            + a small bonus when the sentence is of the kind asked for (a number for "how much ...?")

where, choosing the evidence, the cosine is taken down by how much the sentence resembles every other retrieved paper
(`hubness`: a generic sentence is near any question), and the best `per_paper` sentences of each paper are kept, in
their original order. Papers whose best sentence
scores far below the best paper's are left out, so a single-paper question gets a single-paper prompt. The same
sentences are highlighted as support in the UI, and answer sentences are checked against them. The weights and
thresholds are settings (`config.Answering`, `[answer]`).

Sentence vectors are cached per paper (abstracts do not change under a paper id).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from . import question as Q
from .config import Answering
from .embed import Embedder
from .orders import ADDRESSED, addressed
from .records import Evidence, Hit, Paper
from .text import (
    chosen,
    continues,
    counts,
    has_quantity,
    names_model,
    other_number,
    own_long_names,
    points_back,
    presents_work,
    proposes_work,
    speaks_of_itself,
    speaks_of_others,
    split_sentences,
    states_availability,
    tells_earlier_work,
    tokens,
    with_acronyms,
    word_pairs,
)

# Taken, inside a paper, from a statement of where to get its artefacts when the question does not ask that: as much
# as the opening sentence's penalty (`answer.opening_sentence_penalty`'s default), so it never answers first.
_AVAILABILITY_PENALTY = 2.0


def answer_type_boost(asks: frozenset[str], sentence: str, weight: float) -> float:
    """A bonus for sentences of the kind the question asks for (`Question.asks`: a number, an expansion, a name)."""
    boost = 0.0
    if "number" in asks and has_quantity(sentence):
        boost += weight
    if "expansion" in asks and "(" in sentence:
        boost += weight
    if "name" in asks and len(re.findall(r"(?<=[\s(,])[A-Z][\w\-]+", sentence)) >= 2:
        boost += weight / 2
    return boost


# Where an abstract states a cause or a difficulty: "primarily due to insufficient object priors", "it comes from
# reduced exposure bias", "hindered by inter-individual heterogeneity", "a bidirectional bottleneck that leads to SeL",
# "require access to model gradients, limiting their applicability", "privacy is fundamentally a worst-case property"
# (not "with limited data", a setting).
_CAUSE = re.compile(r"\b(?:because|since|due to|owing to|driven by|drives|drivers?|caused by|attributed to|"
                    r"explained by|motivated by|(?:comes?|stems?|arises?|results?) from|hinder(?:s|ed)?|"
                    r"suffers? from|bottlenecks?|(?:is|are) (?:fundamentally|inherently|intrinsically)|"
                    r"lies in|(?:leads?|led|leading) to|gives? rise to|(?:ensures?|implies|guarantees?|means) that|"
                    # a difficulty
                    r"limiting|limited by|lacks?|lacking|fail(?:s|ed)? to|struggles?|prohibitive|costly)\b",
                    re.IGNORECASE)
# A cause denied ("this gain cannot be explained by closer teacher matching") states none.
_DENIED = re.compile(r"\b(?:not|cannot|n't|never)\s+(?:be\s+|only\s+|solely\s+|merely\s+)?$", re.IGNORECASE)
# Where an abstract reports a finding: "Our pilot experiment shows that ...", "we find that ...", "results reveal".
_FOUND = re.compile(r"\b(?:find|finds|found|show|shows|showed|shown|reveal\w*|demonstrat\w*|observe[sd]?|indicat\w*|"
                    r"suggest\w*|confirm\w*)\s+that\b|\b(?:experiments?|results?|analys[ie]s|evaluations?|stud(?:y|ies))"
                    r"\s+(?:also\s+)?(?:show|shows|showed|reveal|reveals|revealed|demonstrate|demonstrates|indicate|"
                    r"indicates|confirm|confirms)\b", re.IGNORECASE)
# Where an abstract compares its method with others: "outperforms several multi-task optimization methods", "over
# strong canonicalization and sampling baselines".
_COMPARED = re.compile(r"\b(?:outperform\w*|surpass\w*|beats?|better than|baselines?|competitors?|compared (?:to|with)|"
                       r"state[- ]of[- ]the[- ]art)\b", re.IGNORECASE)


# A sentence answering the one before it as a problem: "To address this issue, we propose ...", "To mitigate this,",
# "Motivated by these findings, we propose ...".
_ADDRESSES = re.compile(r"^\W*(?:to (?:address|mitigate|overcome|tackle|solve|remedy|alleviate|fix|resolve|close)|"
                        r"motivated by|in light of) "
                        r"(?:this|these|that|those|both|the (?:above|aforementioned))\b", re.IGNORECASE)


def poses_problem(sents: list[tuple[str, float]]) -> set[int]:
    """Indices of the sentences stating the problem the next one sets out to solve: "We argue that this sparse
    supervision leaves the representation space under-constrained ..." before "To address this issue, we propose
    NITP ..."."""
    return {i for i in range(len(sents) - 1) if _ADDRESSES.search(sents[i + 1][0])}


# Where an abstract names its own method: "we propose AREW, a simple ...", "we introduce Robust Halpern Iteration".
_NAMES_METHOD = re.compile(r"\b(?:we|this paper|this work)\s+(?:\w+\s+)?(?:propose|introduce|present|develop)s?\b"
                           r"[^.;]{0,60}?(?<![\w-])[A-Z][\w-]*[A-Z]")


def names_method(sentence: str) -> bool:
    """Does the sentence name the paper's own method ("To mitigate this issue, we propose AREW, ...")?"""
    return bool(_NAMES_METHOD.search(sentence))


# Where an abstract reports its experiments: "Experimental results on 100 challenging OGBench tasks ...", "We evaluate
# STT-LLM on real-world longitudinal datasets ...", "The approach is tested on two popular benchmarking datasets".
_EVALUATES = re.compile(r"\b(?:experiment\w*|evaluat\w+|benchmark\w*|empirically|tested on|validated on)\b",
                        re.IGNORECASE)


# A name of several capitalised words: "a Global Frequency Module", "the Local Time Module".
_CAPITALISED_NAME = re.compile(r"\b[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)+")


def names_part(sentence: str, asked: str) -> bool:
    """Does the sentence name something in capitalised words, one of them a word of the question ("what's the
    frequency part of the model called?" -> "TFMixer incorporates a Global Frequency Module ...")? A sentence's
    capitalised opening word is no part of a name."""
    words = {_stem(t) for t in tokens(asked)}
    return any(m.start() and words & {_stem(t) for t in tokens(m.group(0))}
               for m in _CAPITALISED_NAME.finditer(sentence))


def reports_evaluation(sentence: str) -> bool:
    """Does the sentence report the paper's experiments ("Experimental results on 100 OGBench tasks ...")?"""
    return bool(_EVALUATES.search(sentence))


def defines(sentence: str, term: str) -> bool:
    """Does the sentence say what `term` is: "Grokking, the phenomenon where models suddenly generalize ...", "a
    failure mode which we call information self-locking (SeL): agents fail ...", "We define latent concepts as ..."?"""
    if not term:
        return False
    t = re.escape(term.lower().rstrip("s"))
    low = sentence.lower()
    said = t + r"\w*(?:\s*\([^)]*\))?\s*(?:,\s*(?:the|a|an|i\.e\.)\b|:|\s+(?:is|are|refers? to|means?|denotes?|" \
        r"describes?)\b|\s+as\b)"
    named = r"\b(?:we call|we term|we define|called|known as|dubbed)\s+(?:\w+\s+){0,2}?" + t
    return bool(re.search(said, low) or re.search(named, low))


def states_comparison(sentence: str) -> bool:
    """Does the sentence compare the work with others ("outperforming several multi-task optimization methods")?"""
    return bool(_COMPARED.search(sentence))


def reports_finding(sentence: str) -> bool:
    """Does the sentence report a finding ("Our pilot experiment shows that ...", "we find that ...")?"""
    return bool(_FOUND.search(sentence))


def states_cause(sentence: str) -> bool:
    """Does the sentence state a cause or a difficulty ("primarily due to ...", "hindered by ...", "... leads to
    SeL") that it does not deny?"""
    return any(not _DENIED.search(sentence[max(0, m.start() - 20):m.start()]) for m in _CAUSE.finditer(sentence))


# "Why does UHM use a winsorized horizon distribution?" asks why a design was chosen, which an abstract answers with
# its purpose ("employs a winsorized horizon distribution to stabilize training").
_WHY_CHOSEN = re.compile(r"\bwhy (?:does|do|did|would|is|are|was|were)\b[^?]*?\b(?:use|uses|used|using|employ\w*|"
                         r"adopt\w*|introduc\w*|add|adds|apply|applies|rel(?:y|ies) on|need|needs|choose|chooses|"
                         r"include|includes|impos\w*|enforc\w*|incorporat\w*)\b", re.IGNORECASE)
_PURPOSE = re.compile(r"\b(?:in order |so as )?to (?:stabiliz|mitigat|prevent|avoid|alleviat|counter|compensat|reduc|"
                      r"improv|ensur|enabl|handl|address|overcom|captur|preserv|control|limit|bound|remov|correct)\w*",
                      re.IGNORECASE)


def answers_why(question: Q.Question, sentence: str) -> bool:
    """Does the sentence state what a why-question asks: a cause (`states_cause`), or the purpose of a design the
    question asks the reason for ("to stabilize training" for "Why does UHM use a winsorized horizon ...?")?"""
    return states_cause(sentence) or bool(_WHY_CHOSEN.search(question.text) and _PURPOSE.search(sentence))


# What a question asks -> the sentence that answers it and the knob it gains, inside the evidence paper. (A cause has
# its own rule in `cue_bonus`: half the boost for the problem the next sentence sets out to solve.)
_CUES: tuple[tuple[str, Callable[[str, Q.Question], bool], str], ...] = (
    ("comparison", lambda s, q: states_comparison(s), "comparison_boost"),
    ("finding", lambda s, q: reports_finding(s), "finding_boost"),
    ("method_name", lambda s, q: names_method(s), "overview_boost"),
    ("name", lambda s, q: names_part(s, q.asked), "part_name_boost"),
    ("evaluation", lambda s, q: reports_evaluation(s), "evaluation_boost"),
    ("definition", lambda s, q: defines(s, Q.defined_term(q.text)), "definition_boost"),
    ("solution", lambda s, q: proposes_work(s), "solution_boost"),
    ("prior", lambda s, q: tells_earlier_work(s), "prior_boost"),
)
# A problem stated: what a question asking for the fix describes.
_TROUBLE = re.compile(r"\b(?:fail\w*|struggl\w*|suffer\w*|collaps\w*|degrad\w*|stuck|bottlenecks?|issues?|problems?|"
                      r"challeng\w*|inefficien\w*|prohibitive)\b", re.IGNORECASE)
# The asks `cue_bonus` answers.
CUED = frozenset({"reason"} | {ask for ask, _, _ in _CUES})


def cue_bonus(question: Q.Question, sentence: str, knobs: Answering, poses: bool = False) -> float:
    """Inside the evidence paper: `knobs.reason_boost` for a sentence stating a cause when the question asks for one
    ("Why ...?", "what drives ...?"), half of it for one stating the problem the next sentence sets out to solve
    (`poses`, see `poses_problem`: a weaker cue than a cause stated; minus `solution_boost` when a fix is asked for
    instead), `knobs.choice_boost` for one naming an
    alternative of an either/or question, and for each of `_CUES` its knob: `comparison_boost` for a sentence
    comparing the work with others when the question asks which methods the paper beats, `finding_boost` for one
    reporting a finding when it asks what a study found, `overview_boost` for one naming the paper's own method when
    it asks what it is called, `evaluation_boost` for one reporting its experiments when it asks where the paper was
    evaluated, `definition_boost` for one saying what the term a "what is X?" question names is, `prior_boost` for
    one telling what earlier work or the usual practice does when it asks exactly that."""
    asks = question.asks
    bonus = 0.0
    if question.choices and chosen(question.choices, sentence):
        bonus += knobs.choice_boost
    if "reason" in asks and answers_why(question, sentence):
        bonus += knobs.reason_boost
    elif "reason" in asks and poses:
        bonus += knobs.reason_boost / 2
    if "solution" in asks and "reason" not in asks and (poses or (_TROUBLE.search(sentence)
                                                                  and not proposes_work(sentence))):
        # "what's the fix for agents that stop gathering information?" describes the problem: the sentence stating
        # it ("agents fail both to elicit informative feedback ...") holds the question's words, the one proposing
        # the paper's work ("To mitigate this issue, we propose AREW") the fix.
        bonus -= knobs.solution_boost
    for ask, answers, knob in _CUES:
        if ask in asks and answers(sentence, question):
            bonus += getattr(knobs, knob)
    return bonus


def unnamed(asked: str, paper: Paper) -> str:
    """What is asked without the paper's own method named in full: "what benchmark were universal horizon models
    evaluated on?" -> "what benchmark were evaluated on?". The name is the subject; the sentence introducing it
    shares its rare words, while the one answering need not."""
    out = asked
    for name in own_long_names(paper.abstract):
        out = re.sub(r"[\s\-]+".join(re.escape(w) for w in re.split(r"[\s\-]+", name)), " ", out, flags=re.IGNORECASE)
    return out if out != asked and len(tokens(out)) >= 2 else asked


def overview_bonus(sents: list[tuple[str, float]], weight: float) -> list[tuple[str, float]]:
    """Scores in abstract order, for a question asking what the paper is about or does: `weight` added to the
    abstract's first sentence presenting its work ("We propose a hierarchical recoupling generation framework ...",
    not the "First, we design ..." of a part of it) and to an opening in which the paper speaks of itself ("We study
    the problem of transformation inversion on Lie groups ..."); half of it to any other sentence about the paper's
    own work. Where to get the code says nothing of what the paper does."""
    if not weight:
        return sents
    # (where it puts its work forward first: "we find ... a failure mode which we call SeL" presents a finding)
    first = next((i for says in (proposes_work, presents_work) for i, (s, _) in enumerate(sents)
                  if says(s) and not states_availability(s)), None)
    out = []
    for i, (s, score) in enumerate(sents):
        if i == first or (i == 0 and speaks_of_itself(s)):
            score += weight
        elif speaks_of_itself(s) and not states_availability(s):
            score += weight / 2
        out.append((s, score))
    return out


class SentenceScorer:
    """Scores a paper's sentences against a question; caches sentence vectors by paper id."""

    def __init__(self, embedder: Embedder, knobs: Answering = Answering(), cache_size: int = 2048) -> None:
        self.embedder = embedder
        self.knobs = knobs
        self._cache: OrderedDict[str, tuple[list[str], np.ndarray]] = OrderedDict()
        self._titles: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = cache_size

    def sentences(self, hits: list[Hit]) -> dict[str, tuple[list[str], np.ndarray]]:
        missing = [h for h in hits if h.paper.paper_id not in self._cache]
        if missing:
            split = [split_sentences(h.paper.abstract) or [h.paper.abstract] for h in missing]
            flat = [s for ss in split for s in ss]
            # One sentence a call: an int8 embedder quantizes each batch by its own range (padding included), so a
            # sentence embedded beside others gets a vector that depends on them, and an answer would depend on the
            # questions asked before it (which papers were cached). Alone, a sentence always gets the same vector;
            # it is no slower on 2 cores (no padding: 112 seed sentences 0.79-0.82 s against 0.87-1.10 s batched).
            vectors = np.vstack([self.embedder.embed([s]) for s in flat]) if flat else np.zeros((0, 0))
            i = 0
            for h, ss in zip(missing, split):
                self._cache[h.paper.paper_id] = (ss, vectors[i : i + len(ss)])
                i += len(ss)
        out = {}
        for h in hits:
            self._cache.move_to_end(h.paper.paper_id)
            out[h.paper.paper_id] = self._cache[h.paper.paper_id]
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return out

    def coverage(self, parts: list[str], hits: list[Hit]) -> dict[str, float]:
        """paper id -> how much of a question the paper covers: the mean, over the question's parts, of the part's
        best cosine to one of the paper's sentences or its title. A paper that is about the whole description
        covers every part a little; one sentence sharing two words with one part covers that part only."""
        if not parts or not hits:
            return {}
        vecs = np.vstack([self.embedder.embed([p]) for p in parts])  # one a call, as sentences (see above)
        out = {}
        for h in hits:
            _, svecs = self.sentences([h])[h.paper.paper_id]
            title = self._title(h)
            mat = np.vstack([svecs, title[None, :]]) if len(svecs) else title[None, :]
            out[h.paper.paper_id] = float((vecs @ mat.T).max(axis=1).mean())
        return out

    def _title(self, hit: Hit) -> np.ndarray:
        pid = hit.paper.paper_id
        if pid not in self._titles:
            self._titles[pid] = self.embedder.embed([hit.paper.title or hit.paper.abstract[:200]])[0]
            while len(self._titles) > self._size:
                self._titles.popitem(last=False)
        return self._titles[pid]

    def similarity(self, text: str, hits: list[Hit]) -> dict[str, np.ndarray]:
        """paper id -> the cosine of each of its sentences (abstract order) to `text`."""
        vec = self.embedder.embed([text])[0]
        return {pid: vecs @ vec if len(sents) else np.zeros(0) for pid, (sents, vecs) in self.sentences(hits).items()}

    def score(self, question: Q.Question, qvec: np.ndarray, hits: list[Hit],
              less: dict[str, np.ndarray] | None = None) -> dict[str, list[tuple[str, float]]]:
        """paper id -> [(sentence, score)] in abstract order, scored against `question.scored`; each sentence's
        cosine less its paper's entry of `less`, when it has one (a weighted `hubness`)."""
        qtok = set(tokens(question.scored))
        out: dict[str, list[tuple[str, float]]] = {}
        for pid, (sents, vecs) in self.sentences(hits).items():
            sims = vecs @ qvec if len(sents) else np.zeros(0)
            if less and pid in less:
                sims = sims - less[pid]
            scored = []
            for s, sim in zip(sents, sims):
                overlap = len(qtok & set(tokens(s))) / len(qtok) if qtok else 0.0
                score = (float(sim) + self.knobs.lexical_weight * overlap
                         + answer_type_boost(question.asks, s, self.knobs.answer_type_boost))
                scored.append((s, score - self.knobs.addressed_penalty if ADDRESSED.search(s) else score))
            out[pid] = scored
        return out


def hubness(found: dict[str, tuple[list[str], np.ndarray]]) -> dict[str, np.ndarray]:
    """Per paper, per sentence: how much more than the papers' sentences on average it resembles every other paper
    (the mean, over the other papers, of its best cosine to one of their sentences), among three papers or more.

    A generic sentence ("learning preferentially converges to the most information-efficient signal component") is
    near every question as it is near every abstract: a "hub" of the embedding space, which outscored the sentences of
    the paper a question described (a corrected cosine as in cross-domain similarity local scaling, with the other
    retrieved papers standing for the questions)."""
    papers = {pid: vecs for pid, (sents, vecs) in found.items() if len(sents)}
    if len(papers) < 3:
        return {}
    raw = {pid: np.mean([(vecs @ other.T).max(axis=1) for o, other in papers.items() if o != pid], axis=0)
           for pid, vecs in papers.items()}
    mean = float(np.mean(np.concatenate(list(raw.values()))))
    return {pid: r - mean for pid, r in raw.items()}


# Pronouns and auxiliaries the index's stopword list keeps: they name nothing a paper is about. Counted, a question
# whose only indexed word is "they" (the rest misspelt or inflected as no abstract writes them: "what evidense do
# they give that a change in angles drives the late switch from memorizing to generalizing?") would find its whole
# description in every paper writing "they".
_FUNCTION_WORDS = frozenset("i me my mine you your yours he him his she her hers they theirs us ours not no nor but if "
                            "will would did done been being had should could might may must shall doing".split())


def select_evidence(question: Q.Question, qvec: np.ndarray, hits: list[Hit], scorer: SentenceScorer, max_papers: int,
                    per_paper: int, margin: float,
                    idf: Callable[[list[str]], dict[str, float]] | None = None,
                    cover_weight: float = 0.0, focus_weight: float = 0.0, expansion: tuple[str, ...] = (),
                    expansion_weight: float = 0.0) -> list[Evidence]:
    """Numbered evidence blocks ([1], [2], ...) from the top hits, the best paper first.

    A paper's relevance is its best sentence's score plus `cover_weight` times the share of the question's
    idf-weighted words found anywhere in it (the glossary's `expansion` of its plain words weighed `expansion_weight`
    times their idf): a paper that is about the whole question ("coding agents for a private repository ... cheaper
    than reinforcement learning") beats one whose single sentence shares two of its words; and
    `knobs.evidence_retrieval_weight` times its retrieval score, which weighs all its chunks and names (one sentence
    echoing a description should not outvote the paper the whole question retrieved). Papers within
    `margin` of the best paper's relevance are kept, best first. Inside a kept paper the sentences are then ranked
    with `with_focus`, plus `knobs.evidence_ask_weight` times their cosine to the part of the question that asks
    (`Question.ask`), when a clause of it only describes the paper, plus `cue_bonus` when a cause, a comparison, a
    finding or one of two alternatives is asked for. A question picking one of the papers and asking something of it
    ("which one is about ...? where do ... come from?") ranks them by the part that picks.
    """
    if not hits or max_papers < 1:
        return []
    pool = hits[: max_papers * 2]
    weight = scorer.knobs.evidence_hub_weight
    hub = {pid: weight * h for pid, h in hubness(scorer.sentences(pool)).items()} if weight else {}
    scored = scorer.score(question, qvec, pool, hub)
    words = [w for w in dict.fromkeys(tokens(question.scored)) if w not in _FUNCTION_WORDS]
    weights = idf(words) if idf is not None and cover_weight else {}
    if weights and expansion and expansion_weight and idf is not None:
        extra = [w for w in dict.fromkeys(tokens(" ".join(expansion))) if w not in weights]
        weights.update({w: expansion_weight * v for w, v in idf(extra).items()})
    # Coverage weighs the parts of a description against each other; a question of one part ("Which baselines does
    # TIED outperform?") has nothing to weigh, and its coverage would only repeat the best sentence's cosine. The
    # parts are the user's own words: a follow-up's searched form adds the previous question, and "Is the code
    # available?" is not a description that a paper linking its code covers.
    parts = question_parts(question.text) if scorer.knobs.evidence_phrase_weight and len(pool) > 1 else []
    phrase_weight = scorer.knobs.evidence_phrase_weight if len(parts) > 1 else 0.0
    covered = scorer.coverage(parts, pool) if phrase_weight else {}
    ranked: list[tuple[float, int, Hit, list[tuple[str, float]]]] = []
    # "which one is about how language models get supervised? where do the targets ... come from?": the paper is
    # picked by the part that says which one, not by a sentence answering the rest ("it comes from ...").
    by = scored
    picking = question.text.replace(question.ask, " ") if question.selects and question.ask else ""
    if tokens(picking):
        by = scorer.score(Q.read(picking), scorer.embedder.embed([picking])[0], pool, hub)
    for i, h in enumerate(pool):
        sents = scored.get(h.paper.paper_id, [])
        best = max((s for _, s in by.get(h.paper.paper_id, [])), default=0.0)
        cover = topic_cover([weights], h.paper.raw + " " + h.paper.title) if weights else 0.0
        retrieval = scorer.knobs.evidence_retrieval_weight * h.score
        phrases = phrase_weight * covered.get(h.paper.paper_id, 0.0)
        ranked.append((best + cover_weight * cover + retrieval + phrases, i, h, sents))
    top = max(r[0] for r in ranked)
    kept = sorted((r for r in ranked if r[0] >= top - margin), key=lambda r: (-r[0], r[1]))[:max_papers]
    ask_weight = scorer.knobs.evidence_ask_weight
    to_ask = scorer.similarity(question.ask, [k[2] for k in kept]) if question.ask and ask_weight else {}
    blocks: list[Evidence] = []
    for n, (_, _, hit, sents) in enumerate(kept, start=1):
        if hit.paper.paper_id in to_ask:
            sents = [(s, x + ask_weight * float(c)) for (s, x), c in zip(sents, to_ask[hit.paper.paper_id])]
        if not question.availability:  # "Project page: https://…/UHM/" names the paper but says nothing of it
            sents = [(s, x - _AVAILABILITY_PENALTY if states_availability(s) else x) for s, x in sents]
        if question.asks & CUED or question.choices:
            # Inside the paper only: a "due to" somewhere in another abstract does not make it the one asked about.
            problem = poses_problem(sents) if question.asks & {"reason", "solution"} else set()
            sents = [(s, x + cue_bonus(question, s, scorer.knobs, i in problem)) for i, (s, x) in enumerate(sents)]
        if question.wants == "number" and question.unit_heads and scorer.knobs.counted_unit_boost:
            # "How many synthetic trajectories ...?" is answered where a number and the trajectories are both said
            # ("generating 200,000+ synthetic trajectories"), not by "thousands of trajectories".
            sents = [(s, x + scorer.knobs.counted_unit_boost if counts(s, question.unit_heads) else x)
                     for s, x in sents]
        if "overview" in question.asks or (question.kind == "which" and not question.asks and not question.compound):
            # "Which paper generates dynamic point clouds ...?" is answered by the paper presenting its work.
            sents = overview_bonus(sents, scorer.knobs.overview_boost)
        # An overview asks for nothing narrower than the paper: the words of the question only name or describe it.
        # Whether a paper on a topic exists asks for the paper's sentence on that topic.
        focus = 0.0 if "overview" in question.asks and not question.exists else focus_weight
        # (a yes/no question asks about the method itself: "Does RHI (Robust Halpern Iteration) learn a model ...?")
        asked = question.asked if "yesno" in question.asks else unnamed(question.asked, hit.paper)
        sents = with_focus(asked, sents, focus, scorer.knobs.addressed_penalty > 0,
                           noun=question.noun, noun_weight=scorer.knobs.asked_noun_boost,
                           model_asked=question.model_asked)
        if len(sents) > 1 and scorer.knobs.opening_sentence_penalty and question.wants not in ("expansion",
                                                                                                "definition") and not (
                "overview" in question.asks and speaks_of_itself(sents[0][0])):
            # An abstract's first sentence is its field's background, seldom what a question about the paper asks
            # (but where an acronym is usually spelt out, and where "We study ..." says what the paper is about).
            # Asked how the paper's method does something, the background is never the means: twice the penalty.
            twice = "mechanism" in question.asks and not speaks_of_itself(sents[0][0])
            sents = [(sents[0][0], sents[0][1] - scorer.knobs.opening_sentence_penalty * (2 if twice else 1))] + \
                sents[1:]
        sents = continued(sents, scorer.knobs.continuation_weight)
        order = sorted(_evidence(sents, scorer.knobs), key=lambda i: -sents[i][1])[:per_paper]
        order.sort()
        blocks.append(Evidence(n=n, hit=hit, sentences=tuple(sents[i][0] for i in order),
                               sentence_scores=tuple(sents[i][1] for i in order)))
    return blocks


# Where a question's next part begins: a clause, or a phrase after a preposition or relative word, each naming one
# thing the wanted paper does or is.
_PART = re.compile(r"[,;:?.]|\b(?:and|that|which|where|while|by|with|whose|when|using|rather than|without|from|for)\b",
                   re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The parts of a question that hold two or more content words, e.g. "Which paper reshapes, without hand-tuning,
    the graphs made from multi-table business records so that graph neural networks predict better?" -> ["hand-tuning",
    "the graphs made", "multi-table business records so", "graph neural networks predict better"] ("Which paper
    reshapes" holds one content word and says too little alone)."""
    parts = [p.strip() for p in _PART.split(question) if p and len(tokens(p)) >= 2]
    return parts or [question]


def continued(sents: list[tuple[str, float]], weight: float) -> list[tuple[str, float]]:
    """Scores in abstract order, a sentence that goes on from the one before it raised by `weight` times how far
    that one outscores it: the sentence restating the question ("... this gain cannot be explained by closer teacher
    matching") is often followed by the one answering it ("Instead, it comes from reduced exposure bias"), which
    shares few of the question's words."""
    if not weight or len(sents) < 2:
        return sents
    out = [sents[0]]
    for (prev, before), (s, score) in zip(sents, sents[1:]):
        if continues(s) and not addressed(s) and not addressed(prev):
            score += weight * max(0.0, before - score)
        out.append((s, score))
    return out


# Words a question and an abstract use for one quantity (stems): "Does it make training cheaper?" is answered by
# "... reducing training cost by 9.7x"; "faster" by a speed-up.
_SAME = {"cheap": "cost", "costl": "cost", "expen": "cost", "fast": "speed", "faste": "speed", "quick": "speed",
         "slow": "speed", "slowe": "speed", "laten": "speed"}


def _stem(word: str) -> str:
    s = word[:5] if len(word) >= 5 else word
    return _SAME.get(s, s)


# Nouns abstracts use for one another when a question asks for one (stems, see _stem): "which datasets ...?" is
# answered by "... on MiniImageNet and TieredImageNet benchmarks".
_KIN = {"datas": frozenset({"bench", "corpu", "corpo"}), "bench": frozenset({"datas", "corpu", "corpo"}),
        "corpu": frozenset({"datas", "bench"}), "corpo": frozenset({"datas", "bench"})}


def noun_kin(noun: str) -> frozenset[str]:
    """The stems of the nouns abstracts write for the one a question asks for: "datasets" -> bench, corpu, corpo."""
    return _KIN.get(_stem(noun), frozenset())


def with_focus(question: str, sents: list[tuple[str, float]], weight: float,
               penalise_orders: bool = True, noun: str = "", noun_weight: float = 0.0,
               model_asked: bool = False) -> list[tuple[str, float]]:
    """Sentence scores plus `weight` times the share of the question's words each sentence holds, every word
    weighted by how few of this paper's sentences use it, plus `noun_weight` for a sentence holding the noun asked
    for (`Question.noun`: "which datasets ...?" -> a sentence naming datasets; with `model_asked`, "which base
    model ...?", a sentence naming a model: "... including Qwen, Llama, Gemma", not "a family of ... methods").

    Inside one paper the subject ("NITP") is in most sentences and says nothing about which one answers; the
    thing asked for ("extra training compute") is in few. e.g. for "How much extra compute does NITP add?" the
    sentence "NITP adds only 2% training compute" outranks "NITP improves MMLU-Pro by 5.7%".
    """
    if not (weight or noun_weight) or not sents:
        return sents
    written = [set(tokens(s)) for s, _ in sents]
    # (a clitic's lone letter is no word: "what's" -> "s", which "agent’s" would match)
    asked = {_stem(t) for t in with_acronyms(set(tokens(question)), set().union(*written)) if len(t) > 1}
    head = {_stem(t) for t in tokens(noun)}
    kin = noun_kin(noun) if len(head) == 1 else frozenset()

    words = [{_stem(t) for t in w} for w in written]
    n = len(sents)
    idf = {t: math.log(1 + n / df) for t in asked if (df := sum(t in w for w in words))}
    total = sum(idf.values()) or 1.0
    # A planted order gets no bonus: its penalty must keep it last however many question words it repeats.
    def bonus(s: str, w: set[str]) -> float:
        if penalise_orders and addressed(s):
            return 0.0
        named = names_model(s) if model_asked else head <= w or bool(kin & w)
        noun_bonus = noun_weight if head and named else 0.0
        return weight * sum(v for t, v in idf.items() if t in w) / total + noun_bonus

    return [(s, score + bonus(s, w)) for (s, score), w in zip(sents, words)]


# A summary question's frame, dropped before its topic is read: "Which papers are about <topic>?"
_FRAME = re.compile(r"^\s*(?:please\s+)?(?:(?:which|what)\s+(?:papers|works?|studies|articles|research|ones)\s+"
                    r"(?:are\s+|is\s+)?(?:there\s+)?|summari[sz]e\s+(?:the\s+)?(?:work|papers|research)?\s*|"
                    r"give\s+(?:me\s+)?an\s+overview\s+of\s+|list\s+(?:the\s+|all\s+)?(?:papers|work)\s+|"
                    r"how\s+many\s+(?:of\s+the\s+)?(?:papers|works?|studies|articles|abstracts)\s+(?:are\s+|is\s+)?"
                    r"(?:there\s+)?|(?:and\s+)?" + Q.LISTING_LEAD + r"\s+)",
                    re.IGNORECASE)
# "Any robotics papers?": the word naming what is listed.
_LISTED = re.compile(r"\s+(?:papers|works|studies|articles)(?=\s*(?:here)?\s*[?.!]*\s*$)", re.IGNORECASE)
# "(which papers) report a speedup" lists papers on speedups: the verb is the frame's ("study report generation"
# keeps its noun).
_REPORTS = re.compile(r"^(?:report|reports|show|shows)\s+(?:(?:a|an|the|any)\s+)?", re.IGNORECASE)
# "about robotics" is about robotics.
_ABOUT = re.compile(r"^(?:about|regarding|concerning)\s+", re.IGNORECASE)
_GENERIC = frozenset("use uses using apply applies applied application applications work works working study "
                     "studies studied analyse analyze "
                     "analyses propose proposes deal deals dealing address addresses tackle summarize summarise "
                     "overview research approaches methods new novel against stuff things involving involve "
                     "involves mentioning mention mentions something anything run runs running ran conduct conducts "
                     "conducting conducted perform performs performing performed".split())


# The field every paper is in names no topic: "attacks on machine learning models" is about attacks, "machine
# learning applied to clinical data" about clinical data.
_UMBRELLA = re.compile(r"\b(?:machine learning|deep learning|artificial intelligence)\b", re.IGNORECASE)


# Words pointing at the collection itself, not the topic: "... in this set", "What research here ...", "Which papers in
# the collection ...".
_HERE = re.compile(r"\b(?:(?:in|from|among|within|of)\s+(?:this|the|these|our|my)\s+(?:set|collection|corpus|list|"
                   r"index|abstracts|seeds)|here)\b", re.IGNORECASE)


# A listing asked for paper by paper or of a group of papers: the topic is what describes the papers ("one sentence
# on each privacy paper", "each paper on RL, what ...", "one line per paper on diffusion please", "how do the RL
# papers differ?"), not the request around it (`question.EACH_PAPER`, `question.TOPIC_PAPERS`).
_PLEASE = re.compile(r"\s*\bplease\b\s*", re.IGNORECASE)


# The frame asked after the topic: "I'm looking for research that models what people prefer. Which papers would
# that be?"
_FRAME_AFTER = re.compile(r"[.?!]\s*(?:so\s+)?(?:which|what)\s+(?:papers|ones|works?|studies)\s+"
                          r"(?:(?:would|could|might)\s+(?:that|those|these|they|it)\s+be|"
                          r"(?:are|is)\s+(?:that|those|these|they|it))\s*$", re.IGNORECASE)
# A name in parentheses is another name for the topic: "stochastic gradient descent (SGD)" is either, and a paper
# writing only "SGD" is on it ("(or several)", "(e.g. ...)" are not names).
_ALSO_NAMED = re.compile(r"\s*\(\s*(?!(?:or|and|not|e\.g|i\.e|just|only|incl\w*)\b)([\w\-]+(?:\s+[\w\-]+)?)\s*\)")
_CONTRAST = re.compile(r",?\s*\b(?:rather than|instead of|as opposed to)\b.*$", re.IGNORECASE)
# "things like privacy", "stuff such as robots": the examples are the topic.
_VAGUE_LIKE = re.compile(r"\b(?:things|stuff|something|anything)\s+(?:like|such as)\s+", re.IGNORECASE)
_EXAMPLES = re.compile(r"[,;:(]?\s*\b(?:e\.\s?g\.?|for example|for instance)(?=[\s,:]|$)|"
                       r"[,;:(]\s*(?:like|such as)\s+", re.IGNORECASE)  # ", like X" gives examples; "like X" compares


def topic_of(question: str) -> str:
    """A summary question's topic: "Which papers here use group theory or symmetry groups?" -> "use group theory or
    symmetry groups"; "Give me one sentence on each privacy paper" -> "privacy"."""
    return topic_parts(question)[0]


def topic_parts(question: str) -> tuple[str, str]:
    """A summary question's topic (`topic_of`) and the examples it gives of it: "Any papers about the order of data,
    e.g. shuffling or permuting training data?" -> ("the order of data", "shuffling or permuting training data");
    "" for examples when it gives none."""
    each = Q.EACH_PAPER.search(question) or Q.TOPIC_PAPERS.search(question)
    described = _PLEASE.sub(" ", " ".join(g for g in each.groups() if g)).strip() if each else ""
    if described:
        return described, ""
    # "Is there a paper on ...", "Are there any papers about ...", "Any robotics papers?": the existence frame too.
    framed = Q.without_exists_frame(_FRAME.sub("", Q.proper(question)))
    topic = _LISTED.sub("", _HERE.sub(" ", _UMBRELLA.sub(" ", framed)).strip(" ?.")).strip()
    topic = _ABOUT.sub("", _REPORTS.sub("", topic))
    # What the papers do not do is no part of the topic: "derive something in closed form, rather than only learning
    # it numerically" would take in every paper that learns.
    topic = _CONTRAST.sub("", _FRAME_AFTER.sub("", topic)).strip() or topic
    topic = _ALSO_NAMED.sub(r" or \1", topic)
    topic = _VAGUE_LIKE.sub("", topic).strip() or topic
    # "privacy, e.g. privacy leakage, privacy risk, or differential privacy": examples of the topic, not alternatives
    # every listed paper must hold one of (a paper on privacy risk in general is on it too)
    # "anything on forecasting? predicting what comes next over time": what follows the question mark says more
    # of the topic before it, as examples do
    head, *examples = (Q.SAID_MORE if "?" in topic.rstrip("?") else _EXAMPLES).split(topic, maxsplit=1)
    head = head.strip(" ,;:(")
    if head != topic and [w for w in tokens(head) if w not in _GENERIC]:
        return head, " ".join(examples).strip(" ,;:()")
    return topic, ""


def topic_alternatives(question: str) -> list[list[str]]:
    """The topic's alternatives, each as its content words: "Which papers use diffusion models or LiDAR?" ->
    [["diffusion", "models"], ["lidar"]]; a paper on any one alternative is on the topic."""
    return alternatives_of(topic_of(question))


def alternatives_of(topic: str) -> list[list[str]]:
    """`topic_alternatives` of a topic as written."""
    parts = re.split(r"\s+or\s+|\s*/\s*|,\s*|;\s*", topic)
    # A hyphenated word counts through its parts ("llm-based" -> "llm", "based"), not as a rarer word of its own
    # that papers saying "LLM agents" lack.
    out = [[w for w in dict.fromkeys(tokens(p)) if w not in _GENERIC and "-" not in w] for p in parts]
    return [ws for ws in out if ws]


def _mentions(word: str, words: set[str]) -> bool:
    """The paper uses the word, in its other number too ("LLMs" ~ "LLM", "GNN" ~ "GNNs": too short for what
    follows), or a word sharing its first five letters ("assistants" ~ "assistive")."""
    if word in words or (len(word) >= 5 and any(w.startswith(word[:5]) for w in words)):
        return True
    other = other_number(word)
    return bool(other) and other in words


# A topic about where to get artefacts; otherwise "Code is available at ..." says nothing of what a paper is about.
_ASKS_AVAILABILITY = re.compile(r"\b(?:availab\w*|releas\w*|open[- ]sourc\w*|github|public\w*)\b",
                                re.IGNORECASE)


def topical(paper_text: str, topic: str) -> str:
    """The paper's text without its availability statements ("Code is available at ..."), unless the topic asks
    about availability: a paper on image retrieval is not about code because its code will be released."""
    if _ASKS_AVAILABILITY.search(topic):
        return paper_text
    return " ".join(s for s in split_sentences(paper_text) if not states_availability(s))


def topic_cover(alternatives: list[dict[str, float]], paper_text: str) -> float:
    """The best share, over the alternatives, of an alternative's term weight (idf) that the paper's text holds."""
    words = set(tokens(paper_text))
    best = 0.0
    for weights in alternatives:
        total = sum(weights.values())
        if total:
            best = max(best, sum(v for w, v in weights.items() if _mentions(w, words)) / total)
    return best


def relevant_papers(question: Q.Question, qvec: np.ndarray, hits: list[Hit], scorer: SentenceScorer,
                    idf: Callable[[list[str]], dict[str, float]], knobs: Answering,
                    closest_if_none: bool = True) -> list[Evidence]:
    """Every retrieved paper on the question's topic, decided per paper, best first, one sentence each; when none
    is, the closest paper (or nothing, without `closest_if_none`).

    A paper is on the topic when its text holds most of one topic alternative's rare words (idf-weighted, words
    common to much of the corpus ignored) and its best sentence is close enough to the question, or when its best
    sentence is very close and its text holds at least some of those words ("few-shot learning" does not take in a
    contrastive-learning paper through one sentence about learning from few images), or when one of its sentences is
    close to the topic itself (`topic_of`) and its text holds half of those words. When exactly one paper is, a paper
    holding most of the words with a sentence a little less close is too (`summary_alone_*`). No cut relative to the
    other papers: a fifth relevant paper is listed however far the fourth is above it. The thresholds are
    `knobs.summary_*`.
    """
    if not hits:
        return []
    alternatives = []
    # The examples a question gives are on the topic too: "the order in which data comes, e.g. shuffling or
    # permuting training data" takes in a paper on shuffling that never says "order".
    head, examples = topic_parts(question.scored)
    for words in alternatives_of(head) + alternatives_of(examples):
        weights = {w: v for w, v in idf(words).items() if v >= knobs.summary_min_idf}
        if weights:
            alternatives.append(weights)
    scored = scorer.score(question, qvec, hits)
    # The question's frame ("What research here ...") dilutes a sentence's score against the whole question; the
    # topic alone is close to the sentence that is on it ("transformation inversion on general Lie groups").
    # Asked which papers share their code, a paper saying where its code is holds every availability word asked.
    available = " ".join(w for ws in alternatives for w in ws if _ASKS_AVAILABILITY.fullmatch(w))
    topic = head if knobs.summary_topic_cover and alternatives else ""
    to_topic = scorer.similarity(topic, hits) if topic else {}
    kept: list[tuple[float, Hit, list[tuple[str, float]]]] = []
    near: list[tuple[float, Hit, list[tuple[str, float]]]] = []  # holding the topic's words, a sentence less close
    for h in hits:
        pid = h.paper.paper_id
        sents = scored.get(pid, [])
        best = max((x for s, x in sents if topical(s, question.scored)), default=0.0)
        text = topical(h.paper.raw, question.scored) + " " + h.paper.title
        if available and states_availability(h.paper.raw):
            text += " " + available  # "publicly available", "released", "open-source": one thing, said any way
        cover = topic_cover(alternatives, text) if alternatives else 0.0
        # Without rare topic words (a topic of common words only) the sentence alone decides.
        sure_cover = knobs.summary_sure_cover if alternatives else 0.0
        closest = max((float(c) for (s, _), c in zip(sents, to_topic.get(pid, ())) if topical(s, question.scored)),
                      default=0.0)
        if ((cover >= knobs.summary_min_cover and best >= knobs.summary_min_sentence)
                or (best >= knobs.summary_sure_sentence and cover >= sure_cover)
                or (topic and closest >= knobs.summary_topic_sentence and cover >= knobs.summary_topic_cover)):
            kept.append((best + cover, h, sents))
        elif cover >= knobs.summary_alone_cover and best >= knobs.summary_min_sentence - knobs.summary_alone_margin:
            near.append((best + cover, h, sents))
    kept.sort(key=lambda k: -k[0])
    if len(kept) == 1 and alternatives and knobs.summary_alone_margin and not question.one_sought:
        # One paper clearly on the topic shows that the question's words name it; the papers holding most of those
        # words with a sentence a little less close to the question are on it too, listed after it ("motivated by
        # ... election campaigns": the conjoint-survey paper's sentences are far from so long a question). With none
        # clearly on it, the topic is not one the abstracts write about, and nothing is added; nor when one paper is
        # asked for ("is there a paper that ..., and what is its dataset?").
        kept += sorted(near, key=lambda k: -k[0])
    if not kept and not closest_if_none:
        return []
    if not kept:  # nothing clearly on the topic: the closest paper, so the answer still says something cited
        h = hits[0]
        sents = scored.get(h.paper.paper_id, [])
        kept = [(0.0, h, sents)]
    blocks = []
    for n, (_, hit, sents) in enumerate(kept, start=1):
        # "Project page: https://rllab-snu…/UHM/" names a link, not what the paper does ("rl" in "rllab" made it the
        # line of "which papers are about RL?"), unless the topic asks where code is.
        every = _evidence(sents, knobs)
        usable = [j for j in every if topical(sents[j][0], question.scored)] or every
        i = says_what_it_does(sents, usable, hit.paper)
        if len(alternatives) == 1 and len(alternatives[0]) == 1:  # a field named by one rare word
            i = on_topic_line(sents, usable, i, set(alternatives[0]), hit.paper)
        blocks.append(Evidence(n=n, hit=hit, sentences=(sents[i][0],) if i is not None else (),
                               sentence_scores=(sents[i][1],) if i is not None else ()))
    return blocks


def what_each_does(question: Q.Question, qvec: np.ndarray, hits: list[Hit], scorer: SentenceScorer,
                   knobs: Answering) -> list[Evidence]:
    """One block per paper, in the order given, showing the first sentence where it puts forward its own work ("We
    introduce a novel ... debiasing methodology ..."), else where it presents it, else where it speaks of itself
    ("We study offline policy optimization ..."), else its line in a listing (`says_what_it_does`): papers set side
    by side with nothing named to compare them on ("compare them", "how do they differ?"), where the sentence
    closest to those words is any sentence ("On synthetic data, we empirically characterize finite-sample error
    ...")."""
    scored = scorer.score(question, qvec, hits)
    blocks = []
    for n, hit in enumerate(hits, start=1):
        sents = scored.get(hit.paper.paper_id, [])
        usable = _evidence(sents, knobs)
        presents = [j for says in (proposes_work, presents_work) for j in usable
                    if j > 0 and says(sents[j][0]) and not points_back(sents[j][0])]
        # "We study offline policy optimization over ...": the paper speaking of itself, when it presents nothing.
        own = presents or [j for j in usable if speaks_of_itself(sents[j][0]) and not points_back(sents[j][0])]
        i = own[0] if own else says_what_it_does(sents, usable, hit.paper)
        blocks.append(Evidence(n=n, hit=hit, sentences=(sents[i][0],) if i is not None else (),
                               sentence_scores=(sents[i][1],) if i is not None else ()))
    return blocks


def told_apart(question: str, hits: list[Hit]) -> list[Hit]:
    """The papers that write the most of the question's word pairs that not all of them write, as given; all of them
    when no pair tells them apart. "Which one uses differential privacy?" after four privacy papers is the one writing
    "differential privacy", though a sentence of another one matches "privacy" better (single words told them apart
    wrongly: "released code", "the language-model one")."""
    asked = word_pairs(question)
    written = {h.paper.paper_id: asked & word_pairs(h.paper.raw + ". " + h.paper.title) for h in hits}
    telling = {pair for pair in asked if 0 < sum(pair in w for w in written.values()) < len(hits)}
    most = max((len(w & telling) for w in written.values()), default=0)
    return [h for h in hits if len(written[h.paper.paper_id] & telling) == most] if most else hits


def collection_blocks(hits: list[Hit]) -> list[Evidence]:
    """One block per paper for a listing of the collection itself ("List all papers"), in the order given: the
    sentence where each paper first puts forward its work ("We propose ..."), else where it first presents it ("...
    which we call ..."), else its first sentence."""
    blocks = []
    for n, hit in enumerate(hits, start=1):
        sents = split_sentences(hit.paper.abstract)
        # "we propose AREW, ..." over "we find that ... a failure mode which we call SeL"
        i = next((j for says in (proposes_work, presents_work) for j, x in enumerate(sents)
                  if says(x) and not states_availability(x)), 0)
        blocks.append(Evidence(n=n, hit=hit, sentences=tuple(sents[i:i + 1]),
                               sentence_scores=(1.0,) * min(1, len(sents))))
    return blocks


def on_topic_line(sents: list[tuple[str, float]], usable: list[int], i: int | None, topic: set[str],
                  paper: Paper) -> int | None:
    """The line a listing of a one-word topic shows, or, when neither it nor the paper's title holds the topic's
    word, the paper's best sentence about its own work that does: "Which papers are about robotics?" lists a
    diffusion paper by "Extensive experiments on robotic control ...", which says why it is listed; its method does
    not."""
    # The word in another form ("robotic" for "robotics", "private" for "privacy"), not one sharing a short prefix
    # ("contrast" is not "contrastive").
    stems = {w[:max(5, len(w) - 2)] for w in topic}

    def holds(text: str) -> bool:
        return any(w.startswith(s) for w in tokens(text) for s in stems)

    if i is None or not stems or holds(sents[i][0]) or (not paper.title_is_opening and holds(paper.title)):
        return i
    own = [j for j in usable if holds(sents[j][0]) and (j > 0 or speaks_of_itself(sents[j][0]))
           and not speaks_of_others(sents[j][0]) and not points_back(sents[j][0])]
    return max(own, key=lambda j: sents[j][1], default=i)


def says_what_it_does(sents: list[tuple[str, float]], usable: list[int], paper: Paper) -> int | None:
    """The sentence a summary line shows: the paper's best on the topic. When that is the abstract's opening
    sentence and it states the field's background ("Large Language Model (LLM) agents have shown significant
    potential ...", "Multimodal Large Language Models (MLLMs) mainly fall into two architectures ..."), the line
    would say nothing of what the paper does: then its best sentence presenting its work instead ("... we propose
    the Opt-Miner framework, where the agent learns ..."), else its best about its own work ("Our approach is
    grounded in ..."); not one whose words the title mostly shows already. The same when the best sentence is the
    paper's account of earlier work ("However, current methods for building assistive agents ..."), and one whose
    subject only the sentence before names ("Instead, it comes from ...", "This design creates ..."). An opening in
    which the paper speaks of itself ("We study the problem of private hypothesis selection ...") stays."""
    if not usable:
        return None
    i = max(usable, key=lambda j: sents[j][1])
    background = (i == 0 and not speaks_of_itself(sents[0][0])) or speaks_of_others(sents[i][0]) or points_back(
        sents[i][0])
    if not background:
        return i
    title = set() if paper.title_is_opening else set(tokens(paper.title))

    def new(j: int) -> bool:
        words = set(tokens(sents[j][0]))
        return j > 0 and bool(words) and len(words & title) / len(words) < 0.5

    for says in (presents_work, speaks_of_itself):
        work = [j for j in usable if new(j) and says(sents[j][0]) and not points_back(sents[j][0])]
        if work:
            return max(work, key=lambda j: sents[j][1])
    return i


def _evidence(sents: list[tuple[str, float]], knobs: Answering) -> list[int]:
    """Which of a paper's sentences may be evidence: with the defence on (`addressed_penalty` > 0) none addressed
    to an assistant, so a planted order never reaches the prompt, the answer or a card's supporting sentences,
    however short the abstract (ranked last, it still filled a three-sentence abstract's three slots)."""
    return [i for i, (s, _) in enumerate(sents) if not (knobs.addressed_penalty > 0 and addressed(s))]


def best_sentence_score(blocks: list[Evidence]) -> float:
    return max((s for b in blocks for s in b.sentence_scores), default=0.0)
