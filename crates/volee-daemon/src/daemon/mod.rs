//! The daemon: one actor that owns the registry, the hosts' watches and the clock.
//!
//! Every input — a client request, a host's report, a listing source's answer, a timer — is
//! handled on one task, so the registry has exactly one writer and state changes are ordered.
//! The actor awaits no child process and no host I/O: hosts, sources and requests that need
//! I/O do it on tasks that answer with a [`Msg`].

mod budget;
mod hooks;
mod launch;
mod notifications;
mod pane_events;
mod pane_requests;
mod processes;
mod remote;
mod request_error;
mod requests;
mod rescan;
mod socket;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use volee_core::{AgentRecord, ArbiterConfig, ExitFact, Millis, Registry};
use volee_protocol::{AgentView, Request, Response};
use volee_tmux::connection::{ConnectionEvent, ControlConnection, SessionKey};
use volee_tmux::server::TmuxError;

use crate::config::Config;
use crate::host::tmux::panes::PaneRow;
use crate::host::tmux::{TmuxHost, Viewer};
use crate::host::zellij::watch::ZellijMsg;
use crate::host::zellij::ZellijHost;
use crate::host::{Hosts, PaneRef};
use crate::paths::Paths;
use crate::persist::{self, Loaded};
use crate::screens::Screens;
use crate::typing::Typing;

pub use notifications::desktop_available;
use request_error::user_error;

/// Milliseconds since the epoch.
pub use volee_os::clock::now_ms;

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("a volee daemon is already running (pid {pid})")]
    AlreadyRunning { pid: String },
    #[error("could not set up {}", path.display())]
    Setup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The runtime (or state) directory, or a file in it, is not the user's own.
    #[error("volee's directories are not safe to use")]
    Paths(#[source] crate::paths::PathError),
}

/// What the daemon persists besides the agents.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct DaemonFile {
    format: u32,
    agents: Vec<AgentRecord>,
    /// tmux servers where `volee tmux-init` ran: their status line gets pushed.
    #[serde(default)]
    tmux_servers: Vec<PathBuf>,
    /// Hook files volee placed in a harness's own directory (Grok), with their harness.
    #[serde(default)]
    hook_files: Vec<(PathBuf, String)>,
    /// `volee quiet`: no notifications until then (epoch ms); kept across daemon restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quiet_until: Option<Millis>,
}

/// Where a request's answer goes.
type Reply = oneshot::Sender<Response>;

