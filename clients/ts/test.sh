#!/usr/bin/env bash
# make test's TypeScript step: @dshq/harness's tests (node:test, compiled with
# tsc) against real nats-server, dshq and Go SDK processes. Without Node.js it
# is skipped with one line outside CI and fails in CI. Output: node's spec
# reporter, then its closing summary as one plain line.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then
    echo "clients/ts: Node.js is missing (CI=true): run .ci/setup" >&2
    exit 1
  fi
  echo "clients/ts: Node.js is missing: the TypeScript tests are skipped (make setup installs it)"
  exit 0
fi
bash ../../.ci/setup-ts.sh # npm ci when node_modules does not match the lockfile
npx tsc -p .
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT
status=0
node --test --test-concurrency=1 --test-timeout=600000 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" \
  dist/test/ || status=$?
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tap" | tail -1)
fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$tap" | tail -1)
skipped=$(sed -n 's/^# skipped \([0-9]*\)$/\1/p' "$tap" | tail -1)
echo "clients/ts: ${pass:-0} passed, ${fail:-0} failed, ${skipped:-0} skipped"
exit $status
