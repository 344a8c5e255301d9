"""What a paper is about, and whether a paper on something exists: read as such, answered by the sentence where the
paper says what it does, and never by a model sentence denying the paper it cites. Pure functions on hand-made
evidence (the fake embedder stands in for similarity)."""

from fakes import HashEmbedder

from rag import question as Q
from rag import support
from rag.config import Answering
from rag.evidence import SentenceScorer, select_evidence
from rag.parse import make_paper
from rag.records import Evidence, Hit

DIET = make_paper("A sustainable diet represents a multi-dimensional synergy among nutrition, environment, economy "
                  "and culture. Existing recommenders model sustainability as a user preference. To address this "
                  "issue, we propose a personalized sustainable diet recommendation model based on a constraint-aware "
                  "decision-making mechanism. Experiments on the SusDiet dataset show gains of 12% in nutrition "
                  "scores.", "d.txt", 0)
SERA = make_paper("Open-weight coding agents should adapt to private codebases. We present Soft-Verified Efficient "
                  "Repository Agents (SERA), an efficient method for training coding agents specialized to private "
                  "codebases. Creating SERA models is 26x cheaper than reinforcement learning. Code is available at "
                  "https://github.com/x/sera.", "s.txt", 0)


def test_overview_and_existence_questions_are_read_as_such() -> None:
    overview = ("What is the SERA paper about?", "What does PrivGate do?", "what is STT-LLM about",
                "Tell me about the paper on private hypothesis selection.", "Give me a quick overview of NITP.",
                "What is the main contribution of TIED?", "What problem does R2G solve?", "Summarize the SERA paper.",
                "Summarize PrivGate", "What does the paper on relational deep learning propose?",
                "Is there a paper on sustainable diet recommendation for individual users?",
                "Do any of the papers look at recommending sustainable diets to individual users?")
    for asked in overview:
        assert "overview" in Q.read(asked).asks, asked
    # One paper to summarize is not a field to list; a field still is.
    assert Q.read("Summarize the SERA paper.").kind == "factoid"
    assert Q.read("Give me an overview of NITP").kind == "factoid"
    for field in ("Summarize the work on RL for LLM agents", "Summarize the papers on privacy",
                  "Give me an overview of work on diffusion models", "Which papers are about privacy?"):
        read = Q.read(field)
        assert read.kind == "summary" and "overview" not in read.asks, field
    # Whether a paper on something exists, and its topic's words without the frame.
    for asked in ("Is there a paper on speculative decoding?",
                  "Are there any papers applying contrastive learning to slides?",
                  "Do any of the papers propose backdoor attacks?", "is there any work on label proportions"):
        assert Q.read(asked).exists, asked
    assert Q.read("Is there a paper on speculative decoding for faster LLM inference?").topic_words == [
        "speculative", "decoding", "faster", "llm", "inference"]
    # Examples of the topic are not its words: a blind dev listing had been answered "No abstract mentions matters".
    assert Q.read("Any papers about the order in which data comes, e.g. shuffling training data, or tasks where the "
                  "order of the inputs matters?").topic_words == ["order", "data", "comes"]
    # As typed in the chat: "any robotics papers?" had been a factoid, "is any paper about robots?" a yes/no.
    for typed, topic in (("any robotics papers?", ["robotics"]), ("is any paper about robots?", ["robots"]),
                         ("Are any of the papers about privacy?", ["privacy"])):
        assert Q.read(typed).exists and Q.read(typed).topic_words == topic, typed
    # A field named in a word or three is listed (every paper in it answers); a paper described is one paper.
    for field in ("is there a paper on robotics?", "any robotics papers?", "is any paper about robots?",
                  "Is there any work on label proportions?"):
        assert Q.read(field).kind == "summary", field
    assert Q.read("Is there a paper on speculative decoding for faster LLM inference?").kind == "which"
    # Tried in the chat after a listing: "tell me more about the privacy ones" had answered from PrivGate alone.
    # A blind dev listing had been answered from one paper: "what's out there that reports statistical significance
    # ...?".
    assert Q.read("what's out there that reports statistical significance?").kind == "summary"
    for plural in ("tell me more about the privacy ones", "Tell me about the papers on diffusion",
                   "Papers that use or study diffusion models / diffusion processes?", "papers using RL?"):
        assert Q.read(plural).kind == "summary", plural
    for one in ("tell me about SERA", "tell me more about the graph one", "Tell me about the paper that analytically "
                "works out what the ideal image encoder looks like"):
        assert Q.read(one).kind != "summary", one
    assert Q.read("Is there a paper on video-text retrieval?").kind == "which"
    # "Any ..." asks for all of them, however long the topic (a blind dev listing had become one paper).
    for plural in ("Any work on 3D point clouds or LiDAR?", "any papers on protein structure prediction with "
                   "diffusion models?"):
        assert Q.read(plural).kind == "summary" and Q.read(plural).exists, plural
    for other in ("Is the code available?", "Is there a paper that recommends sustainable meals, and what is its "
                  "dataset called?", "Which paper studies privacy?", "Does PrivGate need fine-tuning?"):
        assert not Q.read(other).exists, other
    # Narrower questions: a second question asks something else; a number or a name asked for is not an overview.
    for narrower in ("Something else: is there a paper that recommends sustainable meals, and what is its dataset "
                     "called?", "What does SOLAR stand for?", "How much does PrivGate cut leakage?",
                     "What does it do to the tokens?", "Which datasets does SERA use?"):
        assert "overview" not in Q.read(narrower).asks, narrower


