#!/usr/bin/env bash
# What the TypeScript client's tests need (clients/ts, @dshq/harness): Node.js
# 20+ with npm (Debian's nodejs and npm when missing), and the package's
# dependencies installed from its committed lockfile with `npm ci`, through an
# npm cache kept under $HOME/.cache/dshq/npm. .ci/setup calls it.
set -euo pipefail
cd "$(dirname "$0")/../clients/ts"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  echo "setup-ts: installing Node.js (apt-get install nodejs npm)" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q nodejs npm
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "setup-ts: Node.js $(node --version) is older than 20, which @dshq/harness needs" >&2
  exit 1
fi
# npm ci reinstalls from the lockfile; skip it when node_modules already matches it.
stamp=node_modules/.dshq-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
npm ci --cache "$HOME/.cache/dshq/npm" --prefer-offline --no-audit --no-fund --loglevel=error
echo "$want" > "$stamp"
