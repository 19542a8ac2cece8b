//! What the hosts report, turned into observations through the registry's one door: pane
//! output, bells, titles, exits, closes; screens read and classified; a tmux server's pane list
//! (resync); sessions watched, lost or gone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use volee_core::{AgentRecord, ExitFact, Millis, NewAgent, Observation};
use volee_protocol::{Host, ProfileFit};
use volee_tmux::connection::{ControlConnection, SessionKey};
use volee_tmux::server::TmuxError;

use super::{now_ms, Daemon, Msg};
use crate::host::tmux::panes::{self, Known, PaneRow};
use crate::host::{HostEvent, PaneEvent, PaneKey, PaneRef};
use crate::screens::Screens;

/// How often a dead pane without a status is asked again before "status unknown".
const EXIT_RETRIES: u32 = 20;

impl Daemon {
    pub(super) fn on_host_event(&mut self, event: HostEvent) {
        let now = now_ms();
        match event {
            HostEvent::Pane(key, what) => {
                if let Some(id) = self.hosts.agent_at(&key, &self.registry) {
                    self.on_pane_event(&id, what, now);
                }
            }
            HostEvent::ServerChanged(socket) => self.resync(&socket, None),
            HostEvent::SessionPanes { session, alive } => {
                // A pane that is no longer listed was closed.
                let closed: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| match PaneKey::of(&a.host) {
                        Some(PaneKey::Zellij { session: s, pane }) => {
                            s == session && !alive.contains(&pane)
                        }
                        _ => false,
                    })
                    .map(|a| a.id.clone())
                    .collect();
                for id in closed {
                    self.registry
                        .observe(&id, Observation::ProcessGone { at: now });
                }
            }
            HostEvent::SessionGone(session) => {
                // The session itself went away (killed, zellij crashed, a reboot): its agents'
                // host is lost, so they can be restored (`volee restore --host zellij[:S]`).
                let gone: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| matches!(&a.host, Host::Zellij { session: s, .. } if *s == session))
                    .map(|a| a.id.clone())
                    .collect();
                for id in gone {
                    self.registry
                        .observe(&id, Observation::HostLost { at: now });
                }
            }
            HostEvent::PluginHello(_) => self.notices.status_dirty = true,
        }
    }

    fn on_pane_event(&mut self, id: &str, what: PaneEvent, now: Millis) {
        match what {
            PaneEvent::Written => {
                let waiting = self
                    .registry
                    .get(id)
                    .filter(|a| a.decision.state == volee_protocol::AgentState::NeedsYou)
                    .and_then(|a| match PaneKey::of(&a.host)? {
                        PaneKey::Zellij { session, pane } => Some((session, pane)),
                        PaneKey::Tmux { .. } => None,
                    });
                let confirming = waiting
                    .is_some_and(|(session, pane)| self.hosts.zellij.confirm(&session, pane));
                if !confirming {
                    self.on_pane_event(id, PaneEvent::Output, now);
                }
            }
            PaneEvent::Output => {
                // The echo of what volee is typing is not the agent's activity.
                if !self.typing.output(id, now) {
                    return;
                }
                self.registry.observe(id, Observation::Output { at: now });
                // Someone waits for this agent to react (`volee send`, `volee wait`).
                if self.watchers.iter().any(|(w, _)| w == id) {
                    self.registry.touch(id);
                }
            }
            PaneEvent::Bell => {
                self.registry.observe(id, Observation::Bell { at: now });
            }
            PaneEvent::Title(title) => {
                // A title set again to the same text is no news: it keeps its age.
                self.registry
                    .observe(id, Observation::Title { at: now, title });
                let read = self
                    .registry
                    .get(id)
                    .is_some_and(|a| self.screens.read_on_title(a, now));
                if read {
                    self.read_screen(id, now);
                }
            }
            PaneEvent::Exit { status, signal } => self.record_exit(
                id,
                ExitFact {
                    at: now,
                    status,
                    signal,
                },
            ),
            PaneEvent::Shown => self.read_initial_screen(id, now),
            PaneEvent::Closed => {
                if self
                    .registry
                    .get(id)
                    .is_some_and(|a| a.signals().exit.is_none())
                {
                    self.registry
                        .observe(id, Observation::ProcessGone { at: now });
                }
            }
            PaneEvent::Screen { text, output_at } => self.on_screen(id, &text, output_at),
            PaneEvent::ModelDiffered => {
                // The screen read from the model may have been wrong: read it again. And once
                // more a moment later, in case tmux's own screen was the one behind (seen once
                // in a full suite run: a prompt in the model, not yet in the capture).
                self.screens.read_again(id);
                if let Some(pane) = self
                    .registry
                    .get(id)
                    .and_then(|a| self.hosts.watched_pane(a))
                {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        pane.check_model();
                    });
                }
            }
            PaneEvent::Pid(pid) => {
                if self.registry.get(id).is_some_and(|a| a.pid.is_none()) {
                    tracing::debug!("agent {id} runs as process {pid}");
                    self.registry.edit(id, |a| a.pid = Some(pid));
                    // Its terminal is watched from now on.
                    self.hosts.sync(&self.registry);
                }
            }
            PaneEvent::Tab(position) => {
                if matches!(self.registry.get(id).map(|a| &a.host), Some(Host::Zellij { tab, .. }) if *tab != position)
                {
                    self.registry.edit(id, |a| {
                        if let Host::Zellij { tab, .. } = &mut a.host {
                            *tab = position;
                        }
                    });
                }
            }
        }
    }

    /// Read agent `id`'s screen (showing its output of `output_at`) and classify it: a pushed
    /// screen at once, else asked of its watched pane on a task.
    pub(super) fn read_screen(&mut self, id: &str, output_at: Millis) {
        let Some(agent) = self.registry.get(id) else {
            return;
        };
        let agent = agent.clone();
        match self.hosts.zellij_screen(&agent, output_at) {
            crate::host::zellij::ZellijScreen::Now(text) => {
                self.on_screen(id, &text, output_at);
                return;
            }
            crate::host::zellij::ZellijScreen::Asked => return,
            crate::host::zellij::ZellijScreen::Unknown => {}
        }
        let agent = &agent;
        let Some(pane) = self.hosts.watched_pane(agent) else {
            return;
        };
        let check = self.screens.check_model(id, now_ms());
        let (tx, id) = (self.tx.clone(), id.to_string());
        tokio::spawn(async move {
            let text = pane.screen(0).await;
            if check {
                // After the read: the check's capture and the model's text are of one moment.
                pane.check_model();
            }
            if let Ok(text) = text {
                let _ = tx.send(Msg::ScreenRead {
                    id,
                    text,
                    output_at,
                });
            }
        });
    }

    /// Classify what a pane shows when volee starts watching it, like a screen read after output:
    /// a prompt already on screen produces no output event.
    pub(super) fn read_initial_screen(&mut self, id: &str, now: Millis) {
        let at = self
            .registry
            .get(id)
            .and_then(|a| Screens::initial_read(a, now));
        if let Some(at) = at {
            self.read_screen(id, at);
        }
    }

    pub(super) fn on_screen(&mut self, id: &str, text: &str, output_at: Millis) {
        let Some(agent) = self.registry.get(id) else {
            return;
        };
        if let Some(found) = self.screens.classify(agent, text, output_at) {
            if let volee_core::Observation::Screen(m) = &found {
                if !self.screens.counts_now(id, m.state, output_at, now_ms()) {
                    return;
                }
            }
            self.registry.observe(id, found);
        }
    }

    /// Ask agent `id`'s pane how its program ended, after `after`; false when its host cannot
    /// be asked.
    pub(super) fn probe_exit(&self, id: &str, after: Duration) -> bool {
        let Some(pane) = self
            .registry
            .get(id)
            .and_then(|a| self.hosts.watched_pane(a))
            .filter(PaneRef::asks_exit)
        else {
            return false;
        };
        let (tx, id) = (self.tx.clone(), id.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            if let Some(exit) = pane.exit().await {
                let _ = tx.send(Msg::ExitRead { id, exit });
            }
        });
        true
    }

    pub(super) fn record_exit(&mut self, id: &str, exit: ExitFact) {
        let Some(agent) = self.registry.get(id) else {
            return;
        };
        if agent.signals().exit.is_some() || agent.is_ended() {
            return;
        }
        tracing::debug!(
            "agent {id}: pane dead, status {:?}, signal {:?}",
            exit.status,
            exit.signal
        );
        let mut exit = exit;
        // tmux 3.3a sometimes leaves a dead pane's process unreaped (a zombie) until some other
        // child of the server exits, so #{pane_dead_status} stays empty: the zombie still holds
        // its wait status in /proc.
        if exit.status.is_none() && exit.signal.is_none() {
            if let Some((status, signal)) = agent.pid.and_then(super::processes::zombie_wait_status)
            {
                exit.status = status;
                exit.signal = signal;
            }
        }
        // A pane can also be marked dead (pty closed) a moment before its process exits: ask
        // again shortly rather than record "status unknown".
        if exit.status.is_none()
            && exit.signal.is_none()
            && self.hosts.tmux.retry_exit(id, EXIT_RETRIES)
            && self.probe_exit(id, Duration::from_millis(50))
        {
            return;
        }
        self.hosts.tmux.exit_seen(id);
        self.registry.observe(id, Observation::Exit(exit));
    }

    /// List a tmux server's panes again on a task (exits missed, panes killed, agents moved);
    /// `ack` hears when the answer is applied.
    pub(super) fn resync(&self, socket: &Path, ack: Option<tokio::sync::oneshot::Sender<()>>) {
        let (tx, socket, asked_at) = (self.tx.clone(), socket.to_path_buf(), now_ms());
        tokio::spawn(async move {
            let rows = panes::list(socket.clone()).await;
            let _ = tx.send(Msg::Panes {
                socket,
                rows,
                asked_at,
                ack,
            });
        });
    }

    /// A tmux server's panes: exits missed, panes killed, agents moved, agents known only from
    /// their `@volee-agent` pane option (the registry file was lost); then every session that
    /// holds a live agent is watched.
    pub(super) fn on_panes(
        &mut self,
        socket: &Path,
        rows: Result<Vec<PaneRow>, TmuxError>,
        asked_at: Millis,
    ) {
        let now = now_ms();
        let rows = match rows {
            Ok(rows) if !rows.is_empty() => rows,
            // No pane at all: a server being killed answers so on its way out (tmux ends once
            // its last session is gone) — its agents' host is lost as when it no longer answers.
            Ok(_) | Err(TmuxError::NoServer { .. }) => {
                // An agent recorded since the listing was asked for (a restore into a new
                // server) is not judged by it.
                let lost: Vec<String> = self
                    .registry
                    .iter()
                    .filter(|a| a.created_at < asked_at)
                    .filter(|a| crate::host::tmux::host_socket(&a.host) == Some(socket))
                    .map(|a| a.id.clone())
                    .collect();
                for id in lost {
                    self.registry
                        .observe(&id, Observation::HostLost { at: now });
                }
                self.hosts.tmux.server_lost(socket);
                return;
            }
            Err(e) => {
                tracing::warn!("resync of {} failed: {e}", socket.display());
                return;
            }
        };
        let known: Vec<Known> = self
            .registry
            .iter()
            .map(|a| Known {
                id: &a.id,
                host: &a.host,
                placement: a.placement.as_ref(),
                pid: a.pid,
                ended: a.is_ended(),
                origin: a.origin,
                fresh: a.created_at >= asked_at,
            })
            .collect();
        let r = panes::reconcile(socket, &rows, &known, now);
        for (id, placement) in r.placed {
            self.registry.edit(&id, |a| a.placement = Some(placement));
        }
        for (id, host, pid) in r.moved {
            self.registry.edit(&id, |a| {
                a.host = host;
                a.pid = pid;
            });
            if let Some(a) = self.registry.get(&id) {
                self.hosts.index(a);
            }
        }
        for row in &r.unknown {
            // A pane being launched right now is recorded by its launch, not rebuilt.
            if self.registry.is_reserved(&row.agent) {
                continue;
            }
            self.rebuild(socket, row, now);
        }
        for (id, exit) in r.exited {
            self.record_exit(&id, exit);
        }
        // Panes of an earlier server at this socket: restorable, and their pids (perhaps
        // another program's after a reboot) are not signalled.
        for id in r.lost {
            tracing::info!("agent {id}: its tmux server was replaced");
            self.registry
                .observe(&id, Observation::HostLost { at: now });
        }
        for (id, pid) in r.gone {
            self.registry
                .observe(&id, Observation::PaneGone { at: now });
            // Some harnesses (Gemini) ignore the hangup of a killed pane and live on,
            // reparented: the agent is stopped, so is its whole process group.
            if let Some(pid) = pid {
                super::processes::end_orphan_group(pid);
            }
        }
        for session in r.sessions {
            self.watch_session(SessionKey {
                socket: socket.to_path_buf(),
                session,
            });
        }
    }

    /// An agent known only from its pane's options: recorded again, dated by its window's
    /// last activity so a quiet agent is idle at once rather than "working" for the first
    /// window.
    fn rebuild(&mut self, socket: &Path, row: &PaneRow, now: Millis) {
        tracing::info!("rebuilt agent {} from its pane option", row.agent);
        let name = if row.name.is_empty() || self.registry.check_kept_name(&row.name).is_err() {
            row.agent.clone()
        } else {
            row.name.clone()
        };
        let harness = if row.harness.is_empty() {
            "generic".into()
        } else {
            row.harness.clone()
        };
        let mut record = AgentRecord::launched(
            NewAgent {
                id: row.agent.clone(),
                name,
                harness,
                command: vec![row.start_command.clone()],
                cwd: row.path.clone(),
                host: row.host(socket),
                harness_version: None,
                profile_fit: ProfileFit::Generic,
                session_id: None,
            },
            now,
            &self.arbiter(),
        );
        record.pid = row.pid;
        record.placement = row.placement.clone();
        if let Some(activity) = row.activity {
            record.created_at = (activity * 1000).min(now);
            record.state_since = record.created_at;
        }
        self.hosts.index(&record);
        self.registry.insert(record);
        if let Some(exit) = row.exit(now) {
            self.registry.observe(&row.agent, Observation::Exit(exit));
        }
    }

    /// Watch a tmux session (a control connection opened on a task).
    pub(super) fn watch_session(&mut self, key: SessionKey) {
        let Some(connect) = self.hosts.tmux.connect(&key) else {
            return;
        };
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let conn = connect.await;
            let _ = tx.send(Msg::Connected { key, conn });
        });
    }

    /// A session's control connection is open: control mode reports only new output, so what
    /// its agents' panes already show (a prompt printed while no daemon ran) is read once now.
    pub(super) fn on_connected(
        &mut self,
        key: SessionKey,
        conn: Result<ControlConnection, String>,
    ) {
        let closed = conn.as_ref().is_ok_and(|c| !c.is_open());
        if !self.hosts.tmux.connected(key.clone(), conn) {
            if closed {
                // It ended before it was kept: what ended it (the session gone) must be seen.
                self.resync(&key.socket, None);
            }
            return;
        }
        let now = now_ms();
        let shown: Vec<String> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter(|a| {
                matches!(&a.host, Host::Tmux { socket, session, .. }
                    if Path::new(socket) == key.socket && *session == key.session)
            })
            .map(|a| a.id.clone())
            .collect();
        for id in shown {
            self.read_initial_screen(&id, now);
        }
    }

    /// Every tmux server volee knows of is listed again (awaited: `volee ls` right after a
    /// restart must see the agents rebuilt from their panes), and zellij sessions watched again.
    pub(super) async fn startup_resync(&mut self) {
        let mut sockets: BTreeSet<PathBuf> = self
            .registry
            .iter()
            .filter_map(|a| crate::host::tmux::host_socket(&a.host).map(Path::to_path_buf))
            .collect();
        sockets.extend(self.hosts.tmux.servers().iter().cloned());
        // With the registry lost, the agents' panes are still marked: look at every server of
        // this user in tmux's socket directory.
        sockets.extend(panes::user_sockets());
        for socket in sockets {
            let asked_at = now_ms();
            let rows = panes::list(socket.clone()).await;
            self.on_panes(&socket, rows, asked_at);
        }
        // zellij agents: watch their sessions again (a session that is gone ends them).
        let zellij: Vec<(String, Vec<(String, String)>)> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| match &a.host {
                Host::Zellij { session, .. } => Some((session.clone(), a.host_env.clone())),
                _ => None,
            })
            .collect();
        for (session, env) in zellij {
            if self.hosts.zellij.watch(&session, &env).is_err() {
                tracing::warn!("cannot watch zellij session {session:?} again");
            }
        }
        self.hosts.sync(&self.registry);
        self.cancel_unfinished_launches();
        self.flush();
        self.remove_unneeded_hook_files();
    }

    /// A discovered agent's version: its profile fit, hence its screen rules, from now on.
    pub(super) fn on_version(&mut self, id: &str, version: String) {
        let Some(a) = self
            .registry
            .get(id)
            .filter(|a| a.harness_version.is_none())
        else {
            return;
        };
        let fit = match volee_harness::profile(&a.harness).and_then(|p| p.measured) {
            Some(range) if range.contains(&version) => ProfileFit::Measured,
            Some(_) => ProfileFit::OtherVersion,
            None => ProfileFit::Generic,
        };
        self.registry.edit(id, |a| {
            a.profile_fit = fit;
            a.harness_version = Some(version);
        });
        self.screens.read_again(id);
    }

    /// Make sure agent `id`'s host watches it (a discovered agent found in a pane).
    pub(super) fn watch_agent(&mut self, id: &str) {
        let Some(agent) = self.registry.get(id) else {
            return;
        };
        match &agent.host {
            Host::Tmux {
                socket, session, ..
            } => {
                let key = SessionKey {
                    socket: socket.into(),
                    session: session.clone(),
                };
                if self.hosts.tmux.is_watched(&key) {
                    // Found with its screen already drawn (a prompt waiting for the user).
                    self.read_initial_screen(id, now_ms());
                } else {
                    self.watch_session(key);
                }
            }
            Host::Zellij { session, .. } => {
                let (session, env) = (session.clone(), agent.host_env.clone());
                if self.hosts.zellij.watch(&session, &env).is_err() {
                    tracing::warn!("could not watch discovered agent's zellij session {session:?}");
                } else {
                    self.hosts.sync(&self.registry);
                }
            }
            _ => {}
        }
    }
}