def test_what_a_paper_is_about_is_answered_by_the_sentence_presenting_its_work() -> None:
    q = Q.read("What is the SERA paper about?")
    emb = HashEmbedder()
    firsts = []
    for weight in (0.0, 2.0):
        scorer = SentenceScorer(emb, Answering(overview_boost=weight))
        blocks = select_evidence(q, emb.embed([q.scored])[0], [Hit(SERA, 0.9)], scorer, 1, 4, 1.0)
        ranked = sorted(zip(blocks[0].sentence_scores, blocks[0].sentences), reverse=True)
        firsts.append(ranked[0][1])
    assert not firsts[0].startswith("We present") and firsts[1].startswith("We present"), firsts
    # An opening in which the paper speaks of itself keeps its place for an overview ("We study ..." is what the
    # paper is about); an opening stating the field's background is still held back.
    own = make_paper("We study private hypothesis selection under differential privacy. As an application, we obtain "
                     "faster algorithms for universal statistical estimation.", "h.txt", 0)
    q = Q.read("Tell me about the paper on private hypothesis selection.")
    scorer = SentenceScorer(emb, Answering(overview_boost=2.0))
    blocks = select_evidence(q, emb.embed([q.scored])[0], [Hit(own, 0.9)], scorer, 1, 2, 1.0)
    ranked = sorted(zip(blocks[0].sentence_scores, blocks[0].sentences), reverse=True)
    assert ranked[0][1].startswith("We study"), ranked


def test_an_overview_is_answered_where_the_paper_puts_its_work_forward_not_where_it_names_a_finding() -> None:
    # "What is the main idea of AREW?" had been answered by "we find that outcome-based RL can induce a failure mode
    # which we call information self-locking" (naming what it found), not by "we propose AREW, ...".
    arew = make_paper("Reinforcement learning has become a paradigm for building LLM agents. However, in active "
                      "reasoning we find that outcome-based RL can induce a failure mode which we call information "
                      "self-locking (SeL). To mitigate this issue, we propose AREW, an advantage reweighting method "
                      "that uses directional critiques to reallocate credit. Experiments across 9 agentic tasks show "
                      "gains of up to 60 points.", "a.txt", 0)
    emb = HashEmbedder()
    q = Q.read("What is the main idea of AREW?")
    scorer = SentenceScorer(emb, Answering(overview_boost=2.0))
    blocks = select_evidence(q, emb.embed([q.scored])[0], [Hit(arew, 0.9)], scorer, 1, 4, 1.0)
    ranked = sorted(zip(blocks[0].sentence_scores, blocks[0].sentences), reverse=True)
    assert ranked[0][1].startswith("To mitigate this issue, we propose AREW"), ranked


