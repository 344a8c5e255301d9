"""Pure text helpers: LaTeX to readable text, sentence splitting, display titles, links, search normalisation.

Everything here is a deterministic function of its input string, with no I/O and no model, so the parser, the
chunker, the retriever and the answer checker agree on what a sentence or a token is. It deliberately does not try
to be a full LaTeX renderer: abstracts use a small subset (\\textbf, $\\times$, \\emph, a few symbols).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

# --- cleaning -----------------------------------------------------------------------------------------------------

# Zero-width and bidi control characters: invisible, and a way to smuggle text past a reader or a filter.
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u00ad]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """NFC-normalise, drop invisible and control characters, collapse whitespace."""
    text = unicodedata.normalize("NFC", text)
    text = _INVISIBLE.sub("", text)
    text = _CONTROL.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


# --- citation markers ---------------------------------------------------------------------------------------------

# A citation marker as the model writes it and the answer keeps it: "[1]", or a group "[1, 3]" / "[2;4]"; group 1 is
# the numbers. The one definition: rag.answer re-exports it for the UI and the eval (it lives here, in a module that
# imports nothing of ours, because answer.py itself imports sanitize and support, which need it too).
# A word written as a name: two capitals or a capital and a digit ("RHI", "STT-LLM", "R2G", "FoundObj"), as questions
# and abstracts name a paper's method.
NAME_FORM = r"[A-Z][\w\-]*[A-Z0-9][\w\-]*"
MARKER = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


# --- LaTeX -> readable text ----------------------------------------------------------------------------------------

_SYMBOLS = {
    "times": "×", "cdot": "·", "approx": "≈", "sim": "~", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥",
    "neq": "≠", "pm": "±", "infty": "∞", "to": "→", "rightarrow": "→", "leftarrow": "←", "in": "∈",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "eta": "η",
    "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ",
    "omega": "ω", "Omega": "Ω", "Theta": "Θ", "Delta": "Δ", "ell": "ℓ", "log": "log", "sqrt": "√",
    "ldots": "…", "dots": "…", "cdots": "⋯", "%": "%", "&": "&", "_": "_", "#": "#", "$": "$",
}


def latex_to_text(raw: str) -> str:
    """Render the LaTeX found in abstracts as plain readable text.

    e.g. "cost by \\textbf{9.7$\\times$}" -> "cost by 9.7×";  "$\\mathcal{O}(n)$" -> "O(n)"
    """
    s = raw.replace("---", "—").replace("--", "–").replace("``", "“").replace("''", "”").replace("~", " ")
    s = re.sub(r"\\([%&_#$])", r"\1", s)
    for _ in range(3):  # unwrap nested \cmd{...} a few levels deep
        s = re.sub(r"\\(?:textbf|textit|emph|texttt|textsc|textrm|text|mathrm|mathbf|mathcal|mathbb|mathit|"
                   r"underline|operatorname|boldsymbol|bm)\s*\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\([A-Za-z]+)", lambda m: _SYMBOLS.get(m.group(1), ""), s)
    s = re.sub(r"\^\{([^{}]*)\}", r"^\1", s)
    s = re.sub(r"_\{([^{}]*)\}", r"_\1", s)
    s = s.replace("$", "").replace("{", "").replace("}", "")
    return clean(s)


# --- sentences ------------------------------------------------------------------------------------------------------

_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "vs.", "cf.", "Fig.", "Eq.", "Sec.", "approx.", "resp.", "No.", "Dr.")
# What may open a sentence after ". ": a capital (Latin, Latin-1, Greek, Cyrillic), a digit, "$" or "\\" (LaTeX),
# or a letter of a script without case (kana, CJK ideographs, Hangul). A lower-case word ("U.S. presidential",
# "e.g. the") continues the sentence.
_OPENER = "A-Z0-9$\\\\\u00c0-\u00d6\u00d8-\u00de\u0391-\u03a9\u0400-\u042f" \
          "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
# A sentence end and space before an opener; a word's end and a full stop glued to the next sentence's first word
# ("robustness.This"), as abstracts pasted from PDFs often have; or a CJK full stop, question or exclamation mark,
# which ends a sentence whatever follows, with or without a space ("…見る。次に" / "…答えてください。 Next").
_SPLIT = re.compile(r"(?<=[.!?])[\"”’)\]]?\s+(?=[\"“(\[]?[" + _OPENER + r"])|(?<=[a-z]{2}[.!?])(?=[A-Z][a-z]{2})|"
                    r"(?<=[。！？])[」』）】\"”’)\]]?\s*(?=\S)")
# A line ending a sentence: its last mark, then closing quotes or brackets.
_ENDS_SENTENCE = re.compile(r"[.!?。！？][」』）】\"”’)\]]*$")


def ends_sentence(text: str) -> bool:
    """Does the text end a sentence? e.g. "under 0.2 mm." -> True; "e.g." and "a method for" -> False."""
    text = text.rstrip()
    return bool(_ENDS_SENTENCE.search(text)) and not text.endswith(_ABBREVIATIONS)


def clean_lines(text: str) -> str:
    """clean(), except that a line break after a sentence end stays a line break (a sentence boundary that
    split_sentences keeps whatever the next line starts with); every other line break is a space.

    A field's text after a line break is often not the same sentence: a CSV cell pasting a header and a row after
    its abstract ("...under 0.2 mm.\\ntitle,abstract\\nSYSTEM NOTICE,...") must not be glued to the sentence before
    it. But arXiv's abstracts are wrapped at ~80 characters inside sentences ("a new method for\\ncomputing"), so a
    break that does not follow a sentence end joins the lines as before. Without a kept break, the result is
    exactly clean(text).
    """
    out: list[str] = []
    current: list[str] = []  # lines of the sentence being joined (linear even for thousands of wrapped lines)
    for line in text.splitlines():
        line = clean(line)
        if not line:
            continue
        current.append(line)
        if ends_sentence(line):
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return "\n".join(out)


# A sentence that goes on from the one before it: its subject or its point is there ("Instead, it comes from ...",
# "This task cannot be solved by ...", "To address this, we propose ...").
_CONTINUES = re.compile(r"^(?:instead|this|these|that|those|it|its|they|their|such|here|thus|therefore|hence|"
                        r"consequently|as a result|in turn|to (?:this end|address|overcome|tackle|solve|fill|bridge|"
                        r"mitigate|remedy) (?:this|these|it|them|the)|building on)\b", re.IGNORECASE)


def continues(sentence: str) -> bool:
    """Does the sentence go on from the one before it ("Instead, it ...", "This task ...")?"""
    return bool(_CONTINUES.match(sentence.lstrip()))


# A subject that only the sentence before names: "Instead, it comes from ...", "This design creates ...", "These results
# allow ..." (not "This paper / work / study ...", which names the paper).
_POINTS_BACK = re.compile(r"^(?:(?:instead|thus|therefore|hence|consequently|as a result|in turn|moreover|"
                          r"furthermore|in addition|additionally|importantly|crucially|however),?\s+)?"
                          r"(?:it|they|this|these|that|those|such)\b(?!\s+(?:paper|work|study|article|thesis)\b)",
                          re.IGNORECASE)


# The field's acronyms, which an abstract may use without spelling out, or spell out without using: "Is FoundObj's
# agent trained with RL?" is answered by "... through reinforcement learning".
_FIELD_ACRONYMS = {
    "rl": ("reinforcement", "learning"), "llm": ("large", "language", "model"),
    "llms": ("large", "language", "models"), "gnn": ("graph", "neural", "network"),
    "gnns": ("graph", "neural", "networks"), "kd": ("knowledge", "distillation"),
    "sft": ("supervised", "fine-tuning"), "vlm": ("vision-language", "model"),
    "vlms": ("vision-language", "models"), "mllm": ("multimodal", "large", "language", "model"),
    "mllms": ("multimodal", "large", "language", "models"), "dp": ("differential", "privacy"),
    "sgd": ("stochastic", "gradient", "descent"), "moe": ("mixture", "experts"),
    "rag": ("retrieval-augmented", "generation"), "nlp": ("natural", "language", "processing"),
    "lm": ("language", "model"), "lms": ("language", "models"),
}


def spelled_out(acronym: str) -> tuple[str, ...]:
    """The words a field's acronym stands for ("LMs" -> ("language", "models")); () for any other word."""
    return _FIELD_ACRONYMS.get(acronym.lower(), ())


