#!/usr/bin/env bash
# The zellij plugin may depend directly only on the wasm-safe shared crates and zellij-tile
# (+ serde/serde_json), and the shared crates must not bring anything native with them.
# Fails otherwise. Run from anywhere; needs the wasm32-wasip1 target's lock file only (no build).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tree() {
    cargo tree --locked --manifest-path "$here/Cargo.toml" --target wasm32-wasip1 -e normal --prefix none "$@"
}

# The first line is the plugin itself.
direct="$(tree --depth 1 | tail -n +2 | awk '{print $1}' | sort -u)"
bad="$(printf '%s\n' "$direct" | grep -Evx 'volee-protocol|volee-view|zellij-tile|serde|serde_json' || true)"
if [ -n "$bad" ]; then
    echo "error: the zellij plugin depends directly on crates outside volee-protocol, volee-view, zellij-tile, serde, serde_json:" >&2
    printf '  %s\n' $bad >&2
    exit 1
fi

# The shared crates stay pure: no runtime, no OS bindings, no other volee crate.
for shared in volee-protocol volee-view; do
    native="$(tree -p "$shared" | awk '{print $1}' |
        grep -Ex 'tokio|reqwest|hyper|mio|nix|libc|rustix|volee-(core|daemon|tmux|zellij|harness|procscan|store|cli)' | sort -u || true)"
    if [ -n "$native" ]; then
        echo "error: $shared pulls native-only crates into the plugin:" >&2
        printf '  %s\n' $native >&2
        exit 1
    fi
done
echo "ok: direct dependencies:" $direct
