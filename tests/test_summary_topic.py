"""How a summary question's topic is read and a paper judged on it (rag.evidence): the alternatives a "which papers
...?" question names, the share of one alternative's rare words a paper's text holds, and the per-paper rule.
Availability statements are in test_answer_first.py."""

import pytest

from rag import question as Q
from rag.evidence import topic_alternatives, topic_cover


def test_alternatives_split_on_or_slash_and_commas() -> None:
    assert topic_alternatives("Which papers use diffusion models or LiDAR?") == [["diffusion", "models"], ["lidar"]]
    assert topic_alternatives("Which papers work on image-text retrieval / point clouds?") == [
        ["image", "text", "retrieval"], ["point", "clouds"]]  # a compound counts through its parts
    # "and" joins words of one alternative: a paper needs both
    assert topic_alternatives("Which papers study robustness and fairness?") == [["robustness", "fairness"]]
    # The field every paper is in names no topic. Tried in the chat: "attacks on machine learning models" listed a
    # diffusion paper through "machine" (rarer in the seeds than "attacks") and left out the attack papers.
    assert topic_alternatives("Which papers study attacks on machine learning models?") == [["attacks", "models"]]
    assert topic_alternatives("Which papers apply machine learning to biological or clinical data?") == [
        ["biological"], ["clinical", "data"]]
    assert topic_alternatives("Which papers use deep learning?") == []
    # Words pointing at the collection name no topic either: "set" took a weight in a blind dev listing.
    assert topic_alternatives("summarize the work on contrastive learning in this set") == [["contrastive", "learning"]]
    assert topic_alternatives("What research here uses group theory or symmetry groups?") == [
        ["group", "theory"], ["symmetry", "groups"]]
    assert topic_alternatives("Which papers in the collection study privacy?") == [["privacy"]]
    # examples of the topic are not alternatives a listed paper must hold (blind dev: the learnware paper, on privacy
    # risk in general, was left out of "privacy, e.g. privacy leakage, privacy risk, or differential privacy")
    assert topic_alternatives("Which papers deal with privacy, e.g. privacy leakage, privacy risk, or differential "
                              "privacy?") == [["privacy"]]
    assert topic_alternatives("Which papers use RL (for example PPO)?") == [["rl"]]


def test_a_paper_covers_the_topic_through_any_one_alternative() -> None:
    alternatives = [{"llm": 2.0, "agents": 2.0}, {"multimodal": 3.0, "retrieval": 3.0}]
    assert topic_cover(alternatives, "Multimodal retrieval of images.") == 1.0
    assert topic_cover(alternatives, "Repository agents fix code.") == 0.5  # "agents" without "llm"
    assert topic_cover(alternatives, "Assistive agents for LLM users.") == 1.0
    assert topic_cover(alternatives, "Point clouds.") == 0.0


def test_a_short_topic_word_is_covered_in_its_other_number() -> None:
    """"Which papers are about LLMs?": a paper writing "Large Language Model (LLM) agents" holds the topic word in
    its other number (too short for the five-letter prefix that takes "models" for "model"); "loss" is not "los"."""
    assert topic_cover([{"llms": 2.7}], "Large Language Model (LLM) agents plan.") == 1.0
    assert topic_cover([{"gnn": 2.7}], "We attack GNNs.") == 1.0
    assert topic_cover([{"loss": 2.0}], "The los angeles data.") == 0.0


