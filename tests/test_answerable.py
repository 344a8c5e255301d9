"""Near-miss questions: the right paper is found but what is asked for is not in it."""

from pathlib import Path

from fakes import HashEmbedder, ScriptedGenerator
from helpers import make_settings

from rag.answerable import answerability, unanswerable_reason
from rag.indexer import build_index
from rag.parse import make_paper
from rag.pipeline import Assistant
from rag.question import read

PRIV = make_paper("We propose PrivGate, a privacy gate for LLM agents. PrivGate achieves a 62.6% reduction in privacy "
                  "leakage with 15.9% token overhead on 4 benchmarks.", "a.txt", 0)


def test_the_unit_of_a_quantity_question_is_the_noun_after_how_many() -> None:
    assert read("How many GPUs and hours were used to train SERA?").unit == ("gpus", "hours")
    assert read("How many milliseconds of latency does PrivGate add?").unit == ("milliseconds",)
    assert read("How much wall-clock speedup does it give?").unit == ("wall-clock", "wall", "clock", "speedup")
    assert read("On how many tasks?").unit == ("tasks",)
    # Comparatives and pronouns are not units.
    assert read("How much more successful is it?").unit == ("successful",)
    assert read("And how much does their approach cut the cost?").unit == ()
    assert read("Which benchmark was it tested on?").unit == ()
    # People are counted as people however the question goes on; a study's size is counted in them.
    assert read("How many people took part in their study?").unit_heads == ("people",)
    assert read("how big was their user study").unit == ("participants",)
    assert read("How large is the model?").unit == ()


def test_a_unit_the_paper_never_mentions_is_a_reason_to_abstain() -> None:
    reason = unanswerable_reason(read("How many milliseconds of latency does PrivGate add per request?"), [PRIV])
    assert reason == "the abstracts found never mention milliseconds"
    # The unit is in the paper (plural/singular by stem): the question may be answerable.
    assert unanswerable_reason(read("How many benchmarks was PrivGate evaluated on?"), [PRIV]) is None
    assert unanswerable_reason(read("How much token overhead does PrivGate add?"), [PRIV]) is None
    # A gain in speed is stated in any of its words: "how much speedup" by "acceleration ... by up to 1.77x" (a blind
    # dev conversation had declined it).
    rollouts = make_paper("We shape the rollout distribution. Experiments demonstrate significant acceleration over "
                          "state-of-the-art systems by up to 1.77x.", "a.txt", 1)
    assert unanswerable_reason(read("how much speedup do they get?"), [rollouts]) is None
    assert unanswerable_reason(read("how much speedup does it give?"), [PRIV]) is not None
    # Not a quantity question: no judgement.
    assert unanswerable_reason(read("What does PrivGate gate?"), [PRIV]) is None
    assert unanswerable_reason(read("How many milliseconds?"), []) is None


def test_a_compound_question_is_declined_only_when_no_part_can_be_answered() -> None:
    # "... and how many milliseconds ...": the first part is answerable, so the answer goes ahead and says which part
    # it leaves out.
    q = read("What does PrivGate gate, and how many milliseconds of latency does it add?")
    assert answerability(q, [PRIV]) == (None, "the abstracts found never mention milliseconds")
    # Both parts ask what the paper never writes.
    both = read("How many milliseconds of latency does PrivGate add, and how many GPUs does it need?")
    assert answerability(both, [PRIV]) == ("the abstracts found never mention milliseconds", None)
    # A part of a word or two answers nothing alone; one question is not compound.
    assert unanswerable_reason(read("How many milliseconds does PrivGate add, and why?"), [PRIV]) is not None
    assert answerability(read("What does PrivGate gate?"), [PRIV]) == (None, None)


