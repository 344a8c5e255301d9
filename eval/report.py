"""Render eval runs: markdown tables (report.md, compare.md, the stdout summary) and PNG plots.

Input is what `eval.run` writes (summary dict, question records); nothing here runs the pipeline or recomputes a
metric, so a report always shows the numbers stored in `summary.json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

KIND_ORDER = ("factoid", "which_paper", "multi", "followup", "unanswerable")
PLOTS = ("recall_at_k.png", "latency.png", "per_kind.png", "abstention_sweep.png")


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _kinds(d: dict[str, Any]) -> list[str]:
    return sorted(d, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))


def retrieval_table(summary: dict[str, Any]) -> str:
    rows = [[mode, m["overall"]["n"], m["overall"]["recall@1"], m["overall"]["recall@5"], m["overall"]["recall@10"],
             m["overall"]["mrr"], m["overall"]["ndcg@10"]] for mode, m in summary["retrieval"].items()]
    rows += [[f"{mode} ({name})", x["n"], x["recall@1"], x["recall@5"], x["recall@10"], x["mrr"], x["ndcg@10"]]
             for mode, m in summary["retrieval"].items() for name, x in m.get("by_subset", {}).items()]
    return table(["mode", "n", "R@1", "R@5", "R@10", "MRR", "nDCG@10"], rows)


def retrieval_by_kind_table(summary: dict[str, Any]) -> str:
    modes = summary["retrieval"]
    kinds = _kinds(next(iter(modes.values()))["by_kind"])
    rows = []
    for k in kinds:
        h = modes["hybrid"]["by_kind"][k]
        if not h["n"]:
            continue
        rows.append([k, h["n"], *[modes[m]["by_kind"][k]["recall@5"] for m in modes], h["mrr"], h["ndcg@10"]])
    return table(["kind", "n", *[f"{m} R@5" for m in modes], "hybrid MRR", "hybrid nDCG@10"], rows)


def sweep_text(summary: dict[str, Any], all_rows: bool = False) -> str:
    sw = summary["abstention_sweep"]
    best, cur = sw["best"], sw["at_current"]

    def line(r: dict[str, Any]) -> list[Any]:
        return [f"{r['threshold']:.2f}", r["abstained"], r["precision"], r["recall"], r["false_abstention"], r["f1"]]

    head = ["threshold", "abstained", "precision", "recall", "false abst.", "F1"]
    text = [f"Gate: {sw['similarity']}; best = max F1 with false abstention <= {sw['max_false_abstention']}.",
            "", table(["", *head], [["best", *line(best)] if best else ["best", "none", *[""] * 5],
                                    ["current setting", *line(cur)]])]
    if all_rows:
        text += ["", table(head, [line(r) for r in sw["rows"]])]
    return "\n".join(text)


def answers_table(summary: dict[str, Any]) -> str:
    a = summary["answers"]
    rows = []
    for name, b in [*((k, a["by_kind"][k]) for k in _kinds(a["by_kind"])), ("all", a["overall"])]:
        ab = b["abstention"]
        rows.append([name, b["n"], b["score"], b["fact_accuracy"], b.get("first_sentence_accuracy"),
                     b.get("own_words_accuracy"), b.get("words_median"), b.get("quoted_share"),
                     b["citation_precision"], b["citation_recall"], b["abstention_rate"], ab["false_abstention"],
                     b["outside_citations"]])
    for name, b in a.get("by_subset", {}).items():
        ab = b["abstention"]
        rows.append([f"subset {name}", b["n"], b["score"], b["fact_accuracy"], b.get("first_sentence_accuracy"),
                     b.get("own_words_accuracy"), b.get("words_median"), b.get("quoted_share"),
                     b["citation_precision"], b["citation_recall"], b["abstention_rate"], ab["false_abstention"],
                     b["outside_citations"]])
    return table(["kind", "n", "score", "fact acc.", "1st sent.", "own words", "words p50", "quoted", "cit. P",
                  "cit. R", "abstained", "false abst.", "outside"], rows)


def latency_table(summary: dict[str, Any]) -> str:
    return table(["timing", "p50", "p95"], [[k, v["p50"], v["p95"]] for k, v in summary["latency"].items()])


def summary_text(summary: dict[str, Any]) -> str:
    """The tables printed at the end of a run."""
    meta = summary["meta"]
    parts = [f"command: {meta.get('command', '')}",
             f"{summary['kind']} run, {sum(summary['counts'].values())} questions, model {meta.get('model')} "
             f"({meta.get('model_sha256')}; loaded as {meta.get('model_loaded', meta.get('model'))}), "
             f"fingerprint {meta['settings_fingerprint']}, prompts {meta['prompt_version']}, "
             f"commit {meta['git_commit'][:12]}",
             "", "Retrieval (paper level)", retrieval_table(summary),
             "", "Abstention threshold sweep", sweep_text(summary)]
    if "answers" in summary:
        ab = summary["answers"]["overall"]["abstention"]
        parts += ["", "Answers", answers_table(summary),
                  f"abstention: precision {fmt(ab['precision'])}, recall {fmt(ab['recall'])}, "
                  f"false abstention {fmt(ab['false_abstention'])}"]
        if "declining" in summary["answers"]["overall"]:
            de = summary["answers"]["overall"]["declining"]
            parts.append(f"declined (abstained, or opened with 'No abstract mentions ...' / 'No paper is clearly on "
                         f"this topic' before the closest): recall {fmt(de['recall'])}, false "
                         f"{fmt(de['false_abstention'])}")
        o = summary["answers"]["overall"]
        if o.get("checked_sentences"):
            parts.append(f"support check: {o['unsupported_sentences']} of {o['checked_sentences']} model-written "
                         f"sentences flagged unsupported ({fmt(o['flagged_share'])}); modes {o['modes']}")
    parts += ["", "Latency (ms; prompt_tokens in tokens, tokens_per_s in tokens/s)", latency_table(summary)]
    if "resources" in summary:
        r = summary["resources"]
        parts.append(f"peak RSS {r['peak_rss_mb']} MB, wall {r['wall_s']} s")
    return "\n".join(parts)


def write_report(summary: dict[str, Any], records: Sequence[dict[str, Any]], out_dir: Path) -> None:
    meta = summary["meta"]
    counts = ", ".join(f"{k} {v}" for k, v in summary["counts"].items())
    lines = [f"# Eval run {meta['timestamp']}", "",
             f"- command: `{meta.get('command', '')}`", f"- kind: {summary['kind']}",
             f"- questions: {sum(summary['counts'].values())} ({counts})",
             f"- model: {meta.get('model')} (sha256 {meta.get('model_sha256')}), prompts {meta['prompt_version']}",
             f"- settings fingerprint {meta['settings_fingerprint']}, git commit {meta['git_commit']}", "",
             "## Retrieval (paper level)", "", retrieval_table(summary), "", "### By kind", "",
             retrieval_by_kind_table(summary), "", "![recall@k](recall_at_k.png)", "",
             "## Abstention threshold sweep", "", sweep_text(summary, all_rows=True), "",
             "![sweep](abstention_sweep.png)", ""]
    if "answers" in summary:
        lines += ["## Answers", "", answers_table(summary), "", "![per kind](per_kind.png)", ""]
        wrong = [r for r in records if r["metrics"]["correct"] is not None and r["metrics"]["correct"] < 1]
        if wrong:
            lines += ["### Questions not fully right", "",
                      table(["id", "kind", "mode", "score", "answer"],
                            [[r["id"], r["kind"], r["mode"], r["metrics"]["correct"],
                              r["answer"].replace("\n", " ").replace("|", "/")[:140]] for r in wrong]), ""]
    lines += ["## Latency", "", latency_table(summary), "", "![latency](latency.png)", ""]
    if "resources" in summary:
        r = summary["resources"]
        lines += [f"Peak RSS {r['peak_rss_mb']} MB; wall time {r['wall_s']} s.", ""]
    (out_dir / "report.md").write_text("\n".join(lines), encoding="utf-8")
    plot_all(summary, records, out_dir)


def plot_all(summary: dict[str, Any], records: Sequence[dict[str, Any]], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    lowest = 1.0
    for mode, m in summary["retrieval"].items():
        curve = [v or 0.0 for v in m["recall_curve"]]
        lowest = min([lowest, *curve])
        ax.plot(range(1, len(curve) + 1), curve, marker="o", label=mode)
    # zoom in: recall here is often above 0.9, where a 0..1 axis hides the differences between modes
    ax.set(xlabel="k (papers)", ylabel="Recall@k", title="Paper recall@k",
           ylim=(max(0.0, int((lowest - 0.05) * 10) / 10), 1.01), xticks=range(1, len(curve) + 1))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "recall_at_k.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    keys = ["first_token_ms", "total_ms"] if "answers" in summary else ["embed_ms", "retrieve_ms"]
    series = {k: [r["timings"][k] for r in records if k in r.get("timings", {})] for k in keys}
    top = max((max(v) for v in series.values() if v), default=1.0)
    bins = [top * i / 30 for i in range(31)]  # shared bins so the two histograms line up
    for key, vals in series.items():
        if vals:
            ax.hist(vals, bins=bins, alpha=0.6, label=key)
    ax.set(xlabel="milliseconds", ylabel="questions", title="Latency per question")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "latency.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    if "answers" in summary:
        by = summary["answers"]["by_kind"]
        kinds = _kinds(by)
        vals = [by[k]["score"] or 0.0 for k in kinds]
        ax.set(title="Answer score per kind (facts / citation recall / abstention)", ylabel="score")
    else:
        by = summary["retrieval"]["hybrid"]["by_kind"]
        kinds = [k for k in _kinds(by) if by[k]["n"]]
        vals = [by[k]["recall@5"] or 0.0 for k in kinds]
        ax.set(title="Hybrid Recall@5 per kind", ylabel="Recall@5")
    bars = ax.bar(kinds, vals, color="#4c72b0")
    ax.bar_label(bars, fmt="%.2f")
    ax.set_ylim(0, 1.1)
    fig.tight_layout()
    fig.savefig(out_dir / "per_kind.png", dpi=100)
    plt.close(fig)

    rows = summary["abstention_sweep"]["rows"]
    fig, ax = plt.subplots(figsize=(6, 4))
    t = [r["threshold"] for r in rows]
    for key, label in (("recall", "abstention recall"), ("false_abstention", "false abstention"), ("f1", "F1")):
        ax.plot(t, [r[key] or 0.0 for r in rows], marker=".", label=label)
    ax.axvline(summary["abstention_sweep"]["current"], color="grey", ls="--", label="current")
    ax.set(xlabel="min_similarity", title="Abstention threshold sweep", ylim=(0, 1.02))
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "abstention_sweep.png", dpi=100)
    plt.close(fig)


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
    """Flat {metric: value} of the numbers worth comparing between runs."""
    out: dict[str, Any] = {}
    if "retrieval" not in summary:  # a conversation run (eval/conversations.py): its overall and per-kind figures
        for name, figures in [("", summary["overall"]), *summary.get("by_kind", {}).items()]:
            out.update({f"{name} {k}".strip(): v for k, v in figures.items() if v is not None})
        return out
    for mode, m in summary["retrieval"].items():
        for key in ("recall@1", "recall@5", "mrr", "ndcg@10"):
            out[f"{mode} {key}"] = m["overall"][key]
        for name, sub in m.get("by_subset", {}).items():
            for key in ("recall@1", "recall@5"):
                out[f"{mode} {name} {key}"] = sub[key]
    if "answers" in summary:
        a = summary["answers"]
        out["score"] = a["overall"]["score"]
        for k in _kinds(a["by_kind"]):
            out[f"score {k}"] = a["by_kind"][k]["score"]
        out["fact accuracy"] = a["overall"]["fact_accuracy"]
        for key, label in (("first_sentence_accuracy", "fact in first sentence"),
                           ("own_words_accuracy", "fact in own words"), ("words_median", "words p50"),
                           ("quoted_share", "quoted share")):
            out[label] = a["overall"].get(key)
        if "multi" in a["by_kind"]:
            out["summary recall"] = a["by_kind"]["multi"]["citation_recall"]
            out["summary precision"] = a["by_kind"]["multi"]["citation_precision"]
        for name, b in a.get("by_subset", {}).items():
            out[f"{name} fact in first sentence"] = b.get("first_sentence_accuracy")
            out[f"{name} citation precision"] = b["citation_precision"]
        out["citation precision"] = a["overall"]["citation_precision"]
        out["citation recall"] = a["overall"]["citation_recall"]
        out["outside citations"] = a["overall"]["outside_citations"]
        out["abstention recall"] = a["overall"]["abstention"]["recall"]
        out["false abstention"] = a["overall"]["abstention"]["false_abstention"]
    best = summary["abstention_sweep"]["best"]
    out["sweep best threshold"] = best["threshold"] if best else None
    for key in ("first_token_ms", "total_ms", "tokens_per_s"):
        if key in summary["latency"]:
            out[f"{key} p50"] = summary["latency"][key]["p50"]
    if "resources" in summary:
        out["peak RSS MB"] = summary["resources"]["peak_rss_mb"]
    return out


def models_table(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Side by side: one column per model run."""
    heads = [_headline(s) for _, s in runs]
    keys = [k for k in heads[0] if not k.startswith(("dense", "bm25"))]
    stamp = [["model file", *[s["meta"].get("model") for _, s in runs]],
             ["model sha256", *[s["meta"].get("model_sha256") for _, s in runs]]]
    return table(["metric", *[name for name, _ in runs]], [*stamp, *[[k, *[h.get(k) for h in heads]] for k in keys]])


