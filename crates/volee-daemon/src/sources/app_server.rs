//! [`volee_harness::ListingSource::AppServer`]: a shared server that lists the harness's
//! sessions with their states over a Unix socket (Codex's app-server daemon), asked once a
//! second per socket while an agent on it lives, one request at a time. Each agent finds its own
//! thread — by its session id, else the same folder, created after it started, first message =
//! its prompt; never a guess — learns the session id, and takes the thread's status as its
//! `listing` state when it changed.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::time::Duration;

use volee_core::{Millis, Registry};
use volee_listing::codex::CodexThread;

use super::{Sink, SourceMsg};

/// How long one listing may take.
const ASK_TIMEOUT: Duration = Duration::from_millis(800);

pub struct AppServers {
    sink: Sink,
    /// Sockets being asked right now.
    in_flight: HashSet<String>,
}

impl AppServers {
    pub fn new(sink: Sink) -> AppServers {
        AppServers {
            sink,
            in_flight: HashSet::new(),
        }
    }

    /// Ask each app server of live agents for its threads, without waiting.
    pub fn poll(&mut self, registry: &Registry) {
        let sockets: BTreeSet<String> = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| a.listing_socket.clone())
            .collect();
        for socket in sockets {
            if !self.in_flight.insert(socket.clone()) {
                continue;
            }
            let sink = self.sink.clone();
            tokio::spawn(async move {
                let threads = volee_listing::codex::list_threads(Path::new(&socket), ASK_TIMEOUT)
                    .await
                    .map_err(|e| e.to_string());
                sink(SourceMsg::Threads { socket, threads });
            });
        }
    }

    /// An app server's threads: each live agent on it finds its own.
    pub fn on_threads(
        &mut self,
        registry: &mut Registry,
        socket: &str,
        threads: Result<Vec<CodexThread>, String>,
        now: Millis,
    ) {
        self.in_flight.remove(socket);
        let threads = match threads {
            Ok(t) => t,
            Err(e) => {
                // No server (yet): the harness starts it on demand; embedded sessions have none.
                tracing::trace!("app server {socket}: {e}");
                return;
            }
        };
        let mut found = Vec::new();
        for agent in registry.iter() {
            if agent.is_ended() || agent.listing_socket.as_deref() != Some(socket) {
                continue;
            }
            let prompt = volee_harness::listing::positional_prompt(&agent.harness, &agent.command);
            let thread = match agent.session_id.as_deref() {
                Some(id) => threads.iter().find(|t| t.id == id),
                None => volee_listing::codex::match_thread(
                    &threads,
                    &agent.cwd,
                    prompt.as_deref(),
                    agent.created_at / 1000,
                ),
            };
            if let Some(thread) = thread {
                found.push((agent.id.clone(), agent.session_id.is_none(), thread));
            }
        }
        for (id, unnamed, thread) in found {
            if unnamed {
                tracing::info!("agent {id}: app-server thread {}", thread.id);
                registry.edit(&id, |a| a.session_id = Some(thread.id.clone()));
            }
            if let Some(state) = thread.state() {
                let event = format!("app-server {}", thread.status.describe());
                registry.observe(
                    &id,
                    volee_core::observation::listing_poll(now, event, state),
                );
            }
        }
    }
}
