"""The question, read once: a frozen `Question` that retrieval, abstention, evidence and the answer rules read instead
of matching the question's text again each on their own.

`read(text)` reads what the words say, with plain patterns over English questions:

- kind: "summary" ("which papers ...", "summarize ...", "what work is there on ..."), "which" (one paper wanted:
  "which paper proposes ...?"), else "factoid";
- wants: "number" ("how much / how many / by what factor ..."), "expansion" ("what does X stand for"), "name" ("which
  dataset / benchmark / model ..."), "yesno" ("does / is / can ..."), "reason" ("why ...", "what drives ...", "what
  makes it hard ..."), "finding" ("what did the experiment find / show ...?", "what is its headline result?"),
  "overview" (what one paper is about or does: "What is the SERA paper about?", "Summarize the SERA paper", "Is there
  a paper on ...?"), "method_name" (what the paper's own method is called: "What's their fix called?"), "definition"
  (what a term means: "so what is grokking exactly?"), "evaluation" (where it was evaluated: "What benchmark were X
  evaluated on?"), "comparison" (what is asked is which methods it beats: "which baselines does X outperform?"),
  "count" (a listing's length: "How many papers are about RL?"), "prior" (what earlier work or the usual practice
  does: "what did people usually do before ...?"), "mechanism" (how the paper's method does something: "How does the
  few-shot method figure out which samples are noisy?", not how well it does), "solution" (the fix for a problem
  described: "what's the fix for ...?", "how can ...?"), or "" when nothing narrower is asked; `asks` holds every one of
  those the question matches (read without a gloss in parentheses), `wants` the first; exists: it asks whether a
  paper on something exists ("Is there a paper on ...?", "Do any of the papers ...?"), exists_first: that, then
  something of the paper ("..., and what accuracy did it report?"); `compound_parts` splits a question joined to
  another;
- unit: the unit of a quantity question ("how many GPUs" -> gpus); authors: it asks who wrote a paper;
  availability: it asks whether code, data or weights are available; limitations: it asks for the paper's own
  limitations ("What are the limitations of SERA?", not "What limitation of earlier methods does it address?");
  choices: the two alternatives of an either/or question ("Is RHI model-based or model-free?"); collection: it asks
  for the collection itself, no topic ("List all papers");
- refers_back: it points at something said before ("it", "its", "they", "that paper", "the second one"), or names
  nothing of its own ("By how much?", "On which benchmark?": `elliptical`); selects: it asks which of the earlier
  papers ("Which of them is about graphs?"); new_subject: it asks for a paper of its own ("is there a paper that
  ...?"), so its "its" is that paper.

The pipeline then completes the record once, in order, with what needs the conversation or the corpus:
`in_context` adds the standalone form searched and the earlier papers pinned (rag/conversation.py), `in_corpus` the
absent terms (names no abstract contains), the rare terms (words few papers use) and, for an existence question, the
words of its topic no abstract uses in any form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .text import NAME_FORM, names_people, tokens

# What one paper is or does, as a whole: "What is the SERA paper about?", "What does PrivGate do?", "Tell me about the
# paper on private hypothesis selection", "What is the main contribution of TIED?", "Give me an overview of NITP",
# "What problem does R2G solve?", "Summarize the SERA paper"; and whether a paper on something exists ("Is there a
# paper on sustainable diet recommendation?"). Answered by the sentence where the paper says what it does.
WANTS_OVERVIEW = re.compile(
    r"\bwhat(?:'s|’s|s)?(?:\s+(?:is|are|was|were))?\s[^?]{1,160}?\b(?:about|doing)\s*(?:[?.!]|$)|"
    r"\bwhat (?:does|do|did)\b[^?]{1,60}?\b(?:do|propose|introduce|present|contribute|offer)\s*(?:[?.!]|$)|"
    r"^\s*what(?:'s|’s| is| are)\s+(?:the\s+)?[\w\-]*(?-i:[A-Z])[\w\-]*(?:\s+(?:paper|method|framework|model|approach|"
    r"algorithm))?\s*[?.!]?\s*$|"
    r"\btell me (?:more )?about\b|\b(?:give|gives) (?:me |us )?(?:a |an )?(?:quick |short |brief |high-level )?"
    r"(?:overview|summary|rundown|gist|synopsis) of\b|"
    r"\b(?:main|key|core|central) (?:contributions?|ideas?|points?|takeaways?)\b|"
    r"\bwhat (?:problem|problems|question|challenge|gap) (?:does|do|did)\b[^?]{1,60}?\b(?:solve|address|tackle|"
    r"attack)\b|\b(?:in|as) (?:one|a single|a) (?:sentence|line|nutshell)\b|"
    r"\bis there (?:a|an|any|one) (?:paper|work|study|article|method)\b|"
    # "is there a model-free algorithm for robust RL ...?": the paper presenting one
    r"\bis there (?:a|an|any|one) (?:[\w\-]+\s+){0,2}?(?:method|algorithm|approach|framework|technique)\b|"
    r"\b(?:do|does) (?:any|one) (?:of )?(?:the )?(?:papers?|abstracts?|works?)\b", re.IGNORECASE)
# The name of the paper's own method, which the sentence proposing it gives: "What's their fix called?"
WANTS_METHOD_NAME = re.compile(
    r"\bwhat(?:'s|’s| is| was)\s+(?:(?:their|its|the|this|that)\s+)?(?:proposed\s+|new\s+)?(?:fix|method|approach|"
    r"solution|framework|algorithm|technique|remedy|it|this)\s+(?:called|named)\b|\bwhat do (?:they|the authors) call "
    r"(?:it|their (?:fix|method|approach|solution|framework|algorithm|technique))\b|"
    # a description, then "— name?", "method name?", "whats it called"
    r"(?:^|[—–,:;]|\s-)\s*(?:(?:the|its|their)\s+)?(?:method\s+|paper\s+)?name\s*\??\s*$|"
    r"\bwhat(?:'s|’s|s| is)\s+(?:it|that|this one)\s+called\b", re.IGNORECASE)
# What earlier work or the field's usual practice does, asked for itself: "what did people usually do before to deal
# with ...?", "what's the problem with how conjoint experiments are normally summarized?" (not how the paper gets
# past it or compares with it: `_PAST_IT`, "how does PBTO overcome the assumption existing attacks rely on?", "how
# much faster than existing systems?").
WANTS_PRIOR = re.compile(r"\b(?:usual(?:ly)?|normally|typically|traditionally|conventionally|commonly|"
                         r"standard (?:ways?|practice|approach(?:es)?)|used to|(?:existing|prior|previous|earlier|"
                         r"conventional|traditional|standard) (?:[\w-]+ ){0,4}?(?:methods?|approach(?:es)?|work|"
                         r"studies|techniques|ways?|practice|systems|attacks|solutions|algorithms|models))\b",
                         re.IGNORECASE)
_PAST_IT = re.compile(r"\b(?:fix\w*|overcom\w*|address\w*|solv\w*|mitigat\w*|avoid\w*|tackl\w*|handl\w*|improv\w*|"
                      r"beat\w*|outperform\w*|instead|differ\w*|compar\w*|better|remed\w*|get around|go beyond|new|"
                      r"propos\w*|than|vs|versus|over (?:the )?(?:existing|prior|previous|earlier))\b", re.IGNORECASE)
# The way the paper solves a problem asked for: "what's the fix for LLM agents that stop ...?", "how can RL training
# of LLMs be sped up when ...?", "how should graphs built from a schema be changed so ...?".
WANTS_SOLUTION = re.compile(
    r"\b(?:what|which)(?:'s|’s|s| is| was| are)?\s+(?:(?:the|their|its|a|an|this|that)\s+)?"
    r"(?:proposed\s+|new\s+|main\s+)?(?:fix|fixes|solution|remedy|cure)\b(?!\s+(?:called|named))|"
    # "whats their approach" at the end of a question describing the paper
    r"\bwhat(?:'s|’s|s| is| was| are)\s+(?:the|their|its)\s+(?:main\s+)?(?:approach|idea|strategy|trick)\s*[?.!]?\s*$|"
    r"^\s*(?:(?:and|so|ok|okay|but)\b[,\s]*)?how (?:can|could|should|would|might|to|do (?:you|we|people|they))\b|"
    # "How does AREW mitigate the failure of RL-trained agents to ...?": the means against a problem described
    r"\bhow (?:does|do|did) (?:[\w\-]+\s+){1,4}?(?:mitigate|address|fix|solve|overcome|tackle|counter|alleviate|"
    r"remedy|get around|deal with)\b",
    re.IGNORECASE)
# How the paper's method does what the question names: "How does the few-shot method for noisy support sets figure
# out which samples are noisy?" (not how well it does: "how does it compare / perform / scale?").
# (also after a description: "For undoing a mystery warp ...: how do they keep every step valid?")
WANTS_MECHANISM = re.compile(r"(?:^|[:;?.]\s|,\s*(?=and\b))\W*(?:(?:and|so|ok|okay|but)\b[,\s]*)?how (?:does|do|did)\b",
                             re.IGNORECASE)
_HOW_WELL = re.compile(r"\b(?:compare[sd]?|perform\w*|fare[sd]?|differ\w*|relate[sd]?|stack up|scale[sd]?|hold up|"
                       r"generaliz\w*|generalis\w*)\b", re.IGNORECASE)
# The paper's own method as the subject asked about: "the proposed credit-reallocation fix", "their new method".
_PROPOSED = re.compile(r"\b(?:the|their|its|this)\s+(?:proposed|new)\s+(?:[\w\-]+\s+){0,2}?(?:fix|remedy|solution|"
                       r"method|approach|technique|framework|algorithm)\b", re.IGNORECASE)
# Whether a paper on something exists, and the frame that asks it: "Is there a paper on ...", "Are there any papers
# that ...", "Do any of the papers ...".
_EXISTS = re.compile(r"^\s*(?:(?:and|so|ok|okay|also|now)\b[,\s]*)?(?:(?:is|are) (?:any|some)(?:one|body)\s+"
                     r"(?:(?:already|actually|still)\s+)?(?:doing|working\s+on|looking\s+(?:at|into)|studying|"
                     r"researching|tackling)|(?:is|are) there\s+(?:a|an|any|one)?\s*"
                     r"(?:papers?|works?|stud(?:y|ies)|research|articles?)?|(?:do(?:es)?|is|are)\s+any\s+(?:of\s+)?"
                     r"(?:the\s+)?(?:papers?|abstracts?|works?|stud(?:y|ies))?|any\s+(?=(?:[\w\-]+\s+){0,3}?"
                     r"(?:papers|works?|studies|research)\b)|anything(?=\s+(?:on|about|regarding)\b))\s*"
                     r"(?:on|about|regarding|that|which|where|with)?\b",
                     re.IGNORECASE)
# At most this many content words after "Is there a paper on": a field named, not one paper described.
_TOPIC_WORDS = 3
_PLURAL = re.compile(r"\b(?:papers|studies|works|articles|are\s+there|do\s+any)\b|^\s*(?:(?:and|so|ok|okay|also|now)\b"
                     r"[,\s]*)?any\b", re.IGNORECASE)
# One paper sought: "is there a paper that ...", "one study on ..."; not "is anyone doing ...", "is there work on ..."
# (`Question.one_sought`).
_ONE_SOUGHT = re.compile(r"\b(?:is|was)\s+there\s+(?:a|an|one)\b|\b(?:a|an|one)\s+(?:paper|study|article)\b",
                         re.IGNORECASE)
# Words framing a topic, not naming it: "is there work on ... by dealing with the long tail ...?" said "No abstract
# mentions dealing".
_FRAME_WORDS = frozenset("paper papers work works study studies research article articles something else "
                         "anything deal deals dealing concerned tackling handling looking making stuff thing things"
                         .split())
# Nouns asking for a model by name (their first five letters): "which base model", "which LLMs", "which model
# families", "which backbone"; and the phrase that asks for a kind instead ("which kind of models").
_MODEL_NOUNS = frozenset({"model", "llm", "llms", "famil", "backb"})
_A_KIND = re.compile(r"\b(?:kind|kinds|type|types|sort|sorts|class|classes)\s+of\b", re.IGNORECASE)
# "Summarize the SERA paper", "Give me an overview of NITP": one paper, not a field; the object is a paper in the
# singular or a single coined name.
_ONE_PAPER = re.compile(r"^\s*(?i:(?:please\s+)?(?:summari[sz]e|give (?:me )?an overview of|describe|explain)\s+)"
                        r"(?:(?i:(?!(?:each|every)\b)(?:the\s+|this\s+|that\s+)?(?:[\w\-]+\s+){0,4}?"
                        r"(?:paper|study|article))\b(?!s)|"
                        # "Summarize the third one", "summarize it" (after a listing: one of its papers)
                        r"(?i:it|the\s+(?:first|second|third|fourth|fifth|last|other)(?:\s+one)?|this\s+one|"
                        r"that\s+one)\s*[?.!]?\s*$|"
                        r"(?=[\w\-]*[A-Z][\w\-]*[A-Z])[A-Za-z][\w\-]+\s*[?.!]?\s*$)")
# "How many papers are about RL?": a listing that opens with its count (`COUNT`).
_COUNTED = r"how many (?:of the )?(?:papers|studies|works|articles|abstracts)\b"
COUNT = re.compile(r"\b" + _COUNTED, re.IGNORECASE)
# Only as the question's frame: "In the work on RL that ..., which ...?" asks about one paper.
# Other ways to ask for a listing, as users type them: "What about papers dealing with time series?", "Any papers on
# privacy?", "Show me papers about RL" (also dropped from the topic: `evidence.topic_alternatives`).
LISTING_LEAD = (r"(?:(?:what|how)\s+about\s+(?:the\s+)?(?:other\s+)?(?:papers|work|studies|research)|"
                r"any\s+(?:papers|work|studies|research)|anything\s+(?:(?:out\s+)?there\s+)?(?:on|about|regarding)|"
                # "anything using group theory?", "anything in here that makes use of data from the web?"
                r"anything\s+(?:(?:in\s+)?here\s+)?(?:using|involving|mentioning|related\s+to|to\s+do\s+with|"
                r"that\s+(?:uses?|makes?\s+use\s+of|involves?|mentions?|studies|stud(?:y|ied)|appl(?:y|ies)))|"
                # "what's out there on how neural nets learn arithmetic?"
                r"what(?:'s|’s|s|\s+is)\s+(?:out\s+)?there\s+(?:on|about|regarding|that)|"
                # "what's been done on learning people's preferences?"
                r"what(?:'s|’s|s|\s+has)\s+been\s+done\s+(?:on|about|regarding|in|with)|"
                r"(?:show|find|give)\s+(?:me\s+)?(?:all\s+)?(?:the\s+)?(?:papers|studies|works)|"
                # "I'm looking for research that models what people prefer ..."
                r"(?:i'?m|i\s+am|i’m|we'?re|we\s+are)\s+(?:looking|searching)\s+for\s+(?:any\s+)?(?:research|papers|work|"
                r"studies))")
SUMMARY = re.compile(r"^\s*(?:(?:and|also|so|then|now|ok|okay)\b[,\s]*)?(please\s+)?"
                     r"(summari[sz]e|give (me )?an overview|survey|list (the |all )?(papers|work)|"
                     + _COUNTED + r"|"
                     r"(which|what) (papers|studies|works|articles|research|ones)\b|"
                     r"(which|what) of (these|those|the|all)( the)? (papers|studies|works|articles)\b|"
                     r"what work|(are there|is there) (any )?"
                     r"(papers|work|research) (on|about)|papers (on|about|that|which|using|applying|with|involving|"
                     r"mentioning|studying|regarding|concerning|related to|dealing with)\b|"
                     # "work on SGD?", "research involving LiDAR?"
                     r"(work|research|studies) (on|about|involving|regarding|concerning|related to)\b|" +
                     LISTING_LEAD + r"\s|"
                     # "Any robotics papers?"
                     r"any\s+(?:[\w\-]+\s+){1,3}?(?:papers|studies|works)\b|"
                     # "tell me more about the privacy ones"
                     r"tell\s+me\s+(?:more\s+)?about\s+(?:all\s+)?(?:the\s+)?(?:(?!(?:paper|one|that|which|who)\b)"
                     r"[\w\-]+\s+){0,3}?(?:papers|ones|studies|works)\b"
                     r"(?!\s+(?!on\b|about\b|in\b|that\b|which\b|using\b|for\b|with\b)\w))", re.IGNORECASE)
# Every paper on a topic asked about, anywhere in the question: "Give me one sentence on each privacy paper", "one
# line per paper on diffusion", "what does every paper on privacy propose?".
# Its groups are the words describing the papers (`evidence.topic_of`).
EACH_PAPER = re.compile(r"\b(?:each|every)\s+((?:(?!(?:of|one)\b)[\w\-]+\s+){0,3}?)(?:paper|study|work|article)s?\b"
                        r"(?:\s+(?:on|about|regarding|using)\s+([^,;?.!]*))?|"
                        r"\bper\s+paper\b(?:\s+(?:on|about|regarding|using)\s+([^,;?.!]*))?", re.IGNORECASE)
# The papers of a topic named as a group: "How do the RL papers differ?", "what do the privacy papers share?" (not
# "the two papers", "the other papers": earlier ones; "which of the RL papers ...?" asks for one of them).
TOPIC_PAPERS = re.compile(r"(?<!\bof\s)\b(?:the|these|those|all)\s+(?!(?:two|three|four|five|first|second|third|"
                          r"last|other|previous|above|listed|same|following|remaining|cited|retrieved)\b)((?:(?!(?:"
                          r"papers?|that|which|who|of|the|these|those|all|both|two|other|above|listed|cited)\b)"
                          r"[\w\-]+\s+){1,3}?)(?:papers|studies|works)\b", re.IGNORECASE)
# The collection itself asked for, no topic: "List all papers", "What papers do you have?", "How many papers are
# there?".
_COLLECTION = re.compile(r"^\s*(?:please\s+)?(?:(?:list|show(?:\s+me)?|give\s+me|what\s+are)\s+(?:all\s+)?(?:of\s+)?"
                         r"(?:the\s+)?(?:papers|abstracts|works)|(?:what|which)\s+papers\s+(?:do\s+you\s+have|are\s+"
                         r"(?:there|indexed|in\s+(?:the|this|your)\s+(?:index|collection|corpus|library)))|how\s+many\s+"
                         r"(?:papers|abstracts)\s+(?:are\s+there|do\s+you\s+have|are\s+(?:indexed|in\s+(?:the|this|your)\s+"
                         r"(?:index|collection|corpus|library))))(?:\s+(?:you\s+have|here|indexed|in\s+(?:the|this|your)\s+"
                         r"(?:index|collection|corpus|library)))?\s*[?.!]?\s*$", re.IGNORECASE)
# The collection's themes asked for, as a first question: "What are the main themes in these papers?", "What
# topics does the collection cover?", "What is this collection about?" (its listing answers).
_THEMES = re.compile(r"^\s*(?:(?:what|which)\s+(?:are\s+|were\s+)?(?:the\s+)?(?:main\s+|key\s+|major\s+|common\s+|"
                     r"overall\s+|recurring\s+)?(?:themes|topics|areas|subjects|research\s+areas)\b(?:(?!\bon\b|"
                     r"\babout\b).)*\b(?:these|the|all|this|your)\s+(?:papers|abstracts|collection|corpus|index|"
                     r"library)|what\s+(?:is|'s)\s+(?:this|the|your)\s+(?:collection|corpus|index|library)\s+about)\b",
                     re.IGNORECASE)
# "Which paper/work ...?" wants one paper named.
WHICH = re.compile(r"\b(which|what) (paper|work|study|article|method|approach)\b|"
                   r"\bis (?:there (a |any )?|any )(paper|work)|"
                   # "What is the best paper for few-shot learning with noisy labels?"
                   r"\bwhat(?:'s| is) the (?:best|most relevant|right|main|key) (?:paper|work|study|article)\b(?!s)",
                   re.IGNORECASE)
WANTS_NUMBER = re.compile(r"\b(how (much|many|large|big|fast|long|often|far|small)|by how|(what|which)(?:'s|’s| is| "
                          r"was| are| were)?(?: the| their| its)?(?: (?:max(?:imum)?|min(?:imum)?|average|overall|"
                          r"total|best|peak|largest|biggest))? (percentage|"
                          r"fraction|proportion|share|number|ratio|rate|factor|margin|size|accuracy|speed-?up|"
                          r"improvement|gain|reduction|increase)|"
                          r"by what|what (is|was) the (size|number|count)|how (high|low|high up|deep))\b|"
                          # a fragment ending on a bound: "noise level up to?", "speedup of at most?"
                          r"\b(up to|at (most|least))\s*\?", re.IGNORECASE)
WANTS_EXPANSION = re.compile(r"\b(stand for|expan|acronym|abbreviat|denotes?\b)", re.IGNORECASE)
WANTS_NAME = re.compile(r"\b(which|what) (\w+ ){0,2}(dataset|datasets|benchmark|benchmarks|model|models|families|"
                        r"line|method|baseline|baselines|metric|tasks?|collections?|architectures?|algorithms?)\b|\bname|"
                        # a part of the method: "what's the frequency part of the model called?" (its method's
                        # name is `WANTS_METHOD_NAME`)
                        r"\bwhat(?:'s|’s| is| are)\s+(?:the|their|its)\s+(?!(?:proposed\s+|new\s+)?(?:fix|method|"
                        r"approach|solution|framework|algorithm|technique|remedy)\s+called)[\w\s\-]{1,40}?\s+called\s*\??\s*$",
                        re.IGNORECASE)
# "Why ...?", "what drives / causes / makes it hard ...", "what does X come from", "what problem does X fix": a cause
# or a difficulty is asked for, which an abstract states with "due to", "driven by", "hindered by" ...
WANTS_REASON = re.compile(r"(?:^|[,;.?:]\s*|\band\s+)why\b|\bwhat (?:causes|drives|makes)\b|"
                          r"\bwhat (?:does|do|did|is|are|was|were)\b(?:\s+[\w\-]+){0,8}?\s+(?:causes?|drivers?|"
                          r"reasons?)\b|\b(?:comes?|stems?|arises?) from\s*(?:[?,;]|$)|"
                          # "what leads agents to get stuck", "what leads to collapse" (not "what does it lead to",
                          # an effect)
                          r"\bwhat (?:leads?|led)\b|\bwhat (?:is|are|was|were)\b[^?]*\bresponsible for\b|"
                          # "what is the gain attributed to?"
                          r"\b(?:attributed|attributable|due|owing) to\s*(?:[?,;]|$)|"
                          # "what do they say actually explains the improvement?", "what accounts for the gap?"
                          r"\bwhat\b(?:\s+[\w\-']+){0,4}?\s+(?:explains|accounts for|underlies|is behind|drives|"
                          r"causes)\b|"
                          # "what real-world problem motivates the paper?", "what's the motivation for ...?"
                          r"\bwhat\b[^?,;]{0,40}?\bmotivat(?:es|ed|e)\b|\bmotivations?\b|"
                          # "what properties of ... make forecasting them hard"
                          r"\bwhat\b[^?,;]{0,80}?\bmakes?\b[^?,;]{0,60}?\b(?:hard|harder|difficult|challenging|"
                          r"expensive|costly|slow|fail|unstable|ineffective|impractical)\b|"
                          r"\bstruggles? (?:with|to)\b|\bwhat (?:goes|went|is|was|gets) wrong\b|"
                          r"\bwhat (?:(?:is|are|was|were) the )?(?:(?:two|three|main|key|major|central|core|"
                          r"systematic|fundamental|primary|biggest|chief) ){0,2}"
                          r"(?:problems?|issues?|limitations?|challenges?|difficult(?:y|ies)|bottlenecks?|"
                          r"weakness(?:es)?|failures?|obstacles?|drawbacks?|shortcomings?|pitfalls?)\b", re.IGNORECASE)
# "What did the pilot experiment find about ...?", "what does the analysis show?", "what are its main findings?": a
# finding is asked for, which an abstract reports with "we find that", "experiments show".
WANTS_FINDING = re.compile(r"\bwhat (?:did|does|do|have|has)\b(?:\s+[\w\-']+){0,8}?\s+(?:find|show|reveal|"
                           r"demonstrate|conclude|observe|discover|establish|report)\b|"
                           r"\bwhat(?:'s| (?:are|were|is|was)) "
                           r"(?:the|its|their) (?:main |key |headline |central |most important )?(?:findings?|"
                           r"conclusions?|results?)\b", re.IGNORECASE)
# "Which baselines does X beat?", "what kind of competing methods ...": read in what is asked, not in the clause
# describing the paper ("... a politician's traits against a rival").
# A term's meaning asked for: "so what is grokking exactly?", "what do they mean by 'information self-locking'?", "what
# does exposure bias mean?", "define SeL". (Not "what is the main idea" nor "What is SOLAR?", an overview.)
_DEFINITION = re.compile(
    r"\bwhat(?:'s|’s| is| are)\s+(?!(?:the|a|an|it|this|that|their|its|they|these|those)\b)['\"‘“]?"
    r"(?P<a>[a-z][\w\-]*(?:\s+(?!exactly|actually|really|according)[a-z][\w\-]*){0,2})['\"’”]?"
    r"(?=\s*(?:exactly|actually|really|according|,|\?|$))|"
    r"\bwhat (?:do|does) (?:they|the authors|it|the paper) mean by\s+['\"‘“]?(?P<b>[^'\"’”?,]+)|"
    r"\bwhat does\s+['\"‘“]?(?P<c>[\w\-]+(?:\s+[\w\-]+){0,2})['\"’”]?\s+mean\b|"
    r"\bdefin(?:e|ition of)\s+['\"‘“]?(?P<d>[\w\-]+(?:\s+[\w\-]+){0,2})", re.IGNORECASE)


def defined_term(question: str) -> str:
    """The term whose meaning the question asks ("so what is grokking exactly?" -> "grokking"), or ""."""
    m = _DEFINITION.search(question)
    return next((g.strip() for g in m.groups() if g), "") if m else ""


# Where or on what a paper was evaluated: "What benchmark were universal horizon models evaluated on?", "Evaluated on
# what?", "Which datasets do the experiments use?"
WANTS_EVALUATION = re.compile(r"\b(?:evaluat(?:e|es|ed|ing)|tested|(?:did|do|does|they|we|to)\s+test|"
                              r"validat(?:e|es|ed)|benchmark(?:ed|s)?|assess(?:ed|es)?)\s+(?:\w+\s+){0,2}?(?:on|in|with|against)\b|"
                              r"\b(?:evaluated|tested)\s*\?|\bexperiments?\s+(?:on|with|use)\b", re.IGNORECASE)
# ... or what it is compared against, the preposition left without its object ("which prior generators does the
# method compare against?", "compare itself to?", "against which methods ...?"): the object is what is asked.
WANTS_COMPARISON = re.compile(r"\b(?:beat|beats|beating|beaten|outperform\w*|surpass\w*|compet(?:ing|itors?)|rivals?|"
                              r"baselines?|(?:do|does|did|doing)\s+better)\b|\bcompar(?:e|es|ed|ing)\s+(?:(?:it|them|itself|themselves)\s+)?"
                              r"(?:against|to|with)\s*[?.!]*\s*$|\b(?:against|versus|vs\.?|compared\s+(?:to|with))\s+(?:which|what)\b",
                              re.IGNORECASE)
YESNO = re.compile(r"^\s*(does|do|did|is|are|was|were|can|could|will|would|has|have|should)\b", re.IGNORECASE)
# An either/or question: "Is RHI model-based or model-free?", "Does it use hard labels or soft labels?" (the
# alternatives end the question; "or not", "or both" offer no second alternative to name).
_CHOICE = re.compile(r"^\s*(?:does|do|did|is|are|was|were|can|could|will|would|has|have|should)\b.*?"
                     r"((?:[\w\-]+\s+){0,3}[\w\-]+)\s*,?\s+or\s+(?!not\b|both\b|neither\b|either\b|none\b)"
                     r"((?:[\w\-]+\s+){0,3}[\w\-]+)\s*[?.!]?\s*$", re.IGNORECASE)


def choices_in(question: str) -> tuple[str, ...]:
    """The two alternatives an either/or question offers, the first cut to the second's length: "Is RHI model-based
    or model-free?" -> ("model-based", "model-free"); () for any other question."""
    m = _CHOICE.match(question)
    if not m:
        return ()
    second = m.group(2).split()
    first = m.group(1).split()[-len(second):]
    return (" ".join(first), " ".join(second))