def compare_runs(a: tuple[dict[str, Any], list[dict[str, Any]]], b: tuple[dict[str, Any], list[dict[str, Any]]],
                 names: tuple[str, str] = ("A", "B")) -> str:
    """Metric deltas (B - A) and the questions whose fact hit or abstention flipped."""
    ha, hb = _headline(a[0]), _headline(b[0])
    rows = []
    for k in ha:
        va, vb = ha[k], hb.get(k)
        delta = vb - va if isinstance(va, int | float) and isinstance(vb, int | float) else None
        rows.append([k, va, vb, f"{delta:+.3f}" if delta is not None else "n/a"])
    parts = [f"A = {names[0]}", f"B = {names[1]}", "", table(["metric", "A", "B", "B - A"], rows)]
    ra = {r["id"]: r for r in a[1] if "metrics" in r}
    flips = []
    for r in b[1]:
        old = ra.get(r["id"])
        if old is None or "metrics" not in r:
            continue
        for key in ("fact_hit", "abstained"):
            x, y = old["metrics"].get(key), r["metrics"].get(key)
            if x is not None and y is not None and x != y:
                flips.append([r["id"], r["kind"], key, x, y, r["answer"].replace("\n", " ").replace("|", "/")[:100]])
    parts += ["", f"Flipped questions: {len(flips)}"]
    if flips:
        parts += ["", table(["id", "kind", "metric", "A", "B", "B answer"], flips)]
    return "\n".join(parts)
