"""bench/replay.py on a real index of the seeds (fake embedder): a chat model's outputs kept by prompt and replayed,
so answer settings are swept over the same outputs without generating again; the sweep scores as the eval does."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import ScriptedGenerator
from helpers import seeded_assistant

from bench.replay import Recorded, run
from eval.run import Question

PRIVGATE = "6480b13cf7654701"
QUESTION = "How much does PrivGate reduce privacy leakage?"


def test_an_output_is_kept_by_prompt_and_replayed_without_the_model(tmp_path: Path) -> None:
    record = tmp_path / "kept.jsonl"
    model = ScriptedGenerator(["It cuts leakage by 62.6% [1].", "another reply"])
    kept = Recorded(model, record)
    messages = [{"role": "user", "content": "q1"}]
    assert "".join(kept.stream(messages, 64, 0.0)) == "It cuts leakage by 62.6% [1]."
    assert kept.generated == 1 and len(model.prompts) == 1
    # The same prompt again, in a new process reading the file: the kept text, the model not asked.
    again = Recorded(ScriptedGenerator(["must not be used"]), record)
    assert "".join(again.stream(messages, 64, 0.0)) == "It cuts leakage by 62.6% [1]."
    assert again.replayed == 1 and again.generated == 0 and not again.model.prompts
    # Another prompt, or the same one with another budget, is the model's to answer, and is kept too.
    assert "".join(again.stream(messages, 32, 0.0)) == "must not be used"
    assert len(record.read_text(encoding="utf-8").splitlines()) == 2
    assert all(json.loads(line)["key"] for line in record.read_text(encoding="utf-8").splitlines())
    assert again.n_ctx == model.n_ctx  # the rest is the model's own (context size, tokenizer, name)


def test_a_sweep_replays_one_set_of_outputs_at_every_value(tmp_path: Path) -> None:
    model = ScriptedGenerator(["PrivGate cuts privacy leakage by 62.6% [1]."])
    assistant = seeded_assistant(tmp_path / "data", Recorded(model, tmp_path / "kept.jsonl"))
    questions = [Question("a", "factoid", QUESTION, (PRIVGATE,), (("62.6%",),))]
    summaries = run(assistant, questions, "evidence_after_answer", ["true", "false"])
    assert len(model.prompts) == 1  # generated once, replayed for the second value
    for v in ("true", "false"):
        overall = summaries[v]["overall"]
        assert overall["n"] == 1 and overall["fact_accuracy"] == 1.0 and overall["first_sentence_accuracy"] == 1.0
    # The number asked for is answered: the model's one sentence stands alone either way.
    assert summaries["true"]["overall"]["words_median"] == summaries["false"]["overall"]["words_median"]


def test_conversations_are_played_with_kept_outputs_and_written_as_the_eval_writes_them(tmp_path: Path) -> None:
    """`bench.replay --conversations`: the eval's conversations played turn by turn with the model's outputs kept, so
    a second run replays them without the model and scores the same (`eval.conversations.run` writes the folder)."""
    from eval import conversations as C

    conv = C.Conversation("c1", "pronoun", "dev", (
        C.Turn(QUESTION, (PRIVGATE,), (("62.6%",),)),
        C.Turn("And how much token overhead does it add?", (PRIVGATE,), (("15.9%",),))))
    model = ScriptedGenerator(["PrivGate cuts privacy leakage by 62.6% [1].", "It adds 15.9% token overhead [1]."])
    first = Recorded(model, tmp_path / "kept.jsonl")
    summary = C.run(seeded_assistant(tmp_path / "data", first), [conv], tmp_path / "run1", {"command": "x"},
                    progress=False)
    assert first.generated == 2 and summary["overall"]["last_fact_accuracy"] == 1.0
    again = Recorded(ScriptedGenerator(["must not be used"]), tmp_path / "kept.jsonl")
    replayed = C.run(seeded_assistant(tmp_path / "data2", again), [conv], tmp_path / "run2", {"command": "x"},
                     progress=False)
    assert again.replayed == 2 and again.generated == 0 and replayed["overall"] == summary["overall"]
    rows = [json.loads(x) for x in (tmp_path / "run2" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows[0]["id"] == "c1" and rows[0]["turns"][1]["resolved"] == [PRIVGATE]
    assert json.loads((tmp_path / "run2" / "summary.json").read_text(encoding="utf-8"))["meta"] == {"command": "x"}