def test_a_percentage_no_paper_gives_is_a_reason_to_abstain() -> None:
    # A blind dev question: "By what percentage does the structural optimizer ... cut inference cost?" of an abstract
    # saying "often reducing inference cost" across "23 tasks" was answered "23% [1]".
    rdl = make_paper("We develop a structural optimizer for relational graphs. Across 23 tasks, the optimized graphs "
                     "improve accuracy while often reducing inference cost.", "r.txt", 0)
    asked = read("By what percentage does the structural optimizer cut inference cost?")
    assert unanswerable_reason(asked, [rdl]) == "the abstracts found never give a percentage"
    assert unanswerable_reason(asked, [rdl, PRIV]) is None  # one paper found gives one
    # "How many percent" is a percentage asked for, not a unit the abstract must write out as a word.
    for text in ("How many percent does PrivGate cut leakage?", "what percentage of leakage does PrivGate remove?"):
        assert read(text).unit == (), text
        assert unanswerable_reason(read(text), [PRIV]) is None, text
        assert unanswerable_reason(read(text), [rdl]) == "the abstracts found never give a percentage", text
    # Not asked for a percentage: no judgement.
    assert unanswerable_reason(read("How much does the optimizer cut inference cost?"), [rdl]) is None


def test_a_year_no_abstract_gives_is_a_reason_to_abstain() -> None:
    # A blind dev question: the election year of a survey the abstract names but never dates; the record's venue
    # ("ICML 2026") dates the paper, not the survey.
    conjoint = make_paper("On a U.S. presidential conjoint, adversarially learned policies produce vote shares that "
                          "align with historical election ranges.", "c.txt", 0)
    asked = read("Which presidential election year is the U.S. conjoint survey in that paper from?")
    assert unanswerable_reason(asked, [conjoint]) == "the abstracts found never give a year"
    dated = make_paper("We analyse the 2016 U.S. presidential conjoint.", "d.txt", 0)
    assert unanswerable_reason(asked, [dated]) is None
    # The paper's own year is its venue's.
    published = read("In what year was the conjoint paper published?")
    in_venue = make_paper("On a U.S. presidential conjoint, we study policies.", "v.txt", 0, venue="ICML 2026 Papers")
    assert unanswerable_reason(published, [in_venue]) is None
    assert unanswerable_reason(asked, [in_venue]) == "the abstracts found never give a year"
    assert unanswerable_reason(published, [conjoint]) == "the abstracts found never give a year"


def test_a_comparative_or_a_compound_is_not_what_must_be_found() -> None:
    # Blind dev questions that abstained on the right paper: "how much bigger" asks a size, not a unit "bigger";
    # "openly released code-writing agents" asks why, not whether code is released.
    spc = make_paper("We propose SPC, a contrastive loss with experimental metadata. We keep up with models over 10x "
                     "larger in parameter count.", "p.txt", 0)
    bigger = read("SPC: what extra information does it fold into the loss, and how much bigger are the models it "
                  "keeps up with?")
    assert bigger.unit == ()
    assert unanswerable_reason(bigger, [spc]) is None
    sera = make_paper("Open-weight coding agents should hold a fundamental advantage over closed-source systems.",
                      "s.txt", 0)
    why = read("Why should openly released code-writing AI agents have an edge over proprietary ones?")
    assert not why.availability
    assert unanswerable_reason(why, [sera]) is None
    assert read("Did they release the code?").availability  # the artefact itself is still asked for


def test_a_count_the_paper_never_gives_is_a_reason_to_abstain() -> None:
    athletes = make_paper("We propose STT-LLM, a tokenizer for longitudinal data. We evaluate STT-LLM on real-world "
                          "longitudinal datasets from athletes.", "s.txt", 0)
    reason = unanswerable_reason(read("How many athletes are in the datasets used to evaluate STT-LLM?"), [athletes])
    assert reason == "the abstracts found never give a number of athletes"
    # A blind dev question: pairs are counted, though their modifiers hold a slash and a word naming people.
    bench = make_paper("We present SOLAR and a benchmark of human-verified positive and hard-negative pairs.",
                       "b.txt", 0)
    pairs = read("How many human-verified positive/hard-negative pairs are in the SOLAR benchmark?")
    assert pairs.unit_heads == ("pairs",)
    assert unanswerable_reason(pairs, [bench]) == \
        "the abstracts found never give a number of human-verified positive/hard-negative pairs"
    # A count in digits, in words, hyphenated to the noun, or symbolic; people by any of their names.
    study = make_paper("We propose Empower. We conducted an 18-person user study. It used seven teacher-student "
                       "pairs, and networks need log k layers.", "e.txt", 0)
    for question in ("How many participants were in the user study?", "How many people took part in the study?",
                     "How many teacher-student pairs were used?", "How many layers do the networks need?",
                     # a blind dev question: the unit asked in another inflection of the abstract's word
                     "how many big/small model pairings were tried?"):
        assert unanswerable_reason(read(question), [study]) is None, question
    # The noun just before the amount also gives it (an injection test's paper: "finds bugs in 23% of solutions").
    probe = make_paper("CodeProbe finds bugs in 23% of solutions that pass the original tests.", "c.txt", 0)
    assert unanswerable_reason(read("How many bugs does CodeProbe find?"), [probe]) is None
    # "How much ...?" may be answered without a number ("negligible overhead").
    assert unanswerable_reason(read("How much token overhead does PrivGate add per benchmark?"), [PRIV]) is None
    assert unanswerable_reason(read("How many benchmarks was PrivGate evaluated on?"), [PRIV]) is None


