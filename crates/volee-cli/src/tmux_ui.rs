//! volee inside the user's own tmux server: `up`, `down`, `tmux-init`, the picker, jump-to-next
//! and the launch prompt.
//!
//! volee never overwrites what the user set: options live under `@volee-*`, a key that is already
//! bound is left alone (and reported), `status-right` is saved before volee adds its placeholder
//! and restored by `volee down`. What volee added is recorded in `@volee-*` options so `down`
//! removes exactly that.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use volee_protocol::{AgentView, Host, Request, Response};
use volee_tmux::server::{TmuxError, TmuxServer};
use volee_view::sh_quote;

use crate::ask::{agents_of, ask, client, paths};
use crate::caller::{inside_server, stdin_is_tty, tmux_socket as caller_socket};
use crate::error::{tmux_missing, CliError, CliResult, Exit};
use crate::launch_plan::{Place, What};
use crate::output::{now_secs, out};

/// The placeholder a user puts in `status-right` (or `status-left`).
const PLACEHOLDER: &str = "#{volee_status}";
/// What volee puts there: the option the daemon pushes into.
const STATUS_FORMAT: &str = "#{@volee-status}";

/// Key bindings: (option naming the key, default key, what it does).
const BINDINGS: &[(&str, &str, Binding)] = &[
    ("@volee-key-picker", "a", Binding::Picker),
    ("@volee-key-next", "A", Binding::Next),
    ("@volee-key-launch", "V", Binding::Launch),
];

#[derive(Clone, Copy)]
enum Binding {
    /// The browser in a popup (tmux ≥ 3.2), else the menu.
    Picker,
    Next,
    Launch,
}

/// Does this tmux (`tmux -V`: `tmux 3.3a`, `tmux next-3.6`, `tmux master`) have
/// `display-popup` (3.2 and later)?
fn has_popup(version: &str) -> bool {
    let v = version
        .trim()
        .trim_start_matches("tmux ")
        .trim_start_matches("next-");
    let mut parts = v.split('.');
    let major = parts.next().and_then(|m| m.parse::<u32>().ok());
    let minor: String = parts
        .next()
        .unwrap_or("0")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    match (major, minor.parse::<u32>().unwrap_or(0)) {
        (Some(major), minor) => (major, minor) >= (3, 2),
        // A build from git names no number: it is newer than any release.
        (None, _) => v == "master",
    }
}

fn volee_bin() -> CliResult<String> {
    std::env::current_exe()
        .map(|p| p.display().to_string())
        .map_err(|e| CliError::from_error(Exit::Internal, &e))
}

/// The command a key runs; `run-shell` runs it through the shell, hence [`sh_quote`].
/// (`display-popup` expands no format in its command, so the popup is opened by `volee browse
/// --popup`, which `run-shell` gives the client, pane and socket.)
fn binding_command(binding: Binding, bin: &str, popup: bool) -> Vec<String> {
    let bin = sh_quote(bin);
    let common = "--socket '#{socket_path}' --client '#{client_name}'";
    match binding {
        Binding::Picker if popup => vec![
            "run-shell".into(),
            "-b".into(),
            format!("{bin} browse --popup {common} --pane '#{{pane_id}}'"),
        ],
        Binding::Picker => vec![
            "run-shell".into(),
            "-b".into(),
            format!("{bin} pick {common}"),
        ],
        Binding::Next => vec![
            "run-shell".into(),
            "-b".into(),
            format!("{bin} next {common}"),
        ],
        Binding::Launch => vec![
            "command-prompt".into(),
            "-p".into(),
            "volee launch:".into(),
            format!(
                "set-option -g @volee-launch-line \"%%%\" ; run-shell -b \"{bin} launch-line --socket '#{{socket_path}}' --pane '#{{pane_id}}' --client '#{{client_name}}'\""
            ),
        ],
    }
}

/// A global option of the server's (None: unset or empty).
pub(crate) fn option(server: &TmuxServer, name: &str) -> Option<String> {
    server
        .run(&["show-option", "-gqv", name])
        .ok()
        .map(|v| v.trim_end_matches('\n').to_string())
        .filter(|v| !v.is_empty())
}

