#!/usr/bin/env bash
# zellij's own idle cost, without volee: a zellij server with TABS tabs each running `sleep`, with
# or without volee's plugin loaded (`load_plugins`), attached in a private tmux; prints the
# server's CPU over SECS seconds (clock ticks from /proc). For docs/benchmarks.md ("zellij without
# polling"): the part of the 50-agent idle figure that is zellij's.
#   scripts/zellij-idle-tabs.sh TABS PLUGIN(0|1) SECS [BARS(0|1)]
# ZELLIJ (default: zellij on PATH), WASM (default: the newest plugin build under
# ${CARGO_TARGET_DIR:-target}/zellij-plugin).
set -euo pipefail
tabs=${1:-50} plugin=${2:-1} secs=${3:-60} bars=${4:-1}
zellij=${ZELLIJ:-$(command -v zellij)}
root=$(mktemp -d /tmp/volee-zellij-idle.XXXXXX)
trap 'tmux -S "$root/tmux.sock" kill-server 2>/dev/null || true; rm -rf "$root"' EXIT
mkdir -p "$root"/{s,config,cache/zellij,data,tmp}
config='show_startup_tips false\nshow_release_notes false\nsession_serialization false\ndefault_shell "sh"\n'
if [ "$plugin" = 1 ]; then
  wasm=${WASM:-$(ls -t "${CARGO_TARGET_DIR:-target}"/zellij-plugin/wasm32-wasip1/release/*.wasm | head -1)}
  cp "$wasm" "$root/volee.wasm"
  config="${config}load_plugins {\n    \"file:$root/volee.wasm\"\n}\n"
  printf '"%s" {\n    ReadApplicationState\n    ChangeApplicationState\n    ReadPaneContents\n    ReadCliPipes\n    RunCommands\n    OpenTerminalsOrPlugins\n}\n' \
    "$root/volee.wasm" >"$root/cache/zellij/permissions.kdl"
fi
printf "$config" >"$root/config/config.kdl"
{
  echo "layout {"
  if [ "$bars" = 1 ]; then
    echo '  default_tab_template { pane size=1 borderless=true { plugin location="tab-bar"; }; children; pane size=2 borderless=true { plugin location="status-bar"; }; }'
  fi
  for i in $(seq 1 "$tabs"); do echo "  tab name=\"t$i\" { pane command=\"sleep\" { args \"100000\"; }; }"; done
  echo "}"
} >"$root/layout.kdl"
vars="ZELLIJ_SOCKET_DIR=$root/s ZELLIJ_CONFIG_DIR=$root/config XDG_CACHE_HOME=$root/cache XDG_DATA_HOME=$root/data TMPDIR=$root/tmp"
tmux -S "$root/tmux.sock" new-session -d -s z -x 200 -y 50 \
  "env TERM=xterm-256color $vars $zellij --session idle-tabs --new-session-with-layout $root/layout.kdl"
sleep 15
server=$(pgrep -f "^$zellij --server $root/s" | head -1)
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
t0=$(ticks)
sleep "$secs"
t1=$(ticks)
hz=$(getconf CLK_TCK)
echo "tabs=$tabs plugin=$plugin bars=$bars secs=$secs zellij server: $(echo "scale=3; ($t1 - $t0) * 100 / $hz / $secs" | bc) % of a core"
env $vars "$zellij" kill-session idle-tabs >/dev/null 2>&1 || true