def test_a_training_detail_the_paper_never_names_is_a_reason_to_abstain() -> None:
    uhm = make_paper("We propose UHM, a scalable value learning method with a winsorized horizon.", "u.txt", 0)
    assert unanswerable_reason(read("What learning rate was used to train the universal horizon models?"), [uhm]) \
        == "the abstracts found never mention learning rate"
    assert "privacy budget" in (unanswerable_reason(read("Which privacy budget epsilon is used?"), [PRIV]) or "")
    tuned = make_paper("We propose FastGen. A learning rate of 3e-4 and a batch size of 64 suffice.", "f.txt", 0)
    assert unanswerable_reason(read("What learning rate and batch size does FastGen use?"), [tuned]) is None
    assert unanswerable_reason(read("How does UHM learn values?"), [uhm]) is None  # no detail asked


def test_author_questions_need_author_records() -> None:
    assert "no author" in (unanswerable_reason(read("Who are the authors of the PrivGate paper?"), [PRIV]) or "")
    assert "no author" in (unanswerable_reason(read("Which university is PrivGate from?"), [PRIV]) or "")
    with_authors = make_paper("We propose PrivGate, a privacy gate.", "a.jsonl", 0, authors="A. Author, B. Author")
    assert unanswerable_reason(read("Who are the authors of the PrivGate paper?"), [with_authors]) is None


def test_whether_code_is_available_needs_a_link_or_a_statement() -> None:
    asked = read("Is the code available?")
    assert asked.availability and read("Is it open source?").availability
    assert not read("Which public benchmark does PrivGate use?").availability
    # "public" describing something else is not whether an artefact can be had.
    assert not read("What does the paper on privacy leakage in model-reuse marketplaces, where each uploaded model "
                    "comes with a public descriptor, propose?").availability
    assert read("Is the code public?").availability and read("Are the model weights public or not?").availability
    # The verb first, as users ask it; releasing a dataset is a contribution a listing asks about, not availability.
    assert read("Does it release code?").availability and read("Did SERA release its trained models?").availability
    assert read("Do they share their weights?").availability
    assert not read("Which papers release a new dataset?").availability
    assert not read("How does the paper share parameters across layers?").availability
    # A follow-up of two words, tried in the chat: "Any code?" was answered with the paper's title.
    assert read("Any code?").availability and read("And the code?").availability
    assert not read("What code does SERA generate?").availability
    assert "nothing about code" in (unanswerable_reason(asked, [PRIV]) or "")
    linked = make_paper("We propose NITP. Our implementation is available at https://github.com/a/NITP.", "n.txt", 0)
    promised = make_paper("We propose SOLAR, a retrieval model. Code will be available upon publication.", "s.txt", 0)
    assert unanswerable_reason(asked, [linked]) is None and unanswerable_reason(asked, [promised]) is None
    assert unanswerable_reason(read("What does PrivGate gate?"), [PRIV]) is None  # not asked: no judgement


def test_how_long_something_takes_needs_an_abstract_giving_a_duration() -> None:
    asked = read("how long does it take to train the PrivGate model")  # typed so, as in a blind dev question
    assert "never mention a duration" in (unanswerable_reason(asked, [PRIV]) or "")
    timed = make_paper("We propose FastGen, a generator. Training FastGen takes 3 hours on one GPU.", "f.txt", 0)
    assert unanswerable_reason(read("How long does FastGen take to train?"), [timed]) is None
    assert not read("How long is the context window?").unit  # a length, not a duration


