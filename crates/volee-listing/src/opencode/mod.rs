//! OpenCode's own HTTP server as the `listing` source of OpenCode agents (measured on 1.18.33,
//! `docs/harnesses/opencode.md`).
//!
//! Started with `--port P --hostname 127.0.0.1`, the TUI serves its whole HTTP API on that loopback
//! port (`../shared/reference/probe/opencode-openapi.json`). For every live OpenCode agent whose
//! command line names such a port (the caller finds it), one task reads the server-sent event
//! stream `GET /event` and, at each (re)connect, one snapshot: `GET /session/status` (busy or
//! retry; an idle session is absent), `GET /permission` and `GET /question` (pending requests of
//! every session). [`ServerView`] folds both into one state: a pending permission or question →
//! needs_you (the status stays `busy` meanwhile, so busy alone cannot tell), busy/retry →
//! working, a session error (not an abort) → failed until the next busy, else idle once a session
//! is known.
//!
//! - `events`: the events, the snapshot and [`ServerView`] (pure);
//! - `http`: requests and the event stream (`reqwest`, `sse-stream`);
//! - `watch`: the task per agent and [`Watches`], which the caller's actor keeps.

mod events;
mod http;
mod watch;

pub use events::{parse_event, parse_snapshot, ServerEvent, ServerView, Snapshot, Status, Tokens};
pub use http::{EventStream, HttpError, Server, MAX_BODY, MAX_EVENT};
pub use watch::{Observation, Report, Update, Wanted, Watches};
