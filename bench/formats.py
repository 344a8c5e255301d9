"""Formats section of the bench: which GGUF format the default model should decode from, by speed and fidelity.

`generation.quantize = "auto"` loads a Q8_0 copy of a Q4_1/Q5_0/Q5_1 file and leaves Q4_0 alone. This section
measures why, and what the other formats would give: each candidate is made once from the model with
`rag.quantize.quantized_copy` (the app's own code), then measured with llama.cpp at the app's settings:
- speed: prefill and decode tok/s on the pipeline's cold prompt (decode both through llama-cpp-python's `generate`
  and through a bare C-API loop, `bench.llm.raw_decode_rate`, to show what the binding costs), the bytes of weights
  read per decoded token, the rate they are read at while decoding (bytes x tok/s) and that over the copy bandwidth
  (the issue's ceiling);
- fidelity: next-token distributions over the seed chunks compared with an F16 copy (which holds a 4-bit file's
  values with at most F16 rounding): mean KL divergence, top-1 agreement and perplexity, the figures llama.cpp's
  own `perplexity --kl-divergence` reports. A format that decodes faster but moves the distributions (a Q4_1 file
  requantized to Q4_0 must round every block's asymmetric grid onto a symmetric one) changes the model the user
  chose; the eval's task metrics may not show it on extractive answers, this does.

Why a small model misses the bandwidth ceiling: at 135M parameters a token is 30 layers of 576-wide products whose
fixed costs (thread barriers, quantizing activations, one kernel launch per tensor) outweigh reading the bytes; an
F16 copy (twice the bytes, same work) reads them faster than any quantized one and still decodes slower.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.generate import Message
from rag.gguf import FTYPE_Q4_0, FTYPE_Q5_0, FTYPE_Q5_1, FTYPE_Q8_0
from rag.quantize import quantized_copy

from . import llm
from .measure import median

log = logging.getLogger(__name__)

# llama_ftype values (llama.h). F16 first: it is the fidelity reference.
FORMATS = {"F16": 1, "Q8_0": FTYPE_Q8_0, "Q5_1": FTYPE_Q5_1, "Q5_0": FTYPE_Q5_0, "Q4_K_M": 15, "IQ4_NL": 25,
           "Q4_0": FTYPE_Q4_0}


def fidelity_logprobs(path: Path, texts: Sequence[str], threads: int, max_tokens: int = 256) -> list[np.ndarray]:
    """For each text (its first `max_tokens` tokens), the log-probabilities the model gives every next token:
    one float32 array per text, a row per position."""
    from llama_cpp import Llama

    model = Llama(model_path=str(path), n_ctx=max_tokens, n_threads=threads, n_threads_batch=threads,
                  n_batch=max_tokens, logits_all=True, seed=0, verbose=False)
    out = []
    try:
        for toks in fidelity_tokens(model, texts, max_tokens):
            model.reset()
            model.eval(toks)
            s = np.asarray(model.scores[: len(toks)], dtype=np.float64)
            s -= s.max(axis=1, keepdims=True)
            s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
            out.append(s.astype(np.float32))
    finally:
        model.close()
    return out


def fidelity_tokens(model: Any, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """The tokens each text is scored on (every format of one model shares its tokenizer)."""
    return [list(model.tokenize(t.encode()))[:max_tokens] for t in texts]


def compare(ref: Sequence[np.ndarray], cand: Sequence[np.ndarray], tokens: Sequence[Sequence[int]]) -> dict[str, float]:
    """Mean KL(ref || cand) per position, top-1 agreement, and the candidate's perplexity on the texts.

    e.g. ref = cand gives KL 0 and agreement 1; perplexity is exp(mean -log p(next token)), over positions 0..n-2.
    """
    kl = agree = positions = 0.0
    nll = 0.0
    predicted = 0
    for a, b, toks in zip(ref, cand, tokens):
        kl += float((np.exp(a.astype(np.float64)) * (a - b)).sum())
        agree += float((a.argmax(axis=1) == b.argmax(axis=1)).sum())
        positions += len(a)
        nll -= float(b[np.arange(len(toks) - 1), np.asarray(toks[1:])].sum())
        predicted += len(toks) - 1
    return {"kld": round(kl / positions, 4), "top1_agreement": round(agree / positions, 3),
            "perplexity": round(float(np.exp(nll / predicted)), 2)}


def formats(path: Path, folder: Path, messages: Sequence[Message], texts: Sequence[str], threads: int, n_batch: int,
            copy_gbs: float, repeats: int = 3, names: Sequence[str] = tuple(FORMATS)) -> dict[str, Any]:
    """Speed and fidelity rows for the model at `path` ("original") and each named format's copy of it."""
    candidates: dict[str, Path] = {"original": path}
    for name in names:
        candidates[name] = quantized_copy(path, folder, threads, FORMATS[name])[0]
    ref_path = candidates.get("F16", path)
    tokens: list[list[int]] = []
    ref: list[np.ndarray] = []
    rows: dict[str, dict[str, Any]] = {}
    for name, p in [("F16", ref_path)] + [(n, q) for n, q in candidates.items() if n != "F16"]:
        log.info("bench: format %s (%s)", name, p.name)
        model = llm.load(p, threads, n_batch)
        try:
            info = llm.info(model, p)
            cold = llm.render(model, messages)
            prefill = llm.prefill_rate(model, cold, repeats)
            rates, raw = [], []
            for _ in range(repeats):
                model.reset()
                rates.append(llm._first_token(model, cold, 64)[1])
                raw.append(llm.raw_decode_rate(model, cold, 64))
            if not tokens:
                tokens = fidelity_tokens(model, texts, 256)
        finally:
            model.close()
        decode = median(rates)
        read_gbs = decode * info["tensor_bytes"] / 1e9
        logprobs = fidelity_logprobs(p, texts, threads)
        if not ref:
            ref = logprobs
        rows[name] = {"file": p.name, "tensor_mb": round(info["tensor_bytes"] / 2**20, 1),
                      "prefill_tok_s": round(prefill, 1), "decode_tok_s": round(decode, 1),
                      "decode_raw_c_tok_s": round(median(raw), 1),
                      "decode_read_gbs": round(read_gbs, 1), "decode_vs_copy_ceiling": round(read_gbs / copy_gbs, 3),
                      **compare(ref, logprobs, tokens)}
    return {"model": path.name, "threads": threads, "n_batch": n_batch, "copy_gbs": copy_gbs,
            "prompt_tokens": len(cold), "fidelity_positions": sum(len(t) for t in tokens), "rows": rows}
