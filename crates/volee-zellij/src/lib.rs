//! zellij as a host, from the native side: the `zellij` command line (`action new-tab`,
//! `list-panes --json`, `write-chars`, `dump-screen`, `pipe`), and the long-lived `zellij pipe`
//! that carries the volee plugin's events ([`volee_protocol::zellij`]).
//!
//! Measured facts (zellij 0.45.1, `../shared/reference/multiplexers.md` part B and this crate's
//! tests): `action new-tab --name N --cwd D -- CMD` prints the new tab's id and runs CMD in a
//! command pane whose exit is held with its status (`exited`, `exit_status` in `list-panes`);
//! with **no client attached** a new tab gets no pane, so volee then runs the command with
//! `zellij run` (a pane in the first tab) instead; OSC titles reach `list-panes` only while a
//! client renders the session.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

/// A failed zellij command, said so that a user knows what to do.
#[derive(Debug, thiserror::Error)]
pub enum ZellijError {
    #[error("zellij is not installed (no `zellij` on PATH and VOLEE_ZELLIJ unset)")]
    NotInstalled,
    #[error("zellij session {0:?} is not running")]
    NoSession(String),
    #[error("zellij {args}: {message}")]
    Failed { args: String, message: String },
    #[error("zellij {args} took longer than {secs} s")]
    Timeout { args: String, secs: u64 },
    #[error("zellij {args} printed something unexpected: {output:?}")]
    Unexpected { args: String, output: String },
}

impl ZellijError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            ZellijError::NotInstalled => Some(
                "install zellij 0.45 (cargo install --locked zellij@0.45.1) or set VOLEE_ZELLIJ to its path"
                    .into(),
            ),
            ZellijError::NoSession(s) => Some(format!(
                "start it with: zellij attach --create {s}   (list sessions: zellij list-sessions)"
            )),
            _ => None,
        }
    }
}

/// The zellij binary: `VOLEE_ZELLIJ`, else `zellij` on PATH.
pub fn find_binary() -> Result<PathBuf, ZellijError> {
    if let Some(path) = std::env::var_os("VOLEE_ZELLIJ").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    volee_os::program::find("zellij").ok_or(ZellijError::NotInstalled)
}

/// One pane as `zellij action list-panes --json --all` lists it (fields volee uses).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListedPane {
    pub id: u32,
    pub is_plugin: bool,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub exited: bool,
    #[serde(default)]
    pub exit_status: Option<i32>,
    #[serde(default)]
    pub is_held: bool,
    #[serde(default)]
    pub tab_position: usize,
    #[serde(default)]
    pub tab_name: String,
    #[serde(default)]
    pub tab_id: Option<u32>,
    /// The command the pane runs; zellij's default title for it.
    #[serde(default)]
    pub terminal_command: Option<String>,
    #[serde(default)]
    pub is_focused: bool,
    /// A plugin pane's URL (`file:/…/volee.wasm`).
    #[serde(default)]
    pub plugin_url: Option<String>,
    /// Hidden (a background plugin, or a pane hidden by its plugin).
    #[serde(default)]
    pub is_suppressed: bool,
}

/// Parse `list-panes --json --all` output.
pub fn parse_panes(json: &str) -> Result<Vec<ListedPane>, serde_json::Error> {
    serde_json::from_str(json)
}

/// The zellij command line for one session. Every call is one short `zellij` process; the
/// environment (`ZELLIJ_SOCKET_DIR`, …) is the daemon's, which is the user's.
#[derive(Debug, Clone)]
pub struct ZellijCli {
    bin: PathBuf,
    session: String,
    /// Extra environment for the zellij processes (tests isolate their socket dir with it).
    env: Vec<(String, String)>,
}

/// One command-line client at a time, process-wide. zellij 0.45.1 mixes up clients: it reuses a
/// client id as soon as its client has gone, and a new client can be handed an answer meant for
/// another (seen under load: `action new-tab` printed a `list-panes` answer, `list-panes` a
/// `list-clients` one). Fewer clients at once, fewer mix-ups; every answer is also checked.
/// Long-lived clients (the stream pipe, `subscribe`) are not held by this lock.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a new pane may take to show up in `list-panes`.
const PANE_WAIT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(5);

impl ZellijCli {
    pub fn new(bin: impl Into<PathBuf>, session: impl Into<String>) -> ZellijCli {
        ZellijCli {
            bin: bin.into(),
            session: session.into(),
            env: Vec::new(),
        }
    }

