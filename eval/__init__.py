"""Offline evaluation of abstracts-qa: the QA set (`qa.jsonl`), metrics, the runner, reports and the `eval` CLI.

`python -m rag eval -h` is the entry point; `eval.metrics` holds the pure scoring functions.
"""

__all__: list[str] = []