def with_acronyms(words: set[str], text_words: set[str]) -> set[str]:
    """A question's lexical tokens with the field's acronyms in the form a text uses and the question does not:
    {"rl"} gains "reinforcement" and "learning" for a text spelling it out without "RL", and {"reinforcement",
    "learning"} gains "rl" for one writing only "RL"; a text using the question's own form gains nothing."""
    out = set(words)
    for short, long in _FIELD_ACRONYMS.items():
        if short in words and short not in text_words and all(w in text_words for w in long):
            out.update(long)
        elif all(w in words for w in long) and short in text_words and not all(w in text_words for w in long):
            out.add(short)
    return out


def chosen(choices: tuple[str, ...], sentence: str) -> list[str]:
    """The alternatives of an either/or question the sentence names, each by the words it does not share with the
    others: chosen(("model-based", "model-free"), "we propose a model-free algorithm") -> ["model-free"]."""
    words = [set(tokens(c)) for c in choices]
    have = set(tokens(sentence))
    out = []
    for c, own in zip(choices, words):
        distinct = own - set().union(*(w for w in words if w is not own))
        # a word by its first five letters ("image" ~ "images"), a compound ("model-free") only whole
        if distinct and all(any(h == d or ("-" not in d + h and len(d) >= 5 and h.startswith(d[:5])) for h in have)
                            for d in distinct):
            out.append(c)
    return out