# "the two" as papers: "the two (papers)", "these two", before a verb or the end, not "the two kinds of experiments".
_THE_N = (r"(?:the|these|those) (two|three|2|3)(?: (?:papers|ones|methods|works|approaches|models))?(?=\s*[?.,;]|"
          r"\s+(?:differ|compare|have|has|share|use|do|does|did|are|were|is|was|agree|relate|overlap|handle|address|"
          r"achieve|report|perform|mean|need|rely|train|evaluate|work|treat|tackle|approach|focus|target|study|"
          r"beats?|outperforms?|gets?|scales?)\b)")
# "the second" standing for a paper: the ordinal ends the question or a clause (a dash or a colon too: "ok and the
# third - summary pls"), or a verb follows it ("And the second?", "What does the third propose?"); "the second stage"
# is not a paper.
_BARE_ORDINAL = (r"the (?:first|second|third|fourth|fifth|last)(?=\s*(?:[?.!,;:]|$)|\s+[-–—]\s|\s+(?:do|does|did|is|"
                 r"was|has|propose|proposes|use|uses|study|studies|show|shows|say|says|find|finds|report|reports|achieve|"
                 r"achieves|introduce|introduces|address|addresses|claim|claims|about)\b)")
# Words that point back at what was said before. "the method" / "the paper" count only with a determiner that
# refers back ("that", "this", "the same"); "the second one", "the first two", "both", "them" count always; "the
# authors", but not "the authors of" a paper the question names.
_BACK = re.compile(r"\b(it|its|it's|they|their|them|theirs|both|either|these|those|"
                   # "the learning itself" (not "models that improve themselves", a topic)
                   r"the [\w\-]+ (?:itself|themselves)|"
                   # "that" as the subject of a question: "how many tasks was that evaluated on?"
                   r"(?:was|is|were|are|does|did|do|has|have|had|can|could|would|will) that"
                   r"(?!\s+(?:paper|work|method|approach|model|one)\b)|this (paper|work|method|"
                   r"approach|model|one)|that (paper|work|method|approach|model|one)|the (same|former|latter) ?\w*|"
                   r"the (first|second|third|fourth|fifth|last|other) (one|two|three|paper|papers|work|method)s?|"
                   r"the (first|last) (two|three)|" + _BARE_ORDINAL + "|" + _THE_N +
                   r"|the (paper|method|approach|framework|model)|the authors?(?!\s+of\b)|"
                   r"compare them|each of them|one of them|that(?=\s+(?:compare|dif+e?r|relate|stack)))\b",
                   re.IGNORECASE)
