//! The harnesses' own reports of their state, read as the `listing` source.
//!
//! Which reader an agent gets follows its profile's [`volee_harness::ListingSource`], never its
//! name: a status file per process ([`status_file`]), a shared app server that lists sessions
//! over a Unix socket ([`app_server`]), or the harness's own HTTP server with an event stream per
//! agent ([`http_server`]). Each turns what it reads into observations through the registry's one
//! door ([`Registry::observe`]), and records a session id it learns with [`Registry::edit`].
//! Their I/O runs off the actor; results come back as [`SourceMsg`]s.

pub mod app_server;
pub mod http_server;
pub mod status_file;

use std::sync::Arc;

use volee_core::{Millis, Registry};

/// Status files and app servers are asked once a second, only while such an agent lives.
pub const POLL_MS: u64 = 1000;

/// What a source's background work reports to the actor.
#[derive(Debug)]
pub enum SourceMsg {
    /// A watched status-file directory changed.
    StatusFilesChanged,
    /// The sessions an app server lists (or why it could not be asked).
    Threads {
        socket: String,
        threads: Result<Vec<volee_listing::codex::CodexThread>, String>,
    },
    /// What an agent's own server said (agent id, update).
    Server(String, volee_listing::opencode::Update),
}

/// How a source hands a message to the actor.
pub type Sink = Arc<dyn Fn(SourceMsg) + Send + Sync>;

/// Every listing source of the daemon.
pub struct Sources {
    status: status_file::StatusFiles,
    apps: app_server::AppServers,
    servers: http_server::OwnServers,
    last_poll: Millis,
}

impl Sources {
    pub fn new(sink: Sink) -> Sources {
        Sources {
            status: status_file::StatusFiles::new(sink.clone()),
            apps: app_server::AppServers::new(sink.clone()),
            servers: http_server::OwnServers::new(sink),
            last_poll: 0,
        }
    }

    /// When the next poll is due, if any live agent has a polled source.
    pub fn next_poll(&self, registry: &Registry) -> Option<Millis> {
        registry
            .iter()
            .any(|a| !a.is_ended() && (a.status_file.is_some() || a.listing_socket.is_some()))
            .then_some(self.last_poll + POLL_MS)
    }

    /// Poll the status files and app servers when due.
    pub fn poll(&mut self, registry: &mut Registry, now: Millis) {
        if now < self.last_poll + POLL_MS {
            return;
        }
        self.last_poll = now;
        self.status.poll(registry);
        self.apps.poll(registry);
    }

    /// Follow the agents: an event-stream watch per live agent with its own server.
    pub fn sync(&mut self, registry: &Registry, now: Millis) {
        self.servers.sync(registry, now);
    }

    /// A source's report applied; an agent's usage when the report carried it (OpenCode's
    /// server).
    pub fn on_msg(
        &mut self,
        registry: &mut Registry,
        msg: SourceMsg,
        now: Millis,
    ) -> Option<(String, volee_protocol::AgentUsage)> {
        match msg {
            SourceMsg::StatusFilesChanged => self.status.poll(registry),
            SourceMsg::Threads { socket, threads } => {
                self.apps.on_threads(registry, &socket, threads, now)
            }
            SourceMsg::Server(id, update) => {
                return self
                    .servers
                    .on_update(registry, &id, update, now)
                    .map(|usage| (id, usage));
            }
        }
        None
    }

    /// Agent `id` is gone from the registry.
    pub fn forget(&mut self, id: &str) {
        self.status.forget(id);
    }
}
