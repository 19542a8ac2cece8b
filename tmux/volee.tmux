#!/usr/bin/env bash
# volee's tmux plugin: `run-shell /path/to/volee/tmux/volee.tmux` in tmux.conf, or TPM (its
# entry point is ../volee.tmux). The binary does the work: `volee tmux-init` is idempotent.
# When the binary is missing it says how to get it and offers to build it; never a silent no-op.
set -u
CURRENT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PLUGIN_DIR="$(cd "$CURRENT_DIR/.." && pwd)"

# On PATH, else cargo's bin dir (what `cargo install` fills), else a build inside the plugin.
VOLEE="$(command -v volee || true)"
for candidate in "${CARGO_HOME:-$HOME/.cargo}/bin/volee" "$PLUGIN_DIR/target/release/volee"; do
  [ -z "$VOLEE" ] && [ -x "$candidate" ] && VOLEE="$candidate"
done

# tmux expands formats in display-message: a `#` in a path must be written `##`.
tmux_text() { printf '%s' "${1//#/##}"; }

if [ -z "$VOLEE" ]; then
  install="cargo install --locked --path $PLUGIN_DIR/crates/volee-cli"
  tmux display-message -d 0 "volee: the volee binary is not installed. Get it with: $(tmux_text "$install")"
  # Offer to build it, in a window of its own (the build takes a few minutes). A path tmux's
  # command parser would split is not offered: the message above says what to run.
  case "$PLUGIN_DIR" in
    *"'"*|*'"'*|*';'*) ;;
    *)
      if command -v cargo >/dev/null 2>&1; then
        tmux confirm-before -p "volee is not built: build it now with cargo (a few minutes)? (y/n)" \
          "new-window -n volee-build '$CURRENT_DIR/build.sh'"
      fi
      ;;
  esac
  exit 0
fi
SOCKET="$(tmux display-message -p '#{socket_path}')"
"$VOLEE" tmux-init --socket "$SOCKET" 2>&1 | while read -r line; do
  tmux display-message "volee: $(tmux_text "$line")"
done