def points_back(sentence: str) -> bool:
    """Is the sentence's subject something only the sentence before it names ("Instead, it comes from reduced exposure
    bias", "This design creates a privacy surface")? Alone, as a summary line, it says nothing of what it is about."""
    return bool(_POINTS_BACK.match(sentence.lstrip()))


def split_sentences(text: str) -> list[str]:
    """Split text into sentences; keeps abbreviations such as "e.g." and decimals such as "9.7" intact, and splits
    "robustness.This" in two. A line break after a sentence end, and a CJK full stop ("。"), end a sentence whatever
    follows (see clean_lines).

    A text without any sentence end comes back as one sentence.
    """
    out: list[str] = []
    for line in clean_lines(text).split("\n"):
        start = 0
        for m in _SPLIT.finditer(line):
            candidate = line[start : m.start() + len(m.group(0).rstrip())].strip()
            if candidate.endswith(_ABBREVIATIONS):
                continue
            if candidate:
                out.append(candidate)
            start = m.end()
        tail = line[start:].strip()
        if tail:
            out.append(tail)
    return out


# --- quantities -----------------------------------------------------------------------------------------------------

# Nouns a number may be hyphenated to and still count them: "an 18-person study", "a 3-layer network" (unlike
# "2-wise independent", "GPT-4").
COUNTED_UNITS = (r"person|people|participants?|users?|layers?|steps?|stages?|tasks?|hours?|days?|minutes?|seconds?|"
                 r"points?|shots?|dimensional|tokens?|parameters?|samples?|rounds?|turns?|nodes?|heads?|bits?")
# A number that states an amount: "3.3%", "26x", "200,000", "1.77×", "7B", "0.5"; not a digit inside a name ("4D",
# "GPT-4", "Llama-2", "top-1", "2-wise").
_QUANTITY = re.compile(r"(?<![\w\-.])\d+(?:[.,]\d+)*(?:\s?(?:%|×|x\b|-fold\b|[kKMB]\b))?(?![\w\-]*[A-Za-z])")


# "200, 000+": a thousands group split by a space, as a model's tokens sometimes come out.
_SPLIT_GROUPS = re.compile(r"(?<![\d.,])(\d{1,3})((?:, \d{3})+)(?![\d,])")


# A bare number ending its clause: nothing glued to it, then a citation, punctuation or the end ("87 [1].", "by 62.6,");
# "2 datasets" is a count whatever the source says of 2.
_BARE = re.compile(r"(?<![\w\-.,%×])(\d+(?:\.\d+)?)(?=\s*(?:\[|[.,;:)]|$))(?![.,]\d)")
_SUFFIX = re.compile(r"(?<![\w\-.,])(\d+(?:\.\d+)?)(?![.,]\d)(\s?%|×)?")


def mend_numbers(text: str, source: str) -> str:
    """Join thousands groups a space has split ("200, 000+" -> "200,000+") where the source writes the number so;
    a list ("sizes 128, 256") stays as it is unless the source holds "128,256". A bare number the source writes only
    as a percentage or a factor gets its sign back: "87 [1]." -> "87% [1]." when the paper says "87% visual KV
    compression" and never a plain 87 (a small model drops the sign as often as it keeps it)."""
    def join(m: re.Match[str]) -> str:
        whole = m.group(1) + m.group(2).replace(", ", ",")
        return whole if whole in source else m.group(0)

    signs: dict[str, set[str]] = {}
    for m in _SUFFIX.finditer(source):
        signs.setdefault(m.group(1), set()).add((m.group(2) or "").strip())

    def sign(m: re.Match[str]) -> str:
        seen = signs.get(m.group(1), set())
        return m.group(1) + next(iter(seen)) if len(seen) == 1 and "" not in seen else m.group(0)

    joined = _SPLIT_GROUPS.sub(join, text)
    # Citation markers ("[2]", "[1, 3]") hold numbers that are not amounts: only the text between them is read.
    out, at = [], 0
    for m in MARKER.finditer(joined):
        out += [_BARE.sub(sign, joined[at:m.start()]), m.group(0)]
        at = m.end()
    return "".join(out) + _BARE.sub(sign, joined[at:])


# "Code is available at https://github.com/...": a statement of where to get a paper's artefacts.
_AVAILABILITY = re.compile(r"\b(?:code|implementation|data(?:sets?)?|models?|weights|checkpoints?)\b[^.]{0,60}?"
                           r"\b(?:is|are|will be)\s+(?:publicly\s+|openly\s+|made\s+)?(?:available|released|"
                           r"open-sourced)|https?://|\bgithub\b", re.IGNORECASE)


