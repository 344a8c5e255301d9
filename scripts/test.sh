#!/usr/bin/env bash
# Install what the tests need and run all of them: lint, types, fast and slow tests (real models, real browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh "[test]"
if ! command -v chromium >/dev/null 2>&1; then
  # Debian's Chromium for the browser tests; never a browser downloaded by a test tool.
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will be skipped" >&2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False ANONYMIZED_TELEMETRY=False
export TEST_ARTIFACTS=${TEST_ARTIFACTS:-$PWD/test-artifacts}
.venv/bin/ruff check rag ui eval bench tests
.venv/bin/mypy rag ui eval bench
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
