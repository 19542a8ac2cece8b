//! `volee sessions`: every harness's past sessions, from the index in volee's state dir (brought
//! up to date from the harnesses' own files first, incrementally): list, search, show.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;
use volee_daemon::Paths;
use volee_history::{project_roots, roots, Index, Root, Scan, SessionRow, Unreadable};
use volee_view::plain_text;

use crate::error::{CliError, CliResult};
use crate::output::{json, now_secs, out};

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  volee sessions                        the newest past sessions of every harness
  volee sessions --harness claude --since 7d
  volee sessions search auth bug        sessions whose messages have both words
  volee sessions show 01a2              one session's metadata and its last messages
  volee sessions resume 01a2            that session again, in a new supervised pane
  volee sessions search auth --on box   machine box's sessions (volee machine add)

A SID is a harness's native session id: exact, or a unique prefix across harnesses.
The index is $VOLEE_HOME/state/sessions.db (0600); delete it at any time: it is rebuilt.")]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// Only this harness's sessions.
    #[arg(long)]
    pub harness: Option<String>,
    /// Only sessions of this project directory (or below it).
    #[arg(long)]
    pub project: Option<PathBuf>,
    /// Only sessions active within this long (`90m`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Every session (default: the newest 50).
    #[arg(long)]
    pub all: bool,
    /// Print JSON: `{roots, sessions, unreadable}`.
    #[arg(long)]
    pub json: bool,
    /// Ask this machine (`volee machine add`) instead: its harnesses' sessions, read there; in
    /// JSON each session carries `"machine"`.
    #[arg(long, value_name = "MACHINE", global = true)]
    pub on: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// Sessions whose messages (prompts, answers, tool calls) hold every word, best first.
    Search {
        /// Words; a word ending in `*` is a prefix.
        #[arg(required = true)]
        words: Vec<String>,
        /// At most this many sessions.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON: an array of hits (a session object plus `role` and `snippet`).
        #[arg(long)]
        json: bool,
    },
    /// One session: its metadata and its last messages.
    Show {
        /// The harness's native session id, or a unique prefix of it.
        sid: String,
        /// How many of the last messages.
        #[arg(short = 'n', long, default_value_t = 10)]
        messages: usize,
        /// Print JSON: the session object plus `messages`.
        #[arg(long)]
        json: bool,
    },
    /// Resume a past session with its harness's resume line, in its project directory, in a new
    /// supervised pane (a live agent then, with that session id). A session live right now is
    /// not resumed: volee names the agent that has it.
    Resume {
        /// The harness's native session id, or a unique prefix of it.
        sid: String,
        /// Where: `tmux`, `tmux:SESSION`, `zellij` or `zellij:SESSION` (default: your tmux
        /// session, else session `volee`).
        #[arg(long, value_name = "tmux[:SESSION]|zellij[:SESSION]")]
        host: Option<String>,
        /// A name to refer to it by.
        #[arg(long)]
        name: Option<String>,
        /// Print JSON (the agent object of the command contract).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: SessionsArgs) -> CliResult {
    if let Some(machine) = args.on.clone() {
        return run_on(&machine, args);
    }
    let (index, roots, scan) = open_scanned()?;
    match args.command {
        None => list(&index, &roots, &scan, &args),
        Some(SessionsCommand::Search { words, limit, json }) => search(&index, &words, limit, json),
        Some(SessionsCommand::Show {
            sid,
            messages,
            json,
        }) => show(&index, &sid, messages, json),
        Some(SessionsCommand::Resume {
            sid,
            host,
            name,
            json,
        }) => {
            let sessions = index
                .sessions()
                .map_err(|e| CliError::internal(e.to_string()))?;
            let session = resolve(&sessions, &sid)?;
            let project = session.project.as_deref().ok_or_else(|| {
                CliError::user(format!(
                    "session {} records no project directory to resume it in",
                    session.id
                ))
            })?;
            crate::launch::resume_session(
                &session.harness,
                &session.id,
                std::path::Path::new(project),
                host.as_deref(),
                name,
                json,
            )
        }
    }
}

/// The most lines of a machine's plain answer printed, and their longest.
const REMOTE_LINES: usize = 50_000;
const REMOTE_LINE_CHARS: usize = 1_000;

/// The arguments of `volee sessions …` on a machine for `sessions … --on`: every option given
/// but `--on` (as `--option=VALUE`), words and ids after `--`; `--json` only when asked, since a
/// plain answer is printed as the machine's volee made it. A resume always answers in JSON (its
/// agent is printed here as `MACHINE:ID`).
fn remote_args(args: &SessionsArgs) -> CliResult<Vec<String>> {
    let mut out = vec!["sessions".to_owned()];
    let json_flag = |json: bool| json.then(|| "--json".to_owned());
    match &args.command {
        None => {
            out.extend(args.harness.as_ref().map(|h| format!("--harness={h}")));
            if let Some(p) = &args.project {
                let p = p.to_str().ok_or_else(|| {
                    CliError::user(format!("--project {} is not UTF-8", p.display()))
                })?;
                out.push(format!("--project={p}"));
            }
            out.extend(args.since.as_ref().map(|s| format!("--since={s}")));
            if args.all {
                out.push("--all".into());
            }
            out.extend(json_flag(args.json));
        }
        Some(SessionsCommand::Search { words, limit, json }) => {
            out.extend(["search".into(), format!("--limit={limit}")]);
            out.extend(json_flag(*json));
            out.push("--".into());
            out.extend(words.iter().cloned());
        }
        Some(SessionsCommand::Show {
            sid,
            messages,
            json,
        }) => {
            out.extend(["show".into(), format!("--messages={messages}")]);
            out.extend(json_flag(*json));
            out.extend(["--".into(), sid.clone()]);
        }
        Some(SessionsCommand::Resume {
            sid, host, name, ..
        }) => {
            out.push("resume".into());
            out.extend(host.as_ref().map(|h| format!("--host={h}")));
            out.extend(name.as_ref().map(|n| format!("--name={n}")));
            out.extend(["--json".into(), "--".into(), sid.clone()]);
        }
    }
    Ok(out)
}

/// `volee sessions … --on MACHINE`: the same command run on the machine (its index, its files),
/// printed as it printed it (made safe); in JSON each session marked with the machine; a resumed
/// session's agent printed as `MACHINE:ID`.
fn run_on(machine: &str, args: SessionsArgs) -> CliResult {
    crate::machine_cmd::saved(machine)?;
    let stdout = crate::on_machine::run(machine, remote_args(&args)?)?;
    let (as_json, key) = match &args.command {
        None => (args.json, Some("sessions")),
        Some(SessionsCommand::Search { json, .. } | SessionsCommand::Show { json, .. }) => {
            (*json, None)
        }
        Some(SessionsCommand::Resume { json, .. }) => {
            let agent = crate::on_machine::remote_agent(machine, &stdout)?;
            return crate::launch::print_agent(&agent, *json);
        }
    };
    if as_json {
        json(&crate::on_machine::mark_machine(machine, &stdout, key)?)
    } else {
        out(&volee_view::plain_lines(
            &stdout,
            REMOTE_LINES,
            REMOTE_LINE_CHARS,
        ));
        Ok(())
    }
}

/// The index, brought up to date with every root under this environment.
pub(crate) fn open_scanned() -> CliResult<(Index, Vec<Root>, Scan)> {
    let (mut index, roots) = open_index()?;
    let scan = match daemon_indexes(&roots) {
        Some(scan) => scan,
        None => index
            .scan(&roots)
            .map_err(|e| CliError::internal(e.to_string()))?,
    };
    Ok((index, roots, scan))
}

/// Ask a running daemon to bring the index up to date over `roots`: it watches the harnesses'
/// directories, so it reads only what changed (and the roots it does not watch) — no `stat` of
/// every file. None when no daemon runs (or one from before this request): the caller scans.
fn daemon_indexes(roots: &[Root]) -> Option<Scan> {
    let paths = Paths::from_process_env();
    let mut client = volee_daemon::Client::connect(&paths).ok()?;
    let asked = roots
        .iter()
        .map(|r| volee_protocol::SessionRoot {
            harness: r.harness.clone(),
            path: r.path.display().to_string(),
            from: r.from.clone(),
        })
        .collect();
    match client.request(&volee_protocol::Request::IndexSessions { roots: asked }) {
        Ok(volee_protocol::Response::SessionsIndexed { unreadable }) => Some(Scan {
            unreadable: unreadable
                .into_iter()
                .map(|u| Unreadable {
                    harness: u.harness,
                    path: PathBuf::from(u.path),
                    reason: u.reason,
                })
                .collect(),
            ..Scan::default()
        }),
        _ => None,
    }
}

