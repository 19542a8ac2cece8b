//! What the user is told: a notification when an agent needs them, failed or ended a long turn
//! (a tmux message on the clients not showing its pane, the status line's flash, bell and OSC 9
//! on their terminals, the desktop, a push to the phone, the user's command — rate-limited,
//! `volee quiet`), and the status line itself. Which clients view a server is asked on a task.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use volee_core::{Millis, Transition};
use volee_protocol::{AgentState, AgentView, Host, Origin};

use super::{now_ms, Daemon, Msg};
use crate::host::tmux::{host_socket, Viewer};
use crate::notify::{Kind, Limiter, NotifyConfig, Push};
use crate::push::{PushTarget, Pusher};

/// Notifications and the status line's own state.
#[derive(Debug, Default)]
pub(super) struct Notices {
    limiter: Limiter,
    /// `volee quiet`: no notifications until then (epoch ms).
    pub(super) quiet_until: Option<Millis>,
    flash_until: Millis,
    flashing: bool,
    /// The status line must be drawn again though no agent changed (a flash ended, quiet).
    pub(super) status_dirty: bool,
    /// The task that pushes to the phone, started with the first push.
    pusher: Option<Pusher>,
    /// Servers whose `@volee-status-cost` is `on` (read at `tmux-init`).
    pub(super) cost_sockets: BTreeSet<PathBuf>,
    /// The day's spend so far (the local day starting at `.0`, epoch ms; USD), from the usage
    /// ledger.
    pub(super) today: Option<(u64, f64)>,
}

/// The epoch milliseconds at which the local day of `now_ms` began (this machine's time zone;
/// the UTC day when it cannot say).
pub(super) fn local_day_start(now_ms: u64) -> u64 {
    use chrono::{Local, TimeZone};
    let utc = now_ms - now_ms % 86_400_000;
    let Some(now) = Local.timestamp_millis_opt(now_ms as i64).single() else {
        return utc;
    };
    now.date_naive()
        .and_hms_opt(0, 0, 0)
        .and_then(|midnight| Local.from_local_datetime(&midnight).earliest())
        .map_or(utc, |m| m.timestamp_millis().max(0) as u64)
}

impl Notices {
    /// When a summary is due, a flash ends or quiet ends.
    pub(super) fn next_due(&self, cfg: &NotifyConfig) -> Option<Millis> {
        [
            self.limiter.summary_due(cfg),
            self.flashing.then_some(self.flash_until),
            self.quiet_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn quiet(&self, now: Millis) -> bool {
        self.quiet_until.is_some_and(|u| now < u)
    }

    /// Hand `push` to the pushing task (started now if it is not running yet).
    fn push(&mut self, target: &PushTarget, push: Push) {
        if self.pusher.is_none() {
            match Pusher::start() {
                Ok(pusher) => self.pusher = Some(pusher),
                Err(e) => {
                    tracing::warn!("push to {}: no HTTP client: {e}", target.host());
                    return;
                }
            }
        }
        if let Some(pusher) = &self.pusher {
            pusher.send(target, push);
        }
    }
}

/// What a notification is about, while its viewers are asked.
#[derive(Debug)]
pub(super) enum About {
    /// One transition of one agent.
    Agent { id: String, kind: Kind, now: Millis },
    /// The notifications the burst limit held back.
    Summary { text: String },
}

impl Daemon {
    /// Notify about the state transitions of a flush; end a flash or quiet that is over.
    pub(super) fn notify_transitions(&mut self, transitions: Vec<Transition>, now: Millis) {
        for t in transitions {
            // A turn began or ended: its usage is read now (its file's writes are heard too).
            self.history.usage_now(&t.id);
            let working_ms = if t.before == AgentState::Working {
                t.lasted_ms
            } else {
                0
            };
            tracing::debug!(
                "{} {} -> {} ({})",
                t.id,
                t.before,
                t.after,
                self.registry
                    .get(&t.id)
                    .map_or("", |a| a.decision.evidence.as_str())
            );
            if let Some(kind) =
                crate::notify::classify(t.before, t.after, working_ms, self.config.notify.long_turn)
            {
                self.notify(&t.id, kind, now);
            }
        }
        if let Some(held) = self.notices.limiter.take_summary(now, &self.config.notify) {
            self.notify_summary(held);
        }
        // The flash ends: the plain status line again.
        if self.notices.flashing && now >= self.notices.flash_until {
            self.notices.flashing = false;
            self.notices.status_dirty = true;
        }
        // Quiet ends: notifications on again, and the status line says so.
        if self.notices.quiet_until.is_some_and(|u| now >= u) {
            self.notices.quiet_until = None;
            self.registry.mark_unsaved();
            self.notices.status_dirty = true;
        }
    }

    /// Tell the user about agent `id` (one transition), by every channel the config enables —
    /// unless notifications are off or quiet, the limiter holds it, or the user is looking at
    /// the agent's pane right now (its server's clients are asked first, on a task).
    pub(super) fn notify(&mut self, id: &str, kind: Kind, now: Millis) {
        if !self.config.notify.enabled || self.notices.quiet(now) {
            return;
        }
        let about = About::Agent {
            id: id.to_string(),
            kind,
            now,
        };
        // A machine's agent has no pane here: every client volee shows the status line to is
        // told.
        if id.contains(':') {
            let asks: Vec<_> = self
                .watched_sockets()
                .iter()
                .map(|s| self.hosts.tmux.viewers(s))
                .collect();
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let viewers = all_viewers(asks).await;
                let _ = tx.send(Msg::Viewers { about, viewers });
            });
            return;
        }
        let Some(socket) = self.registry.get(id).and_then(|a| host_socket(&a.host)) else {
            self.on_viewers(about, Vec::new());
            return;
        };
        let (viewers, tx) = (self.hosts.tmux.viewers(socket), self.tx.clone());
        tokio::spawn(async move {
            let viewers = viewers.await;
            let _ = tx.send(Msg::Viewers { about, viewers });
        });
    }

