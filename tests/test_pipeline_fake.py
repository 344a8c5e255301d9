"""The whole path on a real Chroma store in tmp_path, with the fake embedder and a scripted generator."""

from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import make_settings

from rag.indexer import build_index
from rag.pipeline import Assistant
from rag.records import CANNOT_ANSWER, Answer, StoreError
from rag.retrieve import Filters

PRIVGATE = "6480b13cf7654701"
GNN_LINKS = "68cbc7867a86c476"  # link stealing against graph neural networks
LEARNWARE = "783b3671c5fc8d35"
HYPOTHESES = "1e2cab7dabb02c87"  # private hypothesis selection, the one writing "differential privacy"
TIED = "2d378f5ceaf9469a"
FOUNDOBJ = "a497e130188d9f8c"


@pytest.fixture
def built(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = make_settings(tmp_path / "data")
    emb = HashEmbedder()
    summary = build_index(s, emb)
    return s, emb, summary


def test_ingest_is_idempotent_and_incremental(built, corpus: Path) -> None:  # type: ignore[no-untyped-def]
    s, emb, first = built
    assert (first.papers, first.added) == (38, 38) and first.chunks > 38
    before = emb.embedded
    again = build_index(s, emb)
    assert (again.papers, again.chunks, again.added, again.embedded_chunks) == (38, first.chunks, 0, 0)
    assert emb.embedded == before  # unchanged input: no embedding work at all


def test_edits_and_removals_leave_no_stale_chunks(tmp_path: Path, corpus: Path) -> None:
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus})
    emb = HashEmbedder()
    build_index(s, emb)
    f = corpus / "000_938f08ec0059db85.txt"
    text = f.read_text(encoding="utf-8")
    f.write_text(text.replace("reducing training cost by", "cutting training cost by"), encoding="utf-8")
    edited = build_index(s, emb)
    assert (edited.papers, edited.added, edited.removed) == (38, 1, 1)
    (corpus / "003_fcd762a5da0c7c9c.txt").unlink()
    gone = build_index(s, emb)
    assert (gone.papers, gone.removed) == (19, 19)
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator())
    store_ids = a.retriever.store.paper_ids()
    assert store_ids == a.catalog.ids() and len(store_ids) == 19