/// Is `key` bound in the prefix table to something other than what volee bound?
fn key_taken(server: &TmuxServer, key: &str, ours: &[String]) -> bool {
    if ours.iter().any(|k| k == key) {
        return false;
    }
    server
        .run(&["list-keys", "-T", "prefix", key])
        .map(|o| !o.trim().is_empty())
        .unwrap_or(false)
}

/// Install options, bindings and the status placeholder; idempotent. Returns warnings.
fn init_server(server: &TmuxServer) -> CliResult<Vec<String>> {
    let bin = volee_bin()?;
    let mut warnings = Vec::new();
    server.run(&["set-option", "-g", "@volee-bin", &bin])?;
    // tmux-resurrect's restore brings volee's agents back. First of all: tmux-continuum runs
    // resurrect's restore about a second after tmux starts.
    warnings.extend(crate::resurrect::install(
        server,
        &bin,
        &crate::resurrect::log_file(&paths()),
    ));

    // Status line: replace the user's placeholder, or append when there is none.
    let status_right = server
        .run(&["show-option", "-gv", "status-right"])?
        .trim_end_matches('\n')
        .to_string();
    if !status_right.contains(STATUS_FORMAT) {
        if option(server, "@volee-saved-status-right").is_none() {
            server.run(&[
                "set-option",
                "-g",
                "@volee-saved-status-right",
                &status_right,
            ])?;
        }
        let new = if status_right.contains(PLACEHOLDER) {
            status_right.replace(PLACEHOLDER, STATUS_FORMAT)
        } else {
            format!("{STATUS_FORMAT} {status_right}")
        };
        server.run(&["set-option", "-g", "status-right", &new])?;
        server.run(&["set-option", "-g", "@volee-set-status-right", &new])?;
        // Make room for the counts when the user kept tmux's default length.
        if server
            .run(&["show-option", "-gv", "status-right-length"])
            .map(|v| v.trim().parse::<u32>().unwrap_or(0) < 80)
            .unwrap_or(false)
            && option(server, "@volee-saved-status-right-length").is_none()
        {
            let old = server.run(&["show-option", "-gv", "status-right-length"])?;
            server.run(&[
                "set-option",
                "-g",
                "@volee-saved-status-right-length",
                old.trim(),
            ])?;
            server.run(&["set-option", "-g", "status-right-length", "80"])?;
        }
    }
    if option(server, "@volee-status").is_none() {
        server.run(&["set-option", "-g", "@volee-status", "volee"])?;
    }

    // Key bindings in the prefix table, never over a user's own binding.
    let popup = volee_tmux::server::version().is_ok_and(|v| has_popup(&v));
    let ours: Vec<String> = option(server, "@volee-bound-keys")
        .map(|v| v.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    let mut bound = Vec::new();
    for (opt, default, binding) in BINDINGS {
        let key = option(server, opt).unwrap_or_else(|| (*default).to_string());
        if key == "none" {
            continue;
        }
        if key_taken(server, &key, &ours) {
            warnings.push(format!(
                "prefix {key} is already bound; volee left it alone (choose another key with: tmux set -g {opt} KEY)"
            ));
            continue;
        }
        let mut args = vec![
            "bind-key".to_string(),
            "-T".into(),
            "prefix".into(),
            key.clone(),
        ];
        args.extend(binding_command(*binding, &bin, popup));
        server.run(&args)?;
        bound.push(key);
    }
    // Keys volee bound before under another option value are released.
    for old in ours.iter().filter(|k| !bound.contains(k)) {
        let _ = server.run(&["unbind-key", "-T", "prefix", old]);
    }
    server.run(&["set-option", "-g", "@volee-bound-keys", &bound.join(" ")])?;
    Ok(warnings)
}

/// Remove everything `init_server` added.
fn down_server(server: &TmuxServer) -> CliResult {
    if let Some(keys) = option(server, "@volee-bound-keys") {
        for key in keys.split_whitespace() {
            let _ = server.run(&["unbind-key", "-T", "prefix", key]);
        }
    }
    let current = server
        .run(&["show-option", "-gv", "status-right"])
        .map(|s| s.trim_end_matches('\n').to_string())
        .unwrap_or_default();
    let set_by_us = option(server, "@volee-set-status-right");
    if let Some(saved) = option(server, "@volee-saved-status-right").or(Some(String::new())) {
        if set_by_us.as_deref() == Some(current.as_str()) {
            // The user did not touch it since: put theirs back as it was.
            server.run(&["set-option", "-g", "status-right", &saved])?;
        } else if current.contains(STATUS_FORMAT) {
            // The user edited it meanwhile: only take volee's part out.
            let restored = current
                .replace(&format!("{STATUS_FORMAT} "), "")
                .replace(STATUS_FORMAT, PLACEHOLDER);
            server.run(&["set-option", "-g", "status-right", &restored])?;
        }
    }
    if let Some(len) = option(server, "@volee-saved-status-right-length") {
        let _ = server.run(&["set-option", "-g", "status-right-length", &len]);
    }
    crate::resurrect::uninstall(server);
    for opt in [
        "@volee-status",
        "@volee-bin",
        "@volee-bound-keys",
        "@volee-saved-status-right",
        "@volee-set-status-right",
        "@volee-saved-status-right-length",
        "@volee-launch-line",
    ] {
        let _ = server.run(&["set-option", "-gu", opt]);
    }
    Ok(())
}

pub fn tmux_init(socket: Option<PathBuf>) -> CliResult {
    volee_tmux::server::version()?;
    let socket = caller_socket(socket);
    let server = TmuxServer::new(&socket);
    if !server.is_running() {
        return Err(TmuxError::NoServer { socket }.into());
    }
    for w in init_server(&server)? {
        eprintln!("warning: {w}");
    }
    ask(&Request::TmuxInit {
        socket: socket.display().to_string(),
        volee_bin: volee_bin()?,
        status_cost: option(&server, "@volee-status-cost").as_deref() == Some("on"),
    })?;
    Ok(())
}

pub fn up(no_attach: bool) -> CliResult {
    // Inside zellij, volee runs in zellij: tmux is neither needed nor touched.
    if let Some(session) = crate::zellij_ui::caller_session() {
        return crate::zellij_ui::up(&session);
    }
    volee_tmux::server::version().map_err(|_| tmux_missing())?;
    client()?;
    let socket = caller_socket(None);
    let server = TmuxServer::new(&socket);
    let inside = inside_server(&socket);
    if !inside && !server.has_session("volee") {
        crate::caller::ensure_default_socket_dir(&socket);
        let cwd = std::env::current_dir().map_err(|e| CliError::from_error(Exit::User, &e))?;
        server.run(&[
            "new-session",
            "-d",
            "-s",
            "volee",
            "-c",
            &cwd.display().to_string(),
        ])?;
    }
    tmux_init(Some(socket.clone()))?;
    let agents = match ask(&Request::List { all: true })? {
        Response::Agents { agents } => agents,
        _ => Vec::new(),
    };
    let summary = volee_view::status_plain(&volee_view::Counts::from_agents(&agents));
    out(&format!(
        "volee is up: {summary}. Keys: prefix a (picker), prefix A (next needing you), prefix V (launch)."
    ));
    // After a reboot (or a lost tmux server): what `[restore] on_up` says.
    if let Err(e) = crate::restore::on_up(&agents, stdin_is_tty()) {
        eprintln!("warning: {}", e.message);
    }
    if inside || no_attach || !stdin_is_tty() {
        if !inside {
            out("attach with: tmux attach -t volee");
        }
        return Ok(());
    }
    let err = server
        .client_command()
        .args(["attach-session", "-t", "=volee"])
        .exec();
    Err(CliError::from_error(Exit::Environment, &err))
}

pub fn down() -> CliResult {
    if let Some(session) = crate::zellij_ui::caller_session() {
        crate::zellij_ui::down(&session)?;
    }
    let paths = paths();
    let mut sockets = vec![caller_socket(None)];
    // The daemon's record of servers where it installed itself (read-only here).
    if let Ok(text) = std::fs::read_to_string(paths.registry()) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Some(list) = v["tmux_servers"].as_array() {
                sockets.extend(list.iter().filter_map(|s| s.as_str()).map(PathBuf::from));
            }
        }
    }
    sockets.sort();
    sockets.dedup();
    let tmux_present = volee_tmux::server::version().is_ok();
    for socket in &sockets {
        let server = TmuxServer::new(socket);
        if tmux_present && server.is_running() {
            down_server(&server)?;
            if let Ok(mut c) = volee_daemon::Client::connect(&paths) {
                let _ = c.request(&Request::TmuxDown {
                    socket: socket.display().to_string(),
                });
            }
        }
    }
    crate::commands::daemon_stop()?;
    // What `volee setup HARNESS` added to the user's own hooks files.
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for p in volee_harness::profiles() {
            let volee_harness::Instrumentation::UserOptIn(rel) = p.instrumentation else {
                continue;
            };
            let file = home.join(rel);
            match crate::setup::unsetup(p.name, &file) {
                Ok(0) => {}
                Ok(n) => out(&format!("took volee's {n} hooks out of {}", file.display())),
                Err(e) => eprintln!("warning: {}: {}", file.display(), e.message),
            }
        }
    }
    out(
        "volee is down: its key bindings, options and status line are removed; agents keep running",
    );
    Ok(())
}

