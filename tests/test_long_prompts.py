"""Prompts longer than the context: a 100,000-character question is truncated with a notice on its way through the
pipeline, and the budgeted prompt fits the real model's context with room for the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedGenerator
from helpers import LONG_QUESTION, SEEDS, corpus_settings, make_settings

from rag import generate as G
from rag.config import Generation
from rag.indexer import build_index
from rag.pipeline import Assistant


def test_a_100000_character_question_is_truncated_with_a_notice(tmp_path: Path, corpus: Path) -> None:
    assert len(LONG_QUESTION) > 100_000
    s = corpus_settings(tmp_path, corpus, **{"generation.n_ctx": 512})
    build_index(s, HashEmbedder())
    gen = ScriptedGenerator(["PrivGate reduces privacy leakage by 62.6% [1]."], n_ctx=512)
    answer = Assistant(s, embedder=HashEmbedder(), generator=gen).ask(LONG_QUESTION)
    assert any("truncated" in n for n in answer.notices)
    assert len(answer.question) <= 1000 and gen.prompts and not answer.abstained
    for prompt in gen.prompts:  # what would have reached llama.cpp fits with room for the answer
        assert gen.count_tokens(prompt) + 16 <= gen.n_ctx


@pytest.mark.slow
def test_budgeted_prompts_fit_the_real_models_context() -> None:
    """The budget (answer.fit_budget, counting with LlamaGenerator.count_tokens) against the real chat template
    and tokenizer: a 1,000-character question (what is left of a 100,000-character one), eight long sources and
    three long earlier turns are cut to fit n_ctx = 512 with room for the answer, and llama.cpp accepts them."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from rag import answer as A
    from rag.parse import ParseReport, iter_papers
    from rag.prompts import load_prompts
    from rag.records import Evidence, Hit
    from rag.text import split_sentences

    gen = G.LlamaGenerator(Generation(n_ctx=512))
    prompts = load_prompts(make_settings(Path("unused")).paths.prompts_dir)
    papers = list(iter_papers([SEEDS], ParseReport()))[:8]
    blocks = [Evidence(n=i + 1, hit=Hit(paper=p, score=1.0), sentences=tuple(split_sentences(p.abstract)))
              for i, p in enumerate(papers)]
    question, notice = A.truncate_question(LONG_QUESTION)
    assert notice and len(question) <= 1000
    history = [{"role": r, "content": papers[i].abstract} for i in range(3) for r in ("user", "assistant")]
    budget = A.fit_budget(gen, prompts, blocks, question, history, max_tokens=64)
    assert budget.dropped_blocks or budget.dropped_turns
    llm = gen._llm
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"], "<|im_end|>", "")
    templated = formatter(messages=budget.messages).prompt  # type: ignore[arg-type]
    used = len(llm.tokenize(templated.encode(), add_bos=False, special=True))
    assert gen.count_tokens(budget.messages) >= used, "the budget must never undercount"
    assert used + budget.max_tokens <= 512, f"the templated prompt takes {used} tokens"
    assert list(gen.stream(budget.messages, 2, temperature=0.0))  # llama.cpp evaluates the whole prompt
