"""How a summary question's topic is read and a paper judged on it (rag.evidence): the alternatives a "which papers
...?" question names, and the share of one alternative's rare words a paper's text holds."""

from rag.evidence import topic_alternatives, topic_cover, topical


def test_alternatives_split_on_or_slash_and_commas() -> None:
    assert topic_alternatives("Which papers use diffusion models or LiDAR?") == [["diffusion", "models"], ["lidar"]]
    assert topic_alternatives("Which papers work on vision-language / multimodal retrieval?") == [
        ["vision-language"], ["multimodal", "retrieval"]]
    # "and" outside an example list joins words of one alternative: a paper needs both
    assert topic_alternatives("Which papers study robustness and fairness?") == [["robustness", "fairness"]]


def test_each_example_after_including_or_such_as_is_an_alternative_of_its_own() -> None:
    assert topic_alternatives("Which papers work on large language models, including LLM agents and multimodal "
                              "LLMs?") == [["large", "language", "models"], ["llm", "agents"], ["multimodal", "llms"]]
    assert topic_alternatives("Summarize the work on 3D data, such as point clouds and meshes.") == [
        ["3d", "data"], ["point", "clouds"], ["meshes"]]


def test_a_compound_is_one_word_unless_its_ending_only_says_how() -> None:
    # "multi" and "task" alone would put every paper on "multiple ... tasks" on the topic
    assert topic_alternatives("Which papers study multi-task learning?") == [["multi-task", "learning"]]
    assert topic_alternatives("Which papers are about LLM-based agents or assistants?") == [["llm", "agents"],
                                                                                            ["assistants"]]
    weights = [{"multi-task": 4.0}]
    assert topic_cover(weights, "A multitask model.") == 1.0  # written closed
    assert topic_cover(weights, "Multiple objectives for one task.") == 0.0


def test_a_paper_covers_the_topic_through_any_one_alternative() -> None:
    alternatives = [{"llm": 2.0, "agents": 2.0}, {"multimodal": 3.0, "llms": 3.0}]
    assert topic_cover(alternatives, "Multimodal LLMs see images.") == 1.0
    assert topic_cover(alternatives, "Repository agents fix code.") == 0.5  # "agents" without "llm"
    assert topic_cover(alternatives, "Point clouds.") == 0.0


def test_availability_statements_do_not_put_a_paper_on_a_topic() -> None:
    text = "We retrieve images. Code is available at https://github.com/x/y."
    assert topical(text, "Which papers release their code?") == text  # asked about: kept
    assert topical(text, "Which papers work on code?") == "We retrieve images."
    assert "github" in topical(text, "Which papers make their code available on github?")



def test_a_close_sentence_alone_lists_a_paper_only_if_it_says_a_topic_word() -> None:
    """The sure-sentence rule: a paper whose best sentence is very close to the question is listed however little of
    the topic its text covers, but not when it holds none of the topic's rare words."""
    from fakes import HashEmbedder

    from rag import question as Q
    from rag.config import Answering
    from rag.evidence import SentenceScorer, relevant_papers
    from rag.parse import make_paper
    from rag.records import Hit

    emb = HashEmbedder()
    q = Q.read("Which papers learn policies from offline data?")
    on = make_paper("We learn policies from offline data.", "a.txt", 0)
    some = make_paper("Papers learn offline from data.", "a.txt", 1)  # "offline" of the two rare words
    none = make_paper("Papers learn from data and papers.", "a.txt", 2)  # close in words, none of the rare ones
    idf = {"policies": 3.0, "offline": 3.0}  # "papers", "learn" and "data" are common: not topic words
    knobs = Answering(summary_min_cover=0.6, summary_min_sentence=0.3, summary_sure_sentence=0.55)
    blocks = relevant_papers(q, emb.embed([q.scored])[0], [Hit(p, 1.0) for p in (on, some, none)],
                             SentenceScorer(emb, knobs), lambda ws: {w: idf[w] for w in ws if w in idf}, knobs)
    assert [b.hit.paper for b in blocks] == [on, some]
