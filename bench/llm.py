"""Generation figures on the real GGUFs: time to first token, prefill and decode rates, and their ceilings.

This module talks to llama_cpp directly (besides `rag.generate` and `rag.quantize`, the only places that do) because
the bench sweeps knobs per run (flash_attn, n_threads, n_batch) and times prefill and decode apart, which a chat
stream cannot.
Requantized copies come from `rag.quantize.quantized_copy`, the code the app itself uses.

For a chat prompt rendered with the GGUF's own template (as llama-cpp-python's chat handler does):
- prefill tok/s: the prompt evaluated from an empty context, prompt tokens / seconds;
- decode tok/s: greedy tokens one by one after the prompt, (n - 1) / seconds between the first and the last;
- cold TTFT: empty context to the first sampled token; "new question" TTFT: the previous question's prompt is
  cached, so only the shared system prompt is reused; follow-up TTFT: the previous prompt and answer are cached and
  the new prompt extends them (llama.cpp evaluates only the new tokens).
Ceilings: decoding reads every weight once per token, so tok/s <= copy bandwidth / model bytes; prefill does about
2 * (parameters - output head) flops per token (logits only for the last token), compared with a float32 GEMM rate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.generate import Message

from .measure import median


def load(path: Path, n_threads: int, n_batch: int = 512, flash_attn: bool = False, n_ctx: int = 2048,
         n_ubatch: int = 0) -> Any:
    """n_ubatch 0 = n_batch, as in `rag.config.Generation`."""
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads, n_batch=n_batch,
                 n_ubatch=n_ubatch or n_batch, flash_attn=flash_attn, seed=0, verbose=False)


def info(llm: Any, path: Path) -> dict[str, Any]:
    import llama_cpp

    model = llm._model.model  # the raw llama_model pointer: only its size and parameter count are read
    meta = llm.metadata
    arch = meta.get("general.architecture", "")
    return {"file": path.name, "file_mb": round(path.stat().st_size / 2**20, 1),
            "tensor_bytes": int(llama_cpp.llama_model_size(model)),
            "n_params": int(llama_cpp.llama_model_n_params(model)), "n_vocab": int(llm.n_vocab()),
            "n_embd": int(llm.n_embd()), "n_layer": int(meta.get(f"{arch}.block_count", 0) or 0), "arch": arch,
            "ftype": int(llama_cpp.llama_model_ftype(model))}


def render(llm: Any, messages: Sequence[Message]) -> list[int]:
    """Tokens of the chat prompt, rendered with the GGUF's template as the chat handler renders it."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:  # fall back to ChatML, the pipeline's default chat_format
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
            "<|im_start|>assistant\n"
        return list(llm.tokenize(text.encode(), add_bos=True, special=True))
    eos = llm.detokenize([llm.token_eos()], special=True).decode(errors="ignore")
    bos = llm.detokenize([llm.token_bos()], special=True).decode(errors="ignore") if llm.token_bos() >= 0 else ""
    chat: Any = list(messages)  # llama_cpp wants its TypedDicts; ours are the same plain dicts
    res = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)(messages=chat)
    return list(llm.tokenize(res.prompt.encode(), add_bos=not res.added_special, special=True))


def _first_token(llm: Any, tokens: list[int], decode: int = 0) -> tuple[float, float, list[int]]:
    """(seconds to the first token, decode tok/s over `decode` more tokens, generated tokens)."""
    t = time.perf_counter()
    out: list[int] = []
    first = last = 0.0
    for tok in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
        now = time.perf_counter()
        if not out:
            first = now
        last = now
        out.append(int(tok))
        if len(out) > decode:
            break
    rate = (len(out) - 1) / (last - first) if len(out) > 1 and last > first else 0.0
    return first - t, rate, out