# "that" / "this" as the object ending a short question: "any way around that?", "what's behind this?" (not "What
# about agents that seek information, is there work on that?", whose "that" is what it has just described).
# Also as the object of a verb in a question of four words or fewer: "who would use this?", "why is that?".
_THAT_BACK = re.compile(r"^\W*(?:(?:[\w'’\-]+\s+){0,4}(?:around|about|behind|beyond|past|against|with|without|for|"
                        r"from|than|like|of|on|to)|(?:[\w'’\-]+\s+){0,2}[\w'’\-]+)\s+(?:that|this)\s*[?.!]*\s*$",
                        re.IGNORECASE)
# Words said before the question proper ("ok, so ..."), and a phrase saying the subject changes ("new question:",
# "btw", "switching topics -"): `_NEW_SUBJECT` and `_LEAD_IN` read both.
_FILLER = r"(?:ok(?:ay)?|so|now|right|alright|anyway|and|also)\b[,\s]*"
_SWITCH = (r"(?:something else|(?:a\s+)?(?:new|diff(?:erent)?|another|unrelated|separate)\s+"
           r"(?:question|topic|subject|thing)|unrelated(?:,?\s+but)?|on another note|btw|by the way|"
           r"(?:changing|switching|switch|change)\s+(?:the\s+)?(?:subjects?|topics?)|(?:changing|switching)\s+"
           r"(?:gears|tack))\b")
