"""The real components end to end: all-MiniLM-L6-v2, Chroma on disk, SmolLM2 through llama.cpp, the CLI."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import ROOT, make_settings

from rag.chunk import chunk_paper, embed_text
from rag.parse import ParseReport, iter_papers
from rag.pipeline import Assistant, ingest
from rag.text import split_sentences, tokens

pytestmark = pytest.mark.slow
SEEDS = ROOT / "seeds"


def test_reingest_changes_nothing(seeded) -> None:  # type: ignore[no-untyped-def]
    again = ingest(seeded)
    assert (again.papers, again.added, again.removed, again.embedded_chunks) == (38, 0, 0, 0)
    assert again.unchanged_files == 2


def test_every_chunk_fits_the_real_tokenizer(real_assistant) -> None:  # type: ignore[no-untyped-def]
    emb = real_assistant.embedder
    for paper in iter_papers([SEEDS], ParseReport()):
        for c in chunk_paper(paper, real_assistant.settings.chunking, emb.count_tokens):
            assert emb.count_tokens(embed_text(paper.title, c.text)) <= real_assistant.settings.chunking.max_tokens


def _distinctive_sentence(paper, df: Counter) -> str:  # type: ignore[no-untyped-def]
    """The sentence with the most words found in no other abstract."""
    sents = split_sentences(paper.abstract)
    return max(sents, key=lambda s: sum(1 for t in set(tokens(s)) if df[t] == 1))


def test_every_paper_is_found_by_its_own_distinctive_sentence(real_assistant) -> None:  # type: ignore[no-untyped-def]
    papers = list(iter_papers([SEEDS], ParseReport()))
    df: Counter = Counter(t for p in papers for t in set(tokens(p.abstract)))
    misses = []
    for p in papers:
        hits = real_assistant.search(_distinctive_sentence(p, df), top_k=3).hits
        if p.paper_id not in [h.paper.paper_id for h in hits]:
            misses.append(p.title)
    assert not misses


def test_dense_alone_finds_papers_by_sentence(real_assistant) -> None:  # type: ignore[no-untyped-def]
    papers = list(iter_papers([SEEDS], ParseReport()))
    found = sum(
        p.paper_id in [h.paper.paper_id for h in real_assistant.search(split_sentences(p.abstract)[-2], top_k=3,
                                                                        mode="dense").hits]
        for p in papers
    )
    assert found >= 34  # dense retrieval on its own is strong too (measured 38/38 when written)


def test_a_described_paper_is_cited_because_it_covers_the_whole_description(real_assistant) -> None:  # type: ignore[no-untyped-def]
    from rag.evidence import SentenceScorer, question_parts

    q = ("Which paper fixes agents trained by outcome reward that neither ask for hints nor use them, by reweighting "
         "step advantages?")
    read = real_assistant.read(q)
    hits = real_assistant.retrieve(read).hits
    scorer = SentenceScorer(real_assistant.embedder, real_assistant.settings.answer)
    covered = scorer.coverage(question_parts(read.text), hits)
    arew = next(h.paper.paper_id for h in hits if h.paper.title.startswith("AREW"))
    # The assistive-agents paper has the single closest sentence (agents, reward); AREW is about every part.
    assert max(covered, key=covered.__getitem__) == arew
    ans = real_assistant.ask(q)
    assert ans.citations[0].paper.paper_id == arew


def test_real_model_answers_with_a_citation_that_holds_the_fact(real_assistant) -> None:  # type: ignore[no-untyped-def]
    ans = real_assistant.ask("How much does PrivGate reduce privacy leakage?")
    assert not ans.abstained
    assert ans.citations
    assert any("62.6%" in c.paper.abstract and "PrivGate" in c.paper.abstract for c in ans.citations)
    retrieved = {h.paper.paper_id for h in ans.hits}
    assert {c.paper.paper_id for c in ans.citations} <= retrieved


def test_a_sentence_gets_the_same_vector_whatever_was_embedded_beside_it(real_assistant) -> None:  # type: ignore[no-untyped-def]
    """The int8 embedder quantizes a batch by its own range: sentences are embedded one a call, so a paper's sentence
    vectors (and the answers chosen from them) do not depend on which papers an earlier question cached."""
    from rag.evidence import SentenceScorer

    hits = real_assistant.search("Which papers use diffusion models?", top_k=4).hits
    alone = SentenceScorer(real_assistant.embedder).sentences(hits[-1:])
    beside = SentenceScorer(real_assistant.embedder).sentences(hits)
    pid = hits[-1].paper.paper_id
    assert alone[pid][0] == beside[pid][0] and (alone[pid][1] == beside[pid][1]).all()


def test_the_same_summary_after_other_questions_and_without_the_model(seeded, real_assistant) -> None:  # type: ignore[no-untyped-def]
    """The default model's preset lists a summary from the evidence without running the model
    (`answer.summary_synthesis` 0); the list is the same from a fresh process as after other questions."""
    question = "Summarize the work on reinforcement learning for LLM agents"
    for other in ("How much does PrivGate reduce privacy leakage?", "Which papers use diffusion models?"):
        real_assistant.ask(other)
    warm = real_assistant.ask(question)
    fresh = Assistant(seeded).ask(question)
    assert [c.paper.paper_id for c in warm.citations] == [c.paper.paper_id for c in fresh.citations]
    assert len(warm.citations) >= 3 and warm.text == fresh.text
    assert not warm.drafted and "first_token_ms" not in warm.timings and warm.mode == "extractive"
    # A value the user sets wins over the preset's: the model is run for its closing sentences again.
    asked = Assistant(seeded.with_values({"answer.summary_synthesis": 2})).ask(question)
    listed = [c.paper.paper_id for c in (*warm.citations, *warm.more)]
    assert asked.drafted and [c.paper.paper_id for c in (*asked.citations, *asked.more)] == listed


def test_out_of_corpus_question_abstains(real_assistant) -> None:  # type: ignore[no-untyped-def]
    ans = real_assistant.ask("What is the best recipe for a vegetarian lasagna?")
    assert ans.abstained and not ans.citations


def _cli(*args: str, data: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAG_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "rag", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=600)


def test_cli_ask_json_and_questions_file(seeded) -> None:  # type: ignore[no-untyped-def]
    data = seeded.paths.data_dir
    one = _cli("ask", "--json", "How much does PrivGate reduce privacy leakage?", data=data)
    assert one.returncode == 0, one.stderr
    d = json.loads(one.stdout)
    keys = {"question", "answer", "abstained", "citations", "hits", "timings", "model", "settings_fingerprint"}
    assert keys <= set(d)
    assert set(d["timings"]) >= {"embed_ms", "retrieve_ms", "prompt_ms", "first_token_ms", "total_ms", "tokens_per_s"}
    c = d["citations"][0]
    assert {"n", "paper_id", "title", "source", "position", "abstract"} <= set(c)
    assert any("62.6%" in c["abstract"] for c in d["citations"])
    many = _cli("ask", "--json", "--questions-file", "-", data=data,
                stdin="What does SOLAR stand for?\nWhat is the capital of Peru?\n")
    assert many.returncode == 0, many.stderr
    lines = [json.loads(x) for x in many.stdout.splitlines()]
    assert len(lines) == 2 and lines[1]["abstained"] is True


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    missing = _cli("ingest", str(tmp_path / "nope"), data=tmp_path / "d")
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0 and "nope" in missing.stderr
    bad_model = _cli("ask", "hello", "--model", str(tmp_path / "missing.gguf"), data=tmp_path / "d")
    assert bad_model.returncode == 2 and "missing.gguf" in bad_model.stderr and "Traceback" not in bad_model.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(os.urandom(4096))
    s = make_settings(tmp_path / "d")
    ingest(s)
    bad = _cli("ask", "privacy?", "--model", str(junk), data=tmp_path / "d")
    assert bad.returncode == 2 and "junk.gguf" in bad.stderr and "GGUF" in bad.stderr


def test_info_reports_the_index(seeded) -> None:  # type: ignore[no-untyped-def]
    out = _cli("info", "--json", data=seeded.paths.data_dir)
    info = json.loads(out.stdout)
    assert info["papers"] == 38 and info["chunks"] > 38 and info["model"].endswith(".gguf")


def test_assistant_is_reusable_across_questions(real_assistant: Assistant) -> None:
    a = real_assistant.ask("What does SOLAR stand for?")
    b = real_assistant.ask("And how many fewer parameters does it use?",
                           history=[{"role": "user", "content": "What does SOLAR stand for?"},
                                    {"role": "assistant", "content": a.text}])
    assert "SOLAR" in b.searched and b.searched != b.question


def test_cli_ask_prints_the_checked_answer_first_and_never_the_draft(seeded) -> None:  # type: ignore[no-untyped-def]
    # A summary: the model's raw output (the draft) is replaced by one line per paper, so the two always differ.
    question = "Summarize the work on reinforcement learning for LLM agents"
    data = seeded.paths.data_dir
    checked = json.loads(_cli("ask", "--json", question, data=data).stdout)["answer"]
    plain = _cli("ask", question, data=data)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith(checked + "\n")  # piped: no draft before it, no escape codes
    assert "\x1b" not in plain.stdout and "[1]" in plain.stdout
