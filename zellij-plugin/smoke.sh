#!/usr/bin/env bash
# Hand-run smoke test of the plugin against a real zellij, isolated from the user's own:
# private tmux server, ZELLIJ_SOCKET_DIR/CONFIG_DIR, XDG_CACHE_HOME (pre-seeded permissions) and
# TMPDIR under one temp dir. Prints a transcript with latencies and CPU; exits non-zero on the
# first expectation that fails.
#
#   zellij-plugin/smoke.sh [PATH/TO/volee_zellij_plugin.wasm]
#
# zellij: $ZELLIJ, else `zellij` on PATH, else ../shared/bin/zellij-0.45.1 beside the repo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
wasm="${1:-$here/target/wasm32-wasip1/release/volee_zellij_plugin.wasm}"
[ -f "$wasm" ] || { echo "no $wasm: cargo build --release in $here first" >&2; exit 2; }
zj="${ZELLIJ:-$(command -v zellij || true)}"
[ -n "$zj" ] || zj="$here/../../shared/bin/zellij-0.45.1"
[ -x "$zj" ] || { echo "no zellij found (set ZELLIJ)" >&2; exit 3; }
command -v tmux >/dev/null || { echo "no tmux" >&2; exit 3; }

base="$(mktemp -d /tmp/volee-zj-smoke.XXXXXX)"
mkdir -p "$base"/{sock,config,cache/zellij,data,tmp}
chmod 700 "$base/sock"
cp "$wasm" "$base/volee.wasm"
plugin="$base/volee.wasm"
cat >"$base/config/config.kdl" <<EOF
show_startup_tips false
show_release_notes false
session_serialization false
default_shell "bash"
load_plugins {
    "file:$plugin" {
        volee_bin "$base/bin/volee"
    }
}
EOF
# A stand-in `volee` for the launch prompt: records its argv, fails like a CLI error.
mkdir -p "$base/bin"
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"%s"\necho "error: the daemon is a stand-in" >&2\nexit 2\n' \
    "$base/launch.argv" >"$base/bin/volee"
chmod +x "$base/bin/volee"
# Grants are keyed by the bare path of a file: plugin ("file:…" keys are ignored).
cat >"$base/cache/zellij/permissions.kdl" <<EOF
"$plugin" {
    ReadApplicationState
    ChangeApplicationState
    ReadPaneContents
    ReadCliPipes
    RunCommands
    OpenTerminalsOrPlugins
}
EOF
export ZELLIJ_SOCKET_DIR="$base/sock" ZELLIJ_CONFIG_DIR="$base/config" XDG_CACHE_HOME="$base/cache" \
    XDG_DATA_HOME="$base/data" TMPDIR="$base/tmp" TERM=xterm-256color
session=S
tsock="volee-zj-smoke-$$"
reader=""
cleanup() {
    "$zj" kill-session "$session" >/dev/null 2>&1 || true
    tmux -L "$tsock" kill-server >/dev/null 2>&1 || true
    [ -n "$reader" ] && kill "$reader" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$base"
}
trap cleanup EXIT
trap 'echo "smoke.sh: line $LINENO failed" >&2' ERR

