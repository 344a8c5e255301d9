"""`python -m rag eval conversations`: scripted multi-turn conversations, answered turn by turn, scored per turn.

Each conversation in `eval/conversations.jsonl` (schema in eval/QA.md) is played as a user would: every turn is
asked with the history of the earlier questions and the system's *own* earlier answers (their text and the paper
ids they cited, as the chat and the API keep them), so a wrong first answer can mislead the follow-up, as it would
for a user. Scores:

- last turn: fact in the answer, fact in its first sentence, the right paper cited (something cited and every cited
  paper gold) and, for listing turns, recall and precision of the papers shown (cited, then those listed under a
  long summary, `Answer.more`) against the complete gold set;
- "switch" conversations: the last turn cites none of the previous turn's papers that are not gold for it (a new
  subject is not pinned to the old paper);
- "ordinal" turns (`refers_to`: previous_citation_N / previous_citations_N_M) are scored against the paper(s) the
  previous answer cited N-th (and M-th), as the user saw them.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rag.records import Answer

from . import metrics as M

CONVERSATIONS = Path(__file__).resolve().parent / "conversations.jsonl"


@dataclass(frozen=True)
class Turn:
    question: str
    gold: tuple[str, ...]
    facts: tuple[tuple[str, ...], ...]
    refers_to: str = ""


@dataclass(frozen=True)
class Conversation:
    id: str
    kind: str
    split: str
    turns: tuple[Turn, ...]
    subset: str = ""  # a group written for one purpose ("user2": written blind after tuning), scored on its own too


class Asker(Protocol):
    def ask(self, question: str, history: list[dict[str, Any]] | None = None) -> Answer: ...


def load(path: Path = CONVERSATIONS, split: str | None = None, ids: Sequence[str] = ()) -> list[Conversation]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            turns = tuple(Turn(t["question"], tuple(t["gold"]), tuple(tuple(f) for f in t["facts"]),
                               t.get("refers_to", "")) for t in d["turns"])
            out.append(Conversation(d["id"], d["kind"], d.get("split", ""), turns, d.get("subset", "")))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a conversation record ({e})") from None
    if split:
        out = [c for c in out if c.split == split]
    if ids:
        out = [c for c in out if c.id in set(ids)]
    return out


def referred(refers_to: str, previous: Sequence[str]) -> tuple[str, ...]:
    """previous_citation_2 -> the 2nd paper the previous answer cited; previous_citations_1_2 -> the 1st and 2nd."""
    picks = [int(x) for x in re.findall(r"\d+", refers_to)]
    return tuple(previous[i - 1] for i in picks if 0 < i <= len(previous))


def score_turn(turn: Turn, ans: Answer, gold: tuple[str, ...]) -> dict[str, Any]:
    cited = [c.paper.paper_id for c in ans.citations]
    facts = [list(f) for f in turn.facts]
    precision, recall = M.citation_scores(M.shown_papers(ans), gold)
    return {
        "question": turn.question, "searched": ans.searched, "resolved": list(ans.focus), "answer": ans.text,
        "mode": ans.mode, "cited": cited, "gold": list(gold),
        "fact_hit": M.fact_hit(ans.text, facts), "first_sentence_hit": M.fact_hit(M.first_sentence(ans.text), facts),
        "right_paper": bool(cited) and bool(gold) and set(cited) <= set(gold) if len(gold) == 1 else None,
        "citation_precision": precision, "citation_recall": recall, "abstained": ans.abstained,
        "declined": ans.declined, "words": M.word_count(ans.text),
    }


def play(asker: Asker, conv: Conversation) -> list[dict[str, Any]]:
    """Ask every turn with the system's own earlier answers as history; the scored turns."""
    history: list[dict[str, Any]] = []
    previous: tuple[str, ...] = ()
    out = []
    for turn in conv.turns:
        ans = asker.ask(turn.question, history=list(history))
        gold = referred(turn.refers_to, previous) if turn.refers_to else turn.gold
        out.append(score_turn(turn, ans, gold))
        previous = tuple(c.paper.paper_id for c in ans.citations)
        history += [{"role": "user", "content": turn.question},
                    {"role": "assistant", "content": ans.text, "paper_ids": list(previous)}]
    if conv.kind == "switch":  # the last turn whose subject shares no paper with the turn before; a third may follow it
        at = next((i for i in range(len(out) - 1, 0, -1) if not set(out[i]["gold"]) & set(out[i - 1]["gold"])), None)
        if at is not None:
            stale = set(out[at - 1]["cited"]) - set(out[at]["gold"])
            out[-1]["switch_ok"] = not (set(out[at]["cited"]) & stale)
    return out


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def block(rs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        last = [r["turns"][-1] for r in rs]
        listing = [t for t in last if len(t["gold"]) > 1]
        return {
            "n": len(rs),
            "last_fact_accuracy": M.mean(t["fact_hit"] for t in last),
            "last_first_sentence_accuracy": M.mean(t["first_sentence_hit"] for t in last),
            "right_paper": M.mean(t["right_paper"] for t in last),
            "switch_ok": M.mean(t.get("switch_ok") for t in last),
            "listing_recall": M.mean(t["citation_recall"] for t in listing),
            "listing_precision": M.mean(t["citation_precision"] for t in listing),
            "abstained": M.mean(t["abstained"] for t in last),
            # abstained, or said first that the abstracts (or the paper discussed) do not hold what was asked
            "declined": M.mean(t.get("declined") for t in last),
            "words_median": M.median(t["words"] for t in last),
        }

    kinds = sorted({r["kind"] for r in records})
    subsets = sorted({r["subset"] for r in records if r.get("subset")})
    return {"overall": block(records), "by_kind": {k: block([r for r in records if r["kind"] == k]) for k in kinds},
            "by_subset": {s: block([r for r in records if r.get("subset") == s]) for s in subsets}}


def table(summary: dict[str, Any]) -> str:
    from .report import table as md

    keys = ["n", "last_fact_accuracy", "last_first_sentence_accuracy", "right_paper", "switch_ok", "listing_recall",
            "listing_precision", "abstained", "declined", "words_median"]
    groups = [*summary["by_kind"].items(), *((f"subset {s}", b) for s, b in summary.get("by_subset", {}).items()),
              ("all", summary["overall"])]
    rows = [[k, *[b[x] for x in keys]] for k, b in groups]
    return md(["kind", "n", "last fact", "last 1st sent.", "right paper", "switch ok", "list R", "list P",
               "abstained", "declined", "words p50"], rows)


def main(argv: list[str]) -> int:
    import argparse

    from rag.config import load as load_settings
    from rag.pipeline import Assistant, ingest

    from .run import RUNS_DIR, stamp

    p = argparse.ArgumentParser(prog="python -m rag eval conversations",
                                description="Play the scripted conversations turn by turn and score the last turns.")
    p.add_argument("--split", choices=("dev", "test"))
    p.add_argument("--ids", help="comma-separated conversation ids")
    p.add_argument("--data-dir")
    p.add_argument("--config")
    p.add_argument("--model", help="a GGUF path or preset name")
    p.add_argument("--out", type=Path)
    p.add_argument("--file", type=Path, default=CONVERSATIONS)
    args = p.parse_args(argv)
    overrides: dict[str, Any] = {"paths.data_dir": args.data_dir}
    if args.model:
        overrides["generation.model_path"] = args.model
    settings = load_settings(args.config, overrides)
    convs = load(args.file, args.split, args.ids.split(",") if args.ids else ())
    if not convs:
        raise ValueError(f"{args.file}: no conversations match --split/--ids")
    assistant = Assistant(settings)
    ingest(settings, embedder=assistant.embedder)
    assistant.warm()
    out = args.out or RUNS_DIR / ("conv-" + dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S"))
    summary = run(assistant, convs, out, stamp(settings, assistant.prompts.version, args.file,
                                               "python -m rag eval conversations " + " ".join(argv)))
    print(table(summary))
    print(f"\nrun folder: {out}")
    return 0


def run(asker: Asker, convs: Sequence[Conversation], out: Path, meta: dict[str, Any],
        progress: bool = True) -> dict[str, Any]:
    """Play the conversations, write the run folder `out` (conversations.jsonl, summary.json); the summary."""
    records = []
    for conv in convs:
        turns = play(asker, conv)
        records.append({"id": conv.id, "kind": conv.kind, "split": conv.split, "subset": conv.subset, "turns": turns})
        if progress:
            print(f"{conv.id} {conv.kind}: last fact {turns[-1]['fact_hit']} right {turns[-1]['right_paper']}",
                  file=sys.stderr)
    summary = {"meta": meta, **summarise(records)}
    out.mkdir(parents=True, exist_ok=True)
    with (out / "conversations.jsonl").open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary
