//! The daemon ⇄ zellij plugin protocol (one NDJSON object per line), shared by the native daemon
//! and the wasm plugin (`zellij-plugin/`).
//!
//! - **Plugin → daemon**: the daemon keeps one long-lived
//!   `zellij --session S pipe --name volee-stream --args v=VERSION` open per zellij session; every
//!   plugin instance that receives it calls `block_cli_pipe_input` (so the pipe stays open) and
//!   writes [`PluginEvent`] lines to it with `cli_pipe_output`. Several instances (one per attached
//!   client) may all write: the daemon deduplicates (events are idempotent, see each variant).
//! - **Daemon → plugin**: one-shot `zellij --session S pipe --name volee -- JSON` with one
//!   [`PluginCommand`]; the plugin answers with one line (`"ok"` or a [`PluginEvent::Mismatch`]) and
//!   unblocks the pipe. Frequent commands ([`PluginCommand::Read`]) go as lines of one long-lived
//!   `zellij pipe --name volee` whose stdin the daemon keeps open: zellij delivers each line as a
//!   message and reads the next once the plugin unblocks the pipe (no process per command).
//!
//! A plugin and a daemon of different [`PIPE_VERSION`]s refuse each other with a message that
//! says to rebuild or reload the plugin.
//!
//! The past sessions the pane lists ([`PluginCommand::Sessions`]) come from the daemon, which
//! reads its index off its actor: the newest [`SESSIONS_MAX`], each text cut
//! ([`PastSession::new`]), the whole list under [`SESSIONS_BYTES_MAX`] ([`newest_sessions`]).

use serde::{Deserialize, Serialize};

use crate::AgentView;

/// Bumped whenever a message below changes shape (3: [`PluginCommand::Sessions`]).
pub const PIPE_VERSION: u32 = 3;
/// Name of the long-lived stream pipe (plugin → daemon events).
pub const STREAM_PIPE: &str = "volee-stream";
/// Name of the one-shot command pipe (daemon → plugin).
pub const COMMAND_PIPE: &str = "volee";
/// The `--args` key carrying the daemon's [`PIPE_VERSION`] on the stream pipe.
pub const VERSION_ARG: &str = "v";
/// What the plugin should say when the versions differ (both sides print it).
pub const MISMATCH_HINT: &str =
    "run `volee up` inside the zellij session again (it writes the plugin that matches the binary) and reload it (zellij action start-or-reload-plugin), or restart the zellij session";
/// The plugin configuration key (`--plugin-configuration background=true`) of the instance
/// `volee up` starts: it hides its pane once its permissions are granted, and runs like a
/// plugin of `load_plugins`.
pub const BACKGROUND_KEY: &str = "background";

/// One terminal pane as the plugin sees it (`PaneUpdate`), with the tab it sits in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZellijPane {
    /// Terminal pane id (`terminal_<id>` on the command line, `ZELLIJ_PANE_ID` inside it).
    pub id: u32,
    /// Tab position (0-based, as `PaneManifest` keys it).
    pub tab: usize,
    pub tab_name: String,
    /// The pane's title: its OSC 0/2 title unless the pane is named.
    pub title: String,
    pub exited: bool,
    pub exit_status: Option<i32>,
    pub is_focused: bool,
    /// Is its tab the active one (for the client of this plugin instance)?
    pub tab_active: bool,
    pub terminal_command: Option<String>,
    /// The process the pane runs (`get_pane_pid`): the daemon watches its terminal for output.
    #[serde(default)]
    pub pid: Option<u32>,
}

/// At most this many past sessions go to the plugins, the newest: a pane shows a few dozen rows,
/// and filtering as you type over the last 200 sessions (weeks of work) finds what one comes
/// back to; the whole history stays `volee browse`'s and `volee sessions search`'s.
pub const SESSIONS_MAX: usize = 200;
/// The list's JSON stays under this many bytes: it is one argument of a `zellij pipe` command
/// (Linux takes at most 128 KiB per argument), and the plugin parses it each time it changes.
pub const SESSIONS_BYTES_MAX: usize = 96 * 1024;
/// Titles and first prompts are cut to this many characters (the pane shows fewer; the filter
/// looks at the start of a prompt).
const SESSION_TEXT_MAX: usize = 160;
/// Project paths and branches are cut to this many characters.
const SESSION_PATH_MAX: usize = 240;
/// A session id longer than this is not sent (no harness's is; a cut one would resume nothing).
const SESSION_ID_MAX: usize = 128;

/// A past session from the daemon's index, as the plugin's pane lists it. Agent-controlled text
/// (title, prompt, project, branch): the plugin shows it only through `volee-view`'s escaping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PastSession {
    /// The harness (profile name) whose session it is.
    pub harness: String,
    /// The harness's native session id (what `volee sessions resume` takes).
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Its last activity, seconds since the epoch (0: not recorded).
    #[serde(default)]
    pub last: u64,
}

impl PastSession {
    /// A session with its texts cut to what the pane needs; None for an id too long to resume.
    pub fn new(
        harness: &str,
        id: &str,
        title: Option<&str>,
        first_prompt: Option<&str>,
        project: Option<&str>,
        branch: Option<&str>,
        last: u64,
    ) -> Option<PastSession> {
        if id.is_empty() || id.chars().count() > SESSION_ID_MAX {
            return None;
        }
        let cut = |text: Option<&str>, max: usize| {
            text.map(|t| t.chars().take(max).collect::<String>())
                .filter(|t| !t.is_empty())
        };
        Some(PastSession {
            harness: cut(Some(harness), SESSION_ID_MAX).unwrap_or_default(),
            id: id.to_owned(),
            title: cut(title, SESSION_TEXT_MAX),
            first_prompt: cut(first_prompt, SESSION_TEXT_MAX),
            project: cut(project, SESSION_PATH_MAX),
            branch: cut(branch, SESSION_PATH_MAX),
            last,
        })
    }
}

/// The sessions to send, from a list ordered newest first: at most [`SESSIONS_MAX`], and no more
/// than fit in [`SESSIONS_BYTES_MAX`] of JSON.
pub fn newest_sessions(sessions: impl IntoIterator<Item = PastSession>) -> Vec<PastSession> {
    let mut bytes = 0;
    let mut kept = Vec::new();
    for session in sessions.into_iter().take(SESSIONS_MAX) {
        let size = serde_json::to_string(&session).map_or(usize::MAX, |s| s.len() + 1);
        if bytes + size > SESSIONS_BYTES_MAX {
            break;
        }
        bytes += size;
        kept.push(session);
    }
    kept
}

/// Plugin → daemon, one per line on the stream pipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PluginEvent {
    /// First line on a stream: the plugin's protocol version and build.
    Hello {
        version: u32,
        plugin_version: String,
        /// zellij's id of the plugin instance (one per client).
        plugin_id: u32,
    },
    /// The plugin speaks another [`PIPE_VERSION`]; nothing else follows.
    Mismatch {
        plugin_version: u32,
        daemon_version: u32,
        hint: String,
    },
    /// Every terminal pane of the session, sent whenever one of them changed (title, exit, focus,
    /// tab). Idempotent: the newest list wins.
    Panes { panes: Vec<ZellijPane> },
    /// The visible text of a pane changed (a render report for a visible pane): its last lines,
    /// plain text. Counts as output activity. Duplicates from several instances are harmless.
    Screen { pane: u32, lines: Vec<String> },
    /// A pane's screen read because the daemon asked ([`PluginCommand::Read`]: its pty was
    /// written to, and zellij pushes nothing for a pane in a hidden tab). Not activity: the
    /// daemon already saw the write.
    Read { pane: u32, lines: Vec<String> },
    /// A tab's bell flag rose (zellij reports it only for a tab that is not active): `panes` are
    /// the terminal panes of that tab.
    Bell { tab: usize, panes: Vec<u32> },
    /// A pane was closed.
    Closed { pane: u32 },
}

/// Daemon → plugin, one per one-shot pipe message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PluginCommand {
    /// The agents for the UI pane (sent on every change) and the panes to watch: the plugin
    /// reports [`PluginEvent::Screen`] only for these (those in hidden tabs when asked:
    /// [`PluginCommand::Read`]).
    Agents {
        version: u32,
        agents: Vec<AgentView>,
        /// Terminal pane ids of the agents of this session.
        watch: Vec<u32>,
    },
    /// Bring a pane to the front for the plugin's client (`volee attach`).
    Focus { version: u32, pane: u32 },
    /// The past sessions for the pane, newest first ([`newest_sessions`]): sent when a plugin
    /// connects and when the daemon's index read something that changed them.
    Sessions {
        version: u32,
        sessions: Vec<PastSession>,
    },
    /// Read these watched panes now (screen, title, exit): each answers with a
    /// [`PluginEvent::Read`], and a [`PluginEvent::Panes`] follows when a title or an exit
    /// changed.
    Read { version: u32, panes: Vec<u32> },
    /// Answer with a [`PluginEvent::Hello`]: `volee up` checks that the plugin it started runs
    /// and speaks its version.
    Ping { version: u32 },
    /// Close the instance `volee up` started (configuration [`BACKGROUND_KEY`]`=true`); other
    /// instances ignore it (`volee down` broadcasts it: a pipe addressed to a plugin's URL
    /// starts that plugin again when the pipe ends, measured on zellij 0.45.1).
    Quit { version: u32 },
}

impl PluginCommand {
    pub fn version(&self) -> u32 {
        match self {
            PluginCommand::Agents { version, .. }
            | PluginCommand::Focus { version, .. }
            | PluginCommand::Sessions { version, .. }
            | PluginCommand::Read { version, .. }
            | PluginCommand::Ping { version }
            | PluginCommand::Quit { version } => *version,
        }
    }
}

/// `terminal_12` → 12 (the form `zellij action` prints and takes), also a bare `12`.
pub fn parse_terminal_id(text: &str) -> Option<u32> {
    let text = text.trim();
    text.strip_prefix("terminal_").unwrap_or(text).parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn events_are_tagged_lines() {
        let e = PluginEvent::Screen {
            pane: 3,
            lines: vec!["$ ".into()],
        };
        let line = serde_json::to_string(&e).unwrap();
        assert_eq!(line, r#"{"type":"screen","pane":3,"lines":["$ "]}"#);
        assert_eq!(serde_json::from_str::<PluginEvent>(&line).unwrap(), e);
        let c = PluginCommand::Focus {
            version: PIPE_VERSION,
            pane: 2,
        };
        let line = serde_json::to_string(&c).unwrap();
        assert_eq!(
            line,
            format!(r#"{{"type":"focus","version":{PIPE_VERSION},"pane":2}}"#)
        );
        assert_eq!(c.version(), PIPE_VERSION);
        let read = PluginCommand::Read {
            version: PIPE_VERSION,
            panes: vec![4, 9],
        };
        let line = serde_json::to_string(&read).unwrap();
        assert_eq!(
            line,
            format!(r#"{{"type":"read","version":{PIPE_VERSION},"panes":[4,9]}}"#)
        );
        assert_eq!(read.version(), PIPE_VERSION);
        let answer = PluginEvent::Read {
            pane: 4,
            lines: vec!["ok".into()],
        };
        let line = serde_json::to_string(&answer).unwrap();
        assert_eq!(line, r#"{"type":"read","pane":4,"lines":["ok"]}"#);
        assert_eq!(serde_json::from_str::<PluginEvent>(&line).unwrap(), answer);
    }

    #[test]
    fn sessions_are_cut_and_bounded() {
        let long = "x".repeat(10_000);
        let s = PastSession::new(
            "claude",
            "d4a8abe5",
            Some(&long),
            None,
            Some("/w"),
            Some(""),
            7,
        )
        .unwrap();
        assert_eq!(s.title.as_deref().map(|t| t.chars().count()), Some(160));
        assert_eq!(s.first_prompt, None);
        assert_eq!(s.branch, None, "an empty text is none");
        assert!(PastSession::new("claude", &long, None, None, None, None, 0).is_none());
        assert!(PastSession::new("claude", "", None, None, None, None, 0).is_none());

        let many = (0..1_000).map(|i| {
            PastSession::new("codex", &format!("s{i}"), Some("t"), None, None, None, i).unwrap()
        });
        let kept = newest_sessions(many);
        assert_eq!(kept.len(), SESSIONS_MAX);
        assert_eq!(kept[0].id, "s0", "the first (newest) are kept");
        // Long texts: the bytes bound comes first, and the command stays one argument.
        let big = (0..1_000).map(|i| {
            let t = "\u{1b}".repeat(200);
            PastSession::new(
                "codex",
                &format!("s{i}"),
                Some(&t),
                Some(&t),
                Some(&t),
                Some(&t),
                1,
            )
            .unwrap()
        });
        let kept = newest_sessions(big);
        assert!(kept.len() < SESSIONS_MAX, "{}", kept.len());
        let command = PluginCommand::Sessions {
            version: PIPE_VERSION,
            sessions: kept,
        };
        let json = serde_json::to_string(&command).unwrap();
        assert!(json.len() < 128 * 1024, "{}", json.len());
        assert_eq!(
            serde_json::from_str::<PluginCommand>(&json).unwrap(),
            command
        );
        assert_eq!(command.version(), PIPE_VERSION);
    }

    #[test]
    fn terminal_ids() {
        assert_eq!(parse_terminal_id("terminal_12\n"), Some(12));
        assert_eq!(parse_terminal_id("7"), Some(7));
        assert_eq!(parse_terminal_id("plugin_1"), None);
    }
}