def test_a_papers_own_limitations_need_an_abstract_that_admits_one() -> None:
    # Seen: "What are the limitations of SERA?" answered with its 26x-cheaper result.
    asked = read("What are the limitations of PrivGate?")
    assert asked.limitations and read("What about its drawbacks?").limitations
    # Asked in the chat's own words after PrivGate, they are its limitations too (read as a new topic, "catch"
    # found nothing); "catch" as a verb is not.
    for q in ("what's the catch?", "any tradeoffs?", "and the trade-offs?"):
        assert read(q).limitations and read(q).refers_back, q
    assert not read("Which bugs does the tool catch?").limitations
    assert "no limitation" in (unanswerable_reason(asked, [PRIV]) or "")
    admits = make_paper("We propose LinProbe, a probe for attention heads. Our analysis is limited to linear models, "
                        "and we leave deeper ones to future work.", "l.txt", 0)
    assert unanswerable_reason(read("What are the limitations of LinProbe?"), [admits]) is None
    # Earlier work's limitations, which a paper states to motivate itself, are answerable as before.
    for q in ("What limitation of earlier methods does FoundObj target?", "Which drawback does TIED fix?"):
        assert not read(q).limitations, q
    # A background sentence naming a limitation is not the paper admitting one.
    background = make_paper("This limitation weakens coherence in LiDAR generation. We propose a 4D generator.",
                            "g.txt", 1)
    assert unanswerable_reason(read("What are the weaknesses of the 4D generator?"), [background])
    # The downside of something the paper names beyond its title is its stated difficulty (a dev question).
    shuffle = make_paper("Shuffling data for SGD is costly. However, RandomShuffle requires a full permutation, which "
                         "has high I/O complexity due to data movement. We propose a linear-I/O shuffle.", "r.txt", 2)
    downside = read("What is the downside of uniformly permuting the input for RandomShuffle?")
    assert downside.limitations and unanswerable_reason(downside, [shuffle]) is None


def test_pipeline_abstains_with_the_reason_and_never_calls_the_model(tmp_path: Path) -> None:
    s = make_settings(tmp_path / "data")
    emb = HashEmbedder()
    build_index(s, emb)
    gen = ScriptedGenerator(["PrivGate adds 12 milliseconds [1]."])
    a = Assistant(s, embedder=emb, generator=gen)
    ans = a.ask("How many milliseconds of latency does PrivGate add per request?")
    # The question names PrivGate: the reason is said of that paper, which is cited so the reader can check.
    assert ans.declined and not ans.abstained and gen.prompts == []
    assert ans.text == "The abstract of PrivGate never mentions milliseconds [1]."
    assert [c.paper.paper_id for c in ans.citations] == [ans.hits[0].paper.paper_id]
    assert ans.hits and ans.hits[0].paper.title.startswith("PrivGate")  # the closest papers are still listed
    # Not naming it, the same question is declined with the reason under the answer.
    unnamed = a.ask("How many milliseconds of latency does the privacy gate add per request?")
    assert unnamed.abstained and gen.prompts == []
    assert "the abstracts found never mention milliseconds" in unnamed.notices
    # The same question about something the paper does report is answered.
    gen2 = ScriptedGenerator(["PrivGate has a 15.9% token overhead [1]."])
    ok = Assistant(s, embedder=emb, generator=gen2).ask("How much token overhead does PrivGate add?")
    assert not ok.abstained and gen2.prompts
    # "Is the code available?" after PrivGate (whose abstract links none and says nothing) is not guessed at.
    history = [{"role": "user", "content": ok.question}, {"role": "assistant", "content": ok.text}]
    code = Assistant(s, embedder=emb, generator=ScriptedGenerator(["Yes [1]."])).ask("Is the code available?",
                                                                                   history=history)
    assert code.abstained and "PrivGate" in code.searched and "nothing about code" in " ".join(code.notices)