# A question that asks for a paper of its own, or says it changes the subject: its "it" / "its" is that new paper
# ("Something else: is there a paper that recommends meals, and what is its dataset called?"); see _new_subject.
_SAYS_SWITCH = re.compile(r"\s*(?:" + _FILLER + r")*" + _SWITCH, re.IGNORECASE)
_NEW_SUBJECT = re.compile(r"^\s*(?:" + _FILLER + r")*" + _SWITCH + r"|"
                          r"\b(?:is there|are there) (?:a|any|an) (?:paper|work|study|article)s?\b|"
                          # "anything on learning from label proportions? what application motivates it"
                          r"^\s*(?:" + _FILLER + r")*(?:(?:is there\s+)?anything|any\s+(?:papers?|work|studies|"
                          r"research))\s+(?:on|about|regarding)\b|"
                          r"^\s*(?:which|what) (?:paper|work|study|article)\b(?!\s+(?:is|was) (?:it|that)\b)",
                          re.IGNORECASE)
_CONTINUES = re.compile(r"^\s*(and|also|what about|how about|so|then)\b", re.IGNORECASE)
# "what about robotics?", "ok and how about X?": a subject of the user's own, not a detail of the paper discussed.
_WHAT_ABOUT = re.compile(r"^\W*(?:(?:and|ok|okay|so|now)\W+)*(?:what|how) about\b", re.IGNORECASE)
# A paper spoken of by a noun: "the learnware paper", "the link-stealing one", "the work on ...".
_A_PAPER = re.compile(r"\b(?:paper|papers|one|ones|work|study|method|approach|framework)\b", re.IGNORECASE)


def what_about(question: str) -> bool:
    """Does the question open "what/how about ...", bringing a subject of its own? "ok and what about robotics?" ->
    True; "so how risky in the end?" -> False."""
    return bool(_WHAT_ABOUT.match(question))


def speaks_of_a_paper(question: str) -> bool:
    """Does the question speak of a paper by a noun ("compare it with the learnware paper", "the one on ...")?"""
    return bool(_A_PAPER.search(question))
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4}
_ORDINAL = re.compile(r"\b(?:the )?(first|second|third|fourth|fifth|last)(?: (one|paper|work|method|approach))?\b",
                      re.IGNORECASE)
_FIRST_N = re.compile(r"\b(?:the )?(first|last|top) (two|three|2|3)\b", re.IGNORECASE)
# "the one tracing generated images back to ...": a paper named by what it does ("the one comparing recurrent and
# multilayer nets" compares nothing itself).
_ONE_DOING = r"\bthe one (?!thing\b)[a-z\-]+ing \w[\w\-]*(?: \w[\w\-]*){0,3}"
_ONE_DOING_RE = re.compile(_ONE_DOING, re.IGNORECASE)
# "the few-shot one", "the database paper": an earlier paper named by what it is about (not "the second one").
_DESCRIBED = re.compile(r"\b(?:the|that|this) (?!(?:first|second|third|fourth|fifth|last|other|same|next|previous)\b)"
                        r"[\w\-]+(?: [\w\-]+){0,3}? (?:one|paper)\b|"
                        r"\bthe (?:paper|work|study) (?:on|about|that|which|where) [\w\-]+(?: [\w\-]+){0,3}|"
                        r"\bthe one (?:on|about|for|with|that|which|where)(?:'s|’s)? [\w\-]+(?: [\w\-]+){0,3}|"
                        + _ONE_DOING,
                        re.IGNORECASE)
# "Which of them ...?", "Which one ...?", "Which of the two ...?": one of the papers the last answer cited.
_SELECT = re.compile(r"^\s*(?:(?:and|so|ok|okay)\b[,\s]*)?(?:which|what)\s+(?:one\s+)?of\s+(?:them|these|those|the\s+"
                     r"(?:two|three|four|five|\d+|(?:[\w\-]+\s+)?(?:papers|ones|works|methods|approaches)))\b|"
                     r"^\s*(?:(?:and|so|ok|okay)\b[,\s]*)?which\s+one\b", re.IGNORECASE)
# What a follow-up can ask about a paper without naming anything ("By how much?", "On which benchmark?", "How much
# faster?", "Evaluated on how many tasks?", "Is the code available?", "Tell me more."): a question of at most
# _ELLIPTICAL_WORDS words whose other words are all of these is about the paper under discussion, as "it" would be.
_ASPECTS = frozenset("""much many more less better worse faster slower cheaper costlier larger smaller bigger higher
    lower fast slow speed speedup speedups cost costs compute memory accuracy performance gain gains improvement
    improvements result results data dataset datasets benchmark benchmarks baseline baselines metric metrics task
    tasks experiment experiments evaluated evaluation tested test compared compare trained training learning
    measured kind kinds type types sort model models method limitation limitations weakness weaknesses
    drawback drawbacks assumption assumptions code authors else exactly example examples detail details large long
    parameters size setting settings application applications proof guarantee guarantees theory main key idea ideas
    contribution contributions problem problems available open source year published summary s
    tell me you explain elaborate describe go please really released release public publicly github weights
    checkpoints implementation downloadable fewer greater percent percentage times factor points only too also just
    vs versus called named name fix solution approach technique catch downside downsides caveat caveats
    shortcoming shortcomings tradeoff tradeoffs trade-off trade-offs trade off offs close closer near optimal
    optimality bound bounds tight efficient efficiency scalable scale against combined combine combining outperform
    outperforms beat beats real world real-world match matches matched up level levels challenge challenges trick
    tricks known best like case study would could take takes took need needs needed require requires
    required""".split())
_ELLIPTICAL_WORDS = 6
# "How do the two differ?", "both": how many earlier papers the question takes together (0: no count said).
_TAKEN_TOGETHER = re.compile(r"\b(?:" + _THE_N + r"|(both))", re.IGNORECASE)
_COUNTS = {"two": 2, "three": 3, "2": 2, "3": 3}
_AUX_WORDS = "does|do|did|is|are|was|were|has|have|had|can|could|will|would|should|must|might|may"
_AUX = f"(?:{_AUX_WORDS})"
# Verbs whose subject is the noun asked for: "Which base model gets comparable to the 32B agents?".
_SUBJECT_VERBS = "gets|achieves|matches|reaches|performs|outperforms|beats|yields|gives|leads|works|helps"
# The noun a "what/which ..." question asks for: "On what kinds of tasks were ...?" -> "tasks", "What reinforcement
# learning algorithm is introduced ...?" -> "algorithm", "... covers which kinds of settings?" -> "settings".
_ASKED_NOUN = re.compile(r"\b(?:what|which)\s+((?:[\w\-]+\s+){0,3}?)(?!" + _AUX + r"\b)([a-z][\w\-]*)"
                         r"(?=\s+(?:" + _AUX_WORDS + "|" + _SUBJECT_VERBS + r")\b|\s*\?\s*$)", re.IGNORECASE)
# Heads that ask for a paper, not for something inside one.
_NOT_ASKED = frozenset("paper papers work works study studies article one ones method approach".split())
# "how many <unit words> <verb/preposition/end>": e.g. "How many parameters did ..." -> "parameters".
_STOP = (f"(?:{_AUX_WORDS}|in|of|for|on|to|at|by|from|with|that|which|who|when|where|per|across|between|used|"
         r"reported|achieved|than|it|they|their)")
_QUANTITY = re.compile(r"\bhow (?:many|much)\s+((?:(?!" + _STOP + r"\b)[\w\-/]+(?:\s+|(?=[?.,;:]|$))){1,4}?)"
                       r"(?=" + _STOP + r"\b|[?.,;:]|$)", re.IGNORECASE)
# A duration asked for ("how long does it take to train X?"), which an abstract states in hours, days or minutes.
_DURATION = re.compile(r"\bhow long (?:does|did|do|will|would|should)\b[^?]*?\b(?:take|takes|train|run|last)\b",
                       re.IGNORECASE)
_DURATION_UNITS = ("hours", "days", "minutes", "wall-clock", "runtime", "gpu-hours")
# Words that say "more/less of something" rather than naming the unit.
_NOT_UNIT = frozenset("times fold more less fewer larger smaller higher lower faster slower extra additional overall "
                      "total absolute relative average better worse quick small large fast slow big little cheaper "
                      "costlier quicker bigger greater longer shorter wider deeper stronger weaker heavier lighter "
                      "percent percentage".split())  # a percentage is written "62.6%"
# The clause that only describes which paper is meant, before or after what is asked: "In the work on RL that ...,
# what estimator is proposed?", "According to the X paper, ...", "What does GHM stand for in the offline RL paper?".
_WH = r"(?:what|which|how|who|where|when|why|does|do|did|is|are|was|were|can|could|has|have)"
_LEAD = re.compile(r"^\s*(?:(?:in|for|according to|within|from)\s+(?:the|a|an|this|that|its|their)\s+|"
                   r"(?:(?:and|also|now|so)\s+)?the\s+(?:paper|work|study)\s+(?:on|about)\s+)[^?]*?,\s*"
                   r"(?=(?:and\s+)?(?:[\w\-]+\s+){0,3}?" + _WH + r"\b)", re.IGNORECASE)
_TAIL = re.compile(r"\s+(?:in|of|for|from|by)\s+the\s+((?:[\w\-/]+\s+){0,6}?)(?:paper|work|study|method|framework|"
                   r"approach|model|generator|algorithm)\b((?:\s+(?:on|about|that|which|where|for)\b[^?]*)?)"
                   r"(?=\s*\?\s*$)", re.IGNORECASE)
