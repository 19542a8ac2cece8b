//! The volee daemon and its client.
//!
//! One daemon per user (per `VOLEE_HOME`), started on demand by any `volee` command. It is the only
//! writer of the agent registry (`agents.json`), owns one tmux control-mode connection per session
//! that holds a watched agent, turns what it reads into states with the arbiter of `volee-core`,
//! and pushes the summary into tmux's `@volee-status`. Clients speak newline-delimited JSON
//! (`volee-protocol`) over a 0600 Unix socket in a 0700 directory; peers of another uid are refused.

pub mod client;
pub mod config;
pub mod daemon;
pub mod discovery;
pub mod handover;
pub mod history;
pub mod host;
pub mod instrument;
pub mod ledger;
pub mod logging;
pub mod machines;
pub mod notify;
pub mod paths;
pub mod persist;
pub mod prices;
pub mod push;
pub mod screens;
pub mod session_retention;
pub mod sources;
pub mod typing;
pub mod worktree;

pub use client::{ensure_daemon, Client, ClientError};
pub use config::Config;
pub use paths::Paths;
