"""No outbound connection: the CLI ingests, searches and answers in a child process whose non-loopback
connections and name lookups are recorded and refused; and that guard itself catches a connection."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import LONG_QUESTION, ROOT, SEEDS

PY = sys.executable


_OFFLINE_RUN = textwrap.dedent("""
    import ipaddress, json, sys
    log, out = [], sys.argv[1]

    def local(host):
        if host in (None, "", "localhost") or str(host).startswith("/"):
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    def hook(event, args):
        host = None
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            address = args[-1]
            host = address[0] if isinstance(address, tuple) else None
        elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
            host = args[0]
        elif event == "urllib.Request":
            host = args[0]
        else:
            return
        if not local(host):
            log.append(f"{event} {host!r}")
            with open(out, "w") as fh:
                json.dump(log, fh)
            raise ConnectionRefusedError(f"offline test: {event} to {host!r} refused")

    sys.addaudithook(hook)
    from rag.cli import main
    for argv in json.loads(sys.argv[2]):  # one process: the imports are paid once
        print(json.dumps({"argv": argv[0], "rc": main(argv)}), flush=True)
""")


@pytest.mark.slow
def test_no_outbound_connection_while_ingesting_and_answering(seeded: Any, tmp_path: Path) -> None:
    """The CLI in a child process whose non-loopback connections and name lookups are recorded and refused:
    ingest (real embedder), search, and ask (real GGUF) a question 100,000 characters long."""
    data = tmp_path / "data"
    shutil.copytree(seeded.paths.data_dir, data)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "ANONYMIZED_", "GRADIO_", "RAG_"))}  # the app sets its own
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "outbound.json"
    questions = tmp_path / "q.txt"
    questions.write_text(LONG_QUESTION + "\n")
    flags = ["--data-dir", str(data)]
    runs = [["ingest", str(SEEDS), "--json", *flags], ["search", "symmetric multimodal retrieval", *flags],
            ["ask", "--questions-file", str(questions), "--json", "--max-tokens", "48", *flags]]
    done = subprocess.run([PY, "-c", _OFFLINE_RUN, str(log), json.dumps(runs)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=600)
    assert not log.exists(), f"tried to reach the network: {log.read_text()}"
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(x["argv"], x["rc"]) for x in lines if "rc" in x] == [("ingest", 0), ("search", 0), ("ask", 0)]
    answers = [x for x in lines if "answer" in x]
    assert len(answers) == 1 and answers[0]["citations"] and len(answers[0]["question"]) <= 1000
    assert any("truncated" in n for n in answers[0]["notices"])


def test_the_offline_guard_itself_catches_a_connection(tmp_path: Path) -> None:
    log = tmp_path / "outbound.json"
    script = _OFFLINE_RUN.split("from rag.cli import main")[0] + textwrap.dedent("""
        import socket
        try:
            socket.socket().connect(("192.0.2.1", 80))
        except ConnectionRefusedError:
            pass
    """)
    subprocess.run([PY, "-c", script, str(log)], check=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert json.loads(log.read_text()) == ["socket.connect '192.0.2.1'"]
