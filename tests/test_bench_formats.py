"""The formats section: fidelity arithmetic on hand-made distributions (fast), and the real SmolLM2 copies (slow)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.formats import compare, formats
from rag import gguf


def _logp(rows: list[list[float]]) -> np.ndarray:
    p = np.asarray(rows, dtype=np.float64)
    return np.log(p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def test_identical_distributions_have_zero_divergence_and_full_agreement() -> None:
    a = _logp([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]])
    out = compare([a], [a], [[0, 2, 1]])
    assert out["kld"] == 0.0 and out["top1_agreement"] == 1.0
    # perplexity over the two predicted tokens: p(2 | pos 0) = 0.1, p(1 | pos 1) = 0.1 -> exp(-log 0.1) = 10
    assert out["perplexity"] == pytest.approx(10.0, abs=0.01)


def test_divergence_and_agreement_follow_their_definitions() -> None:
    ref = _logp([[0.5, 0.5], [0.9, 0.1]])
    cand = _logp([[0.5, 0.5], [0.2, 0.8]])
    out = compare([ref], [cand], [[0, 1]])
    expected = (0.9 * math.log(0.9 / 0.2) + 0.1 * math.log(0.1 / 0.8)) / 2  # row 0 contributes nothing
    assert out["kld"] == pytest.approx(expected, abs=1e-4)
    assert out["top1_agreement"] == 0.5  # row 0 ties (both argmax 0); row 1 disagrees
    assert out["perplexity"] == pytest.approx(2.0, abs=0.01)  # p(1 | pos 0) = 0.5


@pytest.mark.slow
def test_formats_of_the_real_model_rank_fidelity(tmp_path: Path) -> None:
    """F16 is the reference; the Q8_0 copy stays near it and a Q4_0 requantization of a Q4_1 file moves further."""
    messages = [{"role": "user", "content": "What does PrivGate reduce? Answer in one sentence."}]
    texts = ["We propose PrivGate, a framework that selectively invokes explicit reasoning based on internal "
             "privacy signals, and reduces privacy leakage by 62.6% with 15.9% token overhead."]
    res = formats(gguf.default_model_path(), tmp_path, messages, texts, threads=2, n_batch=128, copy_gbs=20.0,
                  repeats=1, names=("F16", "Q8_0", "Q4_0"))
    rows = res["rows"]
    assert set(rows) == {"F16", "original", "Q8_0", "Q4_0"}
    assert rows["F16"]["kld"] == 0.0 and rows["F16"]["top1_agreement"] == 1.0
    assert rows["Q8_0"]["kld"] < rows["Q4_0"]["kld"]
    mb = {name: r["tensor_mb"] for name, r in rows.items()}
    assert mb["Q4_0"] < mb["Q8_0"] < mb["F16"]
    assert all(min(r["decode_tok_s"], r["decode_raw_c_tok_s"], r["prefill_tok_s"]) > 0 for r in rows.values())
