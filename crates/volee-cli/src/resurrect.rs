//! tmux-resurrect and tmux-continuum (issue 22, item 3): volee works with them, not against
//! them. Resurrect saves every pane's place and restores each one with a shell (and types a
//! program back into it only for the programs on its `@resurrect-processes` list); continuum
//! runs resurrect's save every few minutes and its restore when tmux starts. At the end of a
//! restore resurrect runs the command in `@resurrect-hook-post-restore-all` (through `eval` in
//! bash, after every pane, layout, window name and typed program is back): volee puts
//! `volee restore --all --into-resurrect` there, which relaunches each restorable agent of that
//! server *in* the pane resurrect restored in its place (`respawn-pane -k`), never beside it.
//!
//! volee sets that option only when resurrect is there and the option is unset, records what it
//! set (`@volee-resurrect-hook`), and `volee down` unsets it only while it still holds that. A
//! user's own hook is left alone: `volee tmux-init` prints the line that adds volee's command
//! to it. What resurrect really does (its hook order, its save file, how it restores panes) is
//! in tests/e2e/fixtures/resurrect/README.md, recorded from a run of resurrect itself.

use std::path::{Path, PathBuf};

use volee_protocol::{AgentView, Host};
use volee_tmux::format::{fields_format, split_fields};
use volee_tmux::server::TmuxServer;
use volee_view::sh_quote;

use crate::tmux_ui::option;

/// The hook resurrect runs last in a restore.
pub const HOOK_OPTION: &str = "@resurrect-hook-post-restore-all";
/// What volee set in [`HOOK_OPTION`], so `volee down` removes only that.
const OURS_OPTION: &str = "@volee-resurrect-hook";
/// Set by resurrect's own `resurrect.tmux` when the plugin is loaded.
const SCRIPT_OPTIONS: &[&str] = &[
    "@resurrect-restore-script-path",
    "@resurrect-save-script-path",
];
/// The flag that marks volee's command in a hook (a user's own hook that has it is complete).
pub const FLAG: &str = "--into-resurrect";

/// Where resurrect was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Loaded in this server: its `@resurrect-restore-script-path` (or save) option.
    Loaded(String),
    /// Not loaded (yet: a plugin listed after volee's is loaded later), but installed in the
    /// plugin manager's directory.
    Installed(PathBuf),
    Absent,
}

impl Presence {
    pub fn is_present(&self) -> bool {
        !matches!(self, Presence::Absent)
    }
    pub fn describe(&self) -> String {
        match self {
            Presence::Loaded(script) => format!("loaded in tmux ({script})"),
            Presence::Installed(dir) => format!("installed in {}", dir.display()),
            Presence::Absent => "not found".into(),
        }
    }
}