# The paper described inside the question, what is asked going on after it: "What units does the object discovery
# agent in the label-free 3D scene segmentation work merge incrementally?".
_MIDDLE = re.compile(r"\s+(?:in|of|from)\s+the\s+(?:[\w\-/]+\s+){2,6}?(?:paper|work|study)\b(?=\s+\w)", re.IGNORECASE)
# A description, a dash or a colon, then the question: "the paper that learns ... from survey experiments - which real
# election data did they apply it to?".
_DASHED_ASK = re.compile(r"(?:\s+[-–—]|\s*:)\s+(?=(?:and\s+)?(?:[\w\-]+\s+){0,2}?" + _WH + r"\b)", re.IGNORECASE)
# The paper described as the subject mid-question: "Which privacy notion does the privacy-gated LLM agent paper aim
# to secure?" -> "Which privacy notion does aim to secure?".
# ("... give you to work with?": "to work" is a verb)
_SUBJECT = re.compile(r"\b((?:does|do|did|is|are|was|were|has|have)\s+)the\s+(?:[\w\-/]+\s+){2,6}?"
                      r"(?<!\bto\s)(?:paper|work)\b\s*", re.IGNORECASE)
# A name an expansion question asks to spell out: two or more capitals ("GHM", "R2G", "NAEViT", "AMCEs").
_ACRONYM = re.compile(r"\b(?=(?:[a-z0-9\-]*[A-Z]){2})[A-Za-z][A-Za-z0-9\-]*\b")
# The symbols an expansion question asks about, between its wh-word and the verb: "what does H stand for in their
# bound?", "what the S, A, H and T in their bounds stand for".
_SYMBOLS_ASKED = re.compile(r"\b(?:what|which)\b(.{0,60}?)\b(?:stands?|stood|denotes?)\b", re.IGNORECASE)
_LETTER = re.compile(r"(?<![\w\\$])[A-Za-z](?![\w])")


# "What is RKME?", "what's SeL", "and what are AMCEs?": the question is a name and nothing else.
_WHAT_IS_NAME = re.compile(r"^\W*(?i:(?:(?:and|so|ok|okay)\W+)?(?:what\s*(?:'s|’s|is|are)|whats)\s+(?:an?\s+|the\s+)?)("
                           + _ACRONYM.pattern.removeprefix(r"\b") + r")\s*[?.!]*\s*$")


def name_asked(text: str) -> str:
    """The name a question asks about and nothing else: "What is RKME?" -> "RKME"; "" otherwise."""
    m = _WHAT_IS_NAME.match(text)
    return m.group(1) if m else ""


def symbols_asked(text: str) -> tuple[str, ...]:
    """The lone letters an expansion question asks to spell out: "What does H denote?" -> ("H",); not the article
    "a" nor "I"."""
    m = _SYMBOLS_ASKED.search(text)
    return tuple(dict.fromkeys(x for x in _LETTER.findall(m.group(1)) if x not in "aiI")) if m else ()
# The word a question for a thing (not a yes/no one) opens with.
_WH_WORD = r"(?:what|which|how|who|where|when|why)"
# A second question after the first: "What does SVG stand for, and what does it not need ...?", "Which paper does
# Bayesian optimization, and on what domains?"
_SECOND = re.compile(r"(?:,\s*|\band\s+)(?:(?:on|in|for|with|by|from|at|of|under)\s+)?" + _WH_WORD + r"\b",
                     re.IGNORECASE)
# Where a question joined to another begins: "How many people took part in its user study, and how often did they
# pick the new helper?" (not a relative clause: "the model, where query and result can trade places, ...").
_AND_SECOND = re.compile(r"(?:,\s*and|\band|;|\?)\s+(?:(?:on|in|for|with|by|from|at|of|under)\s+)?" + _WH_WORD
                         + r"\b", re.IGNORECASE)


_GLOSS = re.compile(r"\(\s*(?:(?:how|what|which|who|where|when|why)\b|i\.\s?e\.|e\.\s?g\.)[^()]*\)", re.IGNORECASE)
# A topic glossed or exemplified after a comma ("distillation, i.e. compressing one model into another", "drugs, e.g.
# how drugs affect cells"), and a request after the
# question ("Is anyone doing X? Give me a quick overview."), name no more of the field.
_TOPIC_GLOSS = re.compile(r",\s*(?:i\.\s?e\.|that is|meaning|e\.\s?g\.|for example|for instance|such as|like)[^?;]*|"
                          r"\?\s*(?:please\s+)?(?:give|show|tell)\s+me\b.*$", re.IGNORECASE)


def unglossed(question: str) -> str:
    """The question without a gloss of its topic or a request after it: "Is anyone doing distillation, i.e.
    compressing one model into another? Give me a quick overview." -> "Is anyone doing distillation?"."""
    return _TOPIC_GLOSS.sub("", question)


# A kind asked for, a "how ..." inside it saying of what: "on what kind of data do they check how far off the
# estimates are?" asks for a kind of data, not a distance; not past a second question (", and how big is ...?").
_KIND_OF = re.compile(r"\b(?:what|which) (?:kinds?|types?|sorts?) of\b", re.IGNORECASE)
_NEXT_QUESTION = re.compile(r"[?;]|,\s*(?:and|or|but)\b|\band (?:how|what|which|why)\b", re.IGNORECASE)


def _kind_asked(main: str) -> bool:
    """Does every number the question seems to ask for sit inside a "what kind of ..." question?"""
    kind = _KIND_OF.search(main)
    found = list(WANTS_NUMBER.finditer(main))
    if kind is None or not found:
        return False
    return all(n.start() > kind.start() and not _NEXT_QUESTION.search(main[kind.end():n.start()]) for n in found)


def compound_parts(question: str) -> tuple[str, ...]:
    """The questions a compound question joins, each as asked: "Which open-weight model does SERA match, and how
    much cheaper than RL is it?" -> ("Which open-weight model does SERA match", "how much cheaper than RL is it?");
    one question alone -> (question,). Words before the first question ask nothing: "ok and what about ...?" is one.
    """
    cuts = [m.start() for m in _AND_SECOND.finditer(question, 1)]
    bounds = [0, *cuts, len(question)]
    parts = [question[a:b].strip(" ,;") for a, b in zip(bounds, bounds[1:])]
    parts = [re.sub(r"^(?:and|\?)\s+", "", p, flags=re.IGNORECASE) for p in parts]
    if len(parts) > 1 and len(tokens(parts[0])) < 2:  # "ok", "so": a lead-in, not a question
        parts = [f"{parts[0]} and {parts[1]}", *parts[2:]]
    return tuple(p for p in parts if p) or (question,)


# Setting papers side by side: "How does it compare with ...?", "How does it differ from NAEViT?".
# ("diffrent", "diference": the misspellings users type)
_COMPARES = re.compile(r"\b(?:compare[sd]?|comparison|comparing|dif+e?r(?:s|e?n(?:t|ces?))?|"
                       r"versus|vs|better than|worse than|similar to|in common|similarit(?:y|ies)|shares? with|"
                       r"stacks? up|measures? up|fares?|holds? up|"
                       r"who wins|which (?:one |of the two )?(?:is|was|does|did) (?:better|worse|cheaper|faster|"
                       r"slower|more|less)|"
                       # "which of these two is more about ...?", "which one of the two beats ... by the bigger gap?",
                       # "which of those two is about X and which about Y?": the two weighed, not one picked out
                       r"which (?:one )?of (?:the|these|those) (?:two|2)\b[^?]*?\b(?:more|less|better|worse|bigger|"
                       r"larger|smaller|faster|slower|cheaper|higher|lower|stronger|weaker|and which))\b",
                       re.IGNORECASE)
# A comparison the method does without, not one asked for: "what do they use instead of comparing every pair?".
_NOT_COMPARING = re.compile(r"\b(?:instead of|rather than|without|avoid(?:s|ing)?)\s+(?:\w+ing\s+)?compar\w*",
                            re.IGNORECASE)
# Whether a paper's code, data or weights can be had: "Is the code available?", "Is it open source?".
# An artefact word that only modifies another ("code-writing agents") is not the artefact asked for: (?!-).
_AVAILABILITY = re.compile(r"\b(?:code|implementation|source|weights|checkpoints?|models?|data(?:sets?)?)\b(?!-)"
                           r"[^?]{0,40}?"
                           # "public" as what the artefact is ("Is the code public?"), not an attribute of
                           # something else ("each model comes with a public descriptor")
                           r"\b(?:available|released|publicly|public(?=\s*(?:[?.!,;]|$|or\b|and\b))|open[- ]sourced?|"
                           r"on github|downloadable)\b|"
                           r"\bopen[- ]source\b|\bgithub\b|\bwhere can (?:i|one|we) (?:get|find|download)\b|"
                           # the verb first: "Does it release code?", "Do they share their weights?" (and models or
                           # data only when asked whether: "Which papers release a dataset?" asks for papers)
                           r"\b(?:releas|shar|publish|open[- ]sourc)\w*\s+(?:(?:the|its|their|any|all)\s+)?"
                           r"(?:source\s+)?(?:code|implementation|weights|checkpoints?)\b(?!-)|"
                           r"^\s*(?:does|do|did|will|is|are|has|have)\b[^?]*\b(?:releas|shar|publish|open[- ]sourc)"
                           r"\w*\s+(?:(?:the|its|their|any|all)\s+)?(?:\w+\s+)?(?:models?|data(?:sets?)?|benchmarks?)\b|"
                           # a follow-up of two words: "Any code?", "And the code?", "Code?"
                           r"^\s*(?:and\s+)?(?:(?:any|the|its|their)\s+)?(?:source\s+)?(?:code|implementation|"
                           r"weights|checkpoints|repo|repository)\s*[?.!]?\s*$",
                           re.IGNORECASE)
# The paper's own weaknesses asked for; not those of earlier work it addresses ("What limitation of existing
# methods motivates NDA?", "which drawback does it fix?").
_LIMITATIONS = re.compile(r"\b(?:limitations?|weakness(?:es)?|drawbacks?|shortcomings?|downsides?|caveats?|"
                          r"trade-?offs?|(?:the|any) catch(?:es)?)\b", re.IGNORECASE)
_OTHERS_LIMITS = re.compile(r"\b(?:address|overcome|target|tackle|fix|solve|mitigat|motivat|remed|alleviat|resolv|"
                            r"avoid|handl|remov|eliminat)\w*|\b(?:earlier|existing|prior|previous|current|other|"
                            r"conventional|traditional|baselines?|standard)\b", re.IGNORECASE)
