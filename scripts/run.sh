#!/usr/bin/env bash
# The main job on a fresh machine: install, ingest the seeds (idempotent), start the app on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False ANONYMIZED_TELEMETRY=False
.venv/bin/python -m rag ingest
exec .venv/bin/python -m rag serve "$@"