    /// A machine's agent changed state from `was` to `agent`: told like a local one, by its
    /// address `MACHINE:ID`.
    pub(super) fn notify_remote(&mut self, was: &AgentView, agent: &AgentView, now: Millis) {
        // How long it worked: since the working state began there (RFC 3339 from the machine;
        // one that does not parse counts no turn as long).
        let working_ms = match was.state {
            AgentState::Working => humantime::parse_rfc3339(&was.state_since)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |since| now.saturating_sub(since.as_millis() as Millis)),
            _ => 0,
        };
        tracing::debug!(
            "{} {} -> {} ({})",
            agent.address(),
            was.state,
            agent.state,
            agent.evidence
        );
        if let Some(kind) = crate::notify::classify(
            was.state,
            agent.state,
            working_ms,
            self.config.notify.long_turn,
        ) {
            self.notify(&agent.address(), kind, now);
        }
    }

    /// Every tmux server volee shows its status line on, or holds a live agent on.
    fn watched_sockets(&self) -> BTreeSet<PathBuf> {
        let mut sockets: BTreeSet<PathBuf> = self.hosts.tmux.servers().clone();
        sockets.extend(
            self.registry
                .iter()
                .filter(|a| !a.is_ended())
                .filter_map(|a| host_socket(&a.host).map(Path::to_path_buf)),
        );
        sockets
    }

    /// One message for the notifications the burst limit held back, on every attached client
    /// of every server volee watches.
    fn notify_summary(&mut self, held: u32) {
        if held == 0 || self.notices.quiet(now_ms()) {
            return;
        }
        let text = format!(
            "volee: {held} more agent change{} (volee ls)",
            if held == 1 { "" } else { "s" }
        );
        let sockets: BTreeSet<PathBuf> = self
            .registry
            .iter()
            .filter(|a| !a.is_ended())
            .filter_map(|a| host_socket(&a.host).map(Path::to_path_buf))
            .collect();
        let asks: Vec<_> = sockets.iter().map(|s| self.hosts.tmux.viewers(s)).collect();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let viewers = all_viewers(asks).await;
            let _ = tx.send(Msg::Viewers {
                about: About::Summary { text },
                viewers,
            });
        });
    }

    /// The clients of a notification's server are known: tell them, unless one shows the pane.
    pub(super) fn on_viewers(&mut self, about: About, viewers: Vec<Viewer>) {
        let (id, kind, now) = match about {
            About::Summary { text } => {
                tracing::info!("notify: {text}");
                let push = crate::notify::push_for_summary(&text);
                self.deliver(&text, &viewers, push);
                return;
            }
            About::Agent { id, kind, now } => (id, kind, now),
        };
        let Some(view) = self.view_of(&id) else {
            return;
        };
        // Only what the user cannot see: a client showing the pane needs no ping.
        if let Host::Tmux { pane, .. } = &view.host {
            if viewers.iter().any(|c| &c.pane == pane) {
                tracing::debug!(
                    "{id} {}: its pane is on screen, no notification",
                    kind.as_str()
                );
                return;
            }
        }
        let cfg = self.config.notify.clone();
        match self.notices.limiter.admit(&id, kind, now, &cfg) {
            crate::notify::Admit::Send => {}
            other => {
                tracing::debug!("{id} {}: {other:?}", kind.as_str());
                return;
            }
        }
        // A machine's agent is named by its address (`box:ID`): the message says where. The
        // budget's notice says what of what, not the state's evidence.
        let evidence = match (kind, &view.budget) {
            (crate::notify::Kind::Budget, Some(b)) => {
                super::budget::used_text(b, view.usage.as_ref())
            }
            // Why, first: what a phone shows of it is its start.
            (crate::notify::Kind::NeedsYou | crate::notify::Kind::Failed, _) => match view.reason {
                Some(r) => format!("{r}: {}", view.evidence),
                None => view.evidence.clone(),
            },
            _ => view.evidence.clone(),
        };
        let text = crate::notify::message(&view.name, &view.address(), kind, &evidence);
        tracing::info!("notify: {text}");
        let push = crate::notify::push_for_agent(
            &view.name,
            &view.address(),
            view.machine
                .as_deref()
                .unwrap_or(crate::push::local_machine()),
            view.state,
            kind,
            &evidence,
        );
        self.deliver(&text, &viewers, push);
        if let Some(command) = cfg.command(kind) {
            run_notify_command(command, kind, &view);
        }
    }

    /// The message on those clients, the status line's flash, the desktop, bell and OSC 9, the
    /// push to the phone, as configured.
    fn deliver(&mut self, text: &str, viewers: &[Viewer], push: Push) {
        let cfg = &self.config.notify;
        if let Some(target) = &cfg.push {
            self.notices.push(target, push);
        }
        if cfg.tmux_message && !viewers.is_empty() {
            let escaped = volee_view::tmux_message_text(text, 200);
            let show = self
                .hosts
                .tmux
                .show_message(viewers, escaped, cfg.message_time.as_millis());
            tokio::spawn(show);
        }
        if cfg.flash_status {
            self.notices.flashing = true;
            self.notices.flash_until = now_ms() + 3000;
            self.notices.status_dirty = true;
        }
        if cfg.bell || cfg.osc9 {
            let mut bytes = Vec::new();
            if cfg.osc9 {
                let plain: String = text.chars().filter(|c| !c.is_control()).collect();
                bytes.extend_from_slice(format!("\x1b]9;{plain}\x1b\\").as_bytes());
            }
            if cfg.bell {
                bytes.push(0x07);
            }
            for c in viewers {
                write_to_tty(&c.tty, &bytes);
            }
        }
        if cfg.desktop && desktop_available() {
            // Servers that announce `body-markup` read the body as markup: an agent's name or
            // title must show as written.
            let text = text
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;");
            tokio::task::spawn_blocking(move || {
                if let Err(e) = notify_rust::Notification::new()
                    .summary("volee")
                    .body(&text)
                    .appname("volee")
                    .timeout(notify_rust::Timeout::Milliseconds(6000))
                    .show()
                {
                    tracing::debug!("desktop notification: {e}");
                }
            });
        }
    }

    /// Push the summary into `@volee-status` of every server that shows it; only on change, over
    /// an existing control connection when there is one (no process spawned).
    pub(super) fn push_status(&mut self) {
        let views: Vec<AgentView> = self.views(true);
        let mut text = volee_view::status_tmux(&volee_view::Counts::from_agents(&views));
        if self.notices.flashing {
            text = format!("#[reverse]{text}#[noreverse]");
        }
        // `volee quiet` is on: say so, or agents that need the user go unnoticed for hours.
        if self.notices.quiet_until.is_some() {
            text.push_str(volee_view::QUIET_TMUX);
        }
        let mut sockets: BTreeSet<PathBuf> = self.hosts.tmux.servers().clone();
        // A server that only hosts discovered agents is the user's own business until they
        // `tmux-init` it: volee sets nothing there.
        sockets.extend(
            self.registry
                .iter()
                .filter(|a| !a.is_ended() && a.origin == Origin::Launched)
                .filter_map(|a| host_socket(&a.host).map(Path::to_path_buf)),
        );
        // Where `@volee-status-cost` is on: the day's spend after the counts.
        let (with_cost, plain): (BTreeSet<PathBuf>, BTreeSet<PathBuf>) = sockets
            .into_iter()
            .partition(|s| self.notices.cost_sockets.contains(s));
        if !with_cost.is_empty() {
            let spent = self.spent_today(now_ms());
            let cost = format!(
                "{text} #[dim]{} today#[default]",
                volee_view::cost_text(Some(spent)).replace('#', "##")
            );
            self.hosts.tmux.set_status(with_cost, &cost);
        }
        self.hosts.tmux.set_status(plain, &text);
    }

    /// Past local midnight, the status lines that show the day's spend start the new day (within
    /// a minute: checked on the housekeeping tick, no timer of its own).
    pub(super) fn on_new_day(&mut self, now: Millis) {
        if let Some((day, _)) = self.notices.today {
            if !self.notices.cost_sockets.is_empty() && day != local_day_start(now) {
                self.notices.status_dirty = true;
            }
        }
    }

    /// What today's usage cost (USD, the known costs), read from the ledger once a day and kept
    /// up to date as usage comes.
    pub(super) fn spent_today(&mut self, now: Millis) -> f64 {
        let day = local_day_start(now);
        match self.notices.today {
            Some((d, usd)) if d == day => usd,
            _ => {
                let usd = crate::ledger::read(&self.paths.state_dir, day)
                    .map(|(entries, _)| entries.iter().filter_map(|e| e.cost_usd).sum())
                    .unwrap_or(0.0);
                self.notices.today = Some((day, usd));
                usd
            }
        }
    }
}