/// A submit key held back for a pane: the pane and the key.
type SubmitKey = (PaneRef, &'static str);

/// Everything the actor hears.
enum Msg {
    Request(Box<Request>, Reply),
    Watch(String, mpsc::UnboundedSender<Response>),
    /// `volee serve --stdio`'s stream of every local agent.
    WatchAll(mpsc::UnboundedSender<Response>),
    /// What a machine's kept connection said.
    Link(String, crate::machines::link::LinkEvent),
    /// What a zellij session's watch saw.
    Zellij(String, ZellijMsg),
    /// A pane's screen, read after the output of `output_at` settled.
    ScreenRead {
        id: String,
        text: String,
        output_at: Millis,
    },
    /// A pane's exit, asked after a stop or a dead pane without a status.
    ExitRead {
        id: String,
        exit: ExitFact,
    },
    /// A tmux server's panes (resync); `ack` hears when they are applied.
    Panes {
        socket: PathBuf,
        rows: Result<Vec<PaneRow>, TmuxError>,
        /// When the listing was asked for: an agent recorded since is not judged by it.
        asked_at: Millis,
        ack: Option<oneshot::Sender<()>>,
    },
    /// A control connection opened for a session (or why not).
    Connected {
        key: SessionKey,
        conn: Result<ControlConnection, String>,
    },
    /// New harness processes, with their tmux servers' panes: record them.
    Placed(Box<rescan::Placing>),
    /// A launch's pane is open (or could not be): record the agent.
    Opened(Box<launch::Launching>),
    /// The clients viewing a server, asked for a notification.
    Viewers {
        about: notifications::About,
        viewers: Vec<Viewer>,
    },
    /// Typing into agent `id`'s pane failed: nothing is held for it.
    TypingFailed {
        id: String,
    },
    EscalateStop {
        id: String,
    },
    /// A listing source's background work (`sources`).
    Source(crate::sources::SourceMsg),
    /// A discovered agent's version, learnt off the actor (a native binary's `--version` can take
    /// seconds, longer on a harness's first run).
    VersionRead {
        id: String,
        version: String,
    },
    /// The newest past sessions changed (the history thread read the index): the zellij
    /// plugins list them.
    PastSessions(Vec<volee_protocol::zellij::PastSession>),
    /// What an agent's harness recorded of its session's tokens (the history thread read it).
    Usage(String, volee_protocol::AgentUsage),
    Shutdown,
}

/// Run the daemon until it is told to stop. Holds the lock file for its whole life.
pub async fn run(paths: Paths, config: Config) -> Result<(), DaemonError> {
    let setup = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DaemonError::Setup { path, source }
    };
    paths.ensure().map_err(DaemonError::Paths)?;
    let mut lock_opts = std::fs::OpenOptions::new();
    lock_opts.create(true).truncate(false).write(true);
    let lock_file =
        crate::paths::open_private(&paths.lock_file(), lock_opts).map_err(DaemonError::Paths)?;
    let _lock =
        match nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err(_) => {
                return Err(DaemonError::AlreadyRunning {
                    pid: crate::client::read_pid(&paths)
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "unknown".into()),
                })
            }
        };
    // We hold the lock, so a temp file of a save whose writer is gone (killed mid-save) is stale.
    for dir in [&paths.state_dir, &paths.runtime_dir] {
        for path in persist::remove_stale_temp_files(dir) {
            tracing::info!("removed {}, left by a killed save", path.display());
        }
    }
    // We hold the lock, so any socket file left behind is stale.
    let socket = paths.socket();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(setup(&socket))?;
    set_mode(&socket, 0o600).map_err(setup(&socket))?;
    persist::write_atomic(
        &paths.pid_file(),
        format!("{}\n", std::process::id()).as_bytes(),
    )
    .map_err(|e| DaemonError::Setup {
        path: paths.pid_file(),
        source: std::io::Error::other(e.to_string()),
    })?;

    // The profiles, read once: a user's file that cannot be used is skipped, saying why.
    for problem in volee_harness::file::problems() {
        tracing::warn!("profile skipped: {problem}");
    }
    for (name, path, overrides) in volee_harness::file::user_files() {
        let how = if *overrides {
            "overrides the built-in one"
        } else {
            "adds a harness"
        };
        tracing::info!("profile {name} from {}: {how}", path.display());
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let (conn_tx, conn_rx) = mpsc::unbounded_channel();
    crate::session_retention::spawn_daily(paths.data_dir.join("sessions"), &config.sessions);
    let mut daemon = Daemon::new(paths.clone(), config, tx.clone(), conn_tx);
    daemon.load();
    daemon.replay_spool();
    daemon.reload_machines();
    tokio::spawn(socket::accept_loop(listener, tx.clone()));
    daemon.startup_resync().await;
    daemon.run(rx, conn_rx).await;
    daemon.history.stop();

    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(paths.pid_file());
    tracing::info!("daemon stopped");
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The actor.
struct Daemon {
    paths: Paths,
    config: Config,
    registry: Registry,
    /// The multiplexers agents run in, and which agent each watched pane holds.
    hosts: Hosts,
    /// The actor's own inbox, for tasks to answer on.
    tx: mpsc::UnboundedSender<Msg>,
    /// `volee wait`/`watch` streams, by agent id.
    watchers: Vec<(String, mpsc::UnboundedSender<Response>)>,
    /// `WatchAll` streams (`volee serve --stdio` of a machine's connection).
    all_watchers: Vec<mpsc::UnboundedSender<Response>>,
    /// The machines reached over ssh and the mirror of their agents.
    remote: remote::Remote,
    /// What volee typed: echo times and held submit keys.
    typing: Typing<SubmitKey>,
    /// When screens are read, and the rules that classify them.
    screens: Screens,
    /// Hook events lately seen, and volee's hooks files kept under HOME.
    hooks: hooks::HookState,
    /// Notifications: rate limits, quiet mode, the status line's flash.
    notices: notifications::Notices,
    /// Harness processes started outside volee.
    discovery: rescan::Discovery,
    /// The harnesses' own reports of their state.
    sources: crate::sources::Sources,
    /// The past-sessions index, kept up to date on a thread of its own.
    history: crate::history::History,
    /// What tokens cost (`prices.toml`, shipped and the user's).
    prices: crate::prices::Prices,
}

impl Daemon {
    fn new(
        paths: Paths,
        config: Config,
        tx: mpsc::UnboundedSender<Msg>,
        conn_tx: mpsc::UnboundedSender<ConnectionEvent>,
    ) -> Daemon {
        let zellij_tx = tx.clone();
        let zellij = ZellijHost::new(std::sync::Arc::new(move |session, msg| {
            let _ = zellij_tx.send(Msg::Zellij(session, msg));
        }));
        let source_tx = tx.clone();
        let sources = crate::sources::Sources::new(std::sync::Arc::new(move |msg| {
            let _ = source_tx.send(Msg::Source(msg));
        }));
        let history_tx = tx.clone();
        let on_sessions = Box::new(move |sessions| {
            let _ = history_tx.send(Msg::PastSessions(sessions));
        });
        let usage_tx = tx.clone();
        let on_usage = Box::new(move |id, usage| {
            let _ = usage_tx.send(Msg::Usage(id, usage));
        });
        Daemon {
            history: crate::history::History::start(&paths, on_sessions, on_usage),
            prices: {
                let (prices, problem) = crate::prices::Prices::load(&paths.config_dir);
                if let Some(e) = problem {
                    tracing::warn!(
                        "{e}: {}",
                        std::error::Error::source(&e)
                            .map(ToString::to_string)
                            .unwrap_or_default()
                    );
                }
                prices
            },
            screens: Screens::new(paths.config_dir.clone()),
            hosts: Hosts::new(TmuxHost::new(conn_tx), zellij),
            sources,
            paths,
            config,
            registry: Registry::default(),
            tx,
            watchers: Vec::new(),
            all_watchers: Vec::new(),
            remote: remote::Remote::default(),
            typing: Typing::default(),
            hooks: hooks::HookState::default(),
            notices: notifications::Notices::default(),
            discovery: rescan::Discovery::new(),
        }
    }

    fn arbiter(&self) -> ArbiterConfig {
        ArbiterConfig {
            working_window_ms: self.config.working_window.as_millis() as u64,
        }
    }

    fn load(&mut self) {
        match persist::load_json::<DaemonFile>(&self.paths.registry(), now_ms()) {
            Ok(Loaded::Ok(file)) => {
                self.registry = Registry::from_file(volee_core::RegistryFile {
                    format: file.format,
                    agents: file.agents,
                });
                for socket in file.tmux_servers {
                    self.hosts.tmux.set_initialised(&socket, true);
                }
                self.hooks.kept = file.hook_files.into_iter().collect();
                self.notices.quiet_until = file.quiet_until.filter(|u| *u > now_ms());
                tracing::info!("loaded {} agents", self.registry.len());
                self.hosts.reindex(&self.registry);
                self.drop_foreign_restored();
            }
            Ok(Loaded::Missing) => {}
            Ok(Loaded::Corrupt { kept_as, error }) => {
                tracing::error!(
                    "agents.json was corrupt ({error}); kept as {}; rebuilding from tmux",
                    kept_as.display()
                );
            }
            Err(e) => tracing::error!("could not read the registry: {e}"),
        }
    }

    fn save(&mut self) {
        let file = DaemonFile {
            format: volee_core::registry::REGISTRY_FORMAT,
            agents: self.registry.to_file().agents,
            tmux_servers: self.hosts.tmux.servers().iter().cloned().collect(),
            hook_files: self
                .hooks
                .kept
                .iter()
                .map(|(p, h)| (p.clone(), h.clone()))
                .collect(),
            quiet_until: self.notices.quiet_until.filter(|u| *u > now_ms()),
        };
        match persist::save_json(&self.paths.registry(), &file) {
            Ok(()) => self.registry.mark_saved(),
            Err(e) => tracing::error!("could not save the registry: {e}"),
        }
    }

    async fn run(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut conn_rx: mpsc::UnboundedReceiver<ConnectionEvent>,
    ) {
        let mut housekeeping = tokio::time::interval(Duration::from_secs(60));
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        loop {
            self.flush();
            let sleep = self
                .next_deadline()
                .map(|at| Duration::from_millis(at.saturating_sub(now_ms())))
                .unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Shutdown) | None => break,
                    Some(msg) => self.on_msg(msg),
                },
                Some(event) = conn_rx.recv() => {
                    if let Some(event) = self.hosts.tmux.on_event(event) {
                        self.on_host_event(event);
                    }
                }
                _ = tokio::time::sleep(sleep) => self.on_timer(),
                _ = housekeeping.tick() => {
                    self.prune();
                    self.on_new_day(now_ms());
                }
                _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {
                    tracing::info!("SIGTERM");
                    break;
                }
            }
        }
        self.flush();
        if self.registry.is_unsaved() {
            self.save();
        }
    }

    /// The earliest time something is due without a new input: a state that may change, a
    /// settled screen to read, a held submit key, a scan, a poll, a notification summary, the
    /// end of a flash or of quiet.
    fn next_deadline(&self) -> Option<Millis> {
        let states = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| a.decision.recheck_at)
            .min();
        [
            states,
            self.screens.next_due(&self.registry),
            self.typing.next_due(),
            self.discovery.next_scan(&self.config),
            self.sources.next_poll(&self.registry),
            self.notices.next_due(&self.config.notify),
            self.remote.next_due(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_timer(&mut self) {
        let now = now_ms();
        self.release_held();
        for (_, (pane, key)) in self.typing.take_due(now) {
            pane_requests::submit(pane, key, Duration::ZERO);
        }
        self.sources.poll(&mut self.registry, now);
        for (id, out) in self.screens.take_due(&self.registry, now) {
            self.read_screen(&id, out);
        }
        if self
            .discovery
            .next_scan(&self.config)
            .is_some_and(|at| now >= at)
        {
            self.rescan(false, None);
        }
    }

    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Request(req, reply) => self.on_request(*req, reply),
            Msg::Watch(query, tx) => {
                let Some((query, tx)) = self.watch_remote(query, tx) else {
                    return;
                };
                if let Some(error) = self.unknown_machine_query(&query) {
                    let _ = tx.send(error);
                    return;
                }
                self.watch(query, tx);
            }
            Msg::WatchAll(tx) => {
                let _ = tx.send(Response::Agents {
                    agents: self.local_views(true),
                });
                self.all_watchers.push(tx);
            }
            Msg::Link(name, event) => self.on_link(&name, event),
            Msg::Zellij(session, msg) => {
                for event in self.hosts.zellij.on_msg(&session, msg) {
                    self.on_host_event(event);
                }
            }
            Msg::ScreenRead {
                id,
                text,
                output_at,
            } => self.on_screen(&id, &text, output_at),
            Msg::ExitRead { id, exit } => self.record_exit(&id, exit),
            Msg::Panes {
                socket,
                rows,
                asked_at,
                ack,
            } => {
                self.on_panes(&socket, rows, asked_at);
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
            }
            Msg::Connected { key, conn } => self.on_connected(key, conn),
            Msg::Opened(launching) => self.on_opened(*launching),
            Msg::Placed(placing) => {
                let rescan::Placing { new, panes, done } = *placing;
                self.place(new, panes);
                if let Some(done) = done {
                    let _ = done.send(Response::Ok);
                }
            }
            Msg::Viewers { about, viewers } => self.on_viewers(about, viewers),
            Msg::TypingFailed { id } => self.typing.cancel(&id),
            Msg::EscalateStop { id } => self.escalate_stop(&id),
            Msg::Source(msg) => {
                // OpenCode's server reports its tokens with its events.
                if let Some((id, usage)) = self.sources.on_msg(&mut self.registry, msg, now_ms()) {
                    self.on_usage(&id, usage);
                }
            }
            Msg::VersionRead { id, version } => self.on_version(&id, version),
            Msg::PastSessions(sessions) => self.hosts.zellij.show_sessions(sessions),
            Msg::Usage(id, usage) => self.on_usage(&id, usage),
            Msg::Shutdown => {}
        }
    }

    /// `volee wait`/`watch ID` of a local agent.
    fn watch(&mut self, query: String, tx: mpsc::UnboundedSender<Response>) {
        match self.registry.resolve(&query) {
            Ok(agent) => {
                let id = agent.id.clone();
                let _ = tx.send(Response::Agent {
                    agent: agent.view(),
                });
                self.watchers.push((id, tx));
            }
            Err(e) => {
                let _ = tx.send(user_error(&e.to_string(), vec![]));
            }
        }
    }

    /// Re-decide states, notify, persist, answer watchers and show the agents (status line,
    /// zellij plugins).
    fn flush(&mut self) {
        let now = now_ms();
        self.sources.sync(&self.registry, now);
        self.history.sync(&self.registry);
        let transitions = self.registry.reevaluate_all(now, &self.arbiter());
        let state_changed = !transitions.is_empty();
        self.notify_transitions(transitions, now);
        if state_changed {
            self.type_first_prompts();
            self.hosts.sync(&self.registry);
            self.remove_unneeded_hook_files();
        }
        if self.registry.is_unsaved() {
            self.save();
        }
        let changed = self.registry.take_dirty();
        if !changed.is_empty() || std::mem::take(&mut self.notices.status_dirty) {
            let registry = &self.registry;
            self.watchers.retain(|(id, tx)| {
                if !changed.contains(id) {
                    return !tx.is_closed();
                }
                match registry.get(id) {
                    Some(agent) => tx
                        .send(Response::Agent {
                            agent: agent.view(),
                        })
                        .is_ok(),
                    None => {
                        let _ = tx.send(user_error(&format!("agent {id} was removed"), vec![]));
                        false
                    }
                }
            });
            if !changed.is_empty() && !self.all_watchers.is_empty() {
                let agents = self.local_views(true);
                self.all_watchers.retain(|tx| {
                    tx.send(Response::Agents {
                        agents: agents.clone(),
                    })
                    .is_ok()
                });
            }
            self.push_status();
            if !self.hosts.zellij.is_empty() {
                // Remote agents too: the pane lists them as MACHINE:NAME and never focuses one here.
                let views: Vec<AgentView> = self.views(true);
                self.hosts.zellij.show_agents(&views);
            }
        }
    }

    /// The agents of this machine.
    fn local_views(&self, all: bool) -> Vec<AgentView> {
        let mut agents: Vec<&AgentRecord> = self
            .registry
            .iter()
            .filter(|a| all || !a.is_ended())
            .collect();
        agents.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        agents.into_iter().map(AgentRecord::view).collect()
    }

    fn prune(&mut self) {
        let cutoff = now_ms().saturating_sub(self.config.retention.as_millis() as u64);
        let old = self.registry.expired(cutoff);
        for id in &old {
            self.forget(id);
        }
        if !old.is_empty() {
            tracing::info!("pruned {} ended agents", old.len());
        }
    }

    /// Remove an ended agent, its dead pane and everything kept about it.
    fn forget(&mut self, id: &str) {
        let _ = self.forget_for_restore(id);
    }

    /// [`Daemon::forget`], giving back the record (`volee restore` replaces it with the
    /// restored agent, and puts it back if that launch fails).
    fn forget_for_restore(&mut self, id: &str) -> Option<AgentRecord> {
        self.typing.forget(id);
        self.screens.forget(id);
        self.sources.forget(id);
        self.discovery.forget(id);
        self.hosts.tmux.exit_seen(id);
        let agent = self.registry.remove(id)?;
        self.hosts.forget(&agent);
        Some(agent)
    }
}
