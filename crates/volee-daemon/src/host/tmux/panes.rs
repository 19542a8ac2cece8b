//! What tmux says about its panes: the formats volee asks for, their rows, and what a server's
//! pane list means for the agents volee knows (`reconcile`, pure).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use volee_core::{ExitFact, Millis};
use volee_protocol::{Host, Origin, Placement};
use volee_tmux::format::{fields_format, split_fields};
use volee_tmux::server::{TmuxError, TmuxServer};

/// Pane fields read on resync, separated by `\x1f` (titles may hold quotes).
const PANE_FIELDS: &[&str] = &[
    "pane_id",
    "pane_pid",
    "session_name",
    "window_id",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "@volee-agent",
    "@volee-name",
    "@volee-harness",
    "pane_current_path",
    "pane_start_command",
    "window_activity",
    "window_index",
    "pane_index",
    "window_layout",
    "pid",
    "start_time",
    // Last: a window's name is the user's text; a separator in it is taken back into the name.
    "window_name",
];

/// One pane of a server's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneRow {
    pub pane: String,
    pub pid: Option<u32>,
    pub session: String,
    pub window: String,
    pub dead: bool,
    pub status: Option<i32>,
    pub signal: Option<i32>,
    /// Its `@volee-agent` option: the agent volee launched there.
    pub agent: String,
    pub name: String,
    pub harness: String,
    pub path: String,
    pub start_command: String,
    /// Last activity of the pane's window, epoch seconds.
    pub activity: Option<u64>,
    /// Its window's name, index and layout and its index there (what `volee restore` rebuilds).
    pub placement: Option<Placement>,
}

impl PaneRow {
    /// Its program ended: how, seen at `at`.
    pub fn exit(&self, at: Millis) -> Option<ExitFact> {
        self.dead.then_some(ExitFact {
            at,
            status: self.status,
            signal: self.signal,
        })
    }

    /// Where it is, on the server at `socket`.
    pub fn host(&self, socket: &Path) -> Host {
        Host::Tmux {
            socket: socket.display().to_string(),
            session: self.session.clone(),
            window: self.window.clone(),
            pane: self.pane.clone(),
        }
    }
}

pub fn parse_pane_rows(text: &str) -> Vec<PaneRow> {
    text.lines()
        .filter_map(|line| {
            let f = split_fields(line.as_bytes());
            if f.len() < PANE_FIELDS.len() {
                return None;
            }
            Some(PaneRow {
                pane: f[0].clone(),
                pid: f[1].parse().ok(),
                session: f[2].clone(),
                window: f[3].clone(),
                dead: f[4] == "1",
                status: f[5].parse().ok(),
                signal: f[6].parse().ok(),
                agent: f[7].clone(),
                name: f[8].clone(),
                harness: f[9].clone(),
                path: f[10].clone(),
                start_command: f[11].clone(),
                activity: f[12].parse().ok(),
                placement: match (f[13].parse(), f[14].parse()) {
                    (Ok(window_index), Ok(pane_index)) => Some(Placement {
                        window_name: f[18..].join("\x1f"),
                        window_index,
                        window_layout: f[15].clone(),
                        pane_index,
                        server_pid: f[16].parse().unwrap_or(0),
                        server_started: f[17].parse().unwrap_or(0),
                    }),
                    _ => None,
                },
            })
        })
        .collect()
}

/// Every pane of the server at `socket` (a task's work: it runs `tmux list-panes -a`).
pub async fn list(socket: PathBuf) -> Result<Vec<PaneRow>, TmuxError> {
    let text = match TmuxServer::new(&socket)
        .run_async(&["list-panes", "-a", "-F", &fields_format(PANE_FIELDS)])
        .await
    {
        // `list-panes -a` with no session left: a server being killed (seen racing
        // `tmux kill-server`); its agents were lost with it, not closed.
        Err(TmuxError::Failed { stderr, .. }) if stderr.contains("no current target") => {
            return Err(TmuxError::NoServer { socket })
        }
        r => r?,
    };
    Ok(parse_pane_rows(&text))
}