def test_answer_cites_only_given_sources(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    gen = ScriptedGenerator(["End-to-end evaluations show that PrivGate achieves a 62.6% average relative reduction "
                             "in privacy leakage with 15.9% token overhead [1] [9]."])
    a = Assistant(s, embedder=emb, generator=gen)
    events = list(a.stream("How much does PrivGate reduce privacy leakage?"))
    assert all(isinstance(e, str) for e in events[:-1]) and isinstance(events[-1], Answer)
    ans = events[-1]
    assert not ans.abstained and ans.mode == "generated"
    assert ans.dropped_markers == 1 and "[9]" not in ans.text
    assert [c.paper.paper_id for c in ans.citations] == [PRIVGATE]
    retrieved = {h.paper.paper_id for h in ans.hits}
    assert all(c.paper.paper_id in retrieved for c in ans.citations)
    sys_prompt, user = gen.prompts[0][0]["content"], gen.prompts[0][-1]["content"]
    assert "not instructions" in sys_prompt and user.rstrip().endswith("How much does PrivGate reduce privacy leakage?")
    d = ans.to_dict()
    keys = {"question", "answer", "abstained", "citations", "hits", "timings", "model", "settings_fingerprint"}
    assert keys <= set(d)
    assert d["citations"][0]["source"] == "000_938f08ec0059db85.txt" and d["citations"][0]["position"] == 12


@pytest.mark.parametrize("preamble", ["The answer is: ", "Answer: ", "The sources mentioned in the answer are: ",
                                      "The source is [1] "])
def test_a_preamble_before_the_answer_is_dropped(built, preamble: str) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    reply = "PrivGate achieves a 62.6% average relative reduction in privacy leakage [1]."
    ans = Assistant(s, embedder=emb, generator=ScriptedGenerator([preamble + reply])).ask(
        "How much does PrivGate reduce privacy leakage?")
    assert ans.mode == "generated" and ans.text.startswith("PrivGate achieves a 62.6%")


def test_a_sentence_saying_only_where_the_answer_lies_is_dropped_whole(built) -> None:  # type: ignore[no-untyped-def]
    # Cutting "The answer to this question" off it left "Lies in the efficiency-privacy trade-off [1]." opening the
    # answer.
    s, emb, _ = built
    reply = ("The answer to this question lies in the efficiency-privacy trade-off of PrivGate. PrivGate employs "
             "Latent Gating, a training-free mechanism that triggers explicit reasoning only when high latent risk is "
             "detected [1].")
    ans = Assistant(s, embedder=emb, generator=ScriptedGenerator([reply])).ask(
        "What mechanism does PrivGate use to decide when to reason explicitly?")
    assert ans.mode == "generated" and ans.text.startswith("PrivGate employs Latent Gating"), ans.text
    assert "lies in" not in ans.text.lower()


def test_unrelated_question_abstains_without_calling_the_model(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    gen = ScriptedGenerator()
    ans = Assistant(s, embedder=emb, generator=gen).ask("zucchini lasagna oven recipe?")
    assert ans.abstained and ans.text == CANNOT_ANSWER and not ans.citations and gen.prompts == []


def test_unsupported_answer_falls_back_to_one_cited_evidence_sentence(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    gen = ScriptedGenerator(["Bananas are yellow and grow in bunches [1]."])
    ans = Assistant(s, embedder=emb, generator=gen).ask("How much does PrivGate reduce privacy leakage?")
    assert ans.mode == "extractive" and "Bananas" not in ans.text and "“" not in ans.text
    assert ans.text.count("[1]") <= 2 and ans.text.endswith("[1].") and "62.6%" in ans.text.split(" [1].")[0]
    assert [c.paper.paper_id for c in ans.citations] == [PRIVGATE]


def test_filters_restrict_retrieval(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator())
    only = a.search("privacy leakage", filters=Filters(sources=frozenset({"003_fcd762a5da0c7c9c.txt"})))
    assert only.hits and all(h.paper.source == "003_fcd762a5da0c7c9c.txt" for h in only.hits)
    code = a.search("reinforcement learning", filters=Filters(has_code=True))
    assert code.hits and all(h.paper.has_code for h in code.hits)
    one = a.search("anything at all", filters=Filters(paper_ids=frozenset({PRIVGATE})))
    assert [h.paper.paper_id for h in one.hits] == [PRIVGATE]


def test_no_index_is_a_clear_error(tmp_path: Path) -> None:
    a = Assistant(make_settings(tmp_path / "empty"), embedder=HashEmbedder(), generator=ScriptedGenerator())
    with pytest.raises(StoreError, match="run `python -m rag ingest` first"):
        a.search("x")


def test_other_embedding_model_is_refused_with_the_fix(built) -> None:  # type: ignore[no-untyped-def]
    s, _, _ = built
    other = HashEmbedder(dim=128)
    with pytest.raises(StoreError, match="--rebuild"):
        build_index(s, other)


def test_which_paper_quoted_answer_names_the_paper(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    gen = ScriptedGenerator(["Bananas are yellow [1]."])  # unsupported: the answer falls back to quotes
    ans = Assistant(s, embedder=emb, generator=gen).ask("Which paper reduces privacy leakage with PrivGate?")
    assert ans.mode == "extractive"
    title = ans.citations[0].paper.title
    assert ans.citations[0].paper.paper_id == PRIVGATE and ans.text.startswith(title.rstrip(". "))


def test_a_follow_up_stays_on_the_paper_the_previous_answer_cited(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok", "ok", "ok"]))
    first = a.ask("How much does PrivGate reduce privacy leakage?")
    assert [c.paper.paper_id for c in first.citations] == [PRIVGATE]
    history = [{"role": "user", "content": first.question}, {"role": "assistant", "content": first.text}]
    # "its" points back at PrivGate: the answer comes from it, and says what was searched and resolved.
    follow = a.ask("And what is its token overhead?", history=history)
    assert follow.focus == (PRIVGATE,) and "(about: " in follow.searched
    assert [c.paper.paper_id for c in follow.citations] == [PRIVGATE] and "15.9%" in follow.text
    assert follow.to_dict()["resolved_papers"] == [PRIVGATE]
    # "On which benchmark?" names no paper: it is PrivGate's benchmark, not whichever paper the words retrieve.
    ellipsis = a.ask("On which benchmark?", history=history)
    assert ellipsis.focus == (PRIVGATE,) and "(about: " in ellipsis.searched
    assert [c.paper.paper_id for c in ellipsis.citations] == [PRIVGATE] and "PrivacyLens" in ellipsis.text
    # A new subject is not pinned to the old paper.
    switch = a.ask("And which papers use reinforcement learning?", history=history)
    assert switch.focus == () and PRIVGATE not in [c.paper.paper_id for c in switch.citations]


def test_a_follow_up_on_one_paper_that_its_abstract_does_not_answer_says_so_of_that_paper(built) -> None:  # type: ignore[no-untyped-def]
    # Probes of this stop: "any limitations?" after SERA and "is the code public?" after PrivGate answered "I cannot
    # answer this from these abstracts.", as if no paper were in question; the paper discussed is the one that does
    # not say it, and the reader can open it.
    from rag.answerable import of_one

    assert of_one("the abstracts found never give a number of images") == "never gives a number of images"
    assert of_one("the abstracts never mention GSM8K") == "never mentions GSM8K"
    assert of_one("these records carry no author or affiliation information (only the abstracts)") is None
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok", "ok"]))
    first = a.ask("How much does PrivGate reduce privacy leakage?")
    history = [{"role": "user", "content": first.question},
               {"role": "assistant", "content": first.text, "paper_ids": [PRIVGATE]}]
    code = a.ask("Is the code public?", history=history)
    assert code.text == "The abstract of PrivGate says nothing about code, data or weights being available [1]."
    assert [c.paper.paper_id for c in code.citations] == [PRIVGATE] and code.focus == (PRIVGATE,)
    assert code.declined and not code.abstained and code.to_dict()["declined"]
    # A question naming the paper is about it as well ("What are the main limitations of SERA?" had been declined
    # as if no paper were in question); without a paper named or discussed, the question is declined as before.
    named = a.ask("Is the code of PrivGate public?")
    assert named.text == code.text and [c.paper.paper_id for c in named.citations] == [PRIVGATE] and named.declined
    alone = a.ask("Is the code of the privacy gate paper public?")
    assert alone.abstained and alone.text == CANNOT_ANSWER and not alone.citations


def test_a_capital_that_opens_a_sentence_is_not_an_absent_name(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    r = Assistant(s, embedder=emb, generator=ScriptedGenerator()).retriever
    # "What" and "According" open sentences; "GSM8K" names something no abstract contains.
    assert r.absent_terms("A study cut privacy leakage. What gate did it use? According to it, GSM8K?") == ("GSM8K",)
    assert r.absent_terms("How much does PrivGate reduce privacy leakage?") == ()
    # Seen on a blind dev question: "fine-tuning LMs" abstained on, though abstracts write "language models".
    assert r.absent_terms("Which paper fine-tunes LMs to empower people?") == ()
    assert r.absent_terms("Which paper fine-tunes XYZs to empower people?") == ("XYZs",)


def test_a_follow_up_answered_with_the_discussed_papers_name_is_not_an_answer(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    gen = ScriptedGenerator(["SERA makes it cheap [1].", "SERA [1].", "Devstral-Small-2 [1]."])
    a = Assistant(s, embedder=emb, generator=gen)
    first = a.ask("Which paper makes it cheap to train coding agents specialized to a private codebase?")
    sera = first.citations[0].paper
    assert sera.title.startswith("SERA:")
    history = [{"role": "user", "content": first.question}, {"role": "assistant", "content": first.text}]
    # "it" is SERA: "SERA [1]." names the paper under discussion and adds nothing asked for.
    named = a.ask("And which open-weight model does it match?", history=history)
    assert named.focus == (sera.paper_id,)
    assert named.mode == "extractive" and not named.text.startswith("SERA [1]")
    assert "Devstral-Small-2" in named.text
    # The model's terse answer naming the model asked for stands.
    answered = a.ask("And which open-weight model does it match?", history=history)
    assert answered.mode == "generated" and answered.text.startswith("Devstral-Small-2 [1].")


def test_a_follow_ups_answer_is_judged_beside_what_is_known_of_the_paper_discussed() -> None:
    from dataclasses import replace

    from rag import question as Q
    from rag import support
    from rag.parse import make_paper
    from rag.pipeline import discussed
    from rag.records import Evidence, Hit

    paper = replace(make_paper("We propose TFMixer for forecasting. It is tested on IMTS benchmarks.", "t.txt", 0),
                    title="TFMixer: a joint time-frequency modeling framework for IMTS forecasting")
    blocks = [Evidence(n=1, hit=Hit(paper, 0.9), sentences=(), sentence_scores=())]
    # Tried in the chat: "What datasets?" about TFMixer answered with its title, which says nothing asked for.
    narrow = replace(Q.read("What datasets?"), pinned=(paper.paper_id,))
    assert discussed(narrow, blocks) == paper.title
    assert support.restates(f"{paper.title} [1].", f"{narrow.text} {discussed(narrow, blocks)}")
    # Asked what it does, the title is the answer: only its short name is known.
    broad = replace(Q.read("What does it do?"), pinned=(paper.paper_id,))
    assert discussed(broad, blocks) == "TFMixer"
    assert not support.restates(f"{paper.title} [1].", f"{broad.text} {discussed(broad, blocks)}")
    assert discussed(Q.read("What datasets?"), blocks) == ""  # not a follow-up: nothing known


def test_a_follow_up_describing_a_paper_the_last_answer_did_not_cite_finds_it(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok", "ok"]))
    first = a.ask("How much does PrivGate reduce privacy leakage?")
    assert [c.paper.paper_id for c in first.citations] == [PRIVGATE]
    history = [{"role": "user", "content": first.question}, {"role": "assistant", "content": first.text}]
    # "it" alone would be PrivGate; the clause describing the paper names another one, which joins the candidates.
    drill = a.ask("For the paper on coding agents specialized to a private codebase, which open-weight model does it "
                  "match?", history=history)
    assert PRIVGATE in drill.focus and len(drill.focus) == 2
    assert drill.citations[0].paper.title.startswith("SERA:") and "Devstral-Small-2" in drill.text
    # A follow-up that only points back stays on the cited paper.
    assert a.ask("And what is its token overhead?", history=history).focus == (PRIVGATE,)


def test_which_of_them_picks_one_of_the_listed_papers(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    # "Which of them ...?" after a list of three: the one on graphs, named alone, and no paper outside the three.
    listed = [PRIVGATE, GNN_LINKS, LEARNWARE]
    shown = [{"role": "user", "content": "Which papers deal with privacy?"},
             {"role": "assistant", "content": "- PrivGate [1].\n- Link stealing [2].\n- Learnware [3].",
              "paper_ids": listed}]
    picked = a.ask("Which of them is about graph neural networks?", history=shown)
    assert set(picked.focus) == set(listed) and not picked.abstained
    assert picked.citations[0].paper.paper_id == GNN_LINKS
    assert {c.paper.paper_id for c in picked.citations} <= set(listed) and not picked.text.startswith("- ")


def test_which_of_them_is_told_apart_by_the_word_only_one_of_them_writes(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    # Tried in the chat: after four privacy papers, "which one uses differential privacy?" cited PrivGate (its
    # sentences on privacy matched better) rather than the one paper writing "differential privacy".
    listed = [PRIVGATE, GNN_LINKS, HYPOTHESES, LEARNWARE]
    shown = [{"role": "user", "content": "Which papers study privacy?"},
             {"role": "assistant", "paper_ids": listed,
              "content": "- PrivGate [1].\n- Link stealing [2].\n- Hypotheses [3].\n- Learnware [4]."}]
    picked = a.ask("Which one uses differential privacy?", history=shown)
    assert set(picked.focus) == set(listed)
    assert {c.paper.paper_id for c in picked.citations} == {HYPOTHESES}, picked.text
    # A word every listed paper writes tells none apart: all four stay candidates.
    assert len(a.retrieve(a.read("Which of them is about privacy?", shown)).hits) == 4


def test_compare_them_sets_the_two_papers_discussed_side_by_side_by_what_each_does(built) -> None:  # type: ignore[no-untyped-def]
    from rag.text import presents_work

    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    # A blind dev conversation: one paper, then another, then "compare them" cited the second alone.
    shown = [{"role": "user", "content": "What does PrivGate do?"},
             {"role": "assistant", "content": "PrivGate gates reasoning [1].", "paper_ids": [PRIVGATE]},
             {"role": "user", "content": "and the learnware one?"},
             {"role": "assistant", "content": "It studies specifications [1].", "paper_ids": [LEARNWARE]}]
    compared = a.ask("compare them", history=shown)
    assert {c.paper.paper_id for c in compared.citations} == {PRIVGATE, LEARNWARE}, compared.text
    # Nothing named to compare them on: each line is where its paper presents its own work.
    lines = compared.text.splitlines()
    assert len(lines) == 2 and all(presents_work(line) for line in lines), compared.text


def test_a_question_naming_one_paper_is_answered_from_that_paper(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    # Tried in the chat: "is TIED model-based?" was answered from the learnware paper ("model reuse"), "what problem
    # does FoundObj solve?" from Opt-Miner ("real-world problems are still challenging ..."): another paper's
    # sentences matched the question's other words better.
    for question, paper in (("is TIED model-based?", TIED), ("what problem does FoundObj solve?", FOUNDOBJ)):
        assert [h.paper.paper_id for h in a.retrieve(a.read(question)).hits] == [paper], question
        assert {c.paper.paper_id for c in a.ask(question).citations} <= {paper}, question
    # Not a name: a field's acronym, a word in capitals that names no paper ("SOTA", in SOLAR's abstract), a word one
    # paper writes in capitals and another in lower case, or names of two papers.
    from rag.question import names_as_written

    def named(question: str) -> str | None:
        return a.retriever.paper_named(names_as_written(question))

    for question in ("Which attacks on GNN models work?", "what's the max speedup over SOTA systems?",
                     "How does PrivGate differ from SERA?"):
        assert named(question) is None, question
    assert named("What does SOLAR beat?") is not None
    # Typed in lower case (a blind dev question: "rhi - what does it garantee to find in the end" was answered from
    # the grokking paper): a word one paper writes, and only as a name, names it; a word a paper also writes in lower
    # case ("tied": TIED's abstract, and "tied" in another) and a field's acronym do not.
    from rag.question import typed_lower

    def named_lower(question: str) -> str | None:
        rare = a.retriever.rare_terms(question)
        return a.retriever.paper_named(names_as_written(question), [w for w in typed_lower(question) if w in rare])

    assert named_lower("rhi - what does it guarantee to find in the end") == "c07a71e45167fc39"
    assert [h.paper.paper_id for h in a.retrieve(a.read("rhi - what does it guarantee to find in the end")).hits] == [
        "c07a71e45167fc39"]  # the pipeline passes the question's rare lower-case words
    assert named_lower("what problem does foundobj solve?") == FOUNDOBJ
    for question in ("is tied model-based?", "which attacks on gnn models work?", "what does rl stand for?"):
        assert named_lower(question) is None, question


def test_an_existence_question_on_a_topic_no_abstract_mentions_says_so_before_the_closest_paper(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    # The model denies the paper it cites; that sentence is not kept.
    gen = ScriptedGenerator(["No, there is no paper on backdoor attacks in federated learning [1]."])
    a = Assistant(s, embedder=emb, generator=gen)
    ans = a.ask("Is there a paper on persistent backdoor attacks in federated class-incremental learning?")
    assert not ans.abstained
    assert ans.text.startswith("No abstract mentions federated; the closest: "), ans.text
    assert "there is no paper" not in ans.text.lower() and ans.citations
    assert ans.declined and ans.to_dict()["declined"]  # it says no first: the eval counts it as declining
    # Every word of the topic in the abstracts: the answer is the paper, with no such caveat.
    ans = a.ask("Is there a paper on persistent backdoor attacks in class-incremental learning?")
    assert not ans.abstained and not ans.text.startswith("No abstract mentions"), ans.text
    assert "backdoor" in ans.text.lower() and not ans.declined
    # Asked for papers, a listing: its answer says so too, not only its small print (a blind dev question, "any
    # papers on protein structure prediction with diffusion models?", listed diffusion papers without a word).
    listed = a.ask("Are there any papers on federated learning?")
    assert listed.text.startswith("No abstract mentions federated; the closest papers:\n- "), listed.text
    assert listed.declined
    # A word is mentioned in another form of it ("robots" where the abstracts write "robotic"), not where another
    # word only starts alike: a blind dev question, "Is there a paper here on machine translation for low-resource
    # languages?", was answered from Opt-Miner as if "translation" were "transfer" or "transformation".
    assert a.retriever.unmentioned(["translation", "robots", "languages", "federated"]) == (
        "translation", "federated")
    assert "no abstract mentions translation" in a.ask(
        "Is there a paper here on machine translation for low-resource languages?").text.lower()


def test_an_existence_question_with_no_paper_on_its_topic_is_answered_no(built) -> None:  # type: ignore[no-untyped-def]
    from rag import CANNOT_ANSWER

    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["unused"]))
    # Asked whether a paper exists, the abstention is the answer: "No", and why, not "I cannot answer this".
    ans = a.ask("Is there a paper that evaluates on GSM8K?")
    assert ans.abstained and ans.text == "No: no abstract mentions GSM8K.", ans.text
    assert not ans.citations
    # Any other question the abstracts cannot answer still says so.
    other = a.ask("What accuracy does it reach on GSM8K?")
    assert other.abstained and other.text == CANNOT_ANSWER, other.text
    # With every word of its topic somewhere, yet no abstract close to it, the "No" says only that.
    from rag.compose import declined
    from rag.question import read

    assert declined(read("Are there papers about quantum computing?")) == \
        "No: none of these abstracts is close to this topic."
    # A word framing the topic is not one the abstracts lack ("No abstract mentions dealing" was said).
    assert "dealing" not in read("is there work on making RL rollouts faster by dealing with the long tail of "
                                 "response lengths?").topic_words
    # Listed, with no paper clearly on the topic, the closest paper comes after that "No" too.
    from rag.compose import framed

    assert framed("- A paper [1].", read("Are there papers about quantum computing?"), listing=True, listed=1,
                  none_on_topic=True) == "No paper is clearly on this topic; the closest:\n- A paper [1]."


def test_how_many_papers_is_a_listing_that_opens_with_its_count(built) -> None:  # type: ignore[no-untyped-def]
    from rag.question import read

    counted = read("How many papers are about reinforcement learning?")
    assert counted.kind == "summary" and counted.wants == "count"
    assert read("How many GPUs does SERA need?").wants == "number"  # a quantity in one paper
    s, emb, _ = built
    gen = ScriptedGenerator(["ok"])
    a = Assistant(s, embedder=emb, generator=gen)
    ans = a.ask("How many papers study privacy leakage?")
    head, _, listing = ans.text.partition("\n")
    lines = [x for x in listing.splitlines() if x.startswith("- ")]
    # Seen answered from one paper's "for any ρ > 0 ..." sentence: the count is of the papers listed (and paged).
    assert head == f"{len(lines) + len(ans.more)} papers on this topic:", ans.text
    assert len(lines) >= 2 and PRIVGATE in {c.paper.paper_id for c in ans.citations}
    # No paper clearly on the topic: the closest is shown as that, not counted ("1 paper on this topic").
    none = a.ask("How many papers study privacy leakage in quantum chromodynamics?")
    assert none.text.startswith("No paper is clearly on this topic; the closest:\n- "), none.text
    listed = a.ask("Which papers study privacy leakage in quantum chromodynamics?")
    assert "no paper is clearly on this topic: this is the closest" in listed.notices
    # Who wrote a paper is not in an abstract: said, not guessed.
    who = a.ask("Who proposed PrivGate?")
    assert who.abstained and "no author" in " ".join(who.notices)


def test_which_of_these_papers_asked_first_lists_the_collection(built) -> None:  # type: ignore[no-untyped-def]
    from rag.question import read

    # A blind dev question, asked first: "these papers" are the collection, not earlier ones (there are none).
    alone = read("Which of these papers study privacy leakage?", alone=True)
    assert alone.kind == "summary" and not alone.selects
    assert read("Which of these papers study privacy leakage?").selects  # after a listing: among those listed
    s, emb, _ = built
    ans = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"])).ask(
        "Which of these papers study privacy leakage?")
    assert ans.text.startswith("- ") and PRIVGATE in {c.paper.paper_id for c in ans.citations}, ans.text


def test_a_comparison_naming_two_papers_sets_both_side_by_side(built) -> None:  # type: ignore[no-untyped-def]
    from rag.question import compared_parts

    assert compared_parts("How does SOLAR differ from NAEViT?") == ["How does SOLAR", "NAEViT?"]
    assert compared_parts("What's the difference between R2G and NITP?") == ["What's the", "R2G", "NITP?"]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    # Seen: "SOLAR vs NAEViT" answered from NAEViT alone. Asked first, and after a turn about something else.
    for history in ([], [{"role": "user", "content": "Which papers study privacy?"},
                         {"role": "assistant", "content": "- Link stealing [1].", "paper_ids": [GNN_LINKS]}]):
        for q in ("How does PrivGate differ from RKME?", "What does PrivGate have in common with RKME?"):
            ans = a.ask(q, history=history)
            assert set(ans.focus) == {PRIVGATE, LEARNWARE}, (q, ans.focus, ans.searched)
            assert {c.paper.paper_id for c in ans.citations} == {PRIVGATE, LEARNWARE} and ans.text.startswith("- ")
    # One named paper and a description of nothing rare: not a side-by-side; nor a paper described by what it does.
    assert len(a.ask("How does PrivGate compare with earlier methods?").focus) < 2
    assert len(a.ask("Which method, by comparing specifications with learnware inversion, bounds the risk?").focus) < 2


def test_two_papers_asked_about_at_once_are_answered_in_the_order_asked(built) -> None:  # type: ignore[no-untyped-def]
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    question = "what do RKME and PrivGate each report?"
    ans = a.ask(question)
    assert [c.paper.paper_id for c in ans.citations] == [LEARNWARE, PRIVGATE], ans.text
    history = [{"role": "user", "content": question},
               {"role": "assistant", "content": ans.text, "paper_ids": [c.paper.paper_id for c in ans.citations]}]
    # "the first one" is the first the user named, and only that paper, whatever the rest of the question describes
    assert a.read("the first one — what leakage does it report?", history).pinned == (LEARNWARE,)


def test_list_all_papers_lists_the_collection_with_its_count(built) -> None:  # type: ignore[no-untyped-def]
    from rag.catalog import Catalog

    s, emb, _ = built
    gen = ScriptedGenerator(["ok"])
    a = Assistant(s, embedder=emb, generator=gen)
    catalog: Catalog = a.retriever.catalog
    total = catalog.count()
    # Seen: "List all papers" abstained ("no abstract is close enough to the question").
    for q in ("List all papers", "How many papers are there?", "What papers do you have?"):
        ans = a.ask(q)
        head, _, rest = ans.text.partition("\n")
        assert not ans.abstained and head == f"{total} papers are indexed; in source order:", (q, ans.text)
        shown = [c.paper.paper_id for c in ans.citations] + [m.paper.paper_id for m in ans.more]
        assert shown == [p.paper_id for p in catalog.find(limit=len(shown))] and len(shown) == min(total, 50)
        assert len(rest.splitlines()) == s.answer.summary_max_papers
    # Within a filter, that part of it.
    source = catalog.sources()[0]
    part = a.ask("List all papers", filters=Filters(sources=frozenset({source})))
    assert part.text.startswith(f"{len(catalog.ids_where([source]))} papers are indexed")
    assert {c.paper.source for c in part.citations} == {source}
    assert gen.prompts == []  # nothing for a model to say of papers on no topic, whatever its summary settings


def test_and_the_first_one_after_a_drill_down_asks_the_last_question_of_the_lists_first_paper(built) -> None:  # type: ignore[no-untyped-def]
    """A list [GNN link stealing, PrivGate], "how does the second one cut leakage?" (PrivGate), then "And the first
    one?": the first of the list, not of the single-paper answer before it, asked what the last question asked."""
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"] * 3))
    history = [{"role": "user", "content": "Which papers study privacy attacks or leakage?"},
               {"role": "assistant", "content": "- A [1].\n- B [2].", "paper_ids": [GNN_LINKS, PRIVGATE]},
               {"role": "user", "content": "How much does the second one cut leakage?"},
               {"role": "assistant", "content": "By 62.6% [1].", "paper_ids": [PRIVGATE]}]
    ans = a.ask("And the first one?", history=history)
    assert ans.focus == (GNN_LINKS,) and ans.searched.startswith("How much does the second one cut leakage?")
    assert [c.paper.paper_id for c in ans.citations] == [GNN_LINKS]
    # "the second one" with a list behind it is the list's second, however many papers the last answer cited.
    again = a.ask("What does the second one propose?", history=history)
    assert again.focus == (PRIVGATE,)


def test_a_short_follow_up_typing_a_slashed_word_whole_stays_on_the_paper(built) -> None:  # type: ignore[no-untyped-def]
    """A blind dev conversation: "and the io cost?" after the shuffling paper, which writes "I/O", was searched
    alone and abstained."""
    s, emb, _ = built
    shuffle = "bc7a1188090a4271"
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok"]))
    shown = [{"role": "user", "content": "the shuffling for sgd one, what independence do its permutations get"},
             {"role": "assistant", "content": "2-wise independent permutations [1].", "paper_ids": [shuffle]}]
    ans = a.ask("and the io cost?", history=shown)
    assert ans.focus == (shuffle,) and not ans.abstained, (ans.focus, ans.text)


def test_a_follow_up_with_that_as_its_subject_or_asking_how_close_to_optimal_stays_on_the_paper(built) -> None:  # type: ignore[no-untyped-def]
    """Blind dev conversations: "how many tasks was that evaluated on" after the relational-graph paper abstained
    ("that" was read as no reference), and "how close to optimal?" after the unlearning paper answered from another
    paper ("close" and "optimal" were read as a new subject)."""
    from rag import question as Q

    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["ok", "ok"]))
    shown = [{"role": "user", "content": "How much does PrivGate reduce privacy leakage?"},
             {"role": "assistant", "content": "By 62.6% [1].", "paper_ids": [PRIVGATE]}]
    for follow in ("how many benchmarks was that evaluated on", "how close to optimal?"):
        read = a.read(follow, shown)
        assert read.pinned == (PRIVGATE,) and "(about: PrivGate" in read.searched, (follow, read.searched)
    # "that" opening a clause is no reference: "papers that use RL" names its own subject.
    assert not Q.read("which papers that use reinforcement learning are there?").refers_back
    assert Q.read("is that model-free?").refers_back and not Q.read("is that paper model-free?").new_subject


def test_an_existence_question_asking_more_of_a_paper_no_abstract_is_on_says_so(built) -> None:  # type: ignore[no-untyped-def]
    """"Is there a paper here on federated learning across hospitals, and what accuracy did it report?" answered
    another paper's accuracy as if it were that paper; the answer now says first that no abstract mentions the topic
    (the closest paper after it, or "No: ..." alone when nothing is close)."""
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["It reports 90% accuracy [1]."]))
    ans = a.ask("Is there a paper here on federated learning across hospitals, and what accuracy did it report?")
    assert ans.text.startswith(("No abstract mentions federated, hospitals; the closest:",
                                "No: no abstract mentions federated, hospitals.")), ans.text


def test_a_british_spelling_is_searched_as_the_abstracts_spell_it(built) -> None:  # type: ignore[no-untyped-def]
    """"Is there a paper on optimising a behaviour policy?" over abstracts writing "optimization" and "behavior":
    not "no abstract mentions optimising, behaviour" (as it was), but searched their way; the answer still reports
    the question as typed."""
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator())
    typed = "Is there a paper on optimising a behaviour policy?"
    ans = a.ask(typed)
    assert ans.question == typed and ans.searched == "Is there a paper on optimizing a behavior policy?"
    assert not any("optimising" in n or "behaviour" in n for n in ans.notices) and "optimising" not in ans.text


def test_what_is_a_term_the_paper_spells_out_is_answered_by_its_expansion(built) -> None:  # type: ignore[no-untyped-def]
    """"What is RKME?": a term the learnware abstract spells out ("reduced kernel mean embedding (RKME)"), not a
    paper's name, is answered as "What does RKME stand for?" would be; "What is TIED?" names the paper itself and
    "What is UHM?" the method its paper introduces: both are answered with what the work is, not an expansion."""
    from rag import question as Q

    assert Q.name_asked("What is RKME?") == "RKME" and Q.name_asked("whats SeL") == "SeL"
    assert Q.name_asked("What is grokking?") == "" and Q.name_asked("What is the main risk?") == ""
    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator(["It is a specification [1]."] * 2))
    term = a.ask("What is RKME?")
    assert term.text.startswith("RKME stands for reduced kernel mean embedding [1]")
    assert term.citations and term.citations[0].paper.paper_id == LEARNWARE
    paper = a.ask("What is TIED?")
    assert "stands for" not in paper.text and paper.citations[0].paper.paper_id == TIED
    # The method a paper introduces ("we introduce universal horizon models (UHM), ...") is its work, not a term.
    assert "stands for" not in a.ask("What is UHM?").text


def test_the_second_one_after_an_answer_citing_one_paper_says_there_is_none(built) -> None:  # type: ignore[no-untyped-def]
    """"Tell me more about the second one." after an answer that cited one paper (a listing that found one) says
    so, rather than "I cannot answer this from these abstracts." after searching the words "the second one"
    (blind dev conversations); "the first one" is still that paper."""
    s, emb, _ = built
    gen = ScriptedGenerator(["PrivGate reduces leakage by 62.6% [1]."] * 2)
    a = Assistant(s, embedder=emb, generator=gen)
    history = [{"role": "user", "content": "Which papers are about privacy?"},
               {"role": "assistant", "content": "- PrivGate [1].", "paper_ids": [PRIVGATE]}]
    second = a.ask("Tell me more about the second one.", history=history)
    assert second.text == "The last answer cited only one paper, so there is no second one."
    assert second.abstained and not second.citations and gen.prompts == []
    assert a.ask("ok and the third - summary pls", history=history).text.endswith("there is no third one.")
    first = a.ask("And the first one?", history=history)
    assert [c.paper.paper_id for c in first.citations] == [PRIVGATE]


def test_an_answer_that_is_only_a_source_number_is_asked_again_with_the_worked_example(built) -> None:  # type: ignore[no-untyped-def]
    # The 0.5B default answered "[1]" alone to 82 of 718 dev questions; asked again with prompts/example.md's
    # exchange as a turn of its own, it answers in words (bench/RESULTS.md, stop 61).
    s, emb, _ = built
    gen = ScriptedGenerator(["[1]", "PrivGate reduces privacy leakage by 62.6% [1]."])
    a = Assistant(s, embedder=emb, generator=gen)
    events = list(a.stream("How much does PrivGate reduce privacy leakage?"))
    ans = events[-1]
    assert isinstance(ans, Answer)
    assert len(gen.prompts) == 2 and ans.mode == "generated" and ans.text.startswith("PrivGate reduces"), ans.text
    # The "[1]" was held back, never streamed: what the reader saw arriving is the second draft.
    assert "".join(e for e in events if isinstance(e, str)) == "PrivGate reduces privacy leakage by 62.6% [1]."
    first, again = gen.prompts
    assert [m["role"] for m in first] == ["system", "user"]
    example = a.prompts.examples[0]
    assert [m["role"] for m in again] == ["system", "user", "assistant", "user"]
    assert again[2]["content"] == example.answer and again[-1] == first[-1]
    # An answer in words is not asked again, and streams as it comes, its opening marker included; nor is a bare
    # number. "off" never asks again; "always" shows the example the first time.
    for words in ("[1] PrivGate reduces privacy leakage by 62.6%.", "62.6% [1]."):
        gen = ScriptedGenerator([words])
        events = list(Assistant(s, embedder=emb, generator=gen).stream("How much does PrivGate reduce privacy "
                                                                        "leakage?"))
        assert len(gen.prompts) == 1 and "".join(e for e in events if isinstance(e, str)) == words
    # "Which paper ...?" is answered by the paper's name from the evidence either way: not asked again.
    gen = ScriptedGenerator(["[1]", "PrivGate [1]."])
    Assistant(s, embedder=emb, generator=gen).ask("Which paper reduces privacy leakage of LLM agents?")
    assert len(gen.prompts) == 1
    for setting, calls, roles in (("off", 1, 2), ("always", 1, 4)):
        gen = ScriptedGenerator(["[1]", "PrivGate reduces privacy leakage by 62.6% [1]."])
        knob = s.with_values({"answer.worked_example": setting})
        Assistant(knob, embedder=emb, generator=gen).ask("How much does PrivGate reduce privacy leakage?")
        assert len(gen.prompts) == calls and len(gen.prompts[0]) == roles, setting


def test_first_questions_arriving_at_once_open_the_index_once(built) -> None:  # type: ignore[no-untyped-def]
    # The API's threads asking a fresh assistant at once each opened the index (a clean-clone CI run failed with
    # CPython 3.11.7's "AST constructor recursion depth mismatch" from numpy headers parsed in two threads at once).
    import threading
    import time

    s, emb, _ = built
    a = Assistant(s, embedder=emb, generator=ScriptedGenerator())
    opened: list[int] = []
    real = a._open_index

    def slow_open():  # type: ignore[no-untyped-def]
        opened.append(1)
        time.sleep(0.2)  # long enough for every thread to arrive while the first is opening
        return real()

    a._open_index = slow_open  # type: ignore[method-assign]
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(a.retriever)) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(opened) == 1 and len(got) == 5 and all(r is got[0] for r in got)
