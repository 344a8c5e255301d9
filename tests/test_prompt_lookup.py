"""`generation.prompt_lookup`: prompt-lookup decoding (llama-cpp-python's LlamaPromptLookupDecoding as the draft
model). Off by default; on, the model verifies drafted tokens and a greedy answer opens as the plain decode's. The
prompt is longer than one `n_batch`, which is where llama-cpp-python 0.3.x overflowed its logits buffer when it was
given a draft model without `logits_all` (rag/generate.py passes both). Speed and answer identity over the dev
questions: bench/prompt_lookup.py."""

from __future__ import annotations

import pytest

from rag.config import Generation, load
from rag.generate import LlamaGenerator

ABSTRACT = (
    "Large language model agents increasingly handle private user data. We present PrivGate, a framework that "
    "selectively invokes explicit reasoning based on the privacy sensitivity of each request. A lightweight gate "
    "classifies requests and routes only sensitive ones through a privacy-reasoning step. End-to-end evaluations "
    "show that PrivGate achieves a 62.6% average relative reduction in privacy leakage with 15.9% token overhead, "
    "outperforming always-on reasoning baselines in both leakage and cost across three agent benchmarks. ") * 2


def test_off_by_default() -> None:
    assert Generation().prompt_lookup == 0
    assert load(flags={"generation.prompt_lookup": 10}, env={}).generation.prompt_lookup == 10
    with pytest.raises(ValueError):
        Generation(prompt_lookup=-1)


@pytest.mark.slow
def test_a_greedy_answer_is_the_same_with_prompt_lookup() -> None:
    gen = load(env={}).generation
    off = LlamaGenerator(gen.model_copy(update={"prompt_lookup": 0}))
    on = LlamaGenerator(gen.model_copy(update={"prompt_lookup": 10}))
    assert off._llm.draft_model is None and on._llm.draft_model is not None
    messages = [{"role": "system", "content": "Answer from the abstract and cite it as [1]."},
                {"role": "user", "content": f"[1] {ABSTRACT}\n\nQuestion: How much does PrivGate reduce privacy "
                                            "leakage, and at what token overhead?"}]
    assert off.count_tokens(messages) > gen.n_batch  # the prompt spans more than one batch
    plain = "".join(off.stream(messages, max_tokens=60, temperature=0.0))
    drafted = "".join(on.stream(messages, max_tokens=60, temperature=0.0))
    # The drafted tokens are the model's own greedy choices, verified in batches: the answer opens as the plain
    # decode does and states the same figures. Not word for word to the end: on some CPUs (AVX2 without VNNI) a
    # batch of drafted tokens rounds differently from one-token decoding and greedy may part ways later (measured
    # over the dev questions: bench/RESULTS.md, "Prompt-lookup decoding per preset").
    assert "62.6" in plain and "62.6" in drafted and "15.9" in drafted
    assert drafted[:40] == plain[:40]


@pytest.mark.slow
def test_the_repeat_penalty_setting_reaches_the_model() -> None:
    """`generation.repeat_penalty` (1.15 by default; 1.0 is off) is what llama.cpp decodes with: asked to repeat one
    word, the model repeats it without the penalty and cannot under a heavy one."""
    assert Generation().repeat_penalty == 1.15
    with pytest.raises(ValueError):
        Generation(repeat_penalty=0.5)
    gen = load(env={}).generation
    messages = [{"role": "user", "content": "Copy this line exactly: " + " ".join(["data"] * 10)}]
    off = LlamaGenerator(gen.model_copy(update={"repeat_penalty": 1.0}))
    plain = "".join(off.stream(messages, max_tokens=30, temperature=0.0))
    off.repeat_penalty = 3.0  # the same model, decoding under a heavy penalty
    heavy = "".join(off.stream(messages, max_tokens=30, temperature=0.0))
    repeated = plain.lower().count("data")
    assert repeated >= 5 and heavy.lower().count("data") < repeated, (plain, heavy)