/// What volee knows of an agent, for [`reconcile`].
#[derive(Debug, Clone)]
pub struct Known<'a> {
    pub id: &'a str,
    pub host: &'a Host,
    pub placement: Option<&'a Placement>,
    pub pid: Option<u32>,
    pub ended: bool,
    pub origin: Origin,
    /// Recorded after the listing was asked for: its pane may be missing from it, so it is
    /// never judged gone (or lost) by it.
    pub fresh: bool,
}

/// What a server's pane list means for volee's agents.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Live agents whose pane moved (another window or session) or whose pid is now known.
    pub moved: Vec<(String, Host, Option<u32>)>,
    /// Live agents whose window was renamed, moved or re-laid out (or whose place was unknown).
    pub placed: Vec<(String, Placement)>,
    /// Live agents whose pane is dead, with how it ended.
    pub exited: Vec<(String, ExitFact)>,
    /// Panes marked as an agent volee does not know (its registry was lost): rebuild them.
    pub unknown: Vec<PaneRow>,
    /// Live launched agents of this server whose pane is gone, with their pids.
    pub gone: Vec<(String, Option<u32>)>,
    /// Live launched agents whose pane was on an earlier server at this socket (killed,
    /// crashed, a reboot): their host is lost, not their pane closed — they can be restored.
    pub lost: Vec<String>,
    /// The sessions that hold live agents (to watch).
    pub sessions: Vec<String>,
}

/// Compare the panes of the server at `socket` with the agents volee knows. Discovered agents
/// carry no `@volee-agent` option: the `/proc` rescan follows them, not this.
pub fn reconcile<'a>(
    socket: &Path,
    rows: &[PaneRow],
    agents: &[Known<'a>],
    now: Millis,
) -> Reconciled {
    let agents = agents.iter();
    let mut out = Reconciled::default();
    let on_this_server =
        |host: &Host| matches!(host, Host::Tmux { socket: s, .. } if Path::new(s) == socket);
    for row in rows.iter().filter(|r| !r.agent.is_empty()) {
        match agents.clone().find(|a| a.id == row.agent) {
            Some(a) if !a.ended => {
                let host = row.host(socket);
                let pid = row.pid.or(a.pid);
                if *a.host != host || a.pid != pid {
                    out.moved.push((row.agent.clone(), host, pid));
                }
                if let Some(p) = &row.placement {
                    if a.placement != Some(p) {
                        out.placed.push((row.agent.clone(), p.clone()));
                    }
                }
                if let Some(exit) = row.exit(now) {
                    out.exited.push((row.agent.clone(), exit));
                }
            }
            Some(_) => {}
            None => out.unknown.push(row.clone()),
        }
    }
    let present: HashSet<&str> = rows
        .iter()
        .filter(|r| !r.agent.is_empty())
        .map(|r| r.agent.as_str())
        .collect();
    out.gone = agents
        .clone()
        .filter(|a| {
            !a.ended
                && !a.fresh
                && a.origin == Origin::Launched
                && on_this_server(a.host)
                && !present.contains(a.id)
        })
        .map(|a| (a.id.to_string(), a.pid))
        .collect();
    // This server's start; an agent placed on a server started at another time is not here
    // because that server went away.
    let server = rows
        .iter()
        .find_map(|r| r.placement.as_ref().and_then(Placement::server));
    let earlier_server = |id: &str| {
        agents.clone().any(|a| {
            a.id == id
                && a.placement
                    .and_then(Placement::server)
                    .is_some_and(|s| Some(s) != server)
        })
    };
    let (lost, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut out.gone)
        .into_iter()
        .partition(|(id, _)| server.is_some() && earlier_server(id));
    out.gone = gone;
    out.lost = lost.into_iter().map(|(id, _)| id).collect();
    let gone: HashSet<&str> = out
        .gone
        .iter()
        .map(|(id, _)| id.as_str())
        .chain(out.lost.iter().map(String::as_str))
        .collect();
    let mut sessions: Vec<String> = agents
        .filter(|a| !a.ended && !gone.contains(a.id))
        .filter_map(|a| match a.host {
            Host::Tmux { socket: s, .. } if Path::new(s) != socket => None,
            Host::Tmux { session, .. } => {
                // A moved agent is watched in its new session.
                let moved = out.moved.iter().find(|(id, _, _)| id == a.id);
                match moved.map(|(_, h, _)| h) {
                    Some(Host::Tmux { session, .. }) => Some(session.clone()),
                    _ => Some(session.clone()),
                }
            }
            _ => None,
        })
        .collect();
    sessions.extend(out.unknown.iter().map(|r| r.session.clone()));
    sessions.sort();
    sessions.dedup();
    out.sessions = sessions;
    out
}