_AUTHORS = re.compile(r"\b(who (?:are|were|is|was) the authors?|who (?:wrote|authored|published)|authors? of|"
                      r"who (?:proposed|introduced|developed|created|invented|designed|is behind|are behind)\b|"
                      r"(?:written|authored) by|affiliat\w*|which (?:university|universities|institution|lab|company))",
                      re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    text: str
    kind: str  # "summary", "which" or "factoid"
    wants: str  # "number", "expansion", "name", "yesno" or ""
    asks: frozenset[str]  # every answer kind the question matches (wants is the first)
    unit: tuple[str, ...]  # a quantity question's unit words: "how many GPUs and hours" -> ("gpus", "hours")
    unit_phrase: str  # ... as asked: "GPUs and hours"
    unit_heads: tuple[str, ...]  # the head noun of each unit asked: "how many synthetic trajectories" -> trajectories
    authors: bool  # asks who wrote a paper or where they work
    refers_back: bool  # "it", "its", "that paper", "the second one", "compare them", "By how much?" ...
    described: bool  # names an earlier paper by what it is about: "the few-shot one", "the clinical paper"
    continues: bool  # opens like a continuation ("and ...", "what about ...")
    new_subject: bool = False  # asks for a paper of its own ("is there a paper that ...?") or says it changes subject
    noun: str = ""  # the noun a "what/which ..." question asks for: "which datasets does ..." -> "datasets"
    ask: str = ""  # what is asked, without the clause describing the paper (`ask_part`); "" when that is all of it
    acronym: str = ""  # the name an expansion question asks to spell out: "What does GHM stand for?" -> "GHM"
    symbols: tuple[str, ...] = ()  # the symbols one asks about instead: "What does H stand for in the bound?" -> H
    compound: bool = False  # asks a second thing: "What does SVG stand for, and what does it not need?"
    selects: bool = False  # asks which of the earlier papers: "Which of them is about graphs?"
    availability: bool = False  # asks whether code, data or weights are available: "Is the code available?"
    compares: bool = False  # sets papers side by side: "How does it differ from NAEViT?"
    limitations: bool = False  # asks for the paper's own limitations: "What are the limitations of SERA?"
    choices: tuple[str, ...] = ()  # the alternatives an either/or question offers (`choices_in`)
    collection: bool = False  # asks for the collection itself, no topic: "List all papers", "How many are there?"
    # Set by `in_context`: the standalone form retrieval searches, and the earlier papers the question points at.
    searched: str = ""
    pinned: tuple[str, ...] = ()
    in_order: bool = False  # the pinned papers are in the order the user gave them (`conversation.Focus.in_order`)
    past: int = 0  # "the second one" after an answer citing this many papers, fewer than the place asked for
    # Set by `in_corpus`: names no abstract contains, and words of the searched form few papers use.
    absent: tuple[str, ...] = ()
    rare: tuple[str, ...] = ()
    # Set by `in_corpus` for an existence question: words of its topic no abstract uses in any form.
    unmentioned: tuple[str, ...] = ()
    exists: bool = False  # asks whether a paper on something exists: "Is there a paper on ...?", "Do any papers ...?"
    # asks that, then something of the paper: "Is there a paper on federated learning, and what accuracy did it report?"
    exists_first: bool = False
    # either, in the singular ("is there a paper that ..., and what is its dataset called?"), not for all there are
    # ("Are there papers on ...?", "Is anyone doing distillation?")
    one_sought: bool = False
    model_asked: bool = False  # asks for a model by name: "Which base model ...?" (not "which kind of models ...?")
    counted: bool = False  # asks how many of a unit: "How many athletes ...?" (not "how much compute")

    @property
    def summary(self) -> bool:
        return self.kind == "summary"

    @property
    def which(self) -> bool:
        return self.kind == "which"

    @property
    def scored(self) -> str:
        """What evidence sentences are scored against: the searched form, except for a pinned follow-up, whose
        searched form carries the pinned papers' titles (which every sentence of those papers would match)."""
        return self.text if self.pinned else self.searched

    @property
    def asked(self) -> str:
        """What a sentence inside the chosen paper must answer: `scored` without the words that only name the paper,
        among earlier ones or on its own ("Which datasets does the few-shot one use?", "What datasets does the
        few-shot learning paper evaluate on?" -> "Which datasets does use?"): every sentence about few-shot learning
        matches those, the one naming the datasets need not; likewise `ask`, the question without the clause that
        describes its paper."""
        whole = self.ask or self.scored
        if self.described:
            rest = _DESCRIBED.sub(" ", whole)
            # "What is the FoundObj paper about?" asks about the whole paper: nothing is left to pick a sentence by.
            return rest if tokens(rest) else whole
        return whole

    def in_context(self, searched: str, pinned: tuple[str, ...] = (), described: bool = False,
                   side_by_side: bool = False, in_order: bool = False, past: int = 0) -> Question:
        """With its standalone form and pinned papers; two or more pinned papers not told apart ("compare them",
        "the first two") make it a summary of those papers. `described`: the pinned papers are candidates for the
        one the question describes (`conversation.Focus.described`); `side_by_side`: they are all set side by side,
        whatever the question describes ("How does it compare with the learnware paper?"); `in_order`: listed in
        the order given; `past`: the place the question points at is past the papers the last answer cited (that
        many)."""
        described = (self.described or described) and not side_by_side
        kind = "summary" if len(pinned) > 1 and not described else self.kind
        return replace(self, searched=searched, pinned=pinned, kind=kind, described=described, in_order=in_order,
                       past=past)

    def spelling_out(self, name: str) -> Question:
        """The question asking what `name` stands for: "What is RKME?" when an abstract defines RKME, a term of
        the paper rather than its name, is answered as "What does RKME stand for?" would be."""
        asks = (self.asks - {"overview"}) | {"expansion"}
        return replace(self, wants="expansion", asks=asks, acronym=name)

    def in_corpus(self, absent: tuple[str, ...], rare: tuple[str, ...],
                  unmentioned: tuple[str, ...] = ()) -> Question:
        return replace(self, absent=absent, rare=rare, unmentioned=unmentioned)

    @property
    def topic_words(self) -> list[str]:
        """An existence question's topic, as content words: "Is there a paper on speculative decoding for faster LLM
        inference?" -> ["speculative", "decoding", "faster", "llm", "inference"]; of a question going on to ask
        something of that paper, the first part's ("..., and what accuracy did it report?")."""
        asked = compound_parts(self.text)[0] if self.exists_first else self.text  # not what it then asks of it
        # Examples of the topic are not the topic: "... or tasks where the order of the inputs matters" (after
        # "e.g.") would have the answer say that no abstract mentions "matters".
        return [w for w in dict.fromkeys(tokens(without_exists_frame(proper(unglossed(asked)))))
                if w not in _FRAME_WORDS]

    def distinctive(self, paper_words: set[str]) -> tuple[str, ...]:
        """Rare terms the paper contains: a short question ("What does SOLAR stand for?") has a low cosine to any
        chunk, yet a word only one paper uses is evidence enough that it asks about that paper."""
        return tuple(t for t in self.rare if t in paper_words)


def ask_part(question: str) -> str:
    """The question without the words that only say which paper it is about: inside that paper, the sentence that
    answers shares the asked words, while its framing sentence ("We propose a ... for ...") shares the description.

    e.g. "In the work on RL robust to model mismatch, what estimator is proposed?" -> "what estimator is proposed?";
    "A study found X. What does it say Y comes from?" -> "What does it say Y comes from?"; "What does GHM stand for
    in the offline model-based RL paper?" -> "What does GHM stand for?"; "Which privacy notion does the privacy-gated
    LLM agent paper aim to secure?" -> "Which privacy notion does aim to secure?". A description of one word ("the
    full name of the RHI algorithm") names what is asked about and stays.
    """
    # (a second question typed in lower case starts a part too: "which of those is about coding agents? what do
    # they generate training trajectories from?")
    # (... and after a full stop: "... against a rival. in which setting can the optimum be written in closed form?")
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z]|(?:(?:in|on|for|with|by|from|at|of|under)\s+)?" + _WH_WORD + r"\b)",
                     question.strip())
    ask = parts[-1] if len(parts) > 1 and parts[-1].rstrip().endswith("?") else question.strip()
    ask = _LEAD.sub("", ask)
    dash = _DASHED_ASK.search(ask)  # "the paper that ... on voting - which real election data ...?"
    if dash:
        ask = ask[dash.end():]
    tail = _TAIL.search(ask)
    if tail and len((tail.group(1) + tail.group(2)).split()) >= 2:
        ask = ask[:tail.start()] + ask[tail.end():]
    else:
        ask = _MIDDLE.sub("", _SUBJECT.sub(r"\1", ask, count=1), count=1)
    ask = ask.strip()
    return ask if ask != question.strip() and len(tokens(ask)) >= 2 else ""


def _new_subject(question: str) -> bool:
    """Does the question, before its first back-reference, ask for a paper of its own described in at least two
    words, or say it changes the subject? "Is there a paper that recommends sustainable meals, and what is its
    dataset?" -> True; "Which paper did they compare against?" -> False."""
    back = _BACK.search(question)
    before = question[:back.start()] if back else question
    m = _NEW_SUBJECT.search(before)
    if not m:
        return False
    described = [t for t in tokens(before[m.end():]) if t not in _NOT_ASKED]
    return bool(_SAYS_SWITCH.match(m.group(0))) or len(described) >= 2


def short(question: str) -> bool:
    """Short enough to be a follow-up that leans on what was said before ("By how much?", "What is the main risk?")."""
    return len(question.split()) <= _ELLIPTICAL_WORDS


# "the description", "the loss": a definite noun phrase's first word.
_DEFINITE = re.compile(r"\bthe\s+([a-z][\w-]*)", re.IGNORECASE)


def definite_nouns(question: str) -> set[str]:
    """The words a question puts after "the", beyond the generic ones any question may use: "and what must the
    description never give away?" -> {"description"}; "what are the results?" -> set()."""
    generic = _ASPECTS | _NOT_ASKED | _FRAME_WORDS
    return {t for m in _DEFINITE.finditer(question) for t in tokens(m.group(1)) if t not in generic}


def named_words(question: str) -> set[str]:
    """The question's words beyond the generic ones any follow-up may use: "What is the main risk?" -> {"risk"}."""
    return {t for t in tokens(question) if t not in _ASPECTS}


_SEVERAL_POINTERS = frozenset("they them their theirs these those both".split())


def names_another(question: str, one_cited: bool = False) -> bool:
    """Does a comparison name something besides what it points back at? "How does it differ from NAEViT?" -> True;
    "How do they differ?", "Compare them." -> False (the papers already cited are the ones compared). After an
    answer citing one paper, "they" is that paper's authors, not several papers: "how does that compare with the
    GNN link-stealing paper, how much do they improve over generic attacks?" names another (`one_cited`)."""
    if points_at_several(question):
        if not one_cited:
            return False
        return bool(named_words(_COMPARES.sub(" ", question)) - _SEVERAL_POINTERS)
    return bool(named_words(_COMPARES.sub(" ", question)))