/// The index as it is, and the roots it is to cover (the browser draws first, then scans).
pub(crate) fn open_index() -> CliResult<(Index, Vec<Root>)> {
    let paths = Paths::from_process_env();
    paths
        .ensure()
        .map_err(|e| CliError::env(format!("volee's directories: {e}")))?;
    let index = Index::open(&paths.state_dir.join("sessions.db"))
        .map_err(|e| CliError::env(e.to_string()))?;
    let mut roots = roots(|k| std::env::var(k).ok());
    roots.extend(agents_roots(&paths, &roots));
    Ok((index, roots))
}

/// Bring the index at its usual place up to date over `roots` (a second connection: the browser
/// scans on a thread while it shows what the index had).
pub(crate) fn scan_into_index(roots: &[Root]) -> Result<Scan, String> {
    if let Some(scan) = daemon_indexes(roots) {
        return Ok(scan);
    }
    let paths = Paths::from_process_env();
    let mut index = Index::open(&paths.state_dir.join("sessions.db")).map_err(|e| e.to_string())?;
    index.scan(roots).map_err(|e| e.to_string())
}

/// The roots this environment does not have: those the daemon remembers from every agent it has
/// known (ended ones too; read from its file, a daemon running or not), and those in the
/// environments of the live agents now (launched and discovered): a harness started with its own
/// `CODEX_HOME` keeps its sessions there. Only processes of this user are read.
fn agents_roots(paths: &Paths, have: &[Root]) -> Vec<Root> {
    let mut out: Vec<Root> = Vec::new();
    for root in volee_daemon::history::remembered_roots(paths) {
        if !have.iter().chain(&out).any(|h| h.path == root.path) {
            out.push(root);
        }
    }
    let Ok(mut client) = volee_daemon::Client::connect(paths) else {
        return out;
    };
    let Ok(volee_protocol::Response::Agents { agents }) =
        client.request(&volee_protocol::Request::List { all: true })
    else {
        return out;
    };
    for agent in &agents {
        // An ended agent's pid may be another process's now.
        if agent.state.is_final() {
            continue;
        }
        let Some(env) = agent.pid.and_then(own_environ) else {
            continue;
        };
        for root in roots(|k| env.get(k).cloned()) {
            if have.iter().chain(&out).any(|r| r.path == root.path) {
                continue;
            }
            out.push(Root {
                from: format!("{} of agent {}", root.from, agent.id),
                ..root
            });
        }
    }
    // Every agent's working directory, ended ones too: Aider keeps its history in the project.
    let cwds: Vec<(PathBuf, String)> = agents
        .iter()
        .filter(|a| !a.cwd.is_empty())
        .map(|a| (PathBuf::from(&a.cwd), format!("cwd of agent {}", a.id)))
        .collect();
    let known: Vec<Root> = have.iter().chain(&out).cloned().collect();
    out.extend(project_roots(&cwds, &known));
    out
}

/// A process's environment, when the process is this user's.
fn own_environ(pid: u32) -> Option<std::collections::HashMap<String, String>> {
    use std::os::unix::fs::MetadataExt;
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let owner = std::fs::metadata(&dir).ok()?.uid();
    if owner != nix::unistd::getuid().as_raw() {
        return None;
    }
    let bytes = std::fs::read(dir.join("environ")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .collect(),
    )
}

#[derive(Serialize)]
struct RootView<'a> {
    harness: &'a str,
    path: &'a std::path::Path,
    from: &'a str,
    exists: bool,
}

#[derive(Serialize)]
struct Listing<'a> {
    roots: Vec<RootView<'a>>,
    sessions: Vec<&'a SessionRow>,
    unreadable: &'a [Unreadable],
}

