"""The Evaluation tab: the latest eval run's summary, plots, model comparison and every question with its result.

Reads `eval/runs/*/` (written by `python -m rag eval`); never runs an evaluation itself. Plots are loaded into
memory and handed to Gradio as images, so no file route into the project is opened. Text from the run files (which
holds model output and retrieved abstracts, so anything) goes through `sanitise` before Gradio's Markdown: no raw
HTML, no image or link (remote or not), no bare URL the renderer would turn into a link, no local absolute path.
Question rows go to a Dataframe (plain cells) with paths hidden the same way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr

from rag.config import PROJECT_ROOT

RUNS = PROJECT_ROOT / "eval" / "runs"
# ![alt](url "title") and [text](url): the brackets' text stays, the target goes (one level of nested brackets).
_IMAGE = re.compile(r"!\[((?:[^\[\]]|\[[^\]]*\])*)\]\s*(\([^)]*\)|\[[^\]]*\])?")
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\s*(\([^)]*\)|\[[^\]]*\])")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*\S.*$", re.MULTILINE)  # [ref]: http://... definitions
_FILE_URL = re.compile(r"\bfile:/*[^\s`)]*", re.IGNORECASE)
_URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s`<>&\"']*[^\s`<>&\"'.,;:!?)\]]", re.IGNORECASE)
# An absolute path: "/" not after a word character, ":" or "/" (so not "1/2", a URL's path or "a/b"), then at least
# two segments, e.g. "/root/.cache/x.gguf"; "~/..." too.
_PATH = re.compile(r"(?<![\w:/~.])(?:~|/[\w.@+-]+)(?:/[\w.@+-]+)*/([\w.@+-]+)")
_HTML = str.maketrans({"<": "&lt;", ">": "&gt;"})
PLOTS = (("recall_at_k.png", "Recall@k"), ("per_kind.png", "Score per question kind"),
         ("latency.png", "Latency"), ("abstention_sweep.png", "Abstention threshold sweep"))


def hide_paths(text: str) -> str:
    """Local absolute paths shortened to their last part: the project's own files relative to it,
    e.g. "/work/app/eval/runs/r1/report.md" -> "eval/runs/r1/report.md", "/root/.cache/m.gguf" -> "…/m.gguf"."""
    text = text.replace(str(PROJECT_ROOT) + "/", "")
    return _PATH.sub(lambda m: "…/" + m.group(1), text)


def sanitise(markdown: str) -> str:
    """Report Markdown safe to render: raw HTML shown as text, images and links reduced to their text, link
    definitions and file: URLs dropped, bare URLs in code spans (shown, never linked), local paths hidden.
    e.g. 'see ![x](http://e.vil/p.png) <img src=y> [doc](https://a.b) /root/m.gguf' ->
    'see x &lt;img src=y&gt; doc …/m.gguf'."""
    text = markdown.translate(_HTML)
    for _ in range(3):  # an image inside a link's text: [![x](a)](b)
        text = _LINK.sub(lambda m: m.group(1), _IMAGE.sub(lambda m: m.group(1), text))
    text = _REFERENCE.sub("", text)
    text = _FILE_URL.sub("(local file)", text)
    text = hide_paths(text)
    return _URL.sub(lambda m: "`" + m.group(0) + "`", text)


def latest_run(root: Path = RUNS) -> Path | None:
    """The newest run folder with a summary (a full run preferred over a retrieval-only one)."""
    runs = [p for p in root.glob("*/summary.json") if p.is_file()]
    if not runs:
        return None

    def key(p: Path) -> tuple[int, float]:
        try:
            full = json.loads(p.read_text(encoding="utf-8")).get("kind") != "retrieval-only"
        except (OSError, ValueError):
            full = False
        return (int(full), p.stat().st_mtime)

    return max(runs, key=key).parent


def _report(run: Path) -> str:
    """report.md without its image lines (the images are shown below it)."""
    try:
        text = (run / "report.md").read_text(encoding="utf-8")
    except OSError:
        return "This run has no report."
    return sanitise(re.sub(r"^!\[.*$", "", text, flags=re.MULTILINE))


def _comparison(run: Path) -> str:
    for candidate in (run / "compare.md", *sorted(run.parent.glob("*/compare.md"), key=lambda p: -p.stat().st_mtime)):
        if candidate.is_file():
            return sanitise(candidate.read_text(encoding="utf-8"))
    return "No model comparison yet: run `python -m rag eval --models smollm2 gemma3 --limit 40`."


def question_rows(run: Path) -> list[list[Any]]:
    rows: list[list[Any]] = []
    try:
        lines = (run / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return rows
    for line in lines:
        try:
            q = json.loads(line)
        except ValueError:
            continue
        m = q.get("metrics") or {}
        passed = m.get("correct")
        rows.append([
            q.get("id", ""), q.get("kind", ""), hide_paths(str(q.get("question", ""))),
            hide_paths(str(q.get("answer", ""))),
            ", ".join(str(c.get("n")) + ":" + str(c.get("paper_id", ""))[:8] for c in q.get("citations") or []),
            "" if passed is None else ("pass" if passed and float(passed) >= 0.999 else f"{float(passed):.2f}"),
        ])
    return rows


def _images(run: Path) -> list[Any]:
    from PIL import Image

    out: list[Any] = []
    for name, _ in PLOTS:
        try:
            with Image.open(run / name) as im:
                out.append(im.copy())
        except OSError:
            out.append(None)
    return out


def load(root: Path = RUNS) -> list[Any]:
    run = latest_run(root)
    if run is None:
        empty = "No evaluation run yet: `python -m rag eval` writes one under eval/runs/."
        return [empty, "", [], *([None] * len(PLOTS))]
    return [f"**Run {sanitise(run.name)}**\n\n" + _report(run), _comparison(run), question_rows(run), *_images(run)]


def tab() -> list[Any]:
    """Build the tab inside the current gr.Tabs; returns the outputs `load` fills (on page load and by button)."""
    with gr.Tab("Evaluation", id="evaluation"):
        refresh = gr.Button("Reload the latest run", size="sm")
        summary = gr.Markdown()
        with gr.Accordion("Model comparison", open=False):
            comparison = gr.Markdown()
        with gr.Row():
            images = [gr.Image(label=label, interactive=False, show_label=True) for _, label in PLOTS[:2]]
        with gr.Row():
            images += [gr.Image(label=label, interactive=False, show_label=True) for _, label in PLOTS[2:]]
        questions = gr.Dataframe(headers=["id", "kind", "question", "answer", "citations", "passed"],
                                 interactive=False, wrap=True, max_height=480)
    outputs = [summary, comparison, questions, *images]
    refresh.click(lambda: load(), None, outputs, api_visibility="private")
    return outputs
