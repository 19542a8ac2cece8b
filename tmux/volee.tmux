#!/usr/bin/env bash
# volee's tmux plugin (TPM-style): `run-shell /path/to/volee/tmux/volee.tmux` in tmux.conf,
# or `set -g @plugin …` with TPM. The binary does the work: `volee tmux-init` is idempotent.
CURRENT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VOLEE="$(command -v volee || true)"
[ -z "$VOLEE" ] && [ -x "$CURRENT_DIR/../target/release/volee" ] && VOLEE="$CURRENT_DIR/../target/release/volee"
if [ -z "$VOLEE" ]; then
  tmux display-message "volee: binary not found (cargo install --path crates/volee-cli)"; exit 0
fi
SOCKET="$(tmux display-message -p '#{socket_path}')"
"$VOLEE" tmux-init --socket "$SOCKET" 2>&1 | while read -r line; do tmux display-message "volee: $line"; done