def test_a_paper_is_listed_on_cover_and_sentence_or_on_a_very_close_sentence() -> None:
    """The per-paper rule: most of the topic's rare words and a close enough sentence, or a very close sentence in a
    paper holding some of them (`summary_sure_cover`)."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers
    from rag.parse import make_paper
    from rag.records import Hit

    emb = HashEmbedder()
    q = Q.read("Which papers learn policies from offline data?")
    on = make_paper("We learn policies from offline data.", "a.txt", 0)
    close = make_paper("Papers learn from data and papers.", "a.txt", 1)  # close in words, no rare topic word
    off = make_paper("Policies of offline shops differ in many ways and across regions.", "a.txt", 2)  # ~0.53
    idf = {"policies": 3.0, "offline": 3.0}  # "papers", "learn" and "data" are common: not topic words
    partly = make_paper("Papers learn from offline data and papers.", "a.txt", 3)  # close, one rare word of two

    def listed(rare: dict[str, float] = idf, **sure: float) -> list[object]:
        knobs = Answering(summary_min_cover=0.6, summary_min_sentence=0.6, summary_sure_sentence=0.8, **sure)
        blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(p, 1.0) for p in (on, close, off, partly)],
                                 SentenceScorer(emb, knobs), lambda ws: {w: rare[w] for w in ws if w in rare}, knobs)
        return [b.hit.paper for b in blocks]

    # `off` holds the words but its sentence is not close; `close` shares none of the topic's rare words
    assert listed() == [on, partly]
    assert listed(summary_sure_cover=0.0) == [on, partly, close]  # the sentence alone decides
    assert close in listed(rare={})  # a topic of common words only: nothing to hold, the sentence decides


def test_beside_a_single_paper_on_the_topic_one_holding_its_words_with_a_less_close_sentence_is_listed() -> None:
    """One paper clearly on the topic shows that the question's words name it; a paper holding most of those words is
    then listed after it with a sentence `summary_alone_margin` less close (a blind dev listing on "applications in
    business, politics or public policy, such as ... election campaigns" found only the advertising paper). Not when
    two papers are clearly on it, nor when none is."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers
    from rag.parse import make_paper
    from rag.records import Hit

    emb = HashEmbedder()
    q = Q.read("Which papers learn policies from offline data?")
    on = make_paper("We learn policies from offline data.", "a.txt", 0)
    off = make_paper("Policies of offline shops differ in many ways and across regions.", "a.txt", 2)  # ~0.53
    partly = make_paper("Papers learn from offline data and papers.", "a.txt", 3)
    rare = {"policies": 3.0, "offline": 3.0}

    def listed(papers: tuple[object, ...], margin: float = 0.15, **kw: bool) -> list[object]:
        knobs = Answering(summary_min_cover=0.6, summary_min_sentence=0.6, summary_sure_sentence=0.8,
                          summary_alone_margin=margin, summary_alone_cover=0.8)
        blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(p, 1.0) for p in papers],  # type: ignore[arg-type]
                                 SentenceScorer(emb, knobs), lambda ws: {w: rare[w] for w in ws if w in rare}, knobs,
                                 **kw)
        return [b.hit.paper for b in blocks]

    assert listed((off, on)) == [on, off]  # after the paper clearly on the topic
    assert listed((off, on), margin=0.05) == [on]  # its sentence is ~0.07 short of the bar
    assert listed((off, on), margin=0.0) == [on]  # off
    assert listed((on, off, partly)) == [on, partly]  # two clearly on it: the bar stays
    assert listed((off,), closest_if_none=False) == []  # none clearly on it: nothing is added
    # Asked whether a paper exists, in the singular, the one found is the answer (a dev conversation's "is there a
    # paper that recommends sustainable meals, and what is its dataset called?" listed a second paper).
    q = Q.read("Is there a paper that learns policies from offline data?")
    assert q.one_sought and not Q.read("Are there papers that learn policies from offline data?").one_sought
    assert listed((off, on)) == [on]