    /// The zellij environment of a caller (its `ZELLIJ_SOCKET_DIR` and config dirs) for every
    /// command.
    pub fn with_env(mut self, env: &[(String, String)]) -> ZellijCli {
        const KEYS: [&str; 5] = [
            "ZELLIJ_SOCKET_DIR",
            "ZELLIJ_CONFIG_DIR",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "TMPDIR",
        ];
        self.env = env
            .iter()
            .filter(|(k, _)| KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        self
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn bin(&self) -> &Path {
        &self.bin
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.arg("--session").arg(&self.session);
        cmd.kill_on_drop(true);
        cmd
    }

    /// Run `zellij --session S ARGS…`, returning stdout.
    ///
    /// zellij 0.45.1 reuses a client id as soon as its client has gone, so a new client can be
    /// handed a message meant for the one before. Its session check (a `ConnStatus` answered by
    /// anything but `Connected`) then says "There is no active session!" about a live session;
    /// nothing was done yet at that point, so the command is tried again, a few times.
    pub async fn run<S: AsRef<str>>(&self, args: &[S]) -> Result<String, ZellijError> {
        let mut attempt = 0;
        loop {
            match self.run_once(args).await {
                Err(ZellijError::Failed { message, .. } | ZellijError::NoSession(message))
                    if attempt < 4
                        && (message.contains("There is no active session")
                            || message == self.session) =>
                {
                    tracing::debug!("zellij said the session is gone; asking again");
                    tokio::time::sleep(Duration::from_millis(40 << attempt)).await;
                    attempt += 1;
                }
                // Said again and again: the list of sessions (read without connecting to this
                // one) tells a session that is really gone (killed: "There is no active
                // session!" too) from a live one answering oddly.
                Err(ZellijError::Failed { message, .. })
                    if message.contains("There is no active session")
                        && self.listed().await == Some(false) =>
                {
                    return Err(ZellijError::NoSession(self.session.clone()));
                }
                other => return other,
            }
        }
    }

    /// Is this session among `zellij list-sessions`' running ones? None when zellij cannot say.
    async fn listed(&self) -> Option<bool> {
        let mut cmd = Command::new(&self.bin);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.args(["list-sessions", "--no-formatting"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let out = tokio::time::timeout(TIMEOUT, cmd.output())
            .await
            .ok()?
            .ok()?;
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if said.contains("No active zellij sessions") {
            return Some(false);
        }
        if !out.status.success() {
            return None;
        }
        // `NAME [Created 2s ago]`, one per line; an exited session zellij can resurrect says
        // `(EXITED - attach to resurrect)`: not running.
        Some(String::from_utf8_lossy(&out.stdout).lines().any(|l| {
            l.split_once(' ').map_or(l, |(name, _)| name) == self.session && !l.contains("EXITED")
        }))
    }

    async fn run_once<S: AsRef<str>>(&self, args: &[S]) -> Result<String, ZellijError> {
        let shown = args
            .iter()
            .map(|a| a.as_ref().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let _one = ONE_AT_A_TIME.lock().await;
        let started = std::time::Instant::now();
        let mut cmd = self.command();
        cmd.args(args.iter().map(|a| a.as_ref()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = match tokio::time::timeout(TIMEOUT, cmd.output()).await {
            Err(_) => {
                return Err(ZellijError::Timeout {
                    args: shown,
                    secs: TIMEOUT.as_secs(),
                })
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ZellijError::NotInstalled)
            }
            Ok(Err(e)) => {
                return Err(ZellijError::Failed {
                    args: shown,
                    message: e.to_string(),
                })
            }
            Ok(Ok(out)) => out,
        };
        tracing::debug!(
            "zellij --session {} {}: {} in {:?}",
            self.session,
            shown.chars().take(120).collect::<String>(),
            out.status,
            started.elapsed()
        );
        if !out.status.success() {
            // "Session 'x' not found. The following sessions are active: …" (on stdout or stderr).
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            if said.contains(&format!("Session '{}' not found", self.session)) {
                return Err(ZellijError::NoSession(self.session.clone()));
            }
            let said = said.trim();
            return Err(ZellijError::Failed {
                args: shown,
                message: if said.is_empty() {
                    format!("exit {}", out.status)
                } else {
                    said.chars().take(500).collect()
                },
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every pane of the session.
    pub async fn list_panes(&self) -> Result<Vec<ListedPane>, ZellijError> {
        // zellij 0.45.1 sometimes answers with nothing at all, or with the answer meant for the
        // client before (its client ids are reused at once): ask again.
        let mut out = String::new();
        let mut parsed = Err(String::new());
        for attempt in 0..5 {
            out = self
                .run(&["action", "list-panes", "--json", "--all"])
                .await?;
            parsed = parse_panes(&out).map_err(|e| e.to_string());
            if parsed.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        parsed.map_err(|e| ZellijError::Unexpected {
            args: "action list-panes --json --all".into(),
            output: format!("{e}: {}", out.chars().take(200).collect::<String>()),
        })
    }

    /// Does the session exist (running)?
    pub async fn session_exists(&self) -> bool {
        self.list_panes().await.is_ok()
    }

    /// How many clients are attached (`zellij action list-clients`: a header, then one row each).
    pub async fn clients(&self) -> Result<usize, ZellijError> {
        let mut out = String::new();
        for attempt in 0..5 {
            out = self.run(&["action", "list-clients"]).await?;
            // Anything else is an answer meant for another client (see `list_panes`).
            if out.starts_with("CLIENT_ID") {
                return Ok(out.lines().skip(1).filter(|l| !l.trim().is_empty()).count());
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        Err(ZellijError::Unexpected {
            args: "action list-clients".into(),
            output: out.chars().take(200).collect(),
        })
    }

    /// Open `command` in a new tab named `tab_name` in `cwd`; returns the terminal pane id. With
    /// no client attached a new tab gets no pane: the command then runs with `zellij run` in the
    /// session's first tab (still its own command pane, exit status held).
    pub async fn open(
        &self,
        tab_name: &str,
        cwd: &str,
        command: &[String],
    ) -> Result<u32, ZellijError> {
        if self.clients().await? == 0 {
            return self.run_pane(cwd, command).await;
        }
        let mut args: Vec<String> = ["action", "new-tab", "--name", tab_name, "--cwd", cwd, "--"]
            .map(String::from)
            .to_vec();
        args.extend(command.iter().cloned());
        let out = self.run(&args).await?;
        // The new tab's id; when zellij printed something else (another client's answer), the
        // tab is found by its name, which volee makes unique.
        let mut tab_id: Option<u32> = out.trim().parse().ok();
        if tab_id.is_none() {
            let deadline = tokio::time::Instant::now() + PANE_WAIT;
            while tab_id.is_none() {
                tab_id = self
                    .list_panes()
                    .await?
                    .iter()
                    .find(|p| p.tab_name == tab_name)
                    .and_then(|p| p.tab_id);
                if tab_id.is_none() {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(ZellijError::Unexpected {
                            args: "action new-tab".into(),
                            output: out.chars().take(200).collect(),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        let tab_id = tab_id.unwrap_or_default();
        // The tab's pane shows up in `list-panes` within tens of milliseconds; on a loaded machine
        // it can take seconds. Closing the tab early (and running the command elsewhere) would
        // start the agent twice, so wait, and only fall back when the last client left meanwhile.
        let deadline = tokio::time::Instant::now() + PANE_WAIT;
        loop {
            let panes = self.list_panes().await?;
            if let Some(p) = panes
                .iter()
                .find(|p| !p.is_plugin && p.tab_id == Some(tab_id))
            {
                return Ok(p.id);
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.clients().await? == 0 {
            let _ = self
                .run(&["action", "close-tab-by-id", &tab_id.to_string()])
                .await;
            return self.run_pane(cwd, command).await;
        }
        Err(ZellijError::Unexpected {
            args: "action new-tab".into(),
            output: format!("tab {tab_id} has no pane after {} s", PANE_WAIT.as_secs()),
        })
    }

    /// `zellij run`: the command in a new pane of the current tab. Its output is the pane id;
    /// when zellij prints nothing (seen under load), the one new terminal pane is it.
    async fn run_pane(&self, cwd: &str, command: &[String]) -> Result<u32, ZellijError> {
        let before: std::collections::BTreeSet<u32> = self
            .list_panes()
            .await?
            .iter()
            .filter(|p| !p.is_plugin)
            .map(|p| p.id)
            .collect();
        let mut args: Vec<String> = ["run", "--cwd", cwd, "--"].map(String::from).to_vec();
        args.extend(command.iter().cloned());
        let out = self.run(&args).await?;
        if let Some(id) = volee_protocol::zellij::parse_terminal_id(&out) {
            return Ok(id);
        }
        let deadline = tokio::time::Instant::now() + PANE_WAIT;
        loop {
            let new: Vec<u32> = self
                .list_panes()
                .await?
                .iter()
                .filter(|p| !p.is_plugin && !before.contains(&p.id))
                .map(|p| p.id)
                .collect();
            match new.as_slice() {
                [id] => return Ok(*id),
                [] if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                _ => {
                    return Err(ZellijError::Unexpected {
                        args: "run".into(),
                        output: format!("{out:?}; new panes {new:?}"),
                    })
                }
            }
        }
    }

    /// Type text into a pane (as if pasted: bracketed when `bracketed`).
    pub async fn write_chars(&self, pane: u32, text: &str) -> Result<(), ZellijError> {
        let pane = format!("terminal_{pane}");
        self.run(&["action", "write-chars", "--pane-id", &pane, text])
            .await
            .map(drop)
    }

    /// Press keys in a pane, in zellij's key syntax (`Enter`, `Ctrl c`).
    pub async fn send_keys(&self, pane: u32, keys: &str) -> Result<(), ZellijError> {
        let pane = format!("terminal_{pane}");
        self.run(&["action", "send-keys", "--pane-id", &pane, keys])
            .await
            .map(drop)
    }

    /// The pane's screen as plain text.
    pub async fn dump_screen(&self, pane: u32) -> Result<String, ZellijError> {
        let pane = format!("terminal_{pane}");
        self.run(&["action", "dump-screen", "--pane-id", &pane])
            .await
    }

    pub async fn close_pane(&self, pane: u32) -> Result<(), ZellijError> {
        let pane = format!("terminal_{pane}");
        self.run(&["action", "close-pane", "--pane-id", &pane])
            .await
            .map(drop)
    }

    /// Bring a pane to the front of the session: its tab first (`focus-pane-id` does not leave
    /// the current tab), then the pane.
    pub async fn focus_pane(&self, pane: u32) -> Result<(), ZellijError> {
        let tab = match self.list_panes().await {
            Ok(panes) => panes
                .into_iter()
                .find(|p| !p.is_plugin && p.id == pane)
                .and_then(|p| p.tab_id),
            // An answer that would not parse: the pane may well be in the current tab.
            Err(ZellijError::Unexpected { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(tab) = tab {
            self.run(&["action", "go-to-tab-by-id", &tab.to_string()])
                .await?;
        }
        let pane = format!("terminal_{pane}");
        self.run(&["action", "focus-pane-id", &pane])
            .await
            .map(drop)
    }

    /// `zellij attach SESSION`, for the caller to run in its own terminal (by `exec`).
    pub fn attach_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.bin);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.arg("attach").arg(&self.session);
        cmd
    }

    /// One message to the volee plugin(s) of the session; their answers, one per line.
    pub async fn pipe_command(
        &self,
        command: &volee_protocol::zellij::PluginCommand,
    ) -> Result<String, ZellijError> {
        let json = command_json(command)?;
        self.run(&[
            "pipe",
            "--name",
            volee_protocol::zellij::COMMAND_PIPE,
            "--",
            &json,
        ])
        .await
    }

    /// Send `command` to the plugin at `url` with `configuration` (`key=value,…`), which zellij
    /// starts in this session when no such instance runs (in a floating pane, measured on
    /// 0.45.1); its one-line answer. A plugin still waiting for the user to grant its
    /// permissions does not answer: [`ZellijError::Timeout`].
    pub async fn pipe_to_plugin(
        &self,
        url: &str,
        configuration: &str,
        command: &volee_protocol::zellij::PluginCommand,
    ) -> Result<String, ZellijError> {
        let json = command_json(command)?;
        self.run(&[
            "pipe",
            "--plugin",
            url,
            "--plugin-configuration",
            configuration,
            "--name",
            volee_protocol::zellij::COMMAND_PIPE,
            "--",
            &json,
        ])
        .await
    }

    /// `zellij subscribe` to these panes' viewports (JSON lines, see [`parse_subscribe_line`]).
    pub fn spawn_subscribe(&self, panes: &[u32]) -> std::io::Result<tokio::process::Child> {
        let mut cmd = self.command();
        cmd.args(["subscribe", "--format", "json", "--pane-id"]);
        for p in panes {
            cmd.arg(format!("terminal_{p}"));
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        tracing::debug!("zellij --session {} subscribe {panes:?}", self.session);
        cmd.spawn()
    }

    /// The long-lived event stream of the session's volee plugins: a `zellij pipe` whose stdin
    /// stays open (never written) and whose stdout carries [`PluginEvent`] lines.
    ///
    /// [`PluginEvent`]: volee_protocol::zellij::PluginEvent
    /// `zellij pipe --name volee` with stdin kept open: each line written to it is one command
    /// to the plugins (zellij reads the next line once a plugin unblocks the pipe), so frequent
    /// commands cost no process each. Its stdout carries the plugins' answers.
    pub fn spawn_command_pipe(&self) -> std::io::Result<tokio::process::Child> {
        let mut cmd = self.command();
        cmd.args(["pipe", "--name", volee_protocol::zellij::COMMAND_PIPE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        tracing::debug!("zellij --session {} pipe (commands)", self.session);
        cmd.spawn()
    }

    pub fn spawn_stream(&self) -> std::io::Result<tokio::process::Child> {
        let mut cmd = self.command();
        cmd.args([
            "pipe",
            "--name",
            volee_protocol::zellij::STREAM_PIPE,
            "--args",
            &format!(
                "{}={}",
                volee_protocol::zellij::VERSION_ARG,
                volee_protocol::zellij::PIPE_VERSION
            ),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        tracing::debug!("zellij --session {} pipe (stream)", self.session);
        cmd.spawn()
    }
}

/// One update of `zellij subscribe --format json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeUpdate {
    pub pane: u32,
    pub lines: Vec<String>,
    /// The delivery made when the subscription starts (not new output).
    pub initial: bool,
}

/// `{"event":"pane_update","is_initial":false,"pane_id":"terminal_1","viewport":[…]}` → an
/// A plugin command as the one line a pipe carries.
fn command_json(command: &volee_protocol::zellij::PluginCommand) -> Result<String, ZellijError> {
    serde_json::to_string(command).map_err(|e| ZellijError::Unexpected {
        args: "pipe".into(),
        output: e.to_string(),
    })
}

/// update (trailing blank lines dropped); None for other lines.
pub fn parse_subscribe_line(line: &str) -> Option<SubscribeUpdate> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("event")?.as_str()? != "pane_update" {
        return None;
    }
    let pane = volee_protocol::zellij::parse_terminal_id(v.get("pane_id")?.as_str()?)?;
    let mut lines: Vec<String> = v
        .get("viewport")?
        .as_array()?
        .iter()
        .filter_map(|l| l.as_str().map(String::from))
        .collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    Some(SubscribeUpdate {
        pane,
        lines,
        initial: v
            .get("is_initial")
            .and_then(|b| b.as_bool())
            .unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn listed_panes_parse_as_zellij_prints_them() {
        let json = r#"[{"id":0,"is_plugin":true,"title":"tab-bar","exited":false,"exit_status":null,"is_held":false,"tab_position":0,"tab_name":"Tab #1","tab_id":0},
          {"id":5,"is_plugin":false,"title":"hello","exited":true,"exit_status":5,"is_held":true,"tab_position":1,"tab_name":"volee-a4","tab_id":1,"is_focused":true,"pane_cwd":"/tmp","geometry":{}}]"#;
        let panes = parse_panes(json).unwrap();
        assert_eq!(panes.len(), 2);
        assert_eq!(panes[1].exit_status, Some(5));
        assert_eq!(panes[1].tab_id, Some(1));
        assert!(panes[0].is_plugin);
    }

    #[test]
    fn subscribe_lines() {
        let u = parse_subscribe_line(
            r#"{"event":"pane_update","is_initial":true,"pane_id":"terminal_4","viewport":["$ x","",""]}"#,
        )
        .unwrap();
        assert_eq!((u.pane, u.initial), (4, true));
        assert_eq!(u.lines, ["$ x"]);
        assert_eq!(parse_subscribe_line(r#"{"event":"other"}"#), None);
        assert_eq!(parse_subscribe_line("not json"), None);
    }

    #[test]
    fn only_zellij_variables_are_passed_on() {
        let cli = ZellijCli::new("/z", "s").with_env(&[
            ("ZELLIJ_SOCKET_DIR".into(), "/x".into()),
            ("SECRET_TOKEN".into(), "no".into()),
        ]);
        assert_eq!(
            cli.env,
            [("ZELLIJ_SOCKET_DIR".to_string(), "/x".to_string())]
        );
    }
}
