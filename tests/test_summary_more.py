"""A summary with more papers on its topic than it lists: the rest come with the answer (`Answer.more`), best first,
numbered on from the listed ones and never cited in the text, and every interface shows them: `ask --json`'s dict,
the chat's small print (collapsed) and the OpenAI API's `rag.more`. The real Chroma store and BM25 index in
tmp_path, the fake embedder, a scripted model."""

import json
from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import make_settings

from rag.indexer import build_index
from rag.pipeline import Assistant
from ui import render as R
from ui.api import _extras

TIDAL = [
    "We study tidal turbine blade fatigue under turbulent inflow. Tidal turbine blade fatigue limits the life of {x}.",
    "A sensor network measures tidal turbine blade fatigue in situ. Tidal turbine blade fatigue grows with {x}.",
    "We model tidal turbine blade fatigue with a surrogate network. Tidal turbine blade fatigue depends on {x}.",
    "Tidal turbine blade fatigue is predicted from strain gauges. Tidal turbine blade fatigue data cover {x}.",
    "We design composite layups against tidal turbine blade fatigue. Tidal turbine blade fatigue falls with {x}.",
    "Tidal turbine blade fatigue is estimated from vibration spectra. Tidal turbine blade fatigue peaks at {x}.",
]
OTHER = ["Graph neural networks classify molecules by their bonds. The model beats baselines on {x}.",
         "A diffusion model generates protein backbones. Samples are scored on {x}.",
         "Speech recognition improves with self-training on unlabeled audio. Word error rate drops on {x}."]
WHAT = ["spring tides", "array wakes", "blade pitch", "salt water", "storm seasons", "rotor speed",
        "benchmark one", "benchmark two", "benchmark three"]
QUESTION = "Which papers study tidal turbine blade fatigue?"


@pytest.fixture
def assistant(tmp_path: Path) -> Assistant:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rows = [{"title": f"Paper {i}", "abstract": a.format(x=WHAT[i])} for i, a in enumerate(TIDAL + OTHER)]
    (corpus / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    s = make_settings(tmp_path / "data", **{"paths.seeds_dir": corpus, "answer.summary_max_papers": 3})
    emb = HashEmbedder()
    build_index(s, emb)
    return Assistant(s, embedder=emb, generator=ScriptedGenerator(["They all study blade fatigue [1][2]."]))


def test_a_summary_lists_its_first_papers_and_returns_the_rest(assistant: Assistant) -> None:
    ans = assistant.ask(QUESTION)
    listed = [c.paper.title for c in ans.citations]
    more = [c.paper.title for c in ans.more]
    tidal = {f"Paper {i}" for i in range(len(TIDAL))}
    assert len(listed) == 3 and set(listed) <= tidal
    # Every tidal paper is either listed or in `more`, none twice, no off-topic paper in either.
    assert set(listed) | set(more) == tidal and not set(listed) & set(more)
    assert [c.n for c in ans.more] == list(range(4, 4 + len(more)))
    # Not cited in the text: only the listed papers' markers are.
    assert all(f"[{c.n}]" not in ans.text for c in ans.more)
    assert all(c.supporting and c.supporting[0] in c.paper.abstract for c in ans.more)
    assert f"{len(more)} more papers on this topic, listed under the answer" in ans.notices
    assert [m["title"] for m in ans.to_dict()["more"]] == more


def test_every_interface_shows_the_rest(assistant: Assistant) -> None:
    ans = assistant.ask(QUESTION)
    html = R.small_print(ans)
    assert f"{len(ans.more)} more papers on this topic</summary>" in html
    assert all(c.paper.paper_id in html for c in ans.more) and f'<ol start="{ans.more[0].n}">' in html
    extras = _extras(ans)
    assert [m["paper_id"] for m in extras["more"]] == [c.paper.paper_id for c in ans.more]
    assert extras["resolved_papers"] == []


def test_a_single_paper_question_has_no_more(assistant: Assistant) -> None:
    ans = assistant.ask("What does the diffusion model generate?")
    assert ans.more == () and "more papers" not in " ".join(ans.notices)
    assert "<details class=\"more-papers\">" not in R.small_print(ans)


def test_when_every_paper_judged_is_on_the_topic_the_answer_says_more_may_be(tmp_path: Path,
                                                                            assistant: Assistant) -> None:
    assert not any(n.startswith("all ") for n in assistant.ask(QUESTION).notices)  # 9 judged, 6 on the topic
    narrow = Assistant(assistant.settings.with_values({"answer.summary_candidates": 4}),
                       embedder=assistant.embedder, generator=ScriptedGenerator())
    ans = narrow.ask(QUESTION)
    judged = len(ans.hits)  # at least the 4 candidates (retrieval's own top_k when that is more), fewer than 6
    assert 4 <= judged < len(TIDAL) and len(ans.citations) + len(ans.more) == judged
    assert f"all {judged} papers judged were on this topic, so more may be: the Search tab ranks every paper, or " \
           "ask about a narrower topic" in ans.notices


def test_a_summary_is_listed_without_the_model_when_its_settings_want_no_model_sentence(tmp_path: Path,
                                                                                      assistant: Assistant) -> None:
    """`answer.summary_synthesis` 0 (the default model's preset): no prompt, no draft, the same list."""
    drafted = assistant.ask(QUESTION)
    generator = ScriptedGenerator(["They all study blade fatigue [1][2]."])
    silent = Assistant(assistant.settings.with_values({"answer.summary_synthesis": 0}), embedder=assistant.embedder,
                       generator=generator)
    listed = silent.ask(QUESTION)
    assert generator.prompts == [] and not listed.drafted and drafted.drafted
    assert [c.paper.paper_id for c in (*listed.citations, *listed.more)] == \
        [c.paper.paper_id for c in (*drafted.citations, *drafted.more)]
    assert listed.mode == "extractive" and "the model's answer was not supported" not in R.small_print(listed)
    # A single-paper question still asks the model.
    silent.ask("What does the diffusion model generate?")
    assert len(generator.prompts) == 1