def test_a_paper_whose_sentence_is_close_to_the_topic_alone_is_listed() -> None:
    """The question's frame dilutes a sentence's score against the whole question (a blind dev listing, "What research
    here uses group theory or symmetry groups?", missed the Lie-groups paper); the topic alone is close to it."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers, topic_of
    from rag.parse import make_paper
    from rag.records import Hit

    emb = HashEmbedder()
    q = Q.read("What research here uses group theory or symmetry groups?")
    assert topic_of(q.scored) == "uses group theory or symmetry groups"
    lie = make_paper("We recover transformations on Lie groups using group theory.", "a.txt", 0)
    off = make_paper("Our survey uses many ideas of others.", "a.txt", 1)
    rare = {"group": 2.0, "theory": 2.0, "groups": 3.0, "symmetry": 3.0}

    def listed(**knobs: float) -> list[object]:
        k = Answering(summary_min_cover=0.6, summary_min_sentence=0.9, summary_sure_sentence=0.95, **knobs)
        blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(lie, 1.0), Hit(off, 1.0)], SentenceScorer(emb, k),
                                 lambda ws: {w: rare[w] for w in ws if w in rare}, k, closest_if_none=False)
        return [b.hit.paper for b in blocks]

    assert listed() == [lie]
    assert listed(summary_topic_cover=0.0) == []  # the route off: no sentence is close enough to the whole question


def test_a_paper_saying_where_its_code_is_holds_every_availability_word_asked() -> None:
    """A dev conversation: "Which papers say their code is publicly available?" listed one paper of five once
    "publicly" weighed as its kin "public" (`LexicalIndex.idf_or_kin`): "Code is available at https://..." does not
    write it. A paper stating availability holds the topic's availability words, however it says it."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers
    from rag.parse import make_paper
    from rag.records import Hit

    emb = HashEmbedder()
    q = Q.read("Which papers say their code is publicly available?")
    shared = make_paper("We segment point clouds. Code is available at https://github.com/x/y.", "a.txt", 0)
    public = make_paper("We retrieve images. Our code is publicly available.", "a.txt", 1)
    closed = make_paper("We study the code of conduct of listed firms.", "a.txt", 2)
    rare = {"code": 1.8, "publicly": 3.3, "available": 1.5}
    k = Answering(summary_min_cover=0.6, summary_min_sentence=0.0, summary_sure_sentence=2.0, summary_topic_cover=0.0)
    blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(p, 1.0) for p in (shared, public, closed)],
                             SentenceScorer(emb, k), lambda ws: {w: rare[w] for w in ws if w in rare}, k)
    assert {b.hit.paper.paper_id for b in blocks} == {shared.paper_id, public.paper_id}


def test_a_listing_of_a_one_word_field_shows_the_sentence_that_puts_the_paper_in_it() -> None:
    """"Which papers are about robotics?" listed a diffusion paper by its method, which says nothing of robotics; the
    sentence reporting its robotic-control experiments says why it is listed."""
    from rag.evidence import on_topic_line
    from rag.parse import make_paper

    sents = [("Diffusion models are used in robotics with diffusion policies.", 0.9),
             ("We develop a principled MOL framework for diffusion models.", 0.8),
             ("Extensive experiments on robotic control are conducted.", 0.5),
             ("In contrast, we construct deeper architectures.", 0.4)]
    paper = make_paper(" ".join(s for s, _ in sents), "a.txt", 0)
    assert on_topic_line(sents, [0, 1, 2, 3], 1, {"robotics"}, paper) == 2  # not the field's background opening
    assert on_topic_line(sents, [0, 1, 2, 3], 2, {"robotics"}, paper) == 2  # already on it
    assert on_topic_line(sents, [0, 1, 2, 3], 1, {"contrastive"}, paper) == 1  # "contrast" is another word
    titled = make_paper(" ".join(s for s, _ in sents), "a.txt", 0, title="MOL for robotics")
    assert on_topic_line(sents, [0, 1, 2, 3], 1, {"robotics"}, titled) == 1  # the title says it