# A limit stated: "our analysis is limited to linear models", "our method cannot handle ...", "remains an open
# question", "at the cost of ...", "we leave ... to future work" (of the paper's own work when it speaks of itself).
_OWN_LIMIT = re.compile(r"\b(?:limitations?|limited to|drawbacks?|weakness(?:es)?|shortcomings?|caveats?|cannot|"
                        r"can ?not|fails? to|does not (?:apply|scale|handle|hold|generalize)|remains? (?:an? )?"
                        r"(?:open|challenging|unclear)|at the (?:cost|expense) of|future work)\b",
                        re.IGNORECASE)


def states_limitation(text: str) -> bool:
    """Does the text admit a limit of the work it speaks of ("limited to linear models", "at the cost of ...")?"""
    return bool(_OWN_LIMIT.search(text))


# Where an abstract states the problem its work sets out to solve: "However, it often suffers from compounding
# errors ...", "... which is known to have high I/O complexity ...", "This is a critical research gap: ... remains an
# open question".
_PROBLEM = re.compile(r"\b(?:suffers? from|(?:is|are) known to|remains? (?:an? )?(?:open|unsolved|unexplored|poorly "
                      r"understood)|research gap|struggles? (?:to|with)|remains? challenged|(?:is|are) "
                      r"(?:often )?(?:prohibitive|impractical))\b", re.IGNORECASE)


def states_problem(text: str) -> bool:
    """Does the text state a problem (of earlier work, or the one the paper takes on) rather than what the paper
    does or finds? e.g. "However, it often suffers from compounding errors due to repeated model inference"."""
    return bool(_PROBLEM.search(text))


def states_availability(text: str) -> bool:
    """Does the text say where (or that) code, data or models can be had? e.g. "Code is available at https://..."."""
    return bool(_AVAILABILITY.search(text))


# A model named, as papers name the ones they build on or compare with: a family ("Qwen", "Llama", "Devstral-Small-2",
# "Opt-Miner-Qwen3-8B") or a size ("8B", "0.5B").
_MODEL_NAME = re.compile(r"(?<![A-Za-z])(?:Qwen|LLaMA|Llama|Gemma|DeepSeek|Mistral|Mixtral|GPT|Claude|Gemini|Phi-?\d|"
                         r"Devstral|Falcon|OLMo|Vicuna|Pythia|BLOOM|T5|BERT|RoBERTa|ViT|CLIP|ResNet|Whisper|"
                         r"InternVL|LLaVA)[\w\-.]*|\b\d+(?:\.\d+)?[BM]\b")


def names_model(text: str) -> bool:
    """Does the text name a model ("including Qwen, Llama, Gemma", "Opt-Miner-Qwen3-8B", "models like
    Devstral-Small-2")?"""
    return bool(_MODEL_NAME.search(text))


# Amounts written in words: "seven teacher-student pairs", "thousands of trajectories".
_AMOUNT_WORDS = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|"
                           r"fifty|hundred|thousand|million|billion|dozen|hundreds|thousands|millions|billions|"
                           r"dozens)\b(?:\s+of\b)?|\b(?:log\s+)?(?![aAI]\b)[a-zA-Z]\b(?=\s)", re.IGNORECASE)
# Nouns counting people, one stem for all: "how many participants" is counted by "an 18-person study".
_PEOPLE = frozenset({"perso", "peopl", "parti", "users", "user", "subje", "human", "annot", "worke", "volun", "athle"})
# Words for a gain in speed, one stem for all: "how much speedup" is stated as "acceleration ... by up to 1.77x".
_SPEED = frozenset({"speed", "faste", "accel", "quick"})


def names_people(word: str) -> bool:
    """Is the word a name for people counted ("participants", "people", "users", "annotators")?"""
    return word[:5].lower() in _PEOPLE


# Endings a word's other forms do not share: "speeding" / "speed", "deletions" / "delete", "provably" / "provable",
# "pairings" / "pairs".
_ENDING = re.compile(r"(?:ations?|ingly|ings?|edly|ed|ally|ly|ies|es|s)$")


def without_ending(word: str) -> str:
    """The word without an ending its other forms do not share: "pairings" -> "pair", "federated" -> "feder"."""
    return _ENDING.sub("", word)


def unit_stems(heads: tuple[str, ...]) -> set[str]:
    """The stems a unit is written with: its first five letters and, shorter, the word without its inflection
    ("pairings" -> "pairi", "pair"; four letters at least), every name of people for one of them, every word for a
    gain in speed for one of those ("speedup" -> ..., "accel", "faste")."""
    stems = {h[:5].lower() for h in heads}
    stems |= {bare[:5] for h in heads if len(bare := without_ending(h.lower())) >= 4}
    for family in (_PEOPLE, _SPEED):
        if stems & family:
            stems |= family
    return stems


def _unit_word(word: str, stems: set[str]) -> bool:
    return word.lower().startswith(tuple(stems))


