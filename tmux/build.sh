#!/usr/bin/env bash
# Builds volee for the tmux plugin (volee.tmux offers it when the binary is missing), then loads
# it into this tmux server. Runs in a window of its own.
set -u
PLUGIN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
echo "building volee: cargo install --locked --path $PLUGIN_DIR/crates/volee-cli"
if cargo install --locked --path "$PLUGIN_DIR/crates/volee-cli"; then
  "$PLUGIN_DIR/tmux/volee.tmux"
  echo "volee is built and loaded (prefix a: the picker)."
else
  echo "the build failed (see above); the README lists what volee needs."
fi
printf 'press Enter to close this window '
read -r _