def test_words_framing_a_listing_are_no_topic() -> None:
    """"which papers propose new attacks against ml models?" listed PrivGate first: "new" and "against" are rare in
    the seeds, so they weighed as much as "attacks"."""
    from rag.evidence import topic_alternatives

    assert topic_alternatives("which papers propose new attacks against ml models?") == [["attacks", "ml", "models"]]
    assert topic_alternatives("Which papers propose novel attacks?") == [["attacks"]]
    # "report" as the frame's verb is no topic ("Conjoint analyses typically report ..." was the closest paper for
    # "which papers report a speedup?"); as a noun it is.
    assert topic_alternatives("which papers report a speedup?") == [["speedup"]]
    assert topic_alternatives("Which papers show theoretical guarantees?") == [["theoretical", "guarantees"]]
    assert topic_alternatives("Which papers are about report generation?") == [["report", "generation"]]
    # "applications in robotics" is robotics (a dev listing left out the paper on robotic hardware design: it never
    # writes "applications").
    assert topic_alternatives("Which papers have applications in robotics?") == [["robotics"]]
    # "run", "conduct", "perform" are the frame's verbs (a blind dev listing, "which papers mention running
    # ablation studies?", was declined: no paper writes "running ablation").
    assert topic_alternatives("which papers mention running ablation studies?") == [["ablation"]]
    # "things like privacy" is privacy (probes of this stop: "any papers on things like privacy?" found no paper on
    # "like" and "privacy" together); "stuff" names nothing a paper could write (a blind dev question's answer began
    # "No abstract mentions stuff").
    assert topic_alternatives("any papers on things like privacy?") == [["privacy"]]
    assert topic_alternatives("which papers deal with stuff such as robots or drones?") == [["robots"], ["drones"]]
    assert "stuff" not in Q.read("do any of them feed the model the extra stuff an experiment records?").topic_words


def test_a_listing_asked_for_paper_by_paper_is_a_listing_of_its_topic() -> None:
    """"One sentence on each privacy paper" was answered from PrivGate alone, as a question about one paper; and
    "what are the main themes in these papers?", asked first, abstained. Both are listings: of the papers on the topic
    the words around "each"/"per paper" name, and of the whole collection."""
    from rag.question import read

    for asked, topic in (("give me one sentence on each privacy paper", [["privacy"]]),
                         ("summarize each RL paper in one line", [["rl"]]),
                         ("one line per paper on diffusion please", [["diffusion"]]),
                         ("For each paper on reinforcement learning, what is the main result?",
                          [["reinforcement", "learning"]])):
        assert read(asked).summary, asked
        assert topic_alternatives(asked) == topic, asked
    assert not read("What dataset does each method use?").summary  # one paper's methods
    assert not read("summarize the SOLAR paper").summary
    for asked in ("What are the main themes in these papers?", "What topics do these papers cover?",
                  "what is this collection about?"):
        assert read(asked, alone=True).collection, asked
    # After an answer, "these papers" are the ones it listed, not the collection.
    assert not read("What are the main themes in these papers?").collection
    assert not read("What are the main topics of the SOLAR paper?", alone=True).collection
    # A group of papers named by its topic is listed: "How do the RL papers differ?" abstained.
    assert read("How do the RL papers differ?", alone=True).summary
    assert topic_alternatives("How do the RL papers differ?") == [["rl"]]
    assert not read("What do the two papers share?").summary  # earlier papers, not a topic
    assert not read("What do all the papers have in common?").summary
    assert read("what do all the privacy papers share?").summary
    assert not read("Which of the RL papers uses PPO?", alone=True).summary  # one of them