/// TPM's plugin directories: `TMUX_PLUGIN_MANAGER_PATH` in tmux's global environment (TPM sets
/// it), else `$XDG_CONFIG_HOME/tmux/plugins` and `~/.tmux/plugins`.
fn plugin_dirs(server: Option<&TmuxServer>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(line) = server.and_then(|s| {
        s.run(&["show-environment", "-g", "TMUX_PLUGIN_MANAGER_PATH"])
            .ok()
    }) {
        if let Some(path) = line.trim_end().strip_prefix("TMUX_PLUGIN_MANAGER_PATH=") {
            dirs.push(PathBuf::from(path));
        }
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    if let Some(config) = config {
        dirs.push(config.join("tmux/plugins"));
    }
    if let Some(home) = home {
        dirs.push(home.join(".tmux/plugins"));
    }
    dirs
}

/// Is resurrect there: loaded in `server` (the options its `resurrect.tmux` sets), else
/// installed where TPM puts plugins.
pub fn presence(server: Option<&TmuxServer>) -> Presence {
    if let Some(server) = server {
        if let Some(script) = SCRIPT_OPTIONS.iter().find_map(|o| option(server, o)) {
            return Presence::Loaded(script);
        }
    }
    plugin_dirs(server)
        .into_iter()
        .map(|d| d.join("tmux-resurrect"))
        .find(|d| d.join("resurrect.tmux").is_file())
        .map_or(Presence::Absent, Presence::Installed)
}

/// The hook's command. Resurrect runs it with bash's `eval` inside its restore (itself run by
/// `run-shell`, whose output shows in the active pane, and which holds the client's command
/// queue until it ends): so volee runs in the background, reads nothing, prints nothing (its
/// report goes to `log`), and a missing log directory is silent too. volee's binary is named by
/// its absolute path, quoted for the shell; tmux reads an option's value verbatim (no `#{…}`
/// and no `%` expansion: resurrect reads it with `show-option -gqv`), so only the shell's
/// quoting matters. The braces keep it one command a user can put before or after their own
/// (`…; {…}`).
pub fn hook_command(bin: &str, log: &Path) -> String {
    format!(
        "{{ {} restore --all {FLAG} </dev/null >>{} 2>&1 & }} >/dev/null 2>&1",
        sh_quote(bin),
        sh_quote(&log.display().to_string())
    )
}

/// Where the hook's reports go.
pub fn log_file(paths: &volee_daemon::Paths) -> PathBuf {
    paths.log_file().with_file_name("resurrect.log")
}

/// `value` as one double-quoted word of a tmux.conf line: `\`, `"` and `$` (tmux expands
/// environment variables in double quotes) escaped; `#` and `'` are plain inside the quotes.
fn conf_word(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        if matches!(c, '\\' | '"' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The tmux.conf line for a user's own hook with volee's command added after theirs.
pub fn conf_line(theirs: &str, ours: &str) -> String {
    let theirs = theirs.trim_end().trim_end_matches(';').trim_end();
    format!(
        "set -g {HOOK_OPTION} {}",
        conf_word(&format!("{theirs}; {ours}"))
    )
}

/// `volee tmux-init`: set resurrect's hook when resurrect is there and the option is unset (or
/// still holds what volee set, then brought up to date). Returns warnings: a user's own hook
/// without volee's command gets the line to add.
pub fn install(server: &TmuxServer, bin: &str, log: &Path) -> Vec<String> {
    let ours = hook_command(bin, log);
    let current = option(server, HOOK_OPTION);
    let recorded = option(server, OURS_OPTION);
    match current {
        Some(c) if Some(&c) == recorded.as_ref() => {
            if c != ours {
                let _ = server.run(&["set-option", "-g", HOOK_OPTION, &ours]);
                let _ = server.run(&["set-option", "-g", OURS_OPTION, &ours]);
            }
            Vec::new()
        }
        Some(c) if c.contains(FLAG) => Vec::new(),
        Some(c) => vec![format!(
            "tmux-resurrect's {HOOK_OPTION} is your own, so volee left it alone; to bring volee's agents back after a restore, make it in tmux.conf: {}",
            conf_line(&c, &ours)
        )],
        None => {
            if presence(Some(server)).is_present()
                && server
                    .run(&["set-option", "-g", HOOK_OPTION, &ours])
                    .is_ok()
            {
                let _ = server.run(&["set-option", "-g", OURS_OPTION, &ours]);
            }
            Vec::new()
        }
    }
}

/// `volee down`: unset the hook only while it holds what volee set.
pub fn uninstall(server: &TmuxServer) {
    if let Some(recorded) = option(server, OURS_OPTION) {
        if option(server, HOOK_OPTION).as_deref() == Some(recorded.as_str()) {
            let _ = server.run(&["set-option", "-gu", HOOK_OPTION]);
        }
        let _ = server.run(&["set-option", "-gu", OURS_OPTION]);
    }
}

/// `volee doctor`'s line: is resurrect there, and does its restore bring volee's agents back.
pub fn doctor_line(server: Option<&TmuxServer>) -> (bool, String, Option<String>) {
    let found = presence(server);
    if !found.is_present() {
        return (
            true,
            "tmux-resurrect not found (after a reboot: volee restore --all)".into(),
            None,
        );
    }
    let hook = server.and_then(|s| option(s, HOOK_OPTION));
    match hook {
        Some(h) if h.contains(FLAG) => (
            true,
            format!(
                "{}; its restore brings volee's agents back ({HOOK_OPTION})",
                found.describe()
            ),
            None,
        ),
        Some(_) => (
            false,
            format!(
                "{}; your own {HOOK_OPTION} does not bring volee's agents back",
                found.describe()
            ),
            Some("volee tmux-init prints the line to put in tmux.conf".into()),
        ),
        None => (
            false,
            format!(
                "{}; its restore will not bring volee's agents back yet",
                found.describe()
            ),
            Some("run volee up (or volee tmux-init) in that tmux".into()),
        ),
    }
}

/// Shells resurrect restores panes with (its pane runs tmux's `default-command`, else
/// `default-shell`).
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "oksh", "tcsh", "csh", "yash", "nu",
    "elvish", "xonsh",
];

/// One pane of the server, as [`panes`] lists it.
#[derive(Debug, Clone)]
pub struct PaneRow {
    pub id: String,
    pub session: String,
    pub window_index: u32,
    pub window_name: String,
    pub pane_index: u32,
    pub command: String,
    /// Its `@volee-agent` (a pane of volee's is never taken).
    pub agent: String,
    pub dead: bool,
}

/// Every pane of the server, after resurrect's restore.
pub fn panes(server: &TmuxServer) -> Vec<PaneRow> {
    let format = fields_format(&[
        "pane_id",
        "session_name",
        "window_index",
        "pane_index",
        "pane_current_command",
        "@volee-agent",
        "pane_dead",
        "window_name",
    ]);
    let Ok(text) = server.run(&["list-panes", "-a", "-F", &format]) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let f = split_fields(l.as_bytes());
            if f.len() < 8 {
                return None;
            }
            Some(PaneRow {
                id: f[0].clone(),
                session: f[1].clone(),
                window_index: f[2].parse().ok()?,
                pane_index: f[3].parse().ok()?,
                command: f[4].clone(),
                agent: f[5].clone(),
                dead: f[6] == "1",
                // A window name may hold the separator: the rest of the line.
                window_name: f[7..].join("\u{1f}"),
            })
        })
        .collect()
}

