"""A read-only store folder: answers still come (reading needs no writes) or fail with one clear line; ingest
fails with one clear line; nothing stored is lost. The folder is made read-only with a bind mount in a private
mount namespace (`unshare -m`), since chmod does not stop root, who runs CI."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def _can_mount_readonly(tmp) -> bool:  # type: ignore[no-untyped-def]
    probe = tmp / "probe"
    probe.mkdir()
    cmd = f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && ! touch {probe}/x 2>/dev/null"
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "sh", "-c", cmd], capture_output=True).returncode == 0


def test_read_only_store_keeps_answering_and_refuses_writes_in_one_line(seeded, tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not _can_mount_readonly(tmp_path):
        pytest.skip("no private mount namespace here (unshare -m); cannot make a folder read-only for root")
    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    before = sorted(p.relative_to(data).as_posix() for p in data.rglob("*"))
    env = {**os.environ, "RAG_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    py = sys.executable
    script = (f"mount --bind {data} {data} && mount -o remount,bind,ro {data} && "
              f"{py} -m rag search --json 'privacy leakage' > {tmp_path}/search.out 2> {tmp_path}/search.err; "
              f"echo $? > {tmp_path}/search.rc; "
              f"{py} -m rag ingest {ROOT / 'seeds'} > {tmp_path}/ingest.out 2> {tmp_path}/ingest.err; "
              f"echo $? > {tmp_path}/ingest.rc")
    subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, env=env, timeout=600, check=True)
    search_rc = int((tmp_path / "search.rc").read_text())
    search_err = (tmp_path / "search.err").read_text()
    if search_rc == 0:
        hits = json.loads((tmp_path / "search.out").read_text())["hits"]
        assert hits and "PrivGate" in hits[0]["title"]
    else:
        assert search_rc == 2 and "Traceback" not in search_err and search_err.strip().count("\n") == 0
    ingest_rc = int((tmp_path / "ingest.rc").read_text())
    ingest_err = (tmp_path / "ingest.err").read_text()
    # Nothing changed, so ingest may succeed without writing; if it needs to write, it fails in one line.
    assert ingest_rc in (0, 2), ingest_err
    if ingest_rc == 2:
        assert "Traceback" not in ingest_err and ingest_err.strip().startswith("error:")
    assert sorted(p.relative_to(data).as_posix() for p in data.rglob("*")) == before  # nothing lost or added
