"""Cold start: the query paths import only what they use. With the onnx backend's file cached (the seeded index
exported it), the real CLI's `ask --json` and `search --json`, each in a fresh interpreter, finish without torch,
transformers, sentence-transformers, scikit-learn or numba in `sys.modules` (the export path, which this test
process ran for the fixture, keeps using them). Timings are measured by bench/startup.py, not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from rag.config import Settings

ABSENT = {"torch", "transformers", "sentence_transformers", "sklearn", "numba", "matplotlib", "ranx", "gradio"}

# Runs the CLI's own entry point, then writes the top-level names of every module the process imported.
CHILD = """
import json, sys
from rag.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, f)
"""


def _run_cli(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[dict, list[str]]:  # type: ignore[type-arg]
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["code"] == 0
    return json.loads(done.stdout.strip().splitlines()[-1]), got["modules"]


@pytest.mark.slow
def test_ask_imports_no_torch_stack(seeded: Settings, tmp_path: Path) -> None:
    assert any((seeded.paths.data_dir / "onnx").glob("*.onnx"))  # the cached export the query path relies on
    answer, modules = _run_cli(tmp_path, "ask", "How much does PrivGate reduce privacy leakage?", "--json",
                               "--data-dir", str(seeded.paths.data_dir))
    assert answer["answer"] and answer["hits"]
    assert not ABSENT & set(modules), sorted(ABSENT & set(modules))
    # What the answer did need was imported: the check sees imports.
    assert {"onnxruntime", "tokenizers", "chromadb", "bm25s", "llama_cpp"} <= set(modules)


@pytest.mark.slow
def test_search_imports_no_torch_stack_and_no_llm(seeded: Settings, tmp_path: Path) -> None:
    got, modules = _run_cli(tmp_path, "search", "privacy leakage of LLM agents", "--json",
                            "--data-dir", str(seeded.paths.data_dir))
    assert got["hits"]
    assert not (ABSENT | {"llama_cpp"}) & set(modules), sorted((ABSENT | {"llama_cpp"}) & set(modules))
    assert {"onnxruntime", "tokenizers", "chromadb", "bm25s"} <= set(modules)


@pytest.mark.slow
def test_a_summary_listed_from_the_evidence_loads_no_chat_model(seeded: Settings, tmp_path: Path) -> None:
    # The default model's preset lists a summary without running the model, so `ask` never loads the GGUF ...
    answer, modules = _run_cli(tmp_path, "ask", "Summarize the work on reinforcement learning for LLM agents",
                               "--json", "--data-dir", str(seeded.paths.data_dir))
    assert answer["mode"] == "extractive" and len(answer["citations"]) >= 2
    assert "first_token_ms" not in answer["timings"] and answer["model"].endswith(".gguf")
    assert "llama_cpp" not in modules
    # ... while a factoid in the same data folder does (the test above: llama_cpp imported), and a summary whose
    # model writes closing sentences does too.
    _, written = _run_cli(tmp_path, "ask", "Summarize the work on reinforcement learning for LLM agents", "--json",
                          "--data-dir", str(seeded.paths.data_dir), env={"RAG_ANSWER_SUMMARY_SYNTHESIS": "2"})
    assert "llama_cpp" in written