def counts(text: str, heads: tuple[str, ...], in_words: bool = True, near: bool = False) -> bool:
    """Does the text state an amount of one of the unit nouns `heads`, the noun among the three words after the number
    (same clause), the number written in digits, in words, or hyphenated to the noun? e.g. counts("generating 200,000+
    synthetic trajectories", ("trajectories",)) -> True, counts("an 18-person user study", ("participants",)) -> True;
    "from 0.5B to 9B parameters, NITP improves ... with negligible computational overhead" does not count compute.
    Without `in_words` only digits count ("thousands of trajectories" states no exact amount); with `near` the noun
    may also be among the three words before the number ("finds bugs in 23% of solutions" gives an amount of bugs)."""
    stems = unit_stems(heads)
    for m in (*_QUANTITY.finditer(text), *(_AMOUNT_WORDS.finditer(text) if in_words else ())):
        clause = re.split(r"[,.;:()]", text[m.end():], maxsplit=1)[0]
        words = re.findall(r"[A-Za-z][\w\-]*", clause)[:3]
        if near:
            words += re.findall(r"[A-Za-z][\w\-]*", re.split(r"[,;:()]|\.\s", text[:m.start()])[-1])[-3:]
        if any(_unit_word(w, stems) for w in words):
            return True
    return any(_unit_word(m.group(1), stems) for m in re.finditer(r"\b\d+(?:\.\d+)?-([A-Za-z]+)", text))


def has_quantity(text: str) -> bool:
    """Does the text state an amount? e.g. "improves FRD by 3.3%" -> True; "4D LiDAR with GPT-4" -> False."""
    return bool(_QUANTITY.search(text))


# --- links ----------------------------------------------------------------------------------------------------------

_URL = re.compile(r"(?:https?://|www\.|(?<![\w.@])(?:github\.com|gitlab\.com|huggingface\.co)/)[^\s<>\"'{}\\]+",
                  re.IGNORECASE)


def find_links(text: str) -> tuple[str, ...]:
    """URLs in the text, trailing punctuation trimmed, in order, without repeats."""
    seen: dict[str, None] = {}
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(".,;:)]}")
        if not url.lower().startswith("http"):
            url = "https://" + url
        seen.setdefault(url, None)
    return tuple(seen)


# --- display titles -------------------------------------------------------------------------------------------------

# "we propose", "this paper introduces", "here we present" ...: where a paper names its own method.
# "we close this gap by proposing", "our method, Transformation-Inverting Energy Diffusion (TIED), ..." too.
_INTRO = re.compile(r"\b(?:(?:we|this (?:paper|work)|our (?:paper|work))\b[^.;]{0,40}?\b(?:propos|introduc|present|"
                    r"produc|develop|design|call|term|dub|build|creat|devis|releas|formulat)\w*\b|"
                    r"our (?:method|approach|framework|algorithm|model|technique)\b)", re.IGNORECASE)


# A coined name: a word with two capitals ("PBTO", "Opt-Miner", "SusDiet", "UHM").
_COINED = re.compile(r"(?<![\w\-–])(?=[\w\-–]*[A-Z][\w\-–]*[A-Z])[A-Za-z][\w\-–]+")


def presents_work(sentence: str) -> bool:
    """Does the sentence present the paper's own work ("we propose ...", "this paper introduces ...", "our method
    ...")?"""
    return bool(_INTRO.search(sentence))


# Where the paper puts forward something of its own, not where it names what it found ("we find that ... a failure
# mode which we call information self-locking").
_PROPOSES = re.compile(r"\b(?:we|this (?:paper|work)|our (?:paper|work))\b[^.;]{0,40}?\b(?:propos|introduc|present|"
                       r"develop|design|build|creat|devis|formulat)\w*\b", re.IGNORECASE)


def proposes_work(sentence: str) -> bool:
    """Does the sentence put forward the paper's own work ("To mitigate this issue, we propose AREW, ...")?"""
    return bool(_PROPOSES.search(sentence))


# The paper speaking of itself: "We study ...", "our results ...", "In this work ...".
_OWN = re.compile(r"\b(?:we|our|us|this (?:paper|work|study|article))\b", re.IGNORECASE)


def speaks_of_itself(sentence: str) -> bool:
    """Is the sentence about the paper's own work ("We study the problem of private hypothesis selection ...",
    "Our experiments show ...") rather than its field's background ("Synthetic data becomes crucial for ...")?"""
    return bool(_OWN.search(sentence))


# Others' work as the sentence's subject: "Existing methods for diffusion models typically require ...", "However,
# current methods for building assistive agents ...", "While prior work demonstrates ..." (not "SERA is 26x cheaper
# than previous synthetic data methods", which is about the paper).
_OTHERS = re.compile(r"^\W*(?:(?:however|while|although|yet|but|unfortunately|in contrast|meanwhile),?\s+)?"
                     r"(?:(?:the|most|many)\s+)?(?:(?:most|more)\s+[\w\-]+\s+)?(?:existing|current|prior|previous|"
                     r"conventional|traditional|earlier|most|many)\s+(?:[\w\-]+\s+){0,3}?(?:methods?|approach(?:es)?|works?|"
                     r"studies|agents|models|techniques?|systems?|attacks?|algorithms?|frameworks?)\b", re.IGNORECASE)


