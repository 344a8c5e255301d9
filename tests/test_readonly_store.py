"""A read-only data folder: search still answers (reading needs no writes), `ingest` fails with one line, and no
file in the folder changes, byte for byte. The folder is made read-only with `helpers.read_only_shell` (a
read-only bind mount in a private mount namespace, since chmod does not stop root, who runs CI)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_only_shell

pytestmark = pytest.mark.slow


def _contents(folder: Path) -> dict[str, str]:
    """Every file under `folder` -> the SHA-256 of its bytes (and every folder, as "dir")."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def test_read_only_store_keeps_answering_and_refuses_writes_in_one_line(seeded, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    before = _contents(data)
    assert any(name.endswith("chroma.sqlite3") for name in before) and any("catalog" in n for n in before)
    env = {**os.environ, "RAG_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    py, out = sys.executable, tmp_path
    script = (f"touch {data}/probe 2>/dev/null && echo writable > {out}/writable; "
              f"{py} -m rag search --json 'privacy leakage' > {out}/search.out 2> {out}/search.err; "
              f"echo $? > {out}/search.rc; "
              f"{py} -m rag ingest {ROOT / 'seeds'} > {out}/ingest.out 2> {out}/ingest.err; "
              f"echo $? > {out}/ingest.rc")
    subprocess.run(read_only_shell(data, script), cwd=ROOT, env=env, timeout=600, check=True)
    assert not (out / "writable").exists()  # the folder really was read-only

    search_err = (out / "search.err").read_text()
    assert (out / "search.rc").read_text().strip() == "0", search_err
    hits = json.loads((out / "search.out").read_text())["hits"]
    assert hits and "PrivGate" in hits[0]["title"], hits
    ingest_err = (out / "ingest.err").read_text()
    assert (out / "ingest.rc").read_text().strip() == "2", ingest_err
    lines = ingest_err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in ingest_err, ingest_err
    assert str(data) in lines[0] and "write" in lines[0]  # names the folder and what is wrong
    assert _contents(data) == before  # nothing lost, added or changed
