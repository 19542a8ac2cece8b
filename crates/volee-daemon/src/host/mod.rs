//! The pane hosts: the multiplexers agents run in, behind one interface.
//!
//! The actor speaks to a host in three ways: it asks for an owned handle on an agent's pane
//! ([`PaneRef`]: type text, send a key, read the screen, read its exit, close) whose I/O runs on a
//! task, never on the actor; it hands a host what the host's own watchers read and gets back
//! [`HostEvent`]s, each about a pane ([`PaneKey`]) or a whole server/session; and it keeps the
//! host's watches in line with the registry ([`Hosts::sync`]). Everything multiplexer-specific —
//! formats, control connections, the zellij command line and plugin stream — is in
//! [`tmux`] and [`zellij`]. Which agent a pane holds is an index, not a scan.

pub mod tmux;
pub mod zellij;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use volee_core::{AgentRecord, ExitFact, Millis, Registry};
use volee_protocol::{Host, ScreenSource};

pub use self::zellij::ZellijPane;

/// Why a host could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Tmux(#[from] volee_tmux::server::TmuxError),
    #[error(transparent)]
    Zellij(#[from] volee_zellij::ZellijError),
    /// tmux answered a command with an error.
    #[error("tmux: {0}")]
    Refused(String),
    /// A command line could not be built (a NUL byte, say).
    #[error("{0}")]
    BadArgument(String),
    /// tmux printed something volee cannot read.
    #[error("{0}")]
    Unexpected(String),
    /// The session the agent would run in cannot be watched.
    #[error("could not watch tmux session {session:?}: {why}")]
    Unwatched { session: String, why: String },
    /// The tmux session asked for does not exist.
    #[error("tmux session {0:?} does not exist")]
    NoSession(String),
}

/// One pane, wherever it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PaneKey {
    Tmux { socket: PathBuf, pane: String },
    Zellij { session: String, pane: ZellijPane },
}

impl PaneKey {
    /// The pane of an agent's host, if it has one.
    pub fn of(host: &Host) -> Option<PaneKey> {
        match host {
            Host::Tmux { socket, pane, .. } => Some(PaneKey::Tmux {
                socket: socket.into(),
                pane: pane.clone(),
            }),
            Host::Zellij { session, pane, .. } => Some(PaneKey::Zellij {
                session: session.clone(),
                pane: ZellijPane::parse(pane)?,
            }),
            _ => None,
        }
    }
}

/// What a host saw of one pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaneEvent {
    /// New output.
    Output,
    /// Its pty was written to (zellij: volee watches the agent's terminal, which cannot tell
    /// drawing from a title update): output, unless the agent waits for its user — then only
    /// if its screen changed ([`zellij::ZellijHost::confirm`]), since a program may rewrite its
    /// title while a prompt waits (Codex blinks it once a second).
    Written,
    Bell,
    Title(String),
    /// Its program ended, with what is known of how.
    Exit {
        status: Option<i32>,
        signal: Option<i32>,
    },
    /// Its screen as it already is, seen when watching starts (not new output): read it once.
    Shown,
    /// The pane closed without an exit being seen.
    Closed,
    /// Its tab's position (zellij).
    Tab(u32),
    /// Its screen, read because volee asked, showing the output of `output_at`.
    Screen {
        text: String,
        output_at: Millis,
    },
    /// The process it runs (zellij's plugin says; tmux panes come with theirs).
    Pid(u32),
    /// A check found its screen model different from the host's own screen (tmux): the model
    /// now has the host's screen; read it again, and check once more a moment later.
    ModelDiffered,
}

/// What a host reports to the actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    Pane(PaneKey, PaneEvent),
    /// A tmux server's panes must be listed again (a window closed, the layout or the sessions
    /// changed, a control connection ended).
    ServerChanged(PathBuf),
    /// The panes a zellij session lists now: an agent's pane not among them closed.
    SessionPanes {
        session: String,
        alive: HashSet<ZellijPane>,
    },
    /// A zellij session is gone.
    SessionGone(String),
    /// A volee plugin connected to a zellij session: it must be told the agents again.
    PluginHello(String),
}

/// How an agent is stopped in its host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopBy {
    /// Its process group is signalled (tmux keeps the dead pane for the user to read).
    Signal,
    /// Its pane is closed, which hangs its program up.
    Closing,
}

/// An owned handle on one pane: its I/O runs wherever the future is polled.
#[derive(Clone)]
pub enum PaneRef {
    Tmux(tmux::TmuxPane),
    Zellij(zellij::ZellijPaneRef),
}

impl PaneRef {
    /// Can text be delivered as one bracketed paste (else it is typed as keys)?
    pub fn pastes(&self) -> bool {
        matches!(self, PaneRef::Tmux(_))
    }

    pub fn stop_by(&self) -> StopBy {
        match self {
            PaneRef::Tmux(_) => StopBy::Signal,
            PaneRef::Zellij(_) => StopBy::Closing,
        }
    }

