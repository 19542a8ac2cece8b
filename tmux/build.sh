#!/usr/bin/env bash
# Builds volee for the tmux plugin (volee.tmux offers it when the binary is missing), then loads
# it into this tmux server. Runs in a window of its own.
set -u
PLUGIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# cargo on PATH, else where rustup puts it (a tmux server started outside a login shell may
# not have it on PATH).
CARGO="$(command -v cargo || printf '%s' "${CARGO_HOME:-${HOME:-}/.cargo}/bin/cargo")"
echo "building volee: cargo install --locked --path $PLUGIN_DIR/crates/volee-cli"
if "$CARGO" install --locked --path "$PLUGIN_DIR/crates/volee-cli"; then
  "$PLUGIN_DIR/tmux/volee.tmux"
  echo "volee is built and loaded (prefix a: the picker)."
else
  echo "the build failed (see above); the README lists what volee needs."
fi
printf 'press Enter to close this window '
read -r _
