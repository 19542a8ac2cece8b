//! Status files a harness documents, read as a state source (`listing`).
//!
//! Claude Code keeps `~/.claude/sessions/<pid>.json` = `{pid, sessionId, status, waitingFor, …}`
//! (measured on 2.1.197 and 2.1.332: status `busy|shell|idle|waiting`, waitingFor `permission
//! prompt|input needed|dialog open|worker request|sandbox request`).

use std::path::{Path, PathBuf};

use volee_protocol::AgentState;

use crate::profile::{HttpServer, ListingSource, OpenFile, PromptStyle};

/// What one status file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingObservation {
    pub state: AgentState,
    /// `status waiting (permission prompt)`.
    pub evidence: String,
    pub session_id: Option<String>,
}

/// The status file of a harness process, when the harness keeps one
/// ([`ListingSource::StatusFile`]).
pub fn status_file(harness: &str, home: &Path, pid: u32) -> Option<PathBuf> {
    match listing_of(harness) {
        ListingSource::StatusFile { dir } => Some(home.join(dir).join(format!("{pid}.json"))),
        _ => None,
    }
}

/// The listing source of `harness` (none for an unknown one).
pub fn listing_of(harness: &str) -> ListingSource {
    crate::profile(harness).map_or(ListingSource::None, |p| p.listing)
}

