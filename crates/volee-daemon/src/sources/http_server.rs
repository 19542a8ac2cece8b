//! [`volee_harness::ListingSource::HttpServer`]: the harness's own HTTP server on the loopback
//! port its command line names (OpenCode `--port`), one event-stream watch per live agent
//! (`volee_listing::opencode`), read as its `listing` state and session id. A resumed session's
//! first prompt, which the harness ignores on its command line, is handed over through it —
//! only right after the launch, so a restarted daemon never types it again.

use volee_core::{Millis, Registry};
use volee_listing::opencode::{Report, Update, Wanted, Watches};
use volee_protocol::Origin;

use super::{Sink, SourceMsg};

/// How long after its launch an agent's first prompt may still be handed over.
const PROMPT_WINDOW_MS: u64 = 60_000;

pub struct OwnServers {
    watches: Watches,
    report: Report,
}

impl OwnServers {
    pub fn new(sink: Sink) -> OwnServers {
        OwnServers {
            watches: Watches::default(),
            report: std::sync::Arc::new(move |id, update| sink(SourceMsg::Server(id, update))),
        }
    }

    /// Watch the server of every live agent whose command line names one; stop watching ended
    /// ones.
    pub fn sync(&mut self, registry: &Registry, now: Millis) {
        let wanted = registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| {
                let port = volee_harness::listing::server_port(&a.harness, &a.command)?;
                Some(Wanted {
                    id: a.id.clone(),
                    port,
                    session: a.session_id.clone(),
                    prompt: (a.origin == Origin::Launched && now < a.created_at + PROMPT_WINDOW_MS)
                        .then(|| volee_harness::listing::resume_prompt(&a.harness, &a.command))
                        .flatten(),
                })
            })
            .collect();
        self.watches.sync(wanted, &self.report);
    }

    /// A server's event or snapshot: the agent's `listing` state and session id; its usage when
    /// the event changed it (for the daemon to keep, price and hold to a budget).
    pub fn on_update(
        &mut self,
        registry: &mut Registry,
        id: &str,
        update: Update,
        now: Millis,
    ) -> Option<volee_protocol::AgentUsage> {
        let tokens_event = matches!(
            &update,
            Update::Event(
                volee_listing::opencode::ServerEvent::SessionTokens { .. }
                    | volee_listing::opencode::ServerEvent::StepFinished { .. }
            )
        );
        if let Update::PromptDelivered(result) = &update {
            match result {
                Ok(n) => tracing::info!("agent {id}: first prompt handed over ({n} attempts)"),
                Err(e) => tracing::warn!("agent {id}: first prompt not handed over: {e}"),
            }
        }
        let (observation, session) = self.watches.apply(id, &update)?;
        let agent = registry.get(id).filter(|a| !a.is_ended())?;
        if let (None, Some(session)) = (&agent.session_id, session) {
            tracing::info!("agent {id}: server session {session}");
            registry.edit(id, |a| a.session_id = Some(session));
        }
        if let Some((state, event)) = observation {
            let reason = self.watches.reason(id);
            registry.observe(
                id,
                volee_core::observation::listing_poll_because(now, event, state, reason),
            );
        }
        if tokens_event {
            self.watches.usage(id)
        } else {
            None
        }
    }
}
