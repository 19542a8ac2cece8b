//! volee's zellij plugin (wasm32-wasip1): reports the session's terminal panes, their screens,
//! bells and closes to the volee daemon over a long-lived CLI pipe, takes the daemon's commands
//! over one-shot pipes, and, opened as a pane, shows the agents and launches new ones.
//!
//! The protocol is `volee_protocol::zellij`; what the pane shows and how keys act is
//! `volee_view::zellij` (pure and tested natively); [`plugin`] is the thin shell between them and
//! zellij-tile. The same wasm runs as a background plugin (`load_plugins`) and as a UI pane.
//!
//! Builds only for `wasm32-wasip1`: cargo reads `.cargo/config.toml` from the current directory
//! only, so a build started elsewhere without `--target` stops here instead of producing a
//! useless native binary.

#[cfg(not(target_arch = "wasm32"))]
compile_error!(
    "volee's zellij plugin builds only for wasm32-wasip1: run cargo inside zellij-plugin/ \
     (its .cargo/config.toml sets the target) or pass --target wasm32-wasip1"
);
#[cfg(not(target_arch = "wasm32"))]
fn main() {}

#[cfg(target_arch = "wasm32")]
mod plugin;

#[cfg(target_arch = "wasm32")]
use zellij_tile::prelude::*;

#[cfg(target_arch = "wasm32")]
register_plugin!(plugin::VoleePlugin);