ms() { date +%s%3N; }
say() { printf '%s\n' "$*"; }
fail() { say "FAIL: $*"; say "--- stream:"; cat "$base/stream.out" || true; exit 1; }
out="$base/stream.out"
# wait_line FROM_LINE PATTERN TIMEOUT_MS → prints the first matching line after FROM_LINE with its
# delay from $t0.
wait_line() {
    local from=$1 pattern=$2 limit=$3 start line
    start=$(ms)
    while :; do
        line="$(tail -n +"$((from + 1))" "$out" | grep -m1 -E "$pattern" || true)"
        if [ -n "$line" ]; then
            say "  +$(( ${line%% *} - t0 )) ms: ${line#* }" | cut -c1-220
            return 0
        fi
        [ $(( $(ms) - start )) -lt "$limit" ] || fail "no line matching $pattern within $limit ms"
        sleep 0.02
    done
}
lines() { wc -l <"$out"; }
zpipe() { "$zj" --session "$session" pipe --name volee -- "$1"; }
# Every plugin instance answers a broadcast command: one line each.
all_ok() { [ -n "$1" ] && [ -z "$(printf '%s\n' "$1" | grep -vx ok)" ]; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

say "zellij: $zj ($("$zj" --version)); plugin: $wasm ($(stat -c %s "$wasm") bytes); dir: $base"
tmux -L "$tsock" -f /dev/null new-session -d -s z -x 160 -y 45 \
    "env ZELLIJ_SOCKET_DIR=$base/sock ZELLIJ_CONFIG_DIR=$base/config XDG_CACHE_HOME=$base/cache XDG_DATA_HOME=$base/data TMPDIR=$base/tmp TERM=xterm-256color $zj --session $session"
for _ in $(seq 100); do
    if "$zj" list-sessions -s 2>/dev/null | grep -x "$session" >/dev/null; then break; fi
    sleep 0.1
done
sleep 1
server="$(pgrep -f -- "--server $base/sock" || true)"
server="${server%%$'\n'*}"
[ -n "$server" ] || fail "the zellij server did not start"

say "1. stream pipe: zellij --session $session pipe --name volee-stream --args v=1 (one line on stdin starts it)"
mkfifo "$base/stream.in"
(
    exec 3<>"$base/stream.in"
    "$zj" --session "$session" pipe --name volee-stream --args v=1 <&3 |
        while IFS= read -r l; do printf '%s %s\n' "$(ms)" "$l"; done >"$out"
) &
reader=$!
sleep 0.5
n=$(lines); t0=$(ms); echo start >"$base/stream.in"
wait_line "$n" '"type":"hello"' 3000
wait_line "$n" '"type":"panes"' 3000

say "2. command pipe: agents, watching terminal_0"
t0=$(ms); reply="$(zpipe '{"type":"agents","version":1,"agents":[],"watch":[0]}')"
say "  reply '$reply' in $(( $(ms) - t0 )) ms"; all_ok "$reply" || fail "agents reply $reply"

say "3. typing in the visible watched pane → Screen (PaneRenderReport)"
n=$(lines); t0=$(ms); tmux -L "$tsock" send-keys -t z 'echo visible-marker' Enter
wait_line "$n" '"type":"screen","pane":0,.*"visible-marker","' 3000

say "4. a new tab hides terminal_0 → Panes with tab_active false"
n=$(lines); t0=$(ms); "$zj" --session "$session" action new-tab --name second >/dev/null
wait_line "$n" '"id":0,"tab":0,[^}]*"tab_active":false' 3000

say "5. output in the hidden watched pane → Screen (0.5 s poll of get_pane_scrollback)"
n=$(lines); t0=$(ms); "$zj" --session "$session" action write-chars --pane-id terminal_0 $'echo hidden-marker\n'
wait_line "$n" '"type":"screen","pane":0,.*"hidden-marker","' 3000

say "6. printf '\\a' in the hidden pane → Bell"
n=$(lines); t0=$(ms); "$zj" --session "$session" action write-chars --pane-id terminal_0 $'printf "\\a"\n'
wait_line "$n" '"type":"bell","tab":0,"panes":\[0\]' 3000

say "7. OSC title in the hidden pane → Panes (get_pane_info poll)"
n=$(lines); t0=$(ms); "$zj" --session "$session" action write-chars --pane-id terminal_0 $'printf "\\033]2;agent-title\\007"\n'
wait_line "$n" '"id":0,[^}]*"title":"agent-title"' 3000

say "8. CPU of the zellij server (plugin included), 10 s each"
for mode in polling idle; do
    if [ $mode = idle ]; then zpipe '{"type":"agents","version":1,"agents":[],"watch":[]}' >/dev/null; fi
    sleep 0.5; c0=$(cpu_ticks); sleep 10; c1=$(cpu_ticks)
    say "  $mode (watch $([ $mode = idle ] && echo '[]' || echo '[0], hidden')): $(( (c1 - c0) * 10 )) ms CPU in 10 s"
done
zpipe '{"type":"agents","version":1,"agents":[],"watch":[0]}' >/dev/null

say "9. version mismatches"
t0=$(ms); say "  stream v=99: $("$zj" --session "$session" pipe --name volee-stream --args v=99 <<<x | head -n1)"
say "  command version 2: $(zpipe '{"type":"focus","version":2,"pane":0}')"

say "10. focus command brings terminal_0's tab back"
n=$(lines); t0=$(ms); reply="$(zpipe '{"type":"focus","version":1,"pane":0}')"
say "  reply '$reply'"; all_ok "$reply" || fail "focus reply $reply"
wait_line "$n" '"id":0,"tab":0,[^}]*"tab_active":true' 3000

say "11. closing terminal_1 → Closed"
n=$(lines); t0=$(ms); "$zj" --session "$session" action close-pane --pane-id terminal_1 >/dev/null
wait_line "$n" '"type":"closed","pane":1' 3000

say "12. the UI pane (floating), with two agents"
agents='[{"id":"k3f9","name":"fix-auth","harness":"claude","harness_version":null,"profile_fit":"measured","origin":"launched","state":"needs_you","state_source":"hooks","state_since":"2026-01-01T00:00:00Z","evidence":"","exit_status":null,"pid":1,"cwd":"/","session_id":null,"host":{"kind":"zellij","session":"S","tab":0,"pane":"terminal_0"},"title":"\u001b]0;evil\u0007 title"},{"id":"p2x1","name":"refactor","harness":"codex","harness_version":null,"profile_fit":"measured","origin":"launched","state":"working","state_source":"screen","state_since":"2026-01-01T00:00:00Z","evidence":"","exit_status":null,"pid":2,"cwd":"/","session_id":null,"host":{"kind":"tmux","socket":"/s","session":"w","window":"@1","pane":"%1"},"title":null}]'
# The same URL and configuration as in load_plugins: zellij shows the background instance.
say "  $("$zj" --session "$session" action launch-or-focus-plugin --floating --configuration "volee_bin=$base/bin/volee" "file:$plugin")"
sleep 1
reply="$(zpipe "{\"type\":\"agents\",\"version\":1,\"agents\":$agents,\"watch\":[0]}")"
all_ok "$reply" || fail "agents reply $reply"
sleep 0.5
tmux -L "$tsock" capture-pane -p -t z | grep -E 'volee|needs you|working|select' | sed 's/^/  | /'
tmux -L "$tsock" send-keys -t z j Enter
sleep 0.5
tmux -L "$tsock" capture-pane -p -t z | grep -E 'not in this zellij session' | sed 's/^/  | /' ||
    fail "Enter on a tmux agent did not say it is elsewhere"
say "  (l opens the launch prompt:)"
tmux -L "$tsock" send-keys -t z l
sleep 0.3
tmux -L "$tsock" capture-pane -p -t z | grep -E 'launch|generic|claude' | sed 's/^/  | /'
say "  (generic, command line 'echo hi', enter: runs the stand-in volee, shows its stderr)"
tmux -L "$tsock" send-keys -t z Enter
tmux -L "$tsock" send-keys -t z -l 'echo hi'
tmux -L "$tsock" send-keys -t z Enter
sleep 1
tmux -L "$tsock" capture-pane -p -t z | grep -E 'launch failed' | sed 's/^/  | /' ||
    fail "no launch failure shown"
say "  argv: $(tr '\n' ' ' <"$base/launch.argv")"
c0=$(cpu_ticks); sleep 10; c1=$(cpu_ticks)
say "  CPU with the UI pane shown (1 s age refresh; terminal_0 visible, so no polling): $(( (c1 - c0) * 10 )) ms in 10 s"
tmux -L "$tsock" send-keys -t z q
sleep 0.5
c0=$(cpu_ticks); sleep 10; c1=$(cpu_ticks)
say "  CPU after q hid the pane: $(( (c1 - c0) * 10 )) ms in 10 s"

say "13. the stream ends with the session; ok"
