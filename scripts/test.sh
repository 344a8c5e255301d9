#!/usr/bin/env bash
# Install what the tests need and run all of them: lint, types, fast and slow tests (real models, real browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh "[test]"
# Debian's Chromium for the browser tests (Playwright drives it at this path); never a browser downloaded by a test
# tool. The browser tests are part of the suite: without it the run fails here instead of skipping them.
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || true
  if [ ! -x "$CHROMIUM" ]; then
    echo "error: could not install chromium at $CHROMIUM (apt-get install -y chromium, as root); the browser tests" \
      "need it" >&2
    exit 1
  fi
fi
export CHROMIUM
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