def elliptical(question: str) -> bool:
    """Does the question name nothing of its own, so that it can only be about what was being discussed? "By how
    much?", "How much faster?", "On which benchmark?" -> True; "And what about diffusion?" -> False."""
    return short(question) and not named_words(question)


# The size of a study asked for, which an abstract gives in people: "how big was their user study?".
_STUDY_SIZE = re.compile(r"\bhow (?:big|large|many people)\b[^?]*?\b(?:study|studies|survey|trial|experiment)\b|"
                         r"\bsize of (?:the|their|its) (?:user )?(?:study|survey|trial)\b", re.IGNORECASE)
# A lead-in saying the subject changes, before the question proper: "new question: anything on ...", "btw, ...".
_LEAD_IN = re.compile(r"^\s*(?:" + _FILLER + r")*(?:" + _SWITCH + r"\s*[:,;\-–—.]*\s*)?", re.IGNORECASE)


def without_exists_frame(question: str) -> str:
    """The question without the frame asking whether papers exist: "Is there a paper on robotics?" -> "robotics?"."""
    return _EXISTS.sub("", question)


# A topic named first, then a listing asked of it in the same message: "ok what about privacy stuff, which papers are
# about that?" asks "which papers are about privacy stuff?".
_TOPIC_THEN_LISTING = re.compile(
    r"^\s*(?:(?:ok|okay|so|and|now)\b[,\s]*)*(?:what|how) about\s+(?P<topic>[^,;:?]+?)\s*[,;:?]+\s*"
    r"(?P<ask>(?:which|what|any) (?:papers?|works?|studies|research)\b[^?]*?\b(?:about|on|cover|covers|covering|"
    r"study|studies|do|does|use|uses|deal with|deals with|address|addresses))\s+(?:that|this|it|those|them)\s*\??\s*$",
    re.IGNORECASE)


def proper(question: str) -> str:
    """The question without a lead-in changing the subject: "btw, which papers use RL?" -> "which papers use RL?"; a
    topic named before the listing asked of it, put in its place ("what about privacy stuff, which papers are about
    that?" -> "which papers are about privacy stuff?")."""
    m = _TOPIC_THEN_LISTING.match(question)
    if m:
        return f"{m.group('ask')} {m.group('topic')}?"
    return _LEAD_IN.sub("", question)


# A request put to the assistant, before what is requested: "Can you list the papers about LLM agents?" asks for the
# listing, not whether it can be listed; "could you tell me which papers study privacy?" asks which papers do.
_REQUEST = re.compile(r"^\s*(?:(?:(?:can|could|would|will)\s+you|please)\s+(?:please\s+|kindly\s+)?"
                      r"(?=(?:list|show|give|tell|name|summari[sz]e|explain|describe|find|point|recommend|suggest|"
                      r"compare|walk|what|which|how|why)\b))?(?:(?:tell|show)\s+me\s+(?=(?:which|what|how|why|whether|if|who|where|when)\b))?",
                      re.IGNORECASE)


# A follow-up naming only what it asks for, one or two lower-case words ("and datasets", "noise levels?"): what is
# asked is that thing ("what datasets?"). Not a pointer ("and the first one?") nor a verb with its preposition
# ("evaluated on?"), nor a name ("and SERA?").
_BARE = re.compile(r"^\s*(?:(?:and|also|plus|ok|okay|so)\b[\s,]*)?(?:(?:the|its|their)\s+)?"
                   r"(?P<asked>[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*)?)\s*\??\s*$")
_NOT_BARE = frozenset("one ones first second third last other both former latter them it this that these those same "
                      "why how what which who when where on in with for to of from by about".split())


# Greetings before a question and remarks on the answer's form after it ("Hi! Which of the papers come up with a new
# loss function? A short list is fine.") put nothing: the question is what lies between.
_GREETING = re.compile(r"^\s*(?:(?:hi|hello|hey|hiya|greetings|good\s+(?:morning|afternoon|evening))(?:\s+there)?"
                       r"(?:\s*[!,.:;\-–—]+|\s+(?=(?:please|can|could|would|which|what|how|why|is|are|do|does|any)\b)))\s*",
                       re.IGNORECASE)
_SIGN_OFF = re.compile(r"(?<=[?.!])\s+(?:(?:many\s+)?thanks(?:\s+a\s+lot|\s+in\s+advance)?|thank\s+you(?:\s+\w+)?|"
                       r"cheers|ta|(?:a|one|the)\s+(?:short|brief|quick|rough)\s+(?:list|answer|summary|overview)\s+"
                       r"(?:is|would\s+be)\s+(?:fine|ok|okay|enough|great|perfect)|keep\s+it\s+(?:short|brief)|"
                       r"(?:just\s+)?(?:the\s+)?names?\s+(?:is|are|would\s+be)\s+(?:fine|ok|okay|enough))"
                       r"\s*[.!]*\s*$", re.IGNORECASE)


def request_put(question: str) -> str:
    """The question a request to the assistant puts: "Can you list the papers on privacy?" -> "list the papers on
    privacy?"; "could you tell me how much PrivGate cuts leakage?" -> "how much PrivGate cuts leakage?"; "and
    datasets" -> "what datasets?"; "Hi! Which papers are on RL? A short list is fine." -> "Which papers are on RL?".
    A question about a paper ("Can SERA be trained on one GPU?") is left as it is."""
    question = _SIGN_OFF.sub("", _GREETING.sub("", question, count=1)).strip() or question
    bare = _BARE.match(question)
    if bare and not set(bare.group("asked").split()) & _NOT_BARE:
        return f"what {bare.group('asked')}?"
    return _REQUEST.sub("", question, count=1) or question


# The end of a question that goes on to say more of its topic: "anything on forecasting? predicting what comes next
# over time" asks for a field of one word.
SAID_MORE = re.compile(r"\?\s+(?=\w)")


def read(question: str, alone: bool = False) -> Question:
    """e.g. read("By how much does it cut leakage?") -> Question(kind="factoid", wants="number", refers_back=True);
    `alone`: nothing was said before, so "Which of these papers ...?" asks about every paper, not earlier ones."""
    question = request_put(question)
    selects = bool(_SELECT.search(question)) and not alone
    collection = bool(_COLLECTION.match(question)) or (alone and bool(_THEMES.match(question)))
    asked = proper(question)  # the question after a lead-in changing the subject
    listing = SUMMARY.search(asked) or collection or EACH_PAPER.search(asked) or TOPIC_PAPERS.search(asked)
    if listing and not selects and not _ONE_PAPER.search(asked):
        kind = "summary"
    elif WHICH.search(question) or selects:
        kind = "which"
    else:
        kind = "factoid"
    parts = compound_parts(asked)
    # "is there a paper that ...? what convinced them ...?" goes on to ask something of that paper, as ", and what".
    exists = bool(_EXISTS.search(asked)) and not _SECOND.search(asked, 1) and len(parts) == 1
    exists_first = not exists and len(parts) > 1 and bool(_EXISTS.search(parts[0]))
    if (exists or exists_first) and not selects:
        # Alternatives name one topic: "anything on making inference cheaper or faster?" is a field of two words.
        # (Of "anything on X? what motivates it", the topic is X.)
        topic = re.sub(r"\b[\w\-]+\s+or\s+(?=[\w\-]+)", "",
                       _EXISTS.sub("", unglossed(parts[0] if exists_first else SAID_MORE.split(asked, 1)[0])),
                       flags=re.IGNORECASE)
        words = len([w for w in tokens(topic) if w not in _FRAME_WORDS])
        # "Is there a paper on robotics?" names a field, and every paper in it answers: a listing. One described
        # in the singular ("Is there work on the privacy risk of the specifications published in learnware?") is
        # one paper; "Are there papers ...?" asks for all.
        if words <= _TOPIC_WORDS:
            kind = "summary"
        elif kind == "summary" and not _PLURAL.search(question):
            kind = "which"
    # A question in parentheses glosses the one asked: "What kind of randomness guarantee (how many items are jointly
    # random) do its orderings get?" asks for a kind, not a number of items.
    main = _GLOSS.sub(" ", question)
    asks = [k for k, pattern in (("number", WANTS_NUMBER), ("expansion", WANTS_EXPANSION), ("name", WANTS_NAME),
                                 ("yesno", YESNO), ("reason", WANTS_REASON), ("finding", WANTS_FINDING),
                                 ("overview", WANTS_OVERVIEW), ("method_name", WANTS_METHOD_NAME),
                                 ("evaluation", WANTS_EVALUATION), ("solution", WANTS_SOLUTION))
            if (pattern.search(main) or (k == "overview" and _ONE_PAPER.search(question)))
            # A second question asks something narrower: "is there a paper that ..., and what is its dataset?"
            and not (k == "overview" and (kind == "summary" or _SECOND.search(question, 1)))]
    if "number" in asks and _kind_asked(main):
        asks.remove("number")
    if kind == "summary" and COUNT.search(question):  # the number asked for is the listing's length
        asks = ["count"] + [k for k in asks if k != "number"]
    quantity = _QUANTITY.search(main)
    unit = tuple(t for t in tokens(quantity.group(1)) if len(t) >= 3 and not t.isdigit() and t not in _NOT_UNIT) \
        if quantity else ()
    duration = not unit and bool(_DURATION.search(main))
    if duration:
        unit = _DURATION_UNITS
    study = not unit and bool(_STUDY_SIZE.search(main))
    if study:  # "how big was their user study?" is answered in people ("an 18-person user study")
        unit = ("participants",)
    described = bool(_DESCRIBED.search(question)) or selects
    m = _ASKED_NOUN.search(question)
    # "Which paper proposes SOLAR?" asks for a paper, "What does SOLAR stand for?" for no noun: the phrase opens with
    # one of _NOT_ASKED or a verb; nor does "what else does their method do better?" ("else" is no noun).
    opens = (m.group(1) + m.group(2)).split()[0].lower() if m else ""
    noun = m.group(2).lower() if m and opens not in _NOT_ASKED | {"else"} and not re.fullmatch(_AUX, opens) else ""
    ask = ask_part(question)
    if defined_term(question) and not asks:
        asks.append("definition")
    if not asks and _PROPOSED.search(main):
        # "what cheap signal does the proposed credit-reallocation fix rely on?": the paper's own method, as it
        # presents it
        asks.append("solution")
    if WANTS_PRIOR.search(question) and not _PAST_IT.search(question):
        asks.append("prior")
    if WANTS_COMPARISON.search(ask or question) and "reason" not in asks:
        # "Why does mixing labels beat soft labels alone?" asks for the cause, not for which methods are beaten.
        asks.append("comparison")
    if WANTS_MECHANISM.search(main) and not _HOW_WELL.search(main) and not {"solution", "reason"} & set(asks):
        asks.append("mechanism")
    named = _ACRONYM.search(ask or question) if "expansion" in asks else None
    phrase = "a duration (hours, days or minutes)" if duration else "participants" if study else \
        quantity.group(1).strip() if quantity else ""
    heads = tuple(h[-1] for part in re.split(r"\s+(?:and|or)\s+|,\s*", phrase) if (h := tokens(part))
                  and h[-1] in unit) or unit
    # "how many people took part ...?" counts people, not parts ("human-verified pairs" counts pairs).
    heads = tuple(t for t in unit if names_people(t) and "-" not in t and t in phrase.lower().split()) or heads
    return Question(text=question, kind=kind, wants=asks[0] if asks else "", asks=frozenset(asks), unit=unit,
                    unit_heads=heads,
                    unit_phrase=phrase, authors=bool(_AUTHORS.search(question)),
                    refers_back=bool(_BACK.search(asked) or _THAT_BACK.match(asked)) or described
                    or (kind != "summary" and elliptical(question)), described=described,
                    continues=bool(_CONTINUES.search(question)), searched=question,
                    noun=noun, ask=ask, new_subject=_new_subject(question), acronym=named.group(0) if named else "",
                    symbols=symbols_asked(ask or question) if "expansion" in asks and not named else (),
                    compound=bool(_SECOND.search(question, 1)), selects=selects,
                    availability=bool(_AVAILABILITY.search(question)),
                    compares=bool(_COMPARES.search(_NOT_COMPARING.sub(" ", _ONE_DOING_RE.sub(" ", question)))),
                    limitations=bool(_LIMITATIONS.search(question)) and not _OTHERS_LIMITS.search(question),
                    choices=choices_in(question) if kind != "summary" and not _EXISTS.search(question) else (),
                    collection=collection,
                    exists=exists, exists_first=exists_first,
                    one_sought=(exists or exists_first) and bool(_ONE_SOUGHT.search(question))
                    and not _PLURAL.search(question),
                    model_asked=noun[:5] in _MODEL_NOUNS and not _A_KIND.search(question),
                    counted=bool(unit) and not duration and quantity is not None
                    and quantity.group(0).lower().startswith("how many"))