fn list(index: &Index, roots: &[Root], scan: &Scan, args: &SessionsArgs) -> CliResult {
    if let Some(h) = &args.harness {
        if !roots.iter().any(|r| &r.harness == h) {
            let known: Vec<&str> = roots.iter().map(|r| r.harness.as_str()).collect();
            return Err(CliError::user(format!(
                "no past sessions are read for harness {h:?} (read: {})",
                known.join(", ")
            )));
        }
    }
    let since_ms = match &args.since {
        Some(s) => {
            let d = humantime::parse_duration(s)
                .map_err(|e| CliError::user(format!("--since {s:?}: {e} (for example 90m, 7d)")))?;
            Some(volee_os::clock::now_ms() as i64 - d.as_millis() as i64)
        }
        None => None,
    };
    let project = args
        .project
        .as_ref()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    let all = index
        .sessions()
        .map_err(|e| CliError::internal(e.to_string()))?;
    let mut sessions: Vec<&SessionRow> = all
        .iter()
        .filter(|s| args.harness.as_ref().is_none_or(|h| &s.harness == h))
        .filter(|s| since_ms.is_none_or(|t| s.last_ms >= t))
        .filter(|s| {
            project.as_ref().is_none_or(|p| {
                s.project
                    .as_deref()
                    .is_some_and(|sp| std::path::Path::new(sp).starts_with(p))
            })
        })
        .collect();
    if !args.all {
        sessions.truncate(50);
    }
    if args.json {
        return json(&Listing {
            roots: roots
                .iter()
                .map(|r| RootView {
                    harness: &r.harness,
                    path: &r.path,
                    from: &r.from,
                    exists: r.path.is_dir(),
                })
                .collect(),
            sessions,
            unreadable: &scan.unreadable,
        });
    }
    if sessions.is_empty() {
        out("no past sessions (volee sessions --json lists where it looked)");
    } else {
        out(&table(&sessions));
    }
    if !scan.unreadable.is_empty() {
        eprintln!(
            "{} file(s) could not be read (volee sessions --json lists them with the reason)",
            scan.unreadable.len()
        );
    }
    Ok(())
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

fn age(session: &SessionRow) -> String {
    if session.last_ms <= 0 {
        return "-".into();
    }
    let secs = now_secs().saturating_sub((session.last_ms / 1000) as u64);
    volee_view::ago(secs)
}

fn title(session: &SessionRow) -> String {
    let text = session
        .title
        .as_deref()
        .or(session.first_prompt.as_deref())
        .unwrap_or("");
    plain_text(text, 60)
}

fn table(sessions: &[&SessionRow]) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let rows: Vec<[String; 5]> = sessions
        .iter()
        .map(|s| {
            let project = s.project.as_deref().unwrap_or("-");
            let project = match project.strip_prefix(&home) {
                Some(rest) if !home.is_empty() => format!("~{rest}"),
                _ => project.to_owned(),
            };
            [
                age(s),
                s.harness.clone(),
                short(&s.id),
                plain_text(&project, 40),
                title(s),
            ]
        })
        .collect();
    let header = ["LAST", "HARNESS", "SID", "PROJECT", "TITLE"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut l = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 4 {
                l.push_str(cell);
            } else {
                l.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        l.trim_end().to_owned()
    };
    let mut text = line(header);
    for row in &rows {
        text.push('\n');
        text.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
    }
    text
}

fn search(index: &Index, words: &[String], limit: usize, as_json: bool) -> CliResult {
    let hits = index
        .search(&words.join(" "), limit)
        .map_err(|e| CliError::internal(e.to_string()))?;
    if as_json {
        return json(&hits);
    }
    if hits.is_empty() {
        out(&format!("no session mentions {:?}", words.join(" ")));
        return Ok(());
    }
    let mut text = String::new();
    for h in &hits {
        let s = &h.session;
        text.push_str(&format!(
            "{} {} {}  {}  {}\n    {}: {}\n",
            age(s),
            s.harness,
            short(&s.id),
            plain_text(s.project.as_deref().unwrap_or("-"), 40),
            title(s),
            h.role.as_str(),
            plain_text(&h.snippet, 160),
        ));
    }
    out(&text);
    Ok(())
}

/// A SID: an exact native id, else a unique prefix across harnesses.
fn resolve<'a>(sessions: &'a [SessionRow], sid: &str) -> CliResult<&'a SessionRow> {
    if sid.is_empty() {
        return Err(CliError::user("a session id is needed"));
    }
    let exact: Vec<&SessionRow> = sessions.iter().filter(|s| s.id == sid).collect();
    let found = if exact.is_empty() {
        sessions
            .iter()
            .filter(|s| s.id.starts_with(sid))
            .collect::<Vec<_>>()
    } else {
        exact
    };
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::user(format!(
            "no past session {sid:?} (volee sessions lists them; volee sessions search finds them)"
        ))),
        many => Err(CliError::user(format!(
            "{sid:?} names {} sessions: {}",
            many.len(),
            many.iter()
                .map(|s| format!("{}/{}", s.harness, s.id))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[derive(Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    session: &'a SessionRow,
    messages: Vec<volee_history::Message>,
}

fn show(index: &Index, sid: &str, n: usize, as_json: bool) -> CliResult {
    let sessions = index
        .sessions()
        .map_err(|e| CliError::internal(e.to_string()))?;
    let session = resolve(&sessions, sid)?;
    let messages = index
        .messages(session, n)
        .map_err(|e| CliError::internal(e.to_string()))?;
    if as_json {
        return json(&Shown { session, messages });
    }
    let field = |name: &str, value: Option<&str>| {
        format!("{name:<13}{}\n", plain_text(value.unwrap_or("-"), 200))
    };
    let mut text = String::new();
    text.push_str(&field("harness:", Some(&session.harness)));
    text.push_str(&field("session:", Some(&session.id)));
    text.push_str(&field("project:", session.project.as_deref()));
    text.push_str(&field("branch:", session.branch.as_deref()));
    text.push_str(&field("title:", session.title.as_deref()));
    text.push_str(&field("prompt:", session.first_prompt.as_deref()));
    text.push_str(&field("started:", session.started.as_deref()));
    text.push_str(&field("last:", session.last.as_deref()));
    text.push_str(&field("messages:", Some(&session.messages.to_string())));
    text.push_str(&field("model:", session.model.as_deref()));
    let usage = session.usage.map(|u| {
        format!(
            "{} in, {} out, {} cache read, {} cache write",
            u.input, u.output, u.cache_read, u.cache_write
        )
    });
    text.push_str(&field("tokens:", usage.as_deref().or(Some("unknown"))));
    text.push_str(&field("file:", Some(&session.file.display().to_string())));
    for m in &messages {
        text.push_str(&format!(
            "\n{}: {}",
            m.role.as_str(),
            plain_text(&m.text, 400)
        ));
    }
    out(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sessions: SessionsArgs,
    }

    fn remote(argv: &[&str]) -> Vec<String> {
        let cli = Cli::try_parse_from(std::iter::once("sessions").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert_eq!(cli.sessions.on.as_deref(), Some("box"), "{argv:?}");
        remote_args(&cli.sessions).unwrap()
    }

    #[test]
    fn sessions_on_a_machine_forward_their_options() {
        assert_eq!(
            remote(&["search", "auth", "bug*", "--on", "box", "--json"]),
            [
                "sessions",
                "search",
                "--limit=20",
                "--json",
                "--",
                "auth",
                "bug*"
            ]
        );
        assert_eq!(
            remote(&[
                "--on",
                "box",
                "--harness",
                "claude",
                "--since",
                "7d",
                "--all"
            ]),
            ["sessions", "--harness=claude", "--since=7d", "--all"]
        );
        assert_eq!(
            remote(&["show", "01a2", "-n", "3", "--on", "box"]),
            ["sessions", "show", "--messages=3", "--", "01a2"]
        );
        assert_eq!(
            remote(&["resume", "01a2", "--on", "box", "--name", "again"]),
            ["sessions", "resume", "--name=again", "--json", "--", "01a2"]
        );
    }
}
