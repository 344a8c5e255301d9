"""bench/rerank.py: the GGUF judge of "does this abstract answer the question?" on the real default model. Reusing
the previous prompt's KV cache (the question is the shared prefix) must give the judgment a fresh context gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.llm import load
from bench.rerank import _first_tokens, judge
from rag.config import Generation
from rag.gguf import resolve_model

QUESTION = "How much does PrivGate cut privacy leakage?"
PRIV = ("We present PrivGate, a framework that invokes privacy reasoning only for sensitive requests. PrivGate "
        "achieves a 62.6% average relative reduction in privacy leakage with 15.9% token overhead.")
OTHER = ("We study exact unlearning in reinforcement learning and give an algorithm whose expected cost of "
         "retraining from scratch is bounded for tabular Markov decision processes.")


@pytest.mark.slow
def test_a_judgment_after_another_prompt_is_the_judgment_from_a_fresh_context() -> None:
    path = Path(resolve_model(Generation(model_path="smollm2"), None))  # the bench's default model
    warm = load(path, n_threads=2)
    yes, no = _first_tokens(warm, ("Yes", " Yes", "yes")), _first_tokens(warm, ("No", " No", "no"))
    assert yes and no and not set(yes) & set(no)
    first = judge(warm, QUESTION, OTHER, yes, no)
    reused = judge(warm, QUESTION, PRIV, yes, no)  # only the abstract onwards is evaluated again
    fresh = judge(load(path, n_threads=2), QUESTION, PRIV, yes, no)
    assert reused == pytest.approx(fresh, abs=1e-3)
    assert first != pytest.approx(reused, abs=1e-3)  # the abstract reaches the judgment