def test_a_model_sentence_denying_the_paper_it_cites_is_not_supported() -> None:
    emb = HashEmbedder()
    # A threshold the fake embedder's cosines reach, so that only the denial can make a sentence unsupported.
    lenient = Answering(support_similarity=0.2)

    def check(sentence: str, question: str, paper):  # type: ignore[no-untyped-def]
        blocks = [Evidence(1, Hit(paper, 1.0), (), ())]
        papers = SentenceScorer(emb).sentences([b.hit for b in blocks])
        return support.check(sentence, question, blocks, emb, papers, lenient)[1][0]

    question = "Is there a paper on sustainable diet recommendation for individual users?"
    assert check("A paper proposes a sustainable diet recommendation model [1].", question, DIET).supported
    for denial in ("No, there is no paper on sustainable diet recommendation [1].",
                   "No paper proposes a sustainable diet recommendation model [1]."):
        got = check(denial, question, DIET)
        assert not got.supported and got.note.startswith("says the sources do not"), got
    # The same words stated by the source itself are what it says.
    nothing = make_paper("We probe whether models memorise diets. We find no evidence of memorisation in recommenders "
                         "trained on diet logs.", "n.txt", 0)
    assert check("We find no evidence of memorisation in recommenders trained on diet logs [1].",
                 "Do diet recommenders memorise?", nothing).supported
    assert support.denies_sources("There is no paper on it [1].")
    assert not support.denies_sources("PrivGate needs no fine-tuning of the base LLM [1].")


def test_an_overview_from_the_evidence_drops_the_phrase_pointing_back_at_an_unshown_sentence() -> None:
    from rag import compose

    q = Q.read("Is there a paper on sustainable diet recommendation for individual users?")
    sents = ("To address this issue, we propose a personalized sustainable diet recommendation model based on a "
             "constraint-aware decision-making mechanism.",)
    text = compose.fallback([Evidence(1, Hit(DIET, 1.0), sents, (3.0,))], q)
    assert text.startswith("We propose a personalized sustainable diet recommendation model") and "[1]" in text, text
    # A factoid about the same sentence keeps it whole.
    narrow = Q.read("Which mechanism does the diet recommendation model use?")
    kept = compose.fallback([Evidence(1, Hit(DIET, 1.0), sents, (3.0,))], narrow)
    assert "To address this issue" in kept, kept


def test_whether_anyone_works_on_a_field_asks_for_its_papers_and_a_gloss_names_no_more_of_it() -> None:
    from rag.evidence import topic_of

    # A blind dev question had been read as yes/no about one paper: "Is anyone doing distillation, i.e. ...?"
    glossed = ("Is anyone doing distillation, i.e. compressing or transferring one or more models into another "
               "model? Give me a quick overview.")
    for asked in (glossed, "is anybody working on privacy?", "Is someone looking into symmetry groups?"):
        read = Q.read(asked)
        assert read.exists and read.kind == "summary", asked
    # A listing's topic keeps its gloss: "sample complexity, i.e. how many samples ..." is searched by both.
    assert "compressing" in topic_of(glossed)
    # A paper described at length is one paper, not a field to list; a second question is not a request to drop.
    described = Q.read("Is anyone working on making coding agents for private repositories cheaper than RL?")
    assert described.exists and described.kind != "summary"
    assert Q.unglossed("Is there a paper on privacy? What does it find?") == \
        "Is there a paper on privacy? What does it find?"
    assert Q.unglossed("Any privacy papers? Show me the list.") == "Any privacy papers"