def speaks_of_others(sentence: str) -> bool:
    """Is the sentence about earlier work ("Existing methods ... typically require ...") and not the paper's own?"""
    return bool(_OTHERS.search(sentence)) and not speaks_of_itself(sentence)


# The field's usual practice: "Conjoint analyses typically report AMCEs by averaging over opponent attributes".
_PRACTICE = re.compile(r"\b(?:typically|usually|traditionally|conventionally|commonly|standard practice)\b",
                       re.IGNORECASE)
# Earlier work conceded before the paper's own turn: "While existing works mitigate ... via prompt-level tail
# scheduling, we focus on ...".
_CONCEDES = re.compile(r"^\W*(?:while|whereas|although|though)\b", re.IGNORECASE)


def tells_earlier_work(sentence: str) -> bool:
    """Does the sentence say what earlier work or the field's usual practice does, the answer to "what did people
    usually do before ...?" (a concession about it may go on to the paper's own: "While existing works ..., we ...")?"""
    if _OTHERS.search(sentence):
        return not speaks_of_itself(sentence) or bool(_CONCEDES.search(sentence))
    return bool(_PRACTICE.search(sentence)) and not speaks_of_itself(sentence)


def names_work(sentence: str) -> str:
    """The name a paper gives its work where it says what it contributes: "we propose PBTO, the first ..." -> "PBTO",
    "we propose the Opt-Miner framework" -> "Opt-Miner", "we introduce universal horizon models (UHM)" -> "UHM";
    "" when the sentence presents nothing by name ("we propose new algorithms that ...")."""
    intro = _INTRO.search(sentence)
    if not intro:
        return ""
    found = _COINED.search(sentence, intro.end(), intro.end() + 80)
    return found.group(0) if found else ""


# NAME (Expansion), e.g. "SOLAR (Self-supervised jOint LeArning for symmetric multimodal Retrieval)"
_NAME_THEN_EXPANSION = re.compile(r"\b([A-Z][\w\-]*[A-Z][\w\-]*\d*)\s*\(([^()]{8,140})\)")
# Expansion (NAME), e.g. "Next Implicit Token Prediction (NITP)"
_EXPANSION_THEN_NAME = re.compile(r"((?:[\w\-]+\s+){1,12}?[\w\-]+)\s*\(([A-Z][\w\-]*[A-Z][\w\-]*\d*)\)")
# "we propose PrivGate, a gate that ..." -> ("PrivGate", "a gate that ...")
_NAMED = re.compile(r"\b(?:propose|introduce|present|produce|develop|design|call|term|dub)\w*\s+"
                    r"(?:a\s+|an\s+|the\s+)?(?:\w+\s+){0,3}?([A-Z][a-z]*[A-Z][\w\-]*|[A-Z]{3,}[\w\-]*)"
                    r"(?:\s*\([^()]*\))?,\s+(an?\s+[^,.;]{8,90})")


def _spells(name: str, words: list[str]) -> bool:
    """Do the name's capitals appear, in order, among the words' capitals or initials?"""
    caps = [c for c in name if c.isupper()]
    for source in ("".join(c for c in " ".join(words) if c.isupper()), "".join(w[0].upper() for w in words if w)):
        it = iter(source)
        if caps and all(c in it for c in caps):
            return True
    return False


def _expansion_words(name: str, expansion: str, name_first: bool) -> list[str] | None:
    """The fewest words of the expansion that spell the name: e.g. "We propose Next Implicit Token Prediction"
    for NITP -> ["Next", "Implicit", "Token", "Prediction"]."""
    words = expansion.split()
    spans = [words[:k] for k in range(1, len(words) + 1)] if name_first else \
        [words[-k:] for k in range(1, len(words) + 1)]
    for span in spans:
        if _spells(name, span):
            return words if name_first else span
    return None


def _named_with_expansion(sentence: str) -> list[tuple[int, str, str, bool]]:
    """(where, name, expansion, whether the name comes first) for each "NAME (Expansion)" and "Expansion (NAME)" of a
    sentence, the name-first ones first."""
    return [(m.start(), m.group(1), m.group(2), True) for m in _NAME_THEN_EXPANSION.finditer(sentence)] + \
        [(m.start(), m.group(2), m.group(1), False) for m in _EXPANSION_THEN_NAME.finditer(sentence)]


# Capitalised words in a row: "Advantage Reweighting" in "a simple yet effective Advantage Reweighting method".
_CAPITALISED_RUN = re.compile(r"\b[A-Z][a-z][\w\-]*(?:\s+[A-Z][\w\-]*)*")