def raw_decode_rate(llm: Any, tokens: list[int], n: int = 64) -> float:
    """Greedy decode tok/s through llama.cpp's C API alone: one `llama_decode` per token and a numpy argmax over the
    logits, none of llama-cpp-python's per-token Python (sampling, scores bookkeeping, detokenizing). Set against
    the `generate` rate it splits a slow decode between the binding and llama.cpp itself."""
    import ctypes

    import llama_cpp
    import numpy as np

    ctx = llm._ctx.ctx
    llm.reset()
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    for i in range(0, len(tokens), llm.n_batch):
        part = (llama_cpp.llama_token * len(tokens[i:i + llm.n_batch]))(*tokens[i:i + llm.n_batch])
        # `part` must outlive the call: the batch only points at it (an inline temporary could be freed first).
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(part, len(part))) != 0:
            raise RuntimeError("llama_decode failed on the prompt")
    n_vocab = llm.n_vocab()

    def argmax() -> int:
        logits = llama_cpp.llama_get_logits_ith(ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(ctypes.cast(logits, ctypes.POINTER(ctypes.c_float)),
                                                   shape=(n_vocab,))))

    one = (llama_cpp.llama_token * 1)(argmax())
    t = time.perf_counter()
    for _ in range(n):
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1)) != 0:
            raise RuntimeError("llama_decode failed")
        one[0] = argmax()
    rate = n / (time.perf_counter() - t)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    llm.reset()  # the Llama object's own token bookkeeping no longer matches the context: start it afresh
    return rate