/// Parse a status file of `harness`; None when it says nothing volee knows.
pub fn parse_status(harness: &str, text: &str) -> Option<ListingObservation> {
    let kept = matches!(listing_of(harness), ListingSource::StatusFile { .. });
    if !kept || text.len() > 1024 * 1024 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let status = v.get("status")?.as_str()?;
    let waiting_for = v.get("waitingFor").and_then(|w| w.as_str()).unwrap_or("");
    let state = match status {
        "busy" | "shell" => AgentState::Working,
        "idle" => AgentState::Idle,
        // Every documented reason is the user's turn: a permission prompt, a question, a dialog.
        "waiting" => AgentState::NeedsYou,
        _ => return None,
    };
    let evidence = if waiting_for.is_empty() {
        format!("status {status}")
    } else {
        format!(
            "status {status} ({})",
            waiting_for.chars().take(40).collect::<String>()
        )
    };
    Some(ListingObservation {
        state,
        evidence,
        session_id: v
            .get("sessionId")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(String::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_statuses_map_to_states() {
        let waiting = r#"{"pid":1,"sessionId":"s-1","status":"waiting","waitingFor":"permission prompt","kind":"interactive"}"#;
        let o = parse_status("claude", waiting).unwrap();
        assert_eq!(o.state, AgentState::NeedsYou);
        assert_eq!(o.evidence, "status waiting (permission prompt)");
        assert_eq!(o.session_id.as_deref(), Some("s-1"));
        assert_eq!(
            parse_status("claude", r#"{"status":"busy"}"#).map(|o| o.state),
            Some(AgentState::Working)
        );
        assert_eq!(
            parse_status("claude", r#"{"status":"idle"}"#).map(|o| o.state),
            Some(AgentState::Idle)
        );
        assert_eq!(parse_status("claude", r#"{"status":"sleeping"}"#), None);
        assert_eq!(parse_status("claude", "{ torn"), None);
        assert_eq!(parse_status("codex", r#"{"status":"idle"}"#), None);
    }

    #[test]
    fn only_claude_keeps_a_status_file() {
        let p = status_file("claude", Path::new("/h"), 42).unwrap();
        assert_eq!(p, PathBuf::from("/h/.claude/sessions/42.json"));
        assert!(status_file("qwen", Path::new("/h"), 42).is_none());
    }
}

/// Where a harness publishes the session id of a running process, when its profile says
/// (`[session] file`): Claude and Qwen `~/.<h>/sessions/<pid>.json` (`sessionId`), Grok
/// `~/.grok/active_sessions.json` (a list of `{session_id, pid, …}`).
pub fn session_file(harness: &str, home: &Path, pid: u32) -> Option<PathBuf> {
    let file = crate::profile::get(harness)?.session_file?;
    Some(home.join(file.path.replace("{pid}", &pid.to_string())))
}

/// The session id of process `pid` in the text of its harness's [`session_file`].
pub fn parse_session_id(harness: &str, text: &str, pid: u32) -> Option<String> {
    if text.len() > 4 * 1024 * 1024 {
        return None;
    }
    let file = crate::profile::get(harness)?.session_file?;
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let entry = match file.pid_field {
        None => &v,
        Some(field) => v
            .as_array()?
            .iter()
            .find(|s| s.get(field).and_then(|p| p.as_u64()) == Some(u64::from(pid)))?,
    };
    let id = entry.get(file.id_field)?.as_str()?;
    (!id.is_empty() && id.len() <= 200).then(|| id.to_string())
}

/// Does this harness run a server that lists its sessions with their states
/// ([`ListingSource::AppServer`]: Codex's shared app-server daemon)?
pub fn has_listing_server(harness: &str) -> bool {
    matches!(listing_of(harness), ListingSource::AppServer(_))
}

/// Does this harness serve its own state over HTTP ([`ListingSource::HttpServer`])? Its
/// helper processes run the same program ([`not_an_agent`]).
pub fn has_own_server(harness: &str) -> bool {
    matches!(listing_of(harness), ListingSource::HttpServer(_))
}

/// The app server's socket for a process with environment `env`: `$HOME_ENV/SOCKET`, else
/// `$HOME/HOME_DIR/SOCKET` (Codex: `$CODEX_HOME`, else `~/.codex`). None for a harness without
/// one, or an environment naming neither home.
pub fn app_server_socket(harness: &str, env: &[(String, String)]) -> Option<PathBuf> {
    let ListingSource::AppServer(server) = listing_of(harness) else {
        return None;
    };
    let home = env_var(env, server.home_env)
        .map(PathBuf::from)
        .or_else(|| env_var(env, "HOME").map(|h| Path::new(h).join(server.home_dir)))?;
    Some(home.join(server.socket))
}

fn env_var<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// The first prompt on a command line that passes it as the last positional argument
/// ([`PromptStyle::Positional`]: `codex [FLAGS] PROMPT`): the last argument, when that is not a
/// flag. It tells the agent's own session from others in the same folder.
pub fn positional_prompt(harness: &str, command: &[String]) -> Option<String> {
    if crate::profile(harness)?.prompt != PromptStyle::Positional {
        return None;
    }
    let last = command.get(1..)?.last()?;
    (!last.starts_with('-')).then(|| last.clone())
}

/// The loopback port of the harness's own server, read from the agent's command line
/// ([`ListingSource::HttpServer`]: `--port P`, with no `--hostname` or a loopback/any-address
/// one). None for a harness without one, no port, port 0 (a random one nobody can know), or a
/// server bound elsewhere (volee talks to loopback only).
pub fn server_port(harness: &str, command: &[String]) -> Option<u16> {
    let ListingSource::HttpServer(server) = listing_of(harness) else {
        return None;
    };
    let args = command.get(1..)?;
    let port: u16 = flag_value(server, args, &[server.port_flag])?
        .parse()
        .ok()?;
    let loopback = match flag_value(server, args, &[server.hostname_flag]) {
        None => true,
        Some(h) => matches!(
            h,
            "127.0.0.1" | "localhost" | "0.0.0.0" | "::" | "::1" | "[::1]"
        ),
    };
    (port != 0 && loopback).then_some(port)
}

/// The first prompt of a resumed session (the prompt flag with a session or continue flag),
/// which the harness ignores (OpenCode 1.18.33): volee hands it over through the server.
pub fn resume_prompt(harness: &str, command: &[String]) -> Option<String> {
    let ListingSource::HttpServer(server) = listing_of(harness) else {
        return None;
    };
    let args = command.get(1..)?;
    let resumed = flag_value(server, args, server.session_flags).is_some()
        || has_flag(server, args, server.continue_flags);
    let prompt = flag_value(server, args, &[server.prompt_flag])?;
    (resumed && !prompt.is_empty()).then(|| prompt.to_string())
}

/// A found process of a harness with its own server that is no agent: a child of one (it
/// carries the harness's child marker in its environment) or a helper subcommand (`opencode
/// serve`, `opencode mcp …`).
pub fn not_an_agent(harness: &str, argv: &[String], env: &[(String, String)]) -> bool {
    let ListingSource::HttpServer(server) = listing_of(harness) else {
        return false;
    };
    env.iter().any(|(k, _)| k == server.child_marker_env)
        || argv
            .get(1)
            .is_some_and(|a| server.helper_subcommands.contains(&a.as_str()))
}

/// The value of `--name V` / `--name=V` in `args` (values of other flags skipped).
fn flag_value<'a>(server: &HttpServer, args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        for n in names {
            if a == n {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        if server.value_flags.contains(&a.as_str()) {
            it.next();
        }
    }
    None
}

/// Is one of the boolean flags `names` among `args` (values of other flags skipped)?
fn has_flag(server: &HttpServer, args: &[String], names: &[&str]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if names.contains(&a.as_str()) {
            return true;
        }
        if server.value_flags.contains(&a.as_str()) {
            it.next();
        }
    }
    false
}

/// Does this harness hold its transcript (Codex) or a per-session lock file (Copilot) open (see
/// [`session_id_from_open_file`])?
pub fn holds_transcript_open(harness: &str) -> bool {
    open_file_of(harness) != OpenFile::None
}

/// The kind of file `harness` holds open that names its session (its profile's
/// `[session] open_file`).
fn open_file_of(harness: &str) -> OpenFile {
    crate::profile::get(harness).map_or(OpenFile::None, |p| p.open_file)
}

/// The session id in the path of a file the process holds open, for harnesses whose transcript
/// stays open while the session runs: Codex's `~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`
/// (the id is the UUID at the end of the name).
pub fn session_id_from_open_file(harness: &str, path: &Path) -> Option<String> {
    match open_file_of(harness) {
        OpenFile::RolloutUuid => {
            let text = path.to_str()?;
            if !text.contains("/sessions/") {
                return None;
            }
            let name = path.file_name()?.to_str()?;
            let stem = name.strip_prefix("rollout-")?.strip_suffix(".jsonl")?;
            // `<ts>-<uuid>`: the UUID is the last 36 characters, in 8-4-4-4-12 hex groups.
            let id = stem.get(stem.len().checked_sub(36)?..)?;
            let groups: Vec<&str> = id.split('-').collect();
            let shape = groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12];
            (shape
                && groups
                    .iter()
                    .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit())))
            .then(|| id.to_string())
        }
        // Copilot holds `<COPILOT_HOME>/session-state/<id>/inuse.<pid>.hold` open while the
        // session runs in it (measured on 1.0.102).
        OpenFile::InuseHold => {
            let name = path.file_name()?.to_str()?;
            let pid = name.strip_prefix("inuse.")?.strip_suffix(".hold")?;
            if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let session_dir = path.parent()?;
            if session_dir.parent()?.file_name()?.to_str()? != "session-state" {
                return None;
            }
            let id = session_dir.file_name()?.to_str()?;
            copilot_session_id_shape(id).then(|| id.to_string())
        }
        OpenFile::None => None,
    }
}

/// A Copilot session id: a UUID (`--session-id` takes only these), lowercase or not.
fn copilot_session_id_shape(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The session of process `pid` from the per-process lock files its harness keeps, for when
/// its open files cannot be read (Copilot's [`copilot_session_from_lock_files`]); None for other
/// harnesses.
pub fn session_id_from_lock_files(
    harness: &str,
    env: &[(String, String)],
    pid: u32,
) -> Option<String> {
    let profile = crate::profile::get(harness)?;
    if profile.open_file != OpenFile::InuseHold {
        return None;
    }
    let home = harness_home(harness, |key| env_var(env, key).map(String::from))?;
    copilot_session_from_lock_files(&home, pid)
}

/// A harness's whole state directory for a process environment: `$<home_env>` of its profile
/// when set (absolute only), else the directory above its own hooks directory under HOME
/// (Copilot: `$COPILOT_HOME`, else `$HOME/.copilot`).
pub fn harness_home(harness: &str, var: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let profile = crate::profile::get(harness)?;
    if let Some(home_env) = profile.hook_files.home_env {
        if let Some(home) = var(home_env).filter(|v| !v.is_empty()) {
            let home = PathBuf::from(home);
            return home.is_absolute().then_some(home);
        }
    }
    let crate::Instrumentation::OwnHooksFile(dir) = profile.instrumentation else {
        return None;
    };
    let under_home = Path::new(dir).parent()?;
    var("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(under_home))
}

/// Copilot writes `<copilot home>/session-state/<id>/inuse.<pid>.lock` (content: that pid) for a
/// running process and removes it at exit: the session of process `pid`, found by looking into
/// each session directory. None when none or more than one (a stale lock of a crashed process
/// whose pid came back) says so: never a guess.
pub fn copilot_session_from_lock_files(copilot_home: &Path, pid: u32) -> Option<String> {
    let name = format!("inuse.{pid}.lock");
    let mut found: Option<String> = None;
    let entries = std::fs::read_dir(copilot_home.join("session-state")).ok()?;
    for entry in entries.filter_map(Result::ok).take(100_000) {
        let Some(id) = entry.file_name().to_str().map(String::from) else {
            continue;
        };
        if !copilot_session_id_shape(&id) {
            continue;
        }
        let says_pid = std::fs::read(entry.path().join(&name))
            .ok()
            .filter(|b| b.len() <= 64)
            .is_some_and(|b| String::from_utf8_lossy(&b).trim() == pid.to_string());
        if says_pid {
            if found.is_some() {
                return None;
            }
            found = Some(id);
        }
    }
    found
}

#[cfg(test)]
mod session_tests {
    use super::*;

    #[test]
    fn session_ids_from_each_harness_file() {
        assert_eq!(
            parse_session_id("qwen", r#"{"pid":7,"sessionId":"q-1","kind":"tui"}"#, 7).as_deref(),
            Some("q-1")
        );
        let grok =
            r#"[{"session_id":"g-1","pid":5,"cwd":"/w"},{"session_id":"g-2","pid":7,"cwd":"/w"}]"#;
        assert_eq!(parse_session_id("grok", grok, 7).as_deref(), Some("g-2"));
        assert_eq!(parse_session_id("grok", grok, 9), None);
        assert_eq!(parse_session_id("codex", "{}", 1), None);
        assert_eq!(parse_session_id("qwen", "{ torn", 1), None);
        assert_eq!(
            session_file("grok", Path::new("/h"), 3),
            Some(PathBuf::from("/h/.grok/active_sessions.json"))
        );
    }

    #[test]
    fn copilot_session_ids_from_its_hold_and_lock_files() {
        let id = "11111111-2222-4333-8444-555555555555";
        let open = |p: &str| session_id_from_open_file("copilot", Path::new(p));
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/inuse.21840.hold")).as_deref(),
            Some(id)
        );
        // The package cache holds one too (not a session); torn names; another dir.
        assert_eq!(
            open("/h/.cache/copilot/pkg/linux-x64/1.0.102/inuse.21840.hold"),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/inuse.x.hold")),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/session-state/{id}/events.jsonl")),
            None
        );
        assert_eq!(
            open("/h/.copilot/session-state/not-a-uuid/inuse.1.hold"),
            None
        );
        assert_eq!(
            open(&format!("/h/.copilot/other/{id}/inuse.21840.hold")),
            None
        );

        let home = std::env::temp_dir().join(format!("volee-copilot-locks-{}", std::process::id()));
        let state = home.join("session-state");
        let other = "aaaaaaaa-2222-4333-8444-555555555555";
        std::fs::create_dir_all(state.join(id)).unwrap();
        std::fs::create_dir_all(state.join(other)).unwrap();
        std::fs::create_dir_all(state.join(".session-operation-locks")).unwrap();
        std::fs::write(state.join(id).join("inuse.4242.lock"), "4242").unwrap();
        std::fs::write(state.join(other).join("inuse.7.lock"), "7").unwrap();
        assert_eq!(
            copilot_session_from_lock_files(&home, 4242).as_deref(),
            Some(id)
        );
        assert_eq!(copilot_session_from_lock_files(&home, 9), None);
        // A lock whose content names another pid does not count.
        std::fs::write(state.join(other).join("inuse.4242.lock"), "1").unwrap();
        assert_eq!(
            copilot_session_from_lock_files(&home, 4242).as_deref(),
            Some(id)
        );
        // Two sessions claiming one pid: no guess.
        std::fs::write(state.join(other).join("inuse.4242.lock"), "4242\n").unwrap();
        assert_eq!(copilot_session_from_lock_files(&home, 4242), None);
        std::fs::remove_dir_all(&home).unwrap();

        let var = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            harness_home("copilot", var(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.copilot"))
        );
        assert_eq!(
            harness_home("copilot", var(&[("HOME", "/h"), ("COPILOT_HOME", "/c")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            harness_home("copilot", var(&[("COPILOT_HOME", "rel")])),
            None
        );
        assert_eq!(harness_home("copilot", var(&[])), None);
    }

    #[test]
    fn codex_session_ids_from_its_open_rollout_file() {
        let id = |p: &str| session_id_from_open_file("codex", Path::new(p));
        assert_eq!(
            id("/h/.codex/sessions/2026/11/30/rollout-2026-11-30T20-01-02-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl")
                .as_deref(),
            Some("019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b")
        );
        // Not a rollout, not under sessions/, a torn name, another harness.
        assert_eq!(id("/h/.codex/log/codex-tui.log"), None);
        assert_eq!(
            id("/tmp/rollout-2026-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"),
            None
        );
        assert_eq!(id("/h/.codex/sessions/rollout-x.jsonl"), None);
        assert_eq!(
            id("/h/.codex/sessions/rollout-2026-zzzzzzzz-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"),
            None
        );
        assert_eq!(
            session_id_from_open_file(
                "claude",
                Path::new(
                    "/h/.codex/sessions/rollout-2026-019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b.jsonl"
                )
            ),
            None
        );
    }
}

#[cfg(test)]
mod server_tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_harness_names_its_listing_in_its_profile() {
        assert!(matches!(
            listing_of("claude"),
            ListingSource::StatusFile { .. }
        ));
        assert!(matches!(listing_of("codex"), ListingSource::AppServer(_)));
        assert!(matches!(
            listing_of("opencode"),
            ListingSource::HttpServer(_)
        ));
        assert_eq!(listing_of("gemini"), ListingSource::None);
        assert_eq!(listing_of("no-such-harness"), ListingSource::None);
        assert!(has_listing_server("codex") && !has_listing_server("claude"));
    }

    #[test]
    fn the_app_server_socket_follows_the_agents_environment() {
        let sock = "app-server-control/app-server-control.sock";
        assert_eq!(
            app_server_socket("codex", &env(&[("CODEX_HOME", "/c"), ("HOME", "/h")])),
            Some(Path::new("/c").join(sock))
        );
        assert_eq!(
            app_server_socket("codex", &env(&[("CODEX_HOME", ""), ("HOME", "/h")])),
            Some(Path::new("/h/.codex").join(sock))
        );
        assert_eq!(app_server_socket("codex", &[]), None);
        assert_eq!(app_server_socket("claude", &env(&[("HOME", "/h")])), None);
    }

    #[test]
    fn a_positional_first_prompt_is_the_last_argument_unless_a_flag() {
        let c = args(&["codex", "--yolo", "fix the tests"]);
        assert_eq!(
            positional_prompt("codex", &c).as_deref(),
            Some("fix the tests")
        );
        assert_eq!(
            positional_prompt("codex", &args(&["codex", "--yolo"])),
            None
        );
        assert_eq!(positional_prompt("codex", &args(&["codex"])), None);
        assert_eq!(positional_prompt("claude", &c), None);
    }

    #[test]
    fn ports_come_from_the_command_line_and_only_for_loopback() {
        let c = args(&[
            "/x/opencode",
            "--port",
            "4100",
            "--hostname",
            "127.0.0.1",
            "--prompt",
            "hi",
        ]);
        assert_eq!(server_port("opencode", &c), Some(4100));
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port=4101"])),
            Some(4101)
        );
        assert_eq!(server_port("codex", &c), None);
        assert_eq!(server_port("opencode", &args(&["opencode"])), None);
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "0"])),
            None
        );
        assert_eq!(
            server_port("opencode", &args(&["opencode", "--port", "x"])),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--port", "9", "--hostname", "10.0.0.2"])
            ),
            None
        );
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--hostname=0.0.0.0", "--port", "9"])
            ),
            Some(9)
        );
        // A prompt that reads like a flag is a value, not a flag.
        assert_eq!(
            server_port(
                "opencode",
                &args(&["opencode", "--prompt", "--port", "--port", "7"])
            ),
            Some(7)
        );
    }

    #[test]
    fn a_resumed_sessions_prompt_is_handed_over() {
        let o = "opencode";
        let c = args(&[
            "opencode", "-s", "ses_1", "--port", "1", "--prompt", "go on",
        ]);
        assert_eq!(resume_prompt(o, &c).as_deref(), Some("go on"));
        assert_eq!(
            resume_prompt(o, &args(&["opencode", "--prompt", "new"])),
            None
        );
        assert_eq!(
            resume_prompt(o, &args(&["opencode", "--prompt", "-c"])),
            None
        );
        assert_eq!(
            resume_prompt(o, &args(&["opencode", "-c", "--prompt", ""])),
            None
        );
        assert_eq!(
            resume_prompt(o, &args(&["opencode", "--session=ses_1", "--prompt=x"])).as_deref(),
            Some("x")
        );
        assert_eq!(resume_prompt("codex", &c), None);
    }

    #[test]
    fn children_and_subcommands_are_no_agents() {
        let env = env(&[("OPENCODE_PID", "42")]);
        assert!(not_an_agent("opencode", &args(&["opencode"]), &env));
        assert!(not_an_agent("opencode", &args(&["opencode", "serve"]), &[]));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "--prompt", "serve"]),
            &[]
        ));
        assert!(!not_an_agent(
            "opencode",
            &args(&["opencode", "/w/serve"]),
            &[]
        ));
        assert!(!not_an_agent("claude", &args(&["claude"]), &env));
    }
}
