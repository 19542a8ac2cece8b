#!/usr/bin/env bash
# TPM's entry point: TPM runs the *.tmux files at a plugin's root (`set -g @plugin '…/volee'`,
# then prefix I). volee's own file is tmux/volee.tmux, which also works with `run-shell`.
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tmux/volee.tmux" "$@"
