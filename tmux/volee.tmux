#!/usr/bin/env bash
# volee's tmux plugin: `run-shell /path/to/volee/tmux/volee.tmux` in tmux.conf, or TPM (its
# entry point is ../volee.tmux). The binary does the work: `volee tmux-init` is idempotent.
# When the binary is missing it says how to get it and offers to build it; never a silent no-op.
# It prints nothing: `run-shell` would show its output in the active pane.
set -u
CURRENT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PLUGIN_DIR="$(cd "$CURRENT_DIR/.." && pwd)"
CARGO_BIN="${CARGO_HOME:-${HOME:-}/.cargo}/bin"

# On PATH, else cargo's bin dir (what `cargo install` fills), else a build inside the plugin.
find_volee() {
  local candidate
  if candidate="$(command -v volee)"; then
    printf '%s' "$candidate"
    return 0
  fi
  for candidate in "$CARGO_BIN/volee" "$PLUGIN_DIR/target/release/volee"; do
    if [ -x "$candidate" ]; then
      printf '%s' "$candidate"
      return 0
    fi
  done
  return 1
}

# tmux expands formats (`#`) and strftime (`%`) in messages and prompts: both are written twice.
tmux_text() {
  local text="${1//\#/##}"
  printf '%s' "${text//\%/%%}"
}

# Sets CLIENT (the user's client used last) and SESSION (its session's id) once a client is
# attached: when tmux starts, TPM runs this file before the first client is, and a message
# without a client is lost. Control-mode clients have no status line. Fails when the server
# goes away first. While tmux still reads its config (TPM runs from it) there is no session yet
# and `list-clients` fails ("no current target"): the server answering `show-options -g` is
# still there, so that is waited out too.
wait_for_client() {
  local clients last polls=0
  while :; do
    if ! clients="$(tmux list-clients -F '#{client_activity} #{client_control_mode} #{session_id} #{client_name}' 2>/dev/null)"; then
      tmux show-options -gv status >/dev/null 2>&1 || return 1
      clients=""
    fi
    last="$(printf '%s\n' "$clients" | awk '$2 != "1" && $4 != ""' | sort -rn | head -n 1)"
    if [ -n "$last" ]; then
      SESSION="$(printf '%s' "$last" | cut -d' ' -f3)"
      CLIENT="$(printf '%s' "$last" | cut -d' ' -f4-)"
      return 0
    fi
    polls=$((polls + 1))
    # Every second while tmux starts; then less often, for a server that runs detached.
    if [ "$polls" -lt 60 ]; then sleep 1; else sleep 15; fi
  done
}

# A message on CLIENT; DELAY 0 keeps it until a key is pressed (tmux before 3.2 has no -d).
show() {
  local text delay="$2"
  text="$(tmux_text "$1")"
  if [ -n "$delay" ]; then
    tmux display-message -c "$CLIENT" -d "$delay" "$text" 2>/dev/null && return 0
  fi
  tmux display-message -c "$CLIENT" "$text"
}

# The plugin's path as it is, or it contains a character tmux's command parser would read.
plain_path() {
  case "$1" in
    *[!A-Za-z0-9_./+,@=-]*) return 1 ;;
  esac
}

# No binary: offer to build it when cargo is there, else (or when declined) say how to get it.
missing_binary() {
  local install="cargo install --locked --path $PLUGIN_DIR/crates/volee-cli"
  local cargo=""
  if command -v cargo >/dev/null 2>&1 || [ -x "$CARGO_BIN/cargo" ]; then cargo=yes; fi
  if [ -n "$cargo" ] && plain_path "$CURRENT_DIR"; then
    # Exit status 0 once the build window is open; 1 for any other key (tmux 3.3 and later:
    # before, confirm-before does not wait and exits 0).
    tmux confirm-before -t "$CLIENT" \
      -p "volee is not installed: build it now in a new window (cargo install, a few minutes)? (y/n)" \
      "new-window -t '$SESSION:' -n volee-build '$CURRENT_DIR/build.sh'" && return 0
  fi
  show "volee is not installed. Get it with: $install (volee looked on PATH, in $CARGO_BIN and in $PLUGIN_DIR/target/release)" 0
}

if ! VOLEE="$(find_volee)"; then
  # In the background: TPM waits for this file, and the question waits for the user.
  (wait_for_client && missing_binary) </dev/null >/dev/null 2>&1 &
  exit 0
fi
SOCKET="$(tmux display-message -p '#{socket_path}')"
# tmux-init's warnings and errors, shown to the user once a client is attached.
said="$("$VOLEE" tmux-init --socket "$SOCKET" 2>&1)"
if [ -n "$said" ]; then
  said="volee: $(printf '%s' "$said" | tr '\n' ' ')"
  (wait_for_client && show "$said" "") </dev/null >/dev/null 2>&1 &
fi
exit 0
