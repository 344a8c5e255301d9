"""No silent skips: under CI a skipped test fails the run with its reason; `scripts/test.sh` fails when it cannot
install Chromium. Both run pytest or the script in a child process on a throwaway test file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

DEMO = '''
import pytest

pytest_plugins = ["conftest"]


def test_skips_inside():
    pytest.skip("needs the moon")


@pytest.mark.skipif(True, reason="never on a Tuesday")
def test_skipif():
    pass


@pytest.mark.xfail(reason="known and expected", strict=True)
def test_xfail():
    assert False


def test_passes():
    pass
'''


def _pytest(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_demo.py").write_text(DEMO)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-c", os.devnull, str(tmp_path / "test_demo.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_under_ci_a_skipped_test_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "1")
    out = done.stdout
    assert done.returncode == 1, out
    # A skip in the test's body fails it; one decided at setup (skipif) is an error: both fail the run.
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in out, out
    assert "needs the moon" in out and "never on a Tuesday" in out and "skipped under CI" in out


def test_outside_ci_skips_stay_skips(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "")
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in done.stdout, done.stdout


def test_test_script_fails_when_chromium_cannot_be_installed(tmp_path: Path) -> None:
    """A copy of scripts/test.sh in a throwaway project whose install step is a stub, with apt-get failing and no
    Chromium: it stops with exit 1 before lint or pytest, naming what is missing."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "test.sh", tmp_path / "scripts" / "test.sh")
    (tmp_path / "scripts" / "install.sh").write_text("echo installed\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "apt-get").write_text("#!/bin/sh\necho 'E: Unable to locate package chromium' >&2\nexit 100\n")
    (bin_ / "apt-get").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "CHROMIUM": str(tmp_path / "no-chromium")}
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "test.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.strip() == "installed"  # nothing ran after the check
    assert done.stderr.strip().splitlines()[-1].startswith("error: could not install chromium at "), done.stderr