def prefill_rate(llm: Any, tokens: list[int], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        llm.reset()
        t = time.perf_counter()
        llm.eval(tokens)
        rates.append(len(tokens) / (time.perf_counter() - t))
    return median(rates)


def figures(llm: Any, prompts: dict[str, list[Message]], repeats: int = 3, decode: int = 64) -> dict[str, Any]:
    """prompts: "cold" (a question), "other" (another question), "followup" (cold + its answer + a follow-up),
    optionally "cold_single" (the question with one paper of evidence: the issue's single-paper target).

    "followup" is built here from the cold prompt and the model's own answer, so the cached tokens really are its
    prefix; "followup_pipeline" (optional) is the pipeline's real follow-up prompt (history, then new sources).
    """
    cold = render(llm, prompts["cold"])
    other = render(llm, prompts["other"])
    out: dict[str, Any] = {"prompt_tokens": len(cold), "repeats": repeats, "decode_tokens": decode}
    out["prefill_tok_s"] = round(prefill_rate(llm, cold, repeats), 1)
    ttft, rates, follow, fresh, real_follow = [], [], [], [], []
    follow_tokens = real_tokens = 0
    ftoks: list[int] = []
    for _ in range(repeats):
        llm.reset()
        t, rate, gen = _first_token(llm, cold, decode)
        ttft.append(t)
        rates.append(rate)
        answer = llm.detokenize(_until_eos(llm, gen)).decode(errors="ignore").strip() or "It does."
        fmsgs = [*prompts["cold"], {"role": "assistant", "content": answer},
                 {"role": "user", "content": prompts["followup"][-1]["content"]}]
        ftoks = render(llm, fmsgs)
        follow_tokens = len(ftoks) - _common(cold + gen, ftoks)
        follow.append(_first_token(llm, ftoks)[0])
        fresh.append(_first_token(llm, other)[0])  # after the follow-up: only the system prompt is shared
        if "followup_pipeline" in prompts:
            _first_token(llm, cold)
            ptoks = render(llm, prompts["followup_pipeline"])
            real_tokens = len(ptoks) - _common(cold, ptoks)
            real_follow.append(_first_token(llm, ptoks)[0])
    out.update({"ttft_cold_ms": round(median(ttft) * 1000, 1), "decode_tok_s": round(median(rates), 1),
                "ttft_followup_ms": round(median(follow) * 1000, 1), "followup_new_tokens": follow_tokens,
                "ttft_new_question_ms": round(median(fresh) * 1000, 1),
                "new_question_tokens": len(other) - _common(ftoks, other)})
    if "cold_single" in prompts:
        single = render(llm, prompts["cold_single"])
        times = []
        for _ in range(repeats):
            llm.reset()
            times.append(_first_token(llm, single)[0])
        out.update({"ttft_cold_single_ms": round(median(times) * 1000, 1), "single_prompt_tokens": len(single)})
    if real_follow:
        out.update({"ttft_followup_pipeline_ms": round(median(real_follow) * 1000, 1),
                    "followup_pipeline_new_tokens": real_tokens})
    return out


# Citations constrained by grammar: "[" may only open a marker naming a given source (1..n), e.g. n = 3.
CITATION_GBNF = """
root ::= (text | cite)*
text ::= [^\\[\\]]
cite ::= "[" num ("," " "? num)* "]"
num ::= {nums}
"""


def grammar_cost(llm: Any, messages: Sequence[Message], n_sources: int = 3, repeats: int = 3,
                 max_tokens: int = 64) -> dict[str, Any]:
    """Decode rate of one streamed answer with and without a GBNF grammar that makes a marker naming a missing
    source impossible: what constrained citations would cost. Interleaved runs, medians."""
    from llama_cpp import LlamaGrammar

    gbnf = CITATION_GBNF.format(nums=" | ".join(f'"{i}"' for i in range(1, n_sources + 1)))
    grammar = LlamaGrammar.from_string(gbnf, verbose=False)
    rates: dict[str, list[float]] = {"free": [], "grammar": []}
    texts: dict[str, str] = {}
    for _ in range(repeats):
        for key, g in (("free", None), ("grammar", grammar)):
            llm.reset()
            first = None
            n = 0
            pieces = []
            for chunk in llm.create_chat_completion(messages=list(messages), stream=True, max_tokens=max_tokens,
                                                    temperature=0.0, grammar=g, repeat_penalty=1.15):
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    n += 1
                    pieces.append(piece)
                    first = first or time.perf_counter()
            end = time.perf_counter()
            if first and n > 1:
                rates[key].append((n - 1) / (end - first))
            texts[key] = "".join(pieces)
    free, constrained = median(rates["free"]), median(rates["grammar"])
    return {"decode_tok_s_free": round(free, 1), "decode_tok_s_grammar": round(constrained, 1),
            "grammar_over_free": round(constrained / free, 3) if free else None, "n_sources": n_sources,
            "answer_free": texts.get("free", "")[:200], "answer_grammar": texts.get("grammar", "")[:200]}


def _until_eos(llm: Any, tokens: list[int]) -> list[int]:
    eos = llm.token_eos()
    return tokens[: tokens.index(eos)] if eos in tokens else tokens


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def ceilings(model: dict[str, Any], fig: dict[str, Any], copy_gbs: float, gemm_gflops: float) -> dict[str, Any]:
    """Decode vs the bandwidth ceiling, prefill vs the compute reference; e.g. 100 MB at 20 GB/s -> 200 tok/s."""
    decode_ceiling = copy_gbs * 1e9 / model["tensor_bytes"]
    head = model["n_vocab"] * model["n_embd"]
    avg_pos = fig["prompt_tokens"] / 2
    flops = 2 * (model["n_params"] - head) + 4 * model["n_layer"] * model["n_embd"] * avg_pos
    prefill_bound = gemm_gflops * 1e9 / flops
    return {"decode_ceiling_tok_s": round(decode_ceiling, 1),
            "decode_vs_ceiling": round(fig["decode_tok_s"] / decode_ceiling, 3),
            "prefill_gflop_per_token": round(flops / 1e9, 3), "prefill_bound_tok_s": round(prefill_bound, 1),
            "prefill_vs_bound": round(fig["prefill_tok_s"] / prefill_bound, 3)}


def sweep(path: Path, prompts: dict[str, list[Message]], threads: Sequence[int] = (1, 2),
          batches: Sequence[int] = (128, 512), flash: Sequence[bool] = (False, True),
          repeats: int = 3) -> list[dict[str, Any]]:
    """Prefill, decode and cold TTFT for each (flash_attn, n_threads, n_batch)."""
    rows = []
    for fa in flash:
        for nt in threads:
            for nb in batches:
                llm = load(path, nt, nb, fa)
                cold = render(llm, prompts["cold"])
                prefill = prefill_rate(llm, cold, repeats)
                ttfts, rates = [], []
                for _ in range(repeats):
                    llm.reset()
                    t, rate, _ = _first_token(llm, cold, 32)
                    ttfts.append(t)
                    rates.append(rate)
                rows.append({"flash_attn": fa, "n_threads": nt, "n_batch": nb, "prefill_tok_s": round(prefill, 1),
                             "decode_tok_s": round(median(rates), 1), "ttft_cold_ms": round(median(ttfts) * 1000, 1)})
                llm.close()
    return rows


def best(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The winner: lowest cold TTFT (prefill dominates a RAG answer's wait), decode as the tie-break."""
    return min(rows, key=lambda r: (r["ttft_cold_ms"], -r["decode_tok_s"]))