def test_a_listing_whose_topic_a_retrieved_paper_holds_is_not_abstained_on() -> None:
    from rag.answerable import gate
    from rag.records import Hit

    # Tried in the chat: "Which papers are about efficiency?" is far from every chunk by cosine (0.19) and abstained,
    # though several abstracts are about efficiency.
    efficient = make_paper("We improve inference efficiency of vision-language models by pruning tokens.", "e.txt", 0)
    hits = [Hit(efficient, 0.2, best_similarity=0.19)]
    assert gate(read("Which papers are about efficiency?"), hits, 0.3) is None
    # A word the paper only resembles ("transformation" for "transformers"), or a question about one paper: abstain.
    assert gate(read("Which papers use transformers?"), hits, 0.3) == "no abstract is close enough to the question"
    assert gate(read("How much does it improve efficiency?"), hits, 0.3) is not None


def test_a_rare_word_of_the_question_counts_in_the_paper_bm25_ranks_first_wherever_fusion_put_it() -> None:
    from dataclasses import replace

    from rag.answerable import gate
    from rag.records import Hit

    # A dev listing ("Which papers show a small model matching much larger ones?") abstained once score fusion no
    # longer put BM25's first paper first: the gate had read the rare words in whichever paper came first.
    solar = make_paper("We produce SOLAR, a retrieval framework.", "s.txt", 0)
    other = make_paper("We study diffusion models for generation.", "d.txt", 0)
    q = replace(read("What does SOLAR stand for?"), rare=("solar",))
    dense_first = [Hit(other, 0.3, best_similarity=0.2, dense_rank=1, bm25_rank=2),
                   Hit(solar, 0.29, best_similarity=0.1, dense_rank=2, bm25_rank=1)]
    assert gate(q, dense_first, 0.3) is None
    no_bm25 = [Hit(other, 0.3, best_similarity=0.2, dense_rank=1), Hit(solar, 0.29, best_similarity=0.1)]
    assert gate(q, no_bm25, 0.3) == "no abstract is close enough to the question"


def test_a_question_glossed_in_parentheses_is_not_a_quantity_question() -> None:
    """"What kind of randomness guarantee (how many items are jointly random) do its orderings provably get?" was read
    as asking a number of items, and abstained since no abstract counts items; the gloss explains the question, the
    question asks for a kind. The same question asked outright still wants a number."""
    glossed = read("What kind of randomness guarantee (how many items are jointly random) do its orderings get?")
    assert glossed.wants == "" and glossed.unit == (), glossed
    outright = read("How many items are jointly random in its orderings?")
    assert outright.wants == "number" and outright.unit == ("items",), outright
    # An example in parentheses is set aside too: the unit is what follows "how many".
    example = read("How many GPUs (e.g. A100s of 80 GB) does training take?")
    assert example.wants == "number" and example.unit == ("gpus",), example


def test_an_existence_question_that_goes_on_to_ask_of_the_paper_reads_its_topic_from_the_first_part() -> None:
    """"Is there a paper here on federated learning across hospitals, and what accuracy did it report?" was answered
    with another paper's accuracy sentence and nothing said of the topic; its topic is the first part's words, whose
    missing ones the answer names ("No abstract mentions federated, hospitals; the closest: ..."), or "No: ..." when
    the gate abstains. A relative clause ("..., where the query and the context can be swapped?") asks nothing more."""
    from rag import compose

    q = read("Is there a paper here on federated learning across hospitals, and what accuracy did it report?")
    assert q.exists_first and not q.exists and "hospitals" in q.topic_words and "accuracy" not in q.topic_words, q
    assert compose.declined(q.in_corpus((), (), ("federated", "hospitals"))) == \
        "No: no abstract mentions federated, hospitals."
    relative = read("anything on symmetric multimodal retrieval, where the query and the context can be swapped?")
    assert not relative.exists_first and "swapped" in relative.topic_words, relative
    assert not read("How many people took part, and how often did they pick it?").exists_first
    # The second question may follow a question mark (blind dev conversations): the paper asked for is one paper,
    # and the second question's words are not the topic ("No abstract mentions convinced").
    pilot = read("is there a paper that takes out attention from image tokens? what convinced them it was needless?")
    assert pilot.exists_first and not pilot.exists and "convinced" not in pilot.topic_words, pilot
    llp = read("anything on learning from aggregate label proportions? what application motivates it")
    assert llp.exists_first and llp.kind == "which", llp
