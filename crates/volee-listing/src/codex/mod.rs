//! A small client of the Codex CLI's shared app-server daemon (daemon mode, the default since
//! 0.171): which Codex threads are loaded, in which folder, with which first prompt, and whether
//! each is running a turn, waiting on an approval or on user input, or idle.
//!
//! The daemon's control socket (`$CODEX_HOME/app-server-control/app-server-control.sock`, CODEX_HOME
//! defaulting to `~/.codex`) speaks **WebSocket over a Unix socket**: an HTTP/1.1 upgrade, then one
//! JSON-RPC message per text frame, without a `"jsonrpc"` field. The exchange is
//! `initialize{clientInfo}` → (notification `initialized`) → `thread/loaded/list` →
//! `thread/list{includedThreadIds, limit}` (→ `thread/read{threadId}` for a loaded thread the list
//! left out). Schema: `../shared/reference/probe/codex-app-server-schema/` (`ThreadStatus` =
//! `notLoaded | idle | systemError | active{activeFlags: [waitingOnApproval | waitingOnUserInput]}`).
//!
//! - `thread`: `Thread`/`ThreadStatus` from JSON, their meaning, [`match_thread`] (pure);
//! - `rpc`: the JSON-RPC messages and what an incoming one is to a waiting caller (pure);
//! - `client`: the WebSocket (`tokio-tungstenite` over a tokio `UnixStream`) and the listing.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod client;
pub mod rpc;
#[cfg(test)]
mod testdata;
mod thread;

pub use client::{list_threads, MAX_MESSAGE};
pub use thread::{match_thread, CodexThread, ThreadStatus, CREATED_SLACK_SECS};

/// `clientInfo.name` sent with `initialize`. The app-server makes the **first** client name it
/// hears the process-wide originator (`set_default_originator`, write-once): every later thread
/// of that daemon, the user's TUI sessions included, would carry it in its rollout `originator`
/// and in the `originator`/User-Agent headers of its model requests (measured on 0.171.0 with
/// the name `volee`: the TUI's requests went out as `originator: volee`,
/// `User-Agent: volee/0.171.0 …`), and Codex treats non-first-party originators differently. This
/// reserved name is exempt from that (upstream `initialize_processor`), so a listing by volee
/// leaves the user's sessions as they are; the title still says who is asking.
pub const CLIENT_NAME: &str = "codex_app_server_daemon";

/// The control socket of the daemon serving `codex_home` (a user's `~/.codex`).
pub fn socket_in(codex_home: &Path) -> PathBuf {
    codex_home
        .join("app-server-control")
        .join("app-server-control.sock")
}

/// The control socket for this process's environment: `$CODEX_HOME`, else `$HOME/.codex`.
pub fn default_socket() -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".codex"))
        })?;
    Some(socket_in(&home))
}

#[derive(Debug, thiserror::Error)]
pub enum CodexServerError {
    #[error(
        "could not connect to the Codex app-server at {path} (a Codex TUI starts it on demand; \
         `codex app-server daemon start` starts it by hand)"
    )]
    Connect {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the Codex app-server did not answer within {0:?} (`codex app-server daemon restart` \
         restarts it)"
    )]
    Timeout(Duration),
    #[error("i/o error talking to the Codex app-server")]
    Io(#[source] std::io::Error),
    #[error("the Codex app-server refused the WebSocket upgrade: {0}")]
    Handshake(String),
    #[error("WebSocket error talking to the Codex app-server")]
    WebSocket(#[source] tokio_tungstenite::tungstenite::Error),
    #[error("a message from the Codex app-server exceeds {0} bytes")]
    TooLarge(usize),
    #[error("the Codex app-server closed the connection{0}")]
    Closed(String),
    #[error("the Codex app-server answered {method} with error {code}: {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("unexpected message from the Codex app-server: {0}")]
    Malformed(String),
}