/// The clients of several servers, each once.
async fn all_viewers(asks: Vec<impl std::future::Future<Output = Vec<Viewer>>>) -> Vec<Viewer> {
    let mut seen = HashSet::new();
    let mut viewers = Vec::new();
    for ask in asks {
        for v in ask.await {
            if seen.insert((v.socket.clone(), v.name.clone())) {
                viewers.push(v);
            }
        }
    }
    viewers
}

/// Is there a session bus to send desktop notifications to?
pub fn desktop_available() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|v| !v.is_empty())
}

/// Write `bytes` to a client's terminal (a tty device of the user's), never blocking.
fn write_to_tty(tty: &str, bytes: &[u8]) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if !tty.starts_with("/dev/") || bytes.is_empty() {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(tty)
    {
        let _ = f.write_all(bytes);
    }
}

/// The user's command for a notification (`sh -c`), the agent's JSON on its stdin,
/// `VOLEE_EVENT` and `VOLEE_AGENT_ID` in its environment; killed after 30 s.
fn run_notify_command(command: &str, kind: Kind, view: &AgentView) {
    let json = match serde_json::to_vec(view) {
        Ok(j) => j,
        Err(_) => return,
    };
    let child = tokio::process::Command::new("sh")
        .args(["-c", command])
        .env("VOLEE_EVENT", kind.as_str())
        // What `volee show` takes: `MACHINE:ID` for a machine's agent.
        .env("VOLEE_AGENT_ID", view.address())
        // Why it is failed or needs you (`usage_limit`, `permission`); empty otherwise.
        .env(
            "VOLEE_REASON",
            view.reason.map(|r| r.as_str()).unwrap_or_default(),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("notification command {command:?}: {e}");
            return;
        }
    };
    tokio::spawn(async move {
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&json).await;
        }
        if tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    });
}