def test_a_request_to_the_assistant_asks_what_it_requests() -> None:
    """A blind dev conversation: "Can you list the papers about LLM-based agents?" was read as a yes/no question
    and answered from one paper; its topic words were "you list llm agents"."""
    from rag.question import read

    for asked in ("Can you list the papers about LLM-based agents?", "could you summarize the work on privacy?",
                  "can you tell me which papers study privacy?", "Could you please show me papers on graph neural "
                                                                 "networks?"):
        q = read(asked)
        assert q.summary and "yesno" not in q.asks, asked
    assert topic_alternatives(read("Can you list the papers about LLM-based agents?").text) == [["llm", "agents"]]
    assert read("can you tell me how much PrivGate cuts leakage?").asks == frozenset({"number"})
    # A greeting before the question and a remark on the answer's form after it put nothing (a blind dev
    # conversation, "Hi! Which of the papers come up with a new loss function? A short list is fine.", abstained).
    hello = read("Hi! Which of the papers come up with a new loss function? A short list is fine.", alone=True)
    assert hello.summary and hello.text == "Which of the papers come up with a new loss function?"
    assert read("hey, what does SOLAR stand for? thanks!").text == "what does SOLAR stand for?"
    assert read("Hello there. Is PrivGate fast?").text == "Is PrivGate fast?"
    assert read("High-dimensional data: which papers?").text == "High-dimensional data: which papers?"
    assert read("is it cheap? the paper says so").text == "is it cheap? the paper says so"
    # "which ones ...?" lists papers as "which papers ...?" does (a blind dev switch, "ok and which ones use sgd",
    # answered from one paper, its topic "ones sgd"); "which one ...?" picks one.
    assert read("ok and which ones use sgd").summary and topic_alternatives("ok and which ones use sgd") == [["sgd"]]
    assert not read("which one uses sgd?").summary
    # A question about a paper is a yes/no question still.
    assert "yesno" in read("Can SERA be trained on a single GPU?").asks
    assert "yesno" in read("Could the attack work without labels?").asks


def test_a_follow_up_naming_only_what_it_asks_for_asks_for_that() -> None:
    """A blind dev conversation: "and datasets", after a question about a paper, cited the paper's first finding; the
    sentence naming its datasets answers."""
    from rag.question import read

    assert read("and datasets").noun == "datasets"
    assert read("noise levels?").text == "what noise levels?"
    for pointer in ("and the first one?", "both?", "evaluated on?", "and SERA?", "and TIED"):
        assert read(pointer).text == pointer, pointer


@pytest.mark.slow
def test_listings_of_the_seeds_show_what_each_paper_does(real_assistant) -> None:  # type: ignore[no-untyped-def]
    """On the real seeds and embedder (a listing runs no model): every RL paper's line says what it does, never its
    project page ("rl" begins "rllab"); the RL papers asked to be told apart, and the privacy papers asked for one
    sentence each, are listed."""
    rl = real_assistant.ask("Which papers are about RL?")
    lines = [x for x in rl.text.splitlines() if x.startswith("- ")]
    assert len(lines) >= 4 and not any("http" in x or "Project page" in x for x in lines), rl.text
    assert any("universal horizon models" in x for x in lines), rl.text
    differ = real_assistant.ask("How do the RL papers differ?")
    listed = {c.paper.paper_id for c in differ.citations}
    assert not differ.abstained and len(listed) >= 4 and listed <= {c.paper.paper_id for c in rl.citations}
    # Asked as a request to the assistant, the listing is the same one, not a yes/no answer from one paper.
    agents = real_assistant.ask("Can you list the papers about LLM-based agents?")
    assert len(agents.citations) >= 4 and "SERA" in agents.text, agents.text
    each = real_assistant.ask("give me one sentence on each privacy paper")
    assert len(each.citations) >= 3 and "PrivGate" in each.text, each.text
    assert any("private hypothesis selection" in x for x in each.text.splitlines()), each.text


def test_a_papers_line_in_a_listing_of_the_collection_is_what_it_puts_forward() -> None:
    """"List all papers" showed AREW by "we find that outcome-based RL can induce a failure mode which we call
    information self-locking": it names what the paper found; its line is where it proposes AREW."""
    from rag.evidence import collection_blocks
    from rag.parse import make_paper
    from rag.records import Hit

    arew = make_paper("RL has become a paradigm for LLM agents. However, in active reasoning we find that outcome-"
                      "based RL can induce a failure mode which we call information self-locking (SeL). To mitigate "
                      "this issue, we propose AREW, an advantage reweighting method. Code is available at "
                      "https://github.com/x/y.", "a.txt", 0)
    plain = make_paper("Graphs are everywhere. We study link stealing on graphs.", "a.txt", 1)
    blocks = collection_blocks([Hit(arew, 1.0), Hit(plain, 1.0)])
    assert blocks[0].sentences == ("To mitigate this issue, we propose AREW, an advantage reweighting method.",)
    assert blocks[1].sentences == ("Graphs are everywhere.",)  # nothing put forward nor presented: the opening