/// A pane as discovery places processes in it.
pub async fn list_for_discovery(socket: &Path) -> Vec<crate::discovery::PaneInfo> {
    let format = fields_format(&[
        "pane_id",
        "pane_pid",
        "pane_tty",
        "session_name",
        "window_id",
    ]);
    let Ok(text) = TmuxServer::new(socket)
        .run_async(&["list-panes", "-a", "-F", &format])
        .await
    else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let f = split_fields(line.as_bytes());
            Some(crate::discovery::PaneInfo {
                pane: f.first()?.clone(),
                pid: f.get(1)?.parse().ok()?,
                tty: f.get(2)?.clone(),
                session: f.get(3)?.clone(),
                window: f.get(4)?.clone(),
            })
        })
        .collect()
}

/// Sockets in tmux's own directory for this user (`$TMUX_TMPDIR/tmux-UID`, `/tmp` by default),
/// plus the server of `$TMUX`.
pub fn user_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let uid = nix::unistd::getuid().as_raw();
    let default = volee_tmux::connection::default_socket(
        None,
        std::env::var("TMUX_TMPDIR").ok().as_deref(),
        uid,
    );
    let mut sockets: Vec<PathBuf> = default
        .parent()
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .map(|e| e.path())
        .collect();
    if let Ok(tmux) = std::env::var("TMUX") {
        sockets.push(volee_tmux::connection::default_socket(
            Some(&tmux),
            None,
            uid,
        ));
    }
    sockets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: &str, pane: &str, session: &str, dead: bool) -> PaneRow {
        PaneRow {
            pane: pane.into(),
            pid: Some(42),
            session: session.into(),
            window: "@1".into(),
            dead,
            status: dead.then_some(3),
            signal: None,
            agent: agent.into(),
            name: agent.into(),
            harness: "generic".into(),
            path: "/tmp".into(),
            start_command: "sh".into(),
            activity: None,
            placement: None,
        }
    }

    fn tmux(socket: &str, session: &str, pane: &str) -> Host {
        Host::Tmux {
            socket: socket.into(),
            session: session.into(),
            window: "@1".into(),
            pane: pane.into(),
        }
    }

    #[test]
    fn pane_rows_survive_quotes_in_fields() {
        let line = [
            "%3",
            "42",
            "work's",
            "@1",
            "0",
            "",
            "",
            "ab12",
            "na'me",
            "generic",
            "/tmp",
            "sh -c 'x'",
            "1796012403",
            "2",
            "1",
            "b25d,80x24,0,0,2",
            "4321",
            "1796010000",
            "it's\x1fmine",
        ]
        .join("\x1f");
        let rows = parse_pane_rows(&line);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].session, "work's");
        assert_eq!(rows[0].agent, "ab12");
        assert_eq!(rows[0].start_command, "sh -c 'x'");
        assert_eq!(rows[0].activity, Some(1796012403));
        // The window's name is last: a separator in it stays in it.
        assert_eq!(
            rows[0].placement,
            Some(Placement {
                window_name: "it's\x1fmine".into(),
                window_index: 2,
                window_layout: "b25d,80x24,0,0,2".into(),
                pane_index: 1,
                server_pid: 4321,
                server_started: 1796010000,
            })
        );
        assert_eq!(parse_pane_rows("%1\x1f2"), vec![], "a short row is no row");
    }

    #[test]
    fn a_servers_panes_say_which_agents_moved_ended_are_gone_or_unknown() {
        let socket = Path::new("/s");
        let hosts = [
            tmux("/s", "w", "%1"),
            tmux("/s", "w", "%2"),
            tmux("/s", "w", "%3"),
            tmux("/s", "w", "%4"),
            tmux("/other", "w", "%3"),
        ];
        let known = [
            ("moved", Origin::Launched, false),
            ("dead", Origin::Launched, false),
            ("gone", Origin::Launched, false),
            ("found", Origin::Discovered, false),
            ("elsewhere", Origin::Launched, false),
        ];
        let agents: Vec<Known> = known
            .iter()
            .zip(hosts.iter())
            .map(|((id, origin, ended), host)| Known {
                id,
                host,
                placement: None,
                pid: Some(42),
                ended: *ended,
                origin: *origin,
                fresh: false,
            })
            .collect();
        let rows = [
            row("moved", "%1", "other-session", false),
            row("dead", "%2", "w", true),
            row("lost", "%9", "w", false),
            row("", "%5", "w", false),
        ];
        let r = reconcile(socket, &rows, &agents, 7);
        assert_eq!(
            r.moved,
            vec![(
                "moved".to_string(),
                tmux("/s", "other-session", "%1"),
                Some(42)
            )]
        );
        assert_eq!(
            r.exited,
            vec![(
                "dead".to_string(),
                ExitFact {
                    at: 7,
                    status: Some(3),
                    signal: None
                }
            )]
        );
        assert_eq!(r.unknown.len(), 1);
        assert_eq!(r.unknown[0].agent, "lost");
        // A discovered agent is the /proc scan's business; another server's agent is not here.
        assert_eq!(r.gone, vec![("gone".to_string(), Some(42))]);
        assert_eq!(
            r.sessions,
            vec!["other-session".to_string(), "w".to_string()]
        );
    }

    #[test]
    fn an_ended_agents_pane_changes_nothing() {
        let host = tmux("/s", "w", "%1");
        let agents = [Known {
            id: "a",
            host: &host,
            placement: None,
            pid: None,
            ended: true,
            origin: Origin::Launched,
            fresh: false,
        }];
        let rows = [row("a", "%1", "x", true)];
        let r = reconcile(Path::new("/s"), &rows, &agents, 1);
        assert_eq!(r, Reconciled::default());
    }

    #[test]
    fn agents_of_an_earlier_server_at_the_socket_are_lost_not_gone() {
        let place = |server_pid, server_started| Placement {
            window_name: "w".into(),
            window_index: 0,
            window_layout: String::new(),
            pane_index: 0,
            server_pid,
            server_started,
        };
        // Started in the same second as the new server, by another pid: still another server.
        let (earlier, unknown, same) = (place(7, 200), place(0, 0), place(9, 200));
        let host = tmux("/s", "w", "%0");
        let known = |id, placement| Known {
            id,
            host: &host,
            placement: Some(placement),
            pid: Some(42),
            ended: false,
            origin: Origin::Launched,
            fresh: false,
        };
        let agents = [
            known("before-reboot", &earlier),
            known("never-placed", &unknown),
            known("closed", &same),
        ];
        // The new server's pane %0 is someone else's shell: no agent option.
        let mut shell = row("", "%0", "w", false);
        shell.placement = Some(place(9, 200));
        let r = reconcile(Path::new("/s"), &[shell], &agents, 1);
        assert_eq!(r.lost, vec!["before-reboot".to_string()]);
        assert_eq!(
            r.gone,
            vec![
                ("never-placed".to_string(), Some(42)),
                ("closed".to_string(), Some(42))
            ]
        );
        assert!(r.sessions.is_empty(), "{r:?}");
    }
}