/// Run a tmux command on behalf of a key binding; errors go to the user's status line.
pub(crate) fn tell(server: &TmuxServer, client: Option<&str>, message: &str) {
    let mut args = vec!["display-message".to_string()];
    if let Some(c) = client {
        args.extend(["-c".into(), c.to_string()]);
    }
    args.push(volee_view::tmux_message_text(message, 200));
    let _ = server.run(&args);
}

/// The menu command of an agent: switch the client to its pane; for an agent on a machine, a new
/// window running `volee attach MACHINE:ID` (`bin`: this volee, shell-quoted).
fn switch_command(client: Option<&str>, agent: &AgentView, socket: &Path, bin: &str) -> String {
    if agent.machine.is_some() {
        return match remote_attach_line(agent, bin) {
            Some(line) => format!("new-window -n '{}' \"{line}\"", agent.address()),
            None => "display-message 'volee: not an agent id volee would make'".to_owned(),
        };
    }
    match &agent.host {
        Host::Tmux {
            socket: s, pane, ..
        } if Path::new(s) == socket => match client {
            Some(c) => format!("switch-client -c '{}' -t '{pane}'", c.replace('\'', "")),
            None => format!("switch-client -t '{pane}'"),
        },
        _ => format!(
            "display-message 'volee: {} is not on this tmux server'",
            agent.id
        ),
    }
}

