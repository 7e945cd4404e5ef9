#!/usr/bin/env bash
# ccusage 20.0.24, the reference the usage tests compare dshq's token counts
# with (cmd/dshq TestUsage*): installed from npm into the cache
# $HOME/.cache/dshq/ccusage-20.0.24 (its linux-x64 binary comes as an
# optional dependency). Does nothing when it is there. The tests run it with
# --offline and a throw-away HOME only.
set -euo pipefail
dir="${HOME}/.cache/dshq/ccusage-20.0.24"
if [ -x "$dir/node_modules/.bin/ccusage" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: npm is missing: ccusage (the usage tests' reference) cannot be installed" >&2
  exit 1
fi
mkdir -p "$dir"
echo "setup: installing ccusage 20.0.24 into $dir" >&2
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error ccusage@20.0.24 >&2