def _prefixes_spell(name: str, words: list[str]) -> bool:
    """Is the name the words' beginnings, each word giving one or more letters, in order? "AREW" = "A"dvantage +
    "Rew"eighting."""
    name, words = name.lower(), [w.lower() for w in words]
    if not words:
        return not name
    if not name:
        return False
    return any(words[0].startswith(name[:k]) and _prefixes_spell(name[k:], words[1:])
               for k in range(1, min(len(name), len(words[0])) + 1))


def _named_in_apposition(sentence: str) -> tuple[str, str] | None:
    """(name, expansion) where a sentence presents a method by a name and then a phrase whose capitalised words
    spell it: "we propose AREW, a simple yet effective Advantage Reweighting method" -> ("AREW", "Advantage
    Reweighting")."""
    m = _NAMED.search(sentence)
    if m is None:
        return None
    for run in _CAPITALISED_RUN.finditer(m.group(2)):
        if _prefixes_spell(m.group(1), run.group(0).split()):
            return m.group(1), run.group(0)
    return None


def expansion_of(name: str, text: str) -> tuple[str, str] | None:
    """(the name as written, the words spelling it out) where the text defines `name`: "geometric horizon models
    (GHM)", "SOLAR (Self-supervised jOint LeArning ...)" or "we propose AREW, a simple yet effective Advantage
    Reweighting method"; a plural asked ("AMCEs") also finds the singular defined.
    None when the text never spells it out. The first definition wins."""
    wanted = {name, name[:-1]} if name.endswith("s") and len(name) > 2 else {name}
    for sentence in split_sentences(text):
        if len(sentence) > 600:  # as in derive_title: no definition lives in a giant run-on
            continue
        for _, found, expansion, name_first in sorted(_named_with_expansion(sentence)):
            words = _expansion_words(found, expansion.strip(), name_first) if found in wanted else None
            if words:
                return found, " ".join(words)
        apposed = _named_in_apposition(sentence)
        if apposed and apposed[0] in wanted:
            return apposed
    return None


def own_long_names(text: str) -> list[str]:
    """The long forms a paper spells its own method's name out with, in a sentence presenting its work: "we introduce
    universal horizon models (UHM), ..." -> ["universal horizon models"]; not a field's ("reinforcement learning
    (RL)") in a sentence of background."""
    out = []
    for sentence in split_sentences(text):
        if len(sentence) > 600 or not presents_work(sentence):
            continue
        for _, found, expansion, name_first in _named_with_expansion(sentence):
            words = _expansion_words(found, expansion.strip(), name_first)
            if words and len(words) >= 2:
                out.append(" ".join(words))
    return out


def derive_title(text: str, max_len: int = 100, skip: Callable[[str], bool] | None = None) -> str:
    """A short display title for an abstract: its named method and expansion, else its opening sentence.

    e.g. "... We produce SOLAR (Self-supervised jOint LeArning for ...)" -> "SOLAR: Self-supervised jOint LeArning ..."
    A field's own acronym ("Reinforcement learning (RL)") is not a method name: lower-case expansions score low.
    Sentences for which `skip` is true (the parser passes planted orders) are never a title nor its source; ""
    when every sentence is skipped.
    """
    sentences = [x for x in split_sentences(text) if not (skip and skip(x))]
    best: tuple[int, str] | None = None
    for i, sentence in enumerate(sentences):
        if len(sentence) > 600:  # no title lives in a giant run-on; and the regexes below would backtrack on it
            continue
        intro = bool(_INTRO.search(sentence))
        for _, name, expansion, name_first in _named_with_expansion(sentence):
            words = _expansion_words(name, expansion.strip(), name_first)
            if not words:
                continue
            # A coined name is spelled by the expansion's own capitals ("jOint LeArning"); a field's acronym is not.
            capitalised = _spells(name, ["".join(c for c in " ".join(words) if c.isupper())])
            score = (3 if intro else 0) + (2 if capitalised else -2) - (2 if i == 0 and not intro else 0)
            joined = " ".join(words)
            title = f"{name}: {joined[0].upper()}{joined[1:]}"
            if best is None or score > best[0]:
                best = (score, title)
        named = _NAMED.search(sentence)
        if named and intro and (best is None or best[0] < 3):
            best = (3, f"{named.group(1)}: {_shorten(named.group(2).strip(), 70)}")
    if best is not None and best[0] >= 3:
        return _shorten(best[1], max_len)
    if not sentences:
        return ""
    opening = sentences[0]
    return _shorten(opening[: max_len * 2].rstrip("."), max_len)


def _shorten(text: str, max_len: int) -> str:
    text = clean(text)
    if len(text) <= max_len:
        return text
    cut = text[: max_len - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


# --- search normalisation ------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[a-z0-9]+(?:[.\-][a-z0-9]+)*")
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how in into is it its of on or our paper papers that the "
    "their them these this those to was we were what when where which while who why with work works study studies "
    "about any there than then so such also use used using based show shows via".split()
)