/// `BIN attach MACHINE:ID` as a shell line, for an agent on a machine whose machine name and id
/// are plainly names and ids (remote text goes into no command line otherwise).
fn remote_attach_line(agent: &AgentView, bin: &str) -> Option<String> {
    let machine = agent.machine.as_deref()?;
    let plain = volee_daemon::machines::check_name(machine).is_ok()
        && crate::attach::is_plain_id(&agent.id);
    plain.then(|| format!("{} attach {machine}:{}", sh_quote(bin), agent.id))
}

/// Open a tmux window beside `pane` (the client's session) attached to an agent on a machine
/// (`volee attach MACHINE:ID` over the daemon's connection); the session's client goes to it.
pub(crate) fn open_remote_window(
    server: &TmuxServer,
    pane: Option<&str>,
    agent: &AgentView,
) -> CliResult {
    let bin = volee_bin()?;
    let Some(machine) = agent.machine.as_deref() else {
        return Err(CliError::internal(
            "a local agent has no machine to attach to",
        ));
    };
    if volee_daemon::machines::check_name(machine).is_err()
        || !crate::attach::is_plain_id(&agent.id)
    {
        return Err(CliError::internal(format!(
            "machine {} named agent {:?}, which is not an id volee would make",
            volee_view::plain_text(machine, 40),
            volee_view::plain_text(&agent.id, 80)
        )));
    }
    let address = agent.address();
    let mut args = vec!["new-window".to_owned(), "-n".into(), address.clone()];
    if let Some(p) = pane {
        args.extend(["-a".into(), "-t".into(), p.to_owned()]);
    }
    // Several words after the options: tmux runs them as they are, no shell in between.
    args.extend([bin, "attach".into(), address]);
    server.run(&args)?;
    Ok(())
}