# Words that only set papers side by side: "How do they differ?", "what do the two have in common?".
_SIDE_BY_SIDE = frozenset("compare compared comparing comparison differ differs difference differences different "
                          "common similar similarities similarity contrast they them their these those two both "
                          "approaches each other".split())


def compared_on(question: str) -> set[str]:
    """What a comparison names to compare the papers on: "How do they differ in speed?" -> {"speed"}; "compare them",
    "How do the two differ?" -> set() (each paper's own work is what is compared)."""
    return {w for w in tokens(question) if w not in _SIDE_BY_SIDE}


def points_at_several(question: str) -> bool:
    """Does the question point back at more than one paper ("compare them", "how do they differ?", "compare their
    approaches")?"""
    return bool(_SEVERAL.search(question))


_SEVERAL = re.compile(r"\b(?:they|them|their|both|these|those)\b", re.IGNORECASE)


def taken_together(question: str) -> int:
    """How many earlier papers the question takes together when it says a count rather than which ones: "How do
    the two differ?" -> 2, "Do both use RL?" -> 2; 0 otherwise ("the first two" says which: `pointed_at`)."""
    if _FIRST_N.search(question):
        return 0
    m = _TAKEN_TOGETHER.search(question)
    return (_COUNTS[m.group(1).lower()] if m.group(1) else 2) if m else 0


# Where a comparison's next term begins: "SOLAR vs NAEViT", "How does SOLAR differ from NAEViT?", "Compare PrivGate
# with the learnware paper".
_COMPARED_PART = re.compile(r"\b(?:vs\.?|versus|and|or|with|from|to|than|against|between)\b|,|;", re.IGNORECASE)


def names_in(text: str) -> list[str]:
    """Words written as names, lower-cased as `tokens` gives them: two capitals or a capital and a digit ("SOLAR",
    "PrivGate", "R2G", "STT-LLM", "Opt-Miner"), e.g. names_in("How does PrivGate differ from SERA?") -> ["privgate",
    "sera"]."""
    return [w.lower() for w in names_as_written(text)]


def names_as_written(text: str) -> list[str]:
    """`names_in` in the text's own case: "Is TIED model-based?" -> ["TIED"]."""
    return [w for w in re.findall(r"\b" + NAME_FORM, text) if w.lower() not in _NO_NAMES]


def typed_lower(text: str) -> list[str]:
    """The words the text types all in lower case, a name among them perhaps ("rhi", "stt-llm"): not the words
    written in capitals (`names_as_written`) nor those that name no paper (`_NO_NAMES`)."""
    return [w for w in re.findall(r"\b[a-z][a-z0-9\-]*[a-z0-9]\b", text) if len(w) >= 3 and w not in _NO_NAMES]


# A follow-up that opens with the name it then points back at: "and SERA, what training does it use instead of RL?",
# "what about NAEViT - is it faster?", "ok the TIED paper: which baselines does it beat?".
_LEADING_NAME = re.compile(r"^\W*(?:(?:and|ok|okay|so|now|also|then)\b[,\s]*)?(?:(?:what|how) about\s+)?(?:the\s+)?"
                           r"(" + NAME_FORM + r")(?:\s+(?:paper|one|method|model|work))?(?:\s+(?:then|though|too|now))?"
                           r"\s*(?:[,:;?]|\s[-–—]\s)")


def leading_name(text: str) -> str:
    """The name a question opens with as its subject, lower-cased ("and SERA, what does it ...?" -> "sera"), or ""."""
    m = _LEADING_NAME.match(text)
    return m.group(1).lower() if m and m.group(1).lower() not in _NO_NAMES else ""


# Words written in capitals that name no paper: "over SOTA systems", "on one GPU".
_NO_NAMES = frozenset("sota ai ml gpu gpus cpu cpus tpu tpus api apis io ood iid url urls pdf faq llm llms".split())


# Two papers asked about in one message, each named or described: "what gains do AREW and the active distribution
# shaping paper each report?", "looking for two papers: the grokking one and the one about composing group elements".
_PAIR_CUE = re.compile(r"\b(?:each|both|respectively|(?:two|both|the) (?:papers|works|methods|studies|approaches))\b",
                       re.IGNORECASE)
_REFERENCE_END = re.compile(r"(?:\b" + NAME_FORM + r"|\b(?:one|paper|work|method|approach|study))\s*[:,]?\s*$")
_REFERENCE_START = re.compile(r"^\s*(?:" + NAME_FORM + r"\b|the\s+(?:[\w\-/]+\s+){0,8}?"
                              r"(?:one|paper|work|method|approach|study)\b)")


def paper_pair(question: str) -> tuple[str, str] | None:
    """The two references of a message asking about two papers at once, each a name or a description ending in
    "one", "paper", "work", ... joined by "and" (e.g. "what gains do AREW and the active distribution shaping paper
    for RL rollouts each report?" -> ("what gains do AREW", "the active distribution shaping paper for RL rollouts
    each report?")); None for any other question. The words after the second reference belong to it, as a
    retriever reads them."""
    if not _PAIR_CUE.search(question):
        return None
    for m in re.finditer(r"\s+and\s+", question):
        left, right = question[:m.start()], question[m.end():]
        if _REFERENCE_END.search(left) and _REFERENCE_START.match(right):
            return left.strip(), right.strip()
    return None


def compared_parts(question: str) -> list[str]:
    """The terms of a comparison, without its comparing words, e.g. "How does SOLAR differ from NAEViT?" -> ["How
    does SOLAR", "NAEViT?"]."""
    parts = (re.sub(r"\s+", " ", _COMPARES.sub(" ", p)).strip() for p in _COMPARED_PART.split(question))
    return [p for p in parts if p]


def other_side(question: str) -> str:
    """The one term a comparison sets against the paper under discussion: "compare w/ the disentanglement paper" ->
    "w/ the disentanglement paper"; "" when it has two terms, or asks what the other side is ("versus which existing
    designs?", which names no paper)."""
    parts = compared_parts(question)
    return parts[0] if len(parts) == 1 and not re.match(r"\W*(?:which|what)\b", parts[0], re.IGNORECASE) else ""


# A follow-up that only points at another earlier paper: "And the first one?", "What about the second?", "and for the
# other one?"; it asks of that paper what the question before it asked.
_ONLY_POINTS = re.compile(r"^\s*(?:(?:and|so|ok|okay)\s+)?(?:(?:what|how)\s+about\s+)?(?:for\s+)?the\s+(?:first|second|"
                          r"third|fourth|fifth|last|other)(?:\s+(?:one|paper|work|method))?\s*[?.!]*\s*$",
                          re.IGNORECASE)


def only_points(question: str) -> bool:
    """Does the question only point at an earlier paper ("And the first one?"), asking what the last question asked?"""
    return bool(_ONLY_POINTS.match(question))


def place_asked(question: str) -> str:
    """The place in a list a question points at, as written: "Tell me more about the second one." -> "second"."""
    m = _ORDINAL.search(question) if by_position(question) else None
    return m.group(1).lower() if m else ""


def by_position(question: str) -> bool:
    """Does the question pick earlier papers by their place in a list ("the second one", "and the first one?", "the
    first two", "the last paper")?"""
    if _FIRST_N.search(question):
        return True
    m = _ORDINAL.search(question)
    return m is not None and bool(m.group(2) or re.search(r"\b(paper|one|work|method)s?\b", question, re.IGNORECASE)
                                  or re.search(_BARE_ORDINAL, question, re.IGNORECASE))


def pointed_at(question: str, count: int) -> list[int]:
    """Which of the `count` previously cited papers (0-based, in citation order) the question points at.

    "the second one", "and the second?" -> [1]; "the first two" -> [0, 1]; "the last one" -> [count - 1]; "it",
    "its", "that paper" -> [0]; "they", "them", "both", "compare them" -> all. e.g. pointed_at("What about the second
    one?", 3) -> [1]
    """
    if count <= 0:
        return []
    m = _FIRST_N.search(question)
    if m:
        n = min(_COUNTS[m.group(2).lower()], count)
        return list(range(count - n, count)) if m.group(1).lower() == "last" else list(range(n))
    m = _ORDINAL.search(question)
    if m and by_position(question):
        word = m.group(1).lower()
        i = count - 1 if word == "last" else _ORDINALS[word]
        return [i] if i < count else []
    if re.search(r"\b(they|their|them|theirs|both|these|those|each|either)\b", question, re.IGNORECASE):
        return list(range(count))
    return [0]
