//! Harnesses' own servers, read as the `listing` source of their agents' states.
//!
//! - [`codex`]: the Codex CLI's shared app-server daemon (JSON-RPC over a WebSocket on its Unix
//!   control socket, `tokio-tungstenite`): which threads are loaded, where, with which first
//!   prompt, and whether each runs a turn, waits on an approval or on user input, or is idle.
//! - [`opencode`]: OpenCode's own HTTP server on a loopback port (`reqwest`, its event stream
//!   decoded by `sse-stream`): one watch task per agent folds events and snapshots into a state.
//!
//! The wire is the kept crates' job; what is ours is the meaning: the pure parsers of the
//! servers' JSON (`codex::thread`, `codex::rpc`, `opencode::events`), fuzzed in `fuzz/`
//! (`listing_json`), and the rules that turn them into states. Knowing *which* agent has such a
//! server (its command line, its environment) stays with the caller.

pub mod codex;
pub mod opencode;
