#!/usr/bin/env bash
# The real Claude Code and Codex clients for dshq restore's tests
# (cmd/dshq/restore_clients_test.go): installed from npm into a cache
# directory, $HOME/.cache/dshq/clients-<versions>, once; does nothing when
# they are there. The tests find them through DSHQ_CLIENTS_DIR, else that
# directory. They run only offline, with a throw-away HOME (the tests see to
# it). `.ci/setup` calls this.
set -euo pipefail
claude_version=2.1.332
codex_version=0.169.0
dir="${DSHQ_CLIENTS_DIR:-$HOME/.cache/dshq/clients-claude-$claude_version-codex-$codex_version}"
if [ -x "$dir/node_modules/.bin/claude" ] && [ -x "$dir/node_modules/.bin/codex" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup-clients: npm is missing (apt-get install -y npm)" >&2
  exit 1
fi
mkdir -p "$dir"
echo "setup-clients: installing @anthropic-ai/claude-code@$claude_version and @openai/codex@$codex_version into $dir" >&2
tmp="$(mktemp -d "$dir.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && echo '{"private":true}' > package.json &&
  npm install --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$claude_version" "@openai/codex@$codex_version" >install.log 2>&1) || {
  cat "$tmp/install.log" >&2
  exit 1
}
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
