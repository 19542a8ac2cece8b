//! The requests that act in an agent's pane — send, stop, interrupt, peek — each written once
//! against the pane-host seam. The actor decides and keeps its bookkeeping; the pane I/O is an
//! owned future run on a task.

use std::future::Future;
use std::time::Duration;

use nix::sys::signal::Signal;
use volee_core::{AgentRecord, Observation};
use volee_protocol::{AgentState, AgentView, Response, StateSource};

use super::processes::{signal_group, STOP_GRACE_MS};
use super::request_error::RequestError;
use super::{now_ms, Daemon, Msg};
use crate::host::{HostError, PaneKey, PaneRef, StopBy};
use crate::typing::Submit;

/// Send `key` to `pane` after `delay`, on a task.
pub(super) fn submit(pane: PaneRef, key: &'static str, delay: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if let Err(e) = pane.key(key).await {
            tracing::warn!("submit key {key}: {e}");
        }
    });
}

/// When the profile gives no input rules: keystrokes, Enter at once.
const PLAIN_INPUT: volee_harness::InputRules = volee_harness::InputRules {
    bracketed_paste: false,
    enter_delay_ms: 0,
    submit_key: "Enter",
    interrupt_key: "C-c",
    settle_ms: 0,
};

impl Daemon {
    /// A live agent and a handle on its pane.
    fn live_pane(&self, query: &str) -> Result<(&AgentRecord, PaneRef), RequestError> {
        let agent = self.registry.resolve(query)?;
        if agent.is_ended() {
            return Err(RequestError::Ended {
                id: agent.id.clone(),
                state: agent.state().to_string(),
            });
        }
        let pane = self.hosts.pane(agent).ok_or_else(|| RequestError::NoPane {
            id: agent.id.clone(),
        })?;
        Ok((agent, pane))
    }

    /// Type `text` into the agent per its profile's input rules, then submit it once (unless
    /// `raw`, the text is made inert first: [`volee_harness::sanitize_input`]). Gives the agent
    /// as it was before (so the caller can see it react) and the typing, for a task.
    pub(super) fn send_text(
        &mut self,
        query: &str,
        text: &str,
        raw: bool,
    ) -> Result<
        (
            AgentView,
            impl Future<Output = Result<(), HostError>> + Send,
        ),
        RequestError,
    > {
        let (agent, pane) = self.live_pane(query)?;
        self.check_not_held(&agent.id)?;
        if text.contains('\0') {
            return Err(RequestError::user("the text contains a NUL byte"));
        }
        let (id, before) = (agent.id.clone(), agent.view());
        let input = volee_harness::profile(&agent.harness).map_or(PLAIN_INPUT, |p| p.input);
        // Text sent before the previous text's submit: that one goes first.
        if let Some((pane, key)) = self.typing.take_pending(&id) {
            submit(pane, key, Duration::ZERO);
        }
        // Line breaks survive only inside the one bracketed paste; elsewhere each would submit.
        let pastes = pane.pastes() && input.bracketed_paste;
        let text = if raw {
            text.to_string()
        } else {
            volee_harness::sanitize_input(text, pastes)
        };
        // An answer to a prompt or dialog (`y`, `1`) is a keystroke, not a paste: selection
        // dialogs ignore pasted text.
        let is_answer = before.state == AgentState::NeedsYou
            && text.chars().count() <= 3
            && !text.chars().any(char::is_whitespace);
        let paste = pastes && !is_answer;
        // Some TUIs drop an Enter that arrives with the paste: submit after the profile's delay
        // (or once the pane settles), without holding the daemon up.
        let then = self.typing.typed(
            &id,
            now_ms(),
            &input,
            !text.is_empty(),
            (pane.clone(), input.submit_key),
        );
        let typing = async move {
            if !text.is_empty() {
                pane.type_text(&text, paste).await?;
            }
            if let Submit::After(delay, (pane, key)) = then {
                submit(pane, key, Duration::from_millis(delay));
            }
            Ok(())
        };
        Ok((before, typing))
    }

    /// `volee send`: answered once the text is typed.
    pub(super) fn send(&mut self, query: &str, text: &str, raw: bool, reply: super::Reply) {
        let (before, typing) = match self.send_text(query, text, raw) {
            Ok(x) => x,
            Err(e) => {
                let _ = reply.send(e.response());
                return;
            }
        };
        let (tx, id) = (self.tx.clone(), before.id.clone());
        tokio::spawn(async move {
            let answer = match typing.await {
                Ok(()) => Response::Agent { agent: before },
                Err(e) => {
                    let _ = tx.send(Msg::TypingFailed { id });
                    RequestError::from(e).response()
                }
            };
            let _ = reply.send(answer);
        });
    }

