"""The command line and set-up the model-free sweeps share (bench.evidence_pick, bench.summary_pick): one setting
swept over comma-separated values, on the questions of one split of eval/qa.jsonl, through an `Assistant` on an
ingested index of the seeds."""

from __future__ import annotations

import argparse
from typing import Any

from rag.config import load as load_settings


def setup(prog: str, doc: str, flag: str, default: str, setting: str,
          argv: list[str] | None, others: tuple[str, ...] = (),
          aliases: tuple[str, ...] = ()) -> tuple[str, Any, list[Any], list[float]]:
    """(split, assistant, that split's questions, the values of `flag`, also spelt `aliases`) from the command line
    `argv`. With `others`, `--setting` names which of `setting` and `others` the values are for; read it with
    `swept(argv, setting)`."""
    ap = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True, help="an ingested index of the seeds")
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument(flag, *aliases, default=default, help=f"comma-separated {setting} values")
    if others:
        ap.add_argument("--setting", default=setting, choices=(setting, *others), help="the answer setting swept")
    args = ap.parse_args(argv)

    from eval.run import load_qa
    from rag.pipeline import Assistant

    values = [float(v) for v in getattr(args, flag.lstrip("-").replace("-", "_")).split(",")]
    assistant = Assistant(load_settings(flags={"paths.data_dir": args.data_dir}))
    return args.split, assistant, [q for q in load_qa() if q.split == args.split], values


def swept(argv: list[str] | None, default: str) -> str:
    """The `--setting` of the command line `argv` (already checked by `setup`), else `default`."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--setting", default=default)
    return str(ap.parse_known_args(argv)[0].setting)
