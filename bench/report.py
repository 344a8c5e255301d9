"""Results JSON -> the markdown tables the README and bench/RESULTS.md quote. Formatting only, no measuring."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _get(d: Any, *keys: str, default: object = "–") -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def markdown(res: dict[str, Any]) -> str:
    m = res.get("machine", {})
    out = [f"Command: `{res.get('command', '')}`  ", f"Run: {res.get('started', '')}, {res.get('seconds', 0):.0f} s",
           "",
           f"Machine: {m.get('cpu', '?')}, {m.get('usable_cores', '?')} usable cores, {m.get('memory_gb', '?')} GB; "
           f"flags {' '.join(m.get('flags', []))}; load average at start {m.get('load_average_1m', '?')}; "
           f"copy bandwidth {_get(res, 'ceilings', 'copy_gbs', 'best')} GB/s; "
           f"float32 GEMM {_get(res, 'ceilings', 'gemm_gflops')} GFLOP/s. No GPU.", ""]
    ingest = res.get("ingest", {})
    if ingest:
        out += ["### Ingest", "", _row("papers", "chunks", "vectors", "parse papers/s", "embed papers/s (chunks/s)",
                                        "store papers/s (chunks/s)", "total papers/s", "peak RSS MB", "store MB"),
                _row(*["---"] * 9)]
        for size, r in ingest.items():
            if "error" in r or "placeholder" in r:
                out.append(_row(size, r.get("error") or r.get("placeholder"), *[""] * 7))
                continue
            if r.get("vectors") == "replicated":
                out.append(_row(r["papers"], r["chunks"], f"replicated x{r['factor']}", "–", "–",
                                f"(Chroma upsert {r['chroma_upsert_chunks_per_s']} chunks/s)", "–", r["peak_rss_mb"],
                                round(r["store_mb"]["chroma"] + r["store_mb"]["index"], 1)))
                continue
            out.append(_row(r["papers"], r["chunks"], "approx" if r["approx_vectors"] else "real",
                            r["parse"]["papers_per_s"], f"{r['embed']['papers_per_s']} ({r['embed']['chunks_per_s']})",
                            f"{r['store']['papers_per_s']} ({r['store']['chunks_per_s']})",
                            r["total"]["papers_per_s"], r["peak_rss_mb"],
                            round(r["store_mb"]["chroma"] + r["store_mb"]["index"], 1)))
        out.append("")
    retrieval = res.get("retrieval", {})
    if retrieval:
        out += ["### Retrieval (ms, p50 / p95)", "",
                _row("papers", "chunks", "query embed", "dense top-k", "BM25", "fusion", "total"), _row(*["---"] * 7)]
        for r in retrieval.values():
            cells = [f"{r[p]['p50']} / {r[p]['p95']}" for p in ("embed_ms", "dense_ms", "bm25_ms", "fuse_ms",
                                                                "retrieve_ms")]
            out.append(_row(r["papers"], r["chunks"], *cells))
        out.append("")
    h = res.get("hnsw")
    if h:
        out += [f"### HNSW vs exact search ({h['chunks']} chunks, {h['queries']} queries; exact numpy p50 "
                f"{h['exact_numpy_ms']['p50']} ms)", "", _row("ef_search", *[k for k in next(iter(
                    h["by_ef_search"].values())) if k.startswith("recall")], "query p50 ms"), _row(*["---"] * 4)]
        for ef, r in h["by_ef_search"].items():
            out.append(_row(ef, *[v for k, v in r.items() if k.startswith("recall")], r["query_ms"]["p50"]))
        f = h.get("filter", {})
        out += ["", f"Filter has_code (k={f.get('k')}): Chroma `where` p50 {_get(f, 'where_ms', 'p50')} ms vs "
                f"post-filter (fetch {f.get('post_filter_fetch')}) p50 {_get(f, 'post_filter_ms', 'p50')} ms; "
                f"overlap {f.get('overlap')}.", ""]
    gen = res.get("generation", {})
    if gen:
        out += ["### Generation", "", _row("model", "config", "prompt tok", "cold TTFT ms", "single-paper TTFT ms",
                                           "follow-up TTFT ms", "pipeline follow-up TTFT ms", "prefill tok/s",
                                           "decode tok/s", "decode / ceiling", "prefill / bound"),
                _row(*["---"] * 11)]
        for name, g in gen.get("models", {}).items():
            for label, f in g.get("runs", {}).items():
                c = f.get("ceilings", {})
                out.append(_row(name, label, f.get("prompt_tokens"), f.get("ttft_cold_ms"),
                                f.get("ttft_cold_single_ms", "–"),
                                f"{f.get('ttft_followup_ms')} (+{f.get('followup_new_tokens')} tok)",
                                f"{f.get('ttft_followup_pipeline_ms', '–')} "
                                f"(+{f.get('followup_pipeline_new_tokens', '–')} tok)",
                                f.get("prefill_tok_s"), f.get("decode_tok_s"),
                                f"{c.get('decode_vs_ceiling', '–')} of {c.get('decode_ceiling_tok_s', '–')}",
                                f"{c.get('prefill_vs_bound', '–')} of {c.get('prefill_bound_tok_s', '–')}"))
        out.append("")
        out += _generation_extra(gen)
    fm = res.get("formats")
    if fm:
        out += [f"### Formats of {fm['model']} ({fm['threads']} threads, batch {fm['n_batch']}, "
                f"{fm['prompt_tokens']}-token prompt; fidelity vs F16 over {fm['fidelity_positions']} positions)", "",
                _row("format", "MB read / token", "prefill tok/s", "decode tok/s (bare C loop)", "decode reads GB/s",
                     f"of copy {fm['copy_gbs']} GB/s", "KL div.", "top-1 agree", "perplexity"), _row(*["---"] * 9)]
        out += [_row(name, r["tensor_mb"], r["prefill_tok_s"], f"{r['decode_tok_s']} ({r.get('decode_raw_c_tok_s')})",
                     r["decode_read_gbs"],
                     r["decode_vs_copy_ceiling"], r["kld"], r["top1_agreement"], r["perplexity"])
                for name, r in fm["rows"].items()]
        out.append("")
    emb = res.get("embed")
    if emb:
        out += ["### Embedding", "", _row("batch size", *emb["batch"].keys()), _row(*["---"] * (len(emb["batch"]) + 1)),
                _row("chunks/s", *emb["batch"].values()), ""]
        for k, v in emb.items():
            if k.startswith("query_ms_threads_"):
                out.append(f"Query embedding with torch on {k.rsplit('_', 1)[1]} thread(s): p50 {v['p50']} ms, "
                           f"p95 {v['p95']} ms.  ")
        out.append("")
    e2e = res.get("end_to_end", {})
    if e2e:
        out += ["### End to end", "", _row("index", "ready s (spawn to first answer possible)",
                                           "first question s (TTFT ms)", "second question s (TTFT ms)"),
                _row(*["---"] * 4)]
        for size, r in e2e.items():
            if "error" in r:
                out.append(_row(size, r["error"], "", ""))
                continue
            fq, sq = r.get("first_question") or {}, r.get("second_question") or {}
            out.append(_row(size, r.get("ready_s", r.get("warm_s")),
                            f"{fq.get('seconds')} ({fq.get('first_token_ms')})",
                            f"{sq.get('seconds')} ({sq.get('first_token_ms')})"))
        out.append("")
    return "\n".join(out)


def _generation_extra(gen: dict[str, Any]) -> list[str]:
    """The pipeline's own stream timings (as shipped) and the tuning sweeps."""
    out = ["Through the pipeline's generator as shipped (`rag.generate.LlamaGenerator`, TTFT ms / pieces per s):", "",
           _row("model", "cold (3 papers)", "cold (1 paper)", "new question", "pipeline follow-up"), _row(*["---"] * 5)]
    for name, g in gen.get("models", {}).items():
        st = g.get("stream", {})
        out.append(_row(name, *[f"{_get(st, k, 'ttft_ms')} / {_get(st, k, 'pieces_per_s')}"
                                for k in ("cold", "cold_single", "other", "followup_pipeline")]))
    out.append("")
    for name, g in gen.get("models", {}).items():
        for key, rows in g.items():
            if not key.endswith("sweep") or not rows:
                continue
            variant = key.removesuffix("sweep").strip() or "as shipped"
            out += [f"Sweep, {name} {variant}:", "",
                    _row("flash_attn", "n_threads", "n_batch", "cold TTFT ms", "prefill tok/s", "decode tok/s"),
                    _row(*["---"] * 6)]
            out += [_row(r["flash_attn"], r["n_threads"], r["n_batch"], r["ttft_cold_ms"], r["prefill_tok_s"],
                         r["decode_tok_s"]) for r in rows]
            out.append("")
        for label, f in g.get("runs", {}).items():
            gr = f.get("grammar")
            if gr:
                out.append(f"{name}, {label}: citation grammar (markers limited to [1]..[{gr['n_sources']}]) decodes "
                           f"{gr['decode_tok_s_grammar']} tok/s vs {gr['decode_tok_s_free']} free "
                           f"({gr['grammar_over_free']}x).")
                out.append("")
        if "q8_0" in g:
            q = g["q8_0"]
            how = f"made in {q['seconds']} s" if q["made_now"] else "cached (size and mtime match its record)"
            out.append(f"{name}: Q8_0 copy {Path(q['path']).name} ({how}).")
            out.append("")
    return out