pub fn pick(socket: Option<PathBuf>, client_name: Option<String>) -> CliResult {
    let socket = caller_socket(socket);
    let server = TmuxServer::new(&socket);
    let agents = match ask(&Request::List { all: true }) {
        Ok(Response::Agents { agents }) => agents,
        Ok(_) => Vec::new(),
        Err(e) => {
            tell(
                &server,
                client_name.as_deref(),
                &format!("volee: {}", e.message),
            );
            return Err(e);
        }
    };
    let items = volee_view::menu_items(&agents, now_secs());
    if items.is_empty() {
        tell(
            &server,
            client_name.as_deref(),
            "volee: no agents (prefix V launches one)",
        );
        return Ok(());
    }
    let mut args: Vec<String> = vec!["display-menu".into()];
    if let Some(c) = &client_name {
        args.extend(["-c".into(), c.clone()]);
    }
    args.extend([
        "-T".into(),
        "#[align=centre] volee ".into(),
        "-x".into(),
        "C".into(),
        "-y".into(),
        "C".into(),
    ]);
    let bin = volee_bin()?;
    for item in &items {
        let Some(agent) = agents.iter().find(|a| a.address() == item.agent_id) else {
            continue;
        };
        args.push(item.label.clone());
        args.push(item.key.clone());
        args.push(switch_command(client_name.as_deref(), agent, &socket, &bin));
    }
    // display-menu returns only when the menu closes: leave it to tmux and return now.
    leave_to_tmux(&server, &args)
}

/// Run a tmux command that returns only when the user closes what it shows (a menu, a popup)
/// without waiting for it.
pub(crate) fn leave_to_tmux(server: &TmuxServer, args: &[String]) -> CliResult {
    let argv: Vec<String> = args
        .iter()
        .map(|a| volee_tmux::server::literal_arg(a))
        .collect();
    server
        .command()
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| CliError::from_error(Exit::Environment, &e))?;
    Ok(())
}

pub fn next(socket: Option<PathBuf>, client_name: Option<String>) -> CliResult {
    let socket = caller_socket(socket);
    let server = TmuxServer::new(&socket);
    // This server's agents only: a machine's agent is reached from the picker (a window of its
    // own), not switched to.
    let mut agents = agents_of(ask(&Request::List { all: false })?)?;
    agents.retain(|a| a.machine.is_none());
    // Start after the agent the client is looking at, so repeated presses cycle.
    let mut current_pane_args = vec!["display-message".to_string(), "-p".into()];
    if let Some(c) = &client_name {
        current_pane_args.extend(["-c".into(), c.clone()]);
    }
    current_pane_args.push("#{pane_id}".into());
    let current_pane = server
        .run(&current_pane_args)
        .map(|p| p.trim().to_string())
        .unwrap_or_default();
    let current = agents.iter().find(|a| {
        matches!(&a.host, Host::Tmux { pane, socket: s, .. } if *pane == current_pane && Path::new(s) == socket)
    });
    match volee_view::next_needing_you(&agents, current.map(|a| a.id.as_str())) {
        Some(agent) => {
            let Host::Tmux { pane, .. } = &agent.host else {
                return Ok(());
            };
            let mut args = vec!["switch-client".to_string()];
            if let Some(c) = &client_name {
                args.extend(["-c".into(), c.clone()]);
            }
            args.extend(["-t".into(), pane.clone()]);
            server.run(&args)?;
        }
        None => tell(&server, client_name.as_deref(), "volee: no agent needs you"),
    }
    Ok(())
}