/// The server's default shell's name (`default-shell`, a path).
pub fn default_shell(server: &TmuxServer) -> Option<String> {
    option(server, "default-shell").and_then(|s| {
        Path::new(&s)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    })
}

/// Resurrect's save directory, as its scripts find it: `@resurrect-dir` (`$HOME`, `~` and
/// `$HOSTNAME` expanded), else `~/.tmux/resurrect` when it exists, else
/// `${XDG_DATA_HOME:-~/.local/share}/tmux/resurrect`.
pub fn save_dir(server: &TmuxServer) -> Option<PathBuf> {
    let home = std::env::var("HOME").ok()?;
    if let Some(dir) = option(server, "@resurrect-dir") {
        // As resurrect's scripts do: `$(hostname)`.
        let host = if dir.contains("$HOSTNAME") {
            std::process::Command::new("hostname")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        return Some(PathBuf::from(
            dir.replace("$HOME", &home)
                .replace("$HOSTNAME", &host)
                .replace('~', &home),
        ));
    }
    let old = Path::new(&home).join(".tmux/resurrect");
    if old.is_dir() {
        return Some(old);
    }
    let data = std::env::var("XDG_DATA_HOME").unwrap_or_else(|_| format!("{home}/.local/share"));
    Some(Path::new(&data).join("tmux/resurrect"))
}

/// A place in tmux: session, window index, pane index.
type Place = (String, u32, u32);

/// The programs resurrect's save file (its `last`) names for each pane: the command the pane
/// showed (`#{pane_current_command}`, field 10) and the first word of the full command it
/// saved (field 11, after its `:`), which it types back when that program is on its list.
pub fn saved_programs(save: &str) -> Vec<(Place, Vec<String>)> {
    save.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() < 11 || f[0] != "pane" {
                return None;
            }
            let place = (f[1].to_string(), f[2].parse().ok()?, f[5].parse().ok()?);
            let mut names = vec![f[9].to_string()];
            let full = f[10].strip_prefix(':').unwrap_or(f[10]);
            if let Some(first) = full.split_whitespace().next() {
                names.push(
                    Path::new(first)
                        .file_name()
                        .map_or(first.to_string(), |n| n.to_string_lossy().into_owned()),
                );
            }
            names.retain(|n| !n.is_empty());
            Some((place, names))
        })
        .collect()
}

/// What a pane in an agent's place may run to be taken: a shell (resurrect restores each pane
/// with one), a program resurrect's save names for that place (it types it back), the agent's
/// own program.
pub struct Takeable<'a> {
    pub shell: Option<&'a str>,
    pub saved: &'a [(Place, Vec<String>)],
}