def other_number(word: str) -> str:
    """The word's other number, as an index might write it: "llms" -> "llm", "gnn" -> "gnns"; "" for a word too short
    or not all letters, and "loss" stays singular."""
    if len(word) < 3 or not word.isalpha():
        return ""
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word + "s"


# British and American spellings of one word, as (one ending, the other): "generalisation" / "generalization",
# "behaviour" / "behavior", "modelling" / "modeling", "analyse" / "analyze", "catalogue" / "catalog".
_SPELLINGS = (("isation", "ization"), ("isations", "izations"), ("ise", "ize"), ("ised", "ized"), ("ises", "izes"),
              ("ising", "izing"), ("iser", "izer"), ("isers", "izers"), ("yse", "yze"), ("ysed", "yzed"),
              ("ysing", "yzing"), ("our", "or"), ("ours", "ors"), ("oured", "ored"), ("ouring", "oring"),
              ("oural", "oral"), ("ourally", "orally"), ("elled", "eled"), ("elling", "eling"), ("eller", "eler"),
              ("alled", "aled"), ("alling", "aling"), ("ogue", "og"), ("ogues", "ogs"), ("tre", "ter"),
              ("tres", "ters"), ("ence", "ense"))
_SPELLED_MIN = 5  # shorter words ("four", "rise") have no second spelling worth trying


def spellings(word: str) -> list[str]:
    """The word's other spellings, British for American and back, e.g. "generalisation" -> ["generalization"],
    "behavior" -> ["behaviour"]; [] for a word no rule spells two ways. Candidates only: a caller keeps the one the
    abstracts write (`lexical.LexicalIndex.respelt`)."""
    if len(word) < _SPELLED_MIN or not word.isalpha():
        return []
    out = []
    for one, other in _SPELLINGS:
        for a, b in ((one, other), (other, one)):
            if word.endswith(a) and len(word) - len(a) >= 2:
                out.append(word[: -len(a)] + b)
    return list(dict.fromkeys(w for w in out if w != word))


def search_form(text: str) -> str:
    """Lower-case text for lexical search: unicode folded, LaTeX stripped, "×" read as "x"."""
    s = latex_to_text(text) if "\\" in text or "$" in text else text
    s = unicodedata.normalize("NFKC", s).replace("×", "x").replace("–", "-").replace("—", "-")
    return s.lower()


# An inflection a stem drops: "-ing", "-ed" (not the "eed" of "speed"), "-es" (not after s: "classes" keeps "class"),
# "-s" (not "-ss").
_INFLECTION = re.compile(r"(?:ing|(?<!e)ed|(?<!s)es|(?<![su])s)$")


def word_pairs(text: str) -> set[tuple[str, str]]:
    """Adjacent words of each clause, stopwords left out and inflections dropped: "the constraint of differential
    privacy" -> {("constraint", "differential"), ("differential", "privacy")}; "language models" and "language
    modeling" are both ("language", "model"). Two words written together tell papers apart where either word alone,
    written somewhere in most of them, does not."""
    out: set[tuple[str, str]] = set()
    for clause in re.split(r"[.,;:!?()\[\]]+", search_form(text).replace("-", " ")):
        words = [_INFLECTION.sub("", w) for w in _TOKEN.findall(clause) if w not in STOPWORDS]
        out.update(zip(words, words[1:]))
    return out


def stem(word: str) -> str:
    """A crude stem for matching a question's words to a sentence's: the inflection dropped (when three letters
    remain), then the first five letters. e.g. "mixing", "mixed", "mixes" -> "mix"; "datasets" -> "datas";
    "labelled" -> "label"; "speed", "speeds" -> "speed"; "class", "classes" -> "class"."""
    base = _INFLECTION.sub("", word)
    return (base if len(base) >= 3 else word)[:5]


def written_in(word: str, words: set[str]) -> bool:
    """Does a text whose tokens are `words` write `word`, inflected, hyphenated or spelt out? e.g. "multiclass" in
    {"multi-class"}, "matches" in {"matching"}, "rl" in {"reinforcement", "learning"}."""
    if word in words:
        return True
    root = stem(word)
    expansion = spelled_out(word)
    return any(stem(w) == root or w.replace("-", "") == word for w in words) or bool(expansion) and all(
        x in words for x in expansion)


def tokens(text: str, drop_stopwords: bool = True) -> list[str]:
    """Lexical tokens: keeps "9.7x", "mm2mm", "llm-based" whole and also yields their parts.

    e.g. "9.7× cheaper LLM-based" -> ["9.7x", "cheaper", "llm-based", "llm", "based"]
    """
    out: list[str] = []
    for tok in _TOKEN.findall(search_form(text)):
        if drop_stopwords and tok in STOPWORDS:
            continue
        out.append(tok)
        if "-" in tok:
            out.extend(p for p in tok.split("-") if p and not (drop_stopwords and p in STOPWORDS))
    return out