def test_a_paper_on_an_example_the_question_gives_is_on_the_topic() -> None:
    """A blind dev listing, "Any papers about the order in which data or elements come, e.g. shuffling or permuting
    training data, ...?", left out the shuffling paper, which never writes "order": the examples a question gives
    are alternatives too (the head alone still names the topic: `topic_of`)."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers, topic_alternatives, topic_parts
    from rag.parse import make_paper
    from rag.question import read
    from rag.records import Hit

    asked = "Any papers about the order in which data comes, e.g. shuffling or permuting training data?"
    assert topic_parts(asked) == ("the order in which data comes", "shuffling or permuting training data")
    assert topic_parts("Which papers use diffusion models?")[1] == ""
    # ", like X" and ", such as X" give examples too (a blind dev listing, "anything about predicting the future,
    # like forecasting values or the future states of an environment?", left out the forecasting paper); "like"
    # without the comma compares.
    assert topic_parts("anything about predicting the future, like forecasting values?") == \
        ("predicting the future", "forecasting values")
    assert topic_parts("Which papers study attacks, such as backdoors?") == ("study attacks", "backdoors")
    assert topic_parts("which papers act like a judge?")[1] == ""
    # What the papers do not do is no part of the topic (a dev listing, "... worst-case rather than average-case
    # outcomes?", and a blind dev one, "which papers derive something in closed form, rather than only learning it
    # numerically?", took in papers through "average-case" and "learning"); "something" names no topic.
    assert topic_alternatives("which papers derive something in closed form, rather than only learning it "
                              "numerically?") == [["derive", "closed", "form"]]
    assert topic_alternatives("Which papers optimize worst-case instead of average-case outcomes?") == \
        [["optimize", "worst", "case"]]
    # What follows a question mark says more of the topic before it (a blind dev conversation, "anything on
    # forecasting? predicting what comes next over time, values or states", was read as asking for one paper and
    # listed only one).
    more = read("anything on forecasting? predicting what comes next over time, values or states", alone=True)
    assert more.summary and topic_parts(more.text) == ("forecasting", "predicting what comes next over time, values "
                                                                      "or states")
    # A name in parentheses is another name for the topic (a dev listing, "... stochastic gradient descent (SGD)?",
    # left out the paper writing only "SGD"); "(or several)" is none.
    assert topic_alternatives("What work is there involving stochastic gradient descent (SGD)?") == \
        [["stochastic", "gradient", "descent"], ["sgd"]]
    assert topic_alternatives("which papers involve distilling one model (or several) into another") == \
        [["distilling", "one", "model", "several", "another"]]
    # A listing asked by what the user is looking for, its frame after the topic (a blind dev conversation, "Good
    # afternoon. I'm looking for research that models what people prefer ... Which papers would that be?", was
    # answered from one paper's sentences).
    looking = read("Good afternoon. I'm looking for research that models what people prefer, or how voters choose. "
                   "Which papers would that be?", alone=True)
    assert looking.summary
    assert topic_alternatives(looking.text) == [["models", "people", "prefer"], ["voters", "choose"]]
    emb = HashEmbedder()
    q = Q.read(asked)
    shuffle = make_paper("We shuffle the training set in slow storage cheaply.", "a.txt", 0)
    off = make_paper("Our survey uses many ideas of others.", "a.txt", 1)
    rare = {"order": 2.0, "shuffling": 3.0, "permuting": 3.0}
    k = Answering(summary_min_cover=0.6, summary_min_sentence=0.0)
    blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(shuffle, 1.0), Hit(off, 1.0)], SentenceScorer(emb, k),
                             lambda ws: {w: rare[w] for w in ws if w in rare}, k, closest_if_none=False)
    assert [b.hit.paper for b in blocks] == [shuffle]