/// Does this pane hold what resurrect restored in `agent`'s place: the same session, window
/// (index and name) and pane index, not volee's, alive, running a shell or a program
/// resurrect typed back there (see [`Takeable`]).
fn takes(row: &PaneRow, agent: &AgentView, ok: &Takeable) -> bool {
    let (Host::Tmux { session, .. }, Some(place)) = (&agent.host, &agent.placement) else {
        return false;
    };
    if row.session != *session
        || row.window_index != place.window_index
        || row.window_name != place.window_name
        || row.pane_index != place.pane_index
        || !row.agent.is_empty()
        || row.dead
    {
        return false;
    }
    let program = agent
        .command
        .first()
        .and_then(|p| Path::new(p).file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let command = row.command.trim_start_matches('-');
    let typed_back = ok.saved.iter().any(|((s, w, p), names)| {
        *s == row.session
            && *w == row.window_index
            && *p == row.pane_index
            && names.iter().any(|n| n == command)
    });
    SHELLS.contains(&command)
        || ok.shell == Some(command)
        || program.as_deref() == Some(command)
        || typed_back
}

/// The pane resurrect restored in each agent's place (agents in the order given; a pane goes to
/// one agent only).
pub fn pane_for_each(rows: &[PaneRow], agents: &[AgentView], ok: &Takeable) -> Vec<Option<String>> {
    let mut taken: Vec<&str> = Vec::new();
    agents
        .iter()
        .map(|a| {
            let row = rows
                .iter()
                .find(|r| !taken.contains(&r.id.as_str()) && takes(r, a, ok))?;
            taken.push(&row.id);
            Some(row.id.clone())
        })
        .collect()
}

/// Is `agent` on the server at `socket` (a restore after resurrect's brings back that server's
/// agents only).
pub fn on_server(agent: &AgentView, socket: &Path) -> bool {
    let Host::Tmux { socket: s, .. } = &agent.host else {
        return false;
    };
    let s = Path::new(s);
    s == socket
        || matches!(
            (s.canonicalize(), socket.canonicalize()),
            (Ok(a), Ok(b)) if a == b
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_resurrect_typed_back_in_an_agents_place_is_taken() {
        let save = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/e2e/fixtures/resurrect/save.txt"
        ))
        .unwrap();
        let saved = saved_programs(&save);
        assert_eq!(saved.len(), 3);
        assert_eq!(
            saved[0],
            (
                ("main".to_string(), 0, 0),
                vec!["sleep".to_string(), "sleep".to_string()]
            )
        );
        assert_eq!(
            saved[1],
            (("main".to_string(), 1, 0), vec!["bash".to_string()])
        );
        let ok = Takeable {
            shell: None,
            saved: &saved,
        };
        let rows = vec![
            row("%1", 0, "alpha", 0, "sleep", ""),
            row("%2", 1, "pair", 1, "vim", ""),
        ];
        let mut stranger = agent("main", "pair", 1, 1);
        stranger.command = vec!["sh".into()];
        let mut typed = agent("main", "alpha", 0, 0);
        typed.command = vec!["sh".into()];
        assert_eq!(
            pane_for_each(&rows, &[typed, stranger], &ok),
            vec![Some("%1".to_string()), None]
        );
    }

    #[test]
    fn the_hook_quotes_the_binary_and_the_log_for_the_shell_and_runs_in_the_background() {
        let hook = hook_command(
            "/opt/it's #1 %d/volee",
            Path::new("/home/u/state/resurrect.log"),
        );
        assert_eq!(
            hook,
            "{ '/opt/it'\\''s #1 %d/volee' restore --all --into-resurrect </dev/null >>'/home/u/state/resurrect.log' 2>&1 & } >/dev/null 2>&1"
        );
        // bash reads it as one command that starts in the background, and echoes nothing.
        let out = std::process::Command::new("bash")
            .arg("-n")
            .arg("-c")
            .arg(format!("echo mine; {hook}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn the_line_for_a_users_own_hook_keeps_theirs_first_and_escapes_for_tmux_conf() {
        let line = conf_line("echo \"$HOME\";", "{ '/v' restore & }");
        assert_eq!(
            line,
            "set -g @resurrect-hook-post-restore-all \"echo \\\"\\$HOME\\\"; { '/v' restore & }\""
        );
    }

    fn agent(session: &str, window: &str, wi: u32, pi: u32) -> AgentView {
        serde_json::from_value(serde_json::json!({
            "id": "a1", "name": "alpha", "harness": "generic", "state": "stopped",
            "state_source": "multiplexer", "state_since": "2026-01-01T00:00:00Z",
            "evidence": "", "cwd": "/tmp", "origin": "launched", "profile_fit": "generic",
            "host": {"kind": "tmux", "socket": "/s", "session": session, "window": "@1", "pane": "%1"},
            "command": ["claude", "--x"],
            "placement": {"window_name": window, "window_index": wi, "window_layout": "", "pane_index": pi},
        }))
        .unwrap()
    }

    fn row(id: &str, wi: u32, name: &str, pi: u32, command: &str, agent: &str) -> PaneRow {
        PaneRow {
            id: id.into(),
            session: "main".into(),
            window_index: wi,
            window_name: name.into(),
            pane_index: pi,
            command: command.into(),
            agent: agent.into(),
            dead: false,
        }
    }

    #[test]
    fn an_agent_takes_the_shell_or_its_own_program_in_its_place_and_nothing_else() {
        let rows = vec![
            row("%1", 0, "alpha", 0, "bash", ""),
            row("%2", 1, "pair", 0, "vim", ""),
            row("%3", 1, "pair", 1, "claude", ""),
            row("%4", 2, "mine", 0, "bash", "k3f9"),
        ];
        let agents = vec![
            agent("main", "alpha", 0, 0),
            agent("main", "pair", 1, 0),
            agent("main", "pair", 1, 1),
            agent("main", "mine", 2, 0),
            agent("other", "alpha", 0, 0),
            agent("main", "renamed", 0, 0),
            agent("main", "alpha", 0, 0),
        ];
        let ok = Takeable {
            shell: Some("bash"),
            saved: &[],
        };
        assert_eq!(
            pane_for_each(&rows, &agents, &ok),
            vec![
                Some("%1".to_string()),
                None,
                Some("%3".to_string()),
                None,
                None,
                None,
                None
            ]
        );
    }
}