    /// Type `text`, as a bracketed paste when `paste` (and the host can).
    pub async fn type_text(&self, text: &str, paste: bool) -> Result<(), HostError> {
        match self {
            PaneRef::Tmux(p) => p.type_text(text, paste).await,
            PaneRef::Zellij(p) => p.type_text(text).await,
        }
    }

    /// Send one key, named as tmux names keys (`Enter`, `C-c`, `Escape`).
    pub async fn key(&self, key: &str) -> Result<(), HostError> {
        match self {
            PaneRef::Tmux(p) => p.key(key).await,
            PaneRef::Zellij(p) => p.key(key).await,
        }
    }

    /// The screen (with up to `history` lines above it where the host keeps them).
    pub async fn screen(&self, history: u32) -> Result<String, HostError> {
        match self {
            PaneRef::Tmux(p) => p.screen(history).await,
            PaneRef::Zellij(p) => p.screen().await,
        }
    }

    /// How its program ended, asked now; None when it has not (or the host cannot tell on
    /// demand: zellij reports exits itself).
    pub async fn exit(&self) -> Option<ExitFact> {
        match self {
            PaneRef::Tmux(p) => p.exit().await,
            PaneRef::Zellij(_) => None,
        }
    }

    /// Can its exit be asked on demand ([`PaneRef::exit`])?
    pub fn asks_exit(&self) -> bool {
        matches!(self, PaneRef::Tmux(_))
    }

    /// Have the host compare its screen model of the pane with its own screen (tmux; zellij
    /// keeps none).
    pub fn check_model(&self) {
        if let PaneRef::Tmux(p) = self {
            p.check_model();
        }
    }

    /// Close the pane.
    pub async fn close(&self) -> Result<(), HostError> {
        match self {
            PaneRef::Tmux(p) => p.close().await,
            PaneRef::Zellij(p) => p.close().await,
        }
    }
}

/// Every host, and which agent each watched pane holds.
pub struct Hosts {
    pub tmux: tmux::TmuxHost,
    pub zellij: zellij::ZellijHost,
    /// Pane → agent id (the newest agent in that pane: pane ids come back after a server restart).
    index: HashMap<PaneKey, String>,
}

impl Hosts {
    pub fn new(tmux: tmux::TmuxHost, zellij: zellij::ZellijHost) -> Hosts {
        Hosts {
            tmux,
            zellij,
            index: HashMap::new(),
        }
    }

    /// The live agent in pane `key`.
    pub fn agent_at(&self, key: &PaneKey, registry: &Registry) -> Option<String> {
        let id = self.index.get(key)?;
        registry
            .get(id)
            .filter(|a| !a.is_ended() && PaneKey::of(&a.host).as_ref() == Some(key))
            .map(|a| a.id.clone())
    }

    /// Agent `agent` was recorded, or its host changed.
    pub fn index(&mut self, agent: &AgentRecord) {
        self.index.retain(|_, id| *id != agent.id);
        if let Some(key) = PaneKey::of(&agent.host) {
            self.index.insert(key, agent.id.clone());
        }
    }

    /// The whole index again, live agents last so they win a shared pane.
    pub fn reindex(&mut self, registry: &Registry) {
        self.index.clear();
        let (ended, live): (Vec<&AgentRecord>, Vec<&AgentRecord>) =
            registry.iter().partition(|a| a.is_ended());
        for a in ended.into_iter().chain(live) {
            if let Some(key) = PaneKey::of(&a.host) {
                self.index.insert(key, a.id.clone());
            }
        }
    }

    /// A handle on agent `agent`'s pane, when its host is one volee can act in.
    pub fn pane(&self, agent: &AgentRecord) -> Option<PaneRef> {
        match &agent.host {
            Host::Tmux {
                socket,
                session,
                pane,
                ..
            } => Some(PaneRef::Tmux(self.tmux.pane(socket, session, pane))),
            Host::Zellij { session, pane, .. } => {
                let pane = ZellijPane::parse(pane)?;
                self.zellij
                    .pane(session, pane, &agent.host_env)
                    .map(PaneRef::Zellij)
            }
            _ => None,
        }
    }

    /// A handle on agent `agent`'s pane only when reading it costs no process: a tmux pane
    /// whose session is watched (zellij pushes its screens instead).
    pub fn watched_pane(&self, agent: &AgentRecord) -> Option<PaneRef> {
        match self.pane(agent)? {
            PaneRef::Tmux(p) if p.watched() => Some(PaneRef::Tmux(p)),
            _ => None,
        }
    }

    /// The last screen a host pushed for agent `agent`'s pane (zellij pushes screens; tmux is
    /// asked).
    pub fn pushed_screen(&self, agent: &AgentRecord) -> Option<String> {
        match PaneKey::of(&agent.host)? {
            PaneKey::Zellij { session, pane } => self.zellij.screen(&session, pane),
            PaneKey::Tmux { .. } => None,
        }
    }