    /// Type the first prompt of each agent that waits for one and whose screen now says idle
    /// (a screen rule, not mere silence: a harness still starting up, or asking a question, is
    /// not ready for it).
    pub(super) fn type_first_prompts(&mut self) {
        let ready: Vec<(String, String)> = self
            .registry
            .iter()
            .filter(|a| {
                a.decision.state == AgentState::Idle && a.decision.source == StateSource::Screen
            })
            .filter_map(|a| Some((a.id.clone(), a.typed_prompt.clone()?)))
            .collect();
        for (id, prompt) in ready {
            self.registry.edit(&id, |a| a.typed_prompt = None);
            match self.send_text(&id, &prompt, false) {
                Ok((_, typing)) => {
                    let tx = self.tx.clone();
                    tokio::spawn(async move {
                        match typing.await {
                            Ok(()) => tracing::info!("agent {id}: typed its first prompt"),
                            Err(e) => {
                                tracing::warn!("agent {id}: could not type its first prompt: {e}");
                                let _ = tx.send(Msg::TypingFailed { id });
                            }
                        }
                    });
                }
                Err(e) => tracing::warn!("agent {id}: could not type its first prompt: {e}"),
            }
        }
    }

    /// `volee stop`: the host's way — its process group signalled (SIGKILL after the grace
    /// time), or its pane closed. A discovered agent's pid is rechecked first: never signal a
    /// pid that is now someone else's process.
    pub(super) fn stop(&mut self, query: &str) -> Result<Response, RequestError> {
        let (agent, pane) = self.live_pane(query)?;
        let (id, pid) = (agent.id.clone(), agent.pid);
        let answer = |d: &Daemon| match d.registry.get(&id) {
            Some(a) => Response::Agent { agent: a.view() },
            None => Response::Ok,
        };
        if !self.still_its_process(&id) {
            self.end_vanished(&id);
            return Ok(answer(self));
        }
        self.registry
            .observe(&id, Observation::StopRequested { at: now_ms() });
        match pane.stop_by() {
            StopBy::Closing => {
                // Closing the pane hangs its program up; the watch then sees the pane gone.
                tokio::spawn(async move {
                    if let Err(e) = pane.close().await {
                        tracing::warn!("close pane: {e}");
                    }
                });
            }
            StopBy::Signal => {
                if let Some(pid) = pid {
                    signal_group(pid, Signal::SIGTERM);
                    signal_group(pid, Signal::SIGHUP);
                }
                self.probe_exit(&id, Duration::from_millis(50));
                self.probe_exit(&id, Duration::from_millis(300));
                let (tx, escalate) = (self.tx.clone(), id.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(STOP_GRACE_MS)).await;
                    let _ = tx.send(Msg::EscalateStop { id: escalate });
                });
            }
        }
        Ok(answer(self))
    }

    /// The grace time of a stop is over: SIGKILL for an agent that ignored SIGTERM.
    pub(super) fn escalate_stop(&mut self, id: &str) {
        let live = self.registry.get(id).is_some_and(|a| !a.is_ended());
        if !live {
            return;
        }
        if !self.still_its_process(id) {
            self.end_vanished(id);
            return;
        }
        if let Some(pid) = self.registry.get(id).and_then(|a| a.pid) {
            tracing::info!("agent {id} ignored SIGTERM; sending SIGKILL");
            signal_group(pid, Signal::SIGKILL);
        }
        self.probe_exit(id, Duration::from_millis(100));
    }

    /// `volee interrupt`: the profile's interrupt key.
    pub(super) fn interrupt(
        &self,
        query: &str,
    ) -> Result<impl Future<Output = Result<Response, RequestError>> + Send, RequestError> {
        let (agent, pane) = self.live_pane(query)?;
        let key = volee_harness::profile(&agent.harness).map_or("C-c", |p| p.input.interrupt_key);
        Ok(async move {
            pane.key(key).await?;
            Ok(Response::Ok)
        })
    }

    /// `volee peek`: the last `lines` lines of the agent's screen, as plain text. An ended
    /// agent's pane, where the host keeps it (tmux: remain-on-exit), else the last screen the
    /// host pushed.
    pub(super) fn peek(
        &self,
        query: &str,
        lines: u32,
    ) -> Result<impl Future<Output = Result<Response, RequestError>> + Send, RequestError> {
        let agent = self.registry.resolve(query)?;
        if PaneKey::of(&agent.host).is_none() {
            return Err(RequestError::NoPane {
                id: agent.id.clone(),
            });
        }
        let pushed = self.hosts.pushed_screen(agent);
        let pane = self
            .hosts
            .pane(agent)
            .filter(|_| !(agent.is_ended() && pushed.is_some()));
        Ok(async move {
            let text = match pane {
                // zellij 0.45.1 answers a command-line action after at most 1 s: when its
                // screen thread is slower (a loaded machine), `dump-screen` prints nothing and
                // succeeds. The screen the host last pushed is then the best there is.
                Some(pane) => match pane.screen(lines.max(1)).await? {
                    t if t.trim().is_empty() => pushed.unwrap_or(t),
                    t => t,
                },
                None => pushed.unwrap_or_default(),
            };
            let mut kept: Vec<String> = text
                .lines()
                .map(|l| volee_view::plain_text(l, 4096))
                .collect();
            while kept.last().is_some_and(|l| l.is_empty()) {
                kept.pop();
            }
            let skip = kept.len().saturating_sub(lines as usize);
            Ok(Response::Text {
                text: kept[skip..].join("\n"),
            })
        })
    }
}