/// The launch prompt's line: run it through the user's shell in the pane's directory.
pub fn launch_line(socket: &Path, pane: &str, client_name: Option<String>) -> CliResult {
    let server = TmuxServer::new(socket);
    let line = option(&server, "@volee-launch-line").unwrap_or_default();
    let _ = server.run(&["set-option", "-gu", "@volee-launch-line"]);
    let line = line.trim().to_string();
    if line.is_empty() {
        return Ok(());
    }
    let cwd = server
        .run(&["display-message", "-p", "-t", pane, "#{pane_current_path}"])
        .map(|p| p.trim_end_matches('\n').to_string())
        .unwrap_or_default();
    let session = server
        .run(&["display-message", "-p", "-t", pane, "#{session_name}"])
        .map(|p| p.trim_end_matches('\n').to_string())
        .ok();
    let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
    let name_base: String = line
        .split_whitespace()
        .next()
        .map(|w| w.rsplit('/').next().unwrap_or(w).to_string())
        .unwrap_or_default();
    let mut client = client()?;
    let existing = match client.request(&Request::List { all: false })? {
        Response::Agents { agents } => agents,
        _ => Vec::new(),
    };
    let name = (1..)
        .map(|n| {
            if n == 1 {
                name_base.clone()
            } else {
                format!("{name_base}-{n}")
            }
        })
        // Names are unique among this computer's agents (a machine's are its own).
        .find(|n| !existing.iter().any(|a| a.machine.is_none() && &a.name == n) && !n.is_empty());
    // The key binding runs in tmux's environment, not the pane's: not its TMUX.
    let mut env = crate::caller::env();
    env.retain(|(k, _)| k != "TMUX" && k != "TMUX_PANE");
    let req = crate::launch_plan::request(
        "generic".into(),
        crate::launch_plan::line(What::Command(vec![shell, "-c".into(), line]))?,
        Place {
            cwd: if cwd.is_empty() {
                std::env::var("HOME").unwrap_or_else(|_| "/".into())
            } else {
                cwd
            },
            name,
            tmux_socket: socket.display().to_string(),
            tmux_session: session.filter(|s| !s.is_empty()),
            caller_pane: Some(pane.to_string()),
            zellij_session: None,
        },
        env,
    );
    match client.request(&Request::Launch(Box::new(req)))? {
        Response::Agent { agent } => {
            tell(
                &server,
                client_name.as_deref(),
                &format!("volee: launched {} ({})", agent.name, agent.id),
            );
            Ok(())
        }
        other => {
            let e = CliError::from_response(other);
            tell(
                &server,
                client_name.as_deref(),
                &format!("volee: {}", e.message),
            );
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bindings_quote_the_binary_for_the_shell() {
        let picker = binding_command(Binding::Picker, "/opt/it's/volee", false);
        assert_eq!(picker[..2], ["run-shell", "-b"]);
        assert!(
            picker[2].starts_with(r"'/opt/it'\''s/volee' pick --socket"),
            "{picker:?}"
        );
        let popup = binding_command(Binding::Picker, "/opt/it's/volee", true);
        assert!(
            popup[2].starts_with(r"'/opt/it'\''s/volee' browse --popup --socket"),
            "{popup:?}"
        );
        assert!(popup[2].ends_with("--pane '#{pane_id}'"), "{popup:?}");
    }

    /// An agent in pane %7 of the server at /tmp/tmux-0/default, on `machine` when given.
    fn agent_in_pane(id: &str, machine: Option<&str>) -> AgentView {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": "n", "harness": "generic", "harness_version": null,
            "profile_fit": "generic", "origin": "launched", "state": "needs_you",
            "state_source": "process", "state_since": "2026-01-01T00:00:00Z", "evidence": "",
            "exit_status": null, "pid": 1, "cwd": "/", "session_id": null,
            "host": {"kind": "tmux", "socket": "/tmp/tmux-0/default", "session": "s",
                     "window": "@1", "pane": "%7"},
            "machine": machine,
        }))
        .unwrap()
    }

    #[test]
    fn a_machines_agent_opens_a_window_attached_to_it_never_a_local_pane() {
        let socket = Path::new("/tmp/tmux-0/default");
        let local = agent_in_pane("k3f9", None);
        assert_eq!(
            switch_command(Some("c1"), &local, socket, "/v"),
            "switch-client -c 'c1' -t '%7'"
        );
        // The same socket path and pane id on the machine are not ours.
        let remote = agent_in_pane("k3f9", Some("box"));
        assert_eq!(
            switch_command(Some("c1"), &remote, socket, "/opt/it's/volee"),
            r#"new-window -n 'box:k3f9' "'/opt/it'\''s/volee' attach box:k3f9""#
        );
        let hostile = agent_in_pane("k3f9'; touch /tmp/x", Some("box"));
        assert_eq!(
            switch_command(None, &hostile, socket, "/v"),
            "display-message 'volee: not an agent id volee would make'"
        );
    }

    #[test]
    fn the_popup_is_there_from_tmux_3_2() {
        for (v, yes) in [
            ("tmux 3.3a", true),
            ("tmux 3.2", true),
            ("tmux 3.2a", true),
            ("tmux 3.1c", false),
            ("tmux 2.9", false),
            ("tmux 10.0", true),
            ("tmux next-3.6", true),
            ("tmux master", true),
            ("", false),
        ] {
            assert_eq!(has_popup(v), yes, "{v}");
        }
    }
}