    /// Agent `agent`'s zellij screen showing the output of `output_at` (tmux panes are read
    /// through their [`PaneRef`]).
    pub fn zellij_screen(
        &mut self,
        agent: &AgentRecord,
        output_at: Millis,
    ) -> zellij::ZellijScreen {
        match PaneKey::of(&agent.host) {
            Some(PaneKey::Zellij { session, pane }) => self.zellij.read(&session, pane, output_at),
            _ => zellij::ZellijScreen::Unknown,
        }
    }

    /// Where agent `agent`'s screen is read from (None: it has no pane volee reads).
    pub fn screen_source(&self, agent: &AgentRecord) -> Option<ScreenSource> {
        let source = |kind: &str| ScreenSource {
            kind: kind.into(),
            checks: 0,
            differences: 0,
        };
        match &agent.host {
            Host::Tmux {
                socket,
                session,
                pane,
                ..
            } => {
                let key = volee_tmux::connection::SessionKey {
                    socket: socket.into(),
                    session: session.clone(),
                };
                if !self.tmux.is_modelled(&key, pane) {
                    return Some(source("capture"));
                }
                let checks = self
                    .tmux
                    .model_checks(std::path::Path::new(socket), pane)
                    .unwrap_or_default();
                Some(ScreenSource {
                    checks: checks.checks,
                    differences: checks.differences,
                    ..source("model")
                })
            }
            Host::Zellij { .. } => Some(source("plugin")),
            _ => None,
        }
    }

    /// Keep the hosts' watches in line with the live agents: control connections of sessions
    /// without one close, zellij watches follow their agents' panes.
    pub fn sync(&mut self, registry: &Registry) {
        self.tmux.keep_watching(registry);
        self.zellij.keep_watching(registry);
    }

    /// Agent `agent` is gone from the registry.
    pub fn forget(&mut self, agent: &AgentRecord) {
        self.index.retain(|_, id| *id != agent.id);
        match PaneKey::of(&agent.host) {
            Some(PaneKey::Tmux { socket, pane }) => {
                self.tmux.forget_checks(&socket, &pane);
                // Its server gone, its pane id may be another pane's on a new server there.
                if agent.signals().host_lost.is_none() {
                    tmux::close_if_dead(socket, pane);
                }
            }
            Some(PaneKey::Zellij { session, pane }) => self.zellij.forget_pane(&session, pane),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volee_core::{ArbiterConfig, ExitFact, NewAgent, Observation};
    use volee_protocol::ProfileFit;

    fn agent(id: &str, pane: &str) -> AgentRecord {
        AgentRecord::launched(
            NewAgent {
                id: id.into(),
                name: id.into(),
                harness: "generic".into(),
                command: vec!["sh".into()],
                cwd: "/".into(),
                host: Host::Tmux {
                    socket: "/tmp/s".into(),
                    session: "w".into(),
                    window: "@1".into(),
                    pane: pane.into(),
                },
                harness_version: None,
                profile_fit: ProfileFit::Generic,
                session_id: None,
            },
            1,
            &ArbiterConfig::default(),
        )
    }

    #[tokio::test]
    async fn a_pane_holds_its_live_agent_even_after_a_server_restart_reused_its_id() {
        let (conn_tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let mut hosts = Hosts::new(
            tmux::TmuxHost::new(conn_tx),
            zellij::ZellijHost::new(std::sync::Arc::new(|_, _| {})),
        );
        let mut registry = Registry::default();
        registry.insert(agent("old", "%0"));
        registry.observe(
            "old",
            Observation::Exit(ExitFact {
                at: 2,
                status: Some(0),
                signal: None,
            }),
        );
        registry.reevaluate("old", 3, &ArbiterConfig::default());
        registry.insert(agent("new", "%0"));
        hosts.reindex(&registry);
        let key = PaneKey::Tmux {
            socket: "/tmp/s".into(),
            pane: "%0".into(),
        };
        assert_eq!(hosts.agent_at(&key, &registry).as_deref(), Some("new"));
        // The index follows an agent that moved, and never answers with an ended agent.
        registry.edit("new", |a| {
            if let Host::Tmux { pane, .. } = &mut a.host {
                *pane = "%5".into();
            }
        });
        hosts.index(registry.get("new").unwrap());
        assert_eq!(hosts.agent_at(&key, &registry), None);
        let moved = PaneKey::Tmux {
            socket: "/tmp/s".into(),
            pane: "%5".into(),
        };
        assert_eq!(hosts.agent_at(&moved, &registry).as_deref(), Some("new"));
    }

    #[test]
    fn zellij_panes_are_numbers_inside_and_terminal_ids_at_the_edge() {
        let host = Host::Zellij {
            session: "s".into(),
            tab: 0,
            pane: "terminal_7".into(),
        };
        assert_eq!(
            PaneKey::of(&host),
            Some(PaneKey::Zellij {
                session: "s".into(),
                pane: ZellijPane(7)
            })
        );
        assert_eq!(ZellijPane(7).terminal_id(), "terminal_7");
        assert_eq!(PaneKey::of(&Host::None), None);
    }
}
