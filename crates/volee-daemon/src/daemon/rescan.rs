//! Discovery on the actor: harness processes started outside volee, found by a `/proc` scan
//! (`volee-procscan`), followed when their harness goes on in another process, ended when
//! gone, and placed in their host (a tmux pane, a zellij pane, else a terminal).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use volee_core::{AgentRecord, Millis, NewAgent, Observation};
use volee_protocol::{Host, Origin, ProfileFit};

use super::{now_ms, Daemon, Msg, Reply};
use crate::config::Config;
use crate::discovery::Seen;
use crate::host::tmux::panes;

/// The socket of the app server that lists an agent's sessions, for its harness and
/// environment (none for most harnesses).
pub(super) fn listing_socket(harness: &str, env: &[(String, String)]) -> Option<String> {
    volee_harness::listing::app_server_socket(harness, env).map(|p| p.display().to_string())
}

/// A harness process found by a scan, not yet an agent.
pub(super) struct NewProcess {
    found: volee_procscan::Found,
    proc_: volee_procscan::Proc,
    env: Vec<(String, String)>,
    tty: Option<String>,
    /// Its ancestors, innermost first.
    chain: Vec<u32>,
    /// The tmux server its `$TMUX` names.
    tmux: Option<PathBuf>,
}

/// New processes whose tmux servers' panes were listed, to place.
pub(super) struct Placing {
    pub(super) new: Vec<NewProcess>,
    pub(super) panes: HashMap<PathBuf, Vec<crate::discovery::PaneInfo>>,
    /// A `volee rescan` waiting for them to be recorded.
    pub(super) done: Option<Reply>,
}

/// What discovery keeps between scans.
pub(super) struct Discovery {
    /// When `/proc` was last scanned.
    last_scan: Millis,
    rules: Vec<volee_procscan::ProcessRule>,
    /// Repeated `/proc` scans (old processes that are no candidates are re-read in turn).
    scanner: volee_procscan::Scanner,
    /// New processes being placed (their tmux servers' panes are being listed).
    placing: HashSet<u32>,
    /// What the last scan saw of each discovered agent's process: its start time (with the pid,
    /// it tells that process from a later one that got the same pid), launcher and terminal.
    seen: HashMap<String, Seen>,
}

impl Discovery {
    pub(super) fn new() -> Discovery {
        Discovery {
            last_scan: 0,
            rules: crate::discovery::rules(),
            scanner: volee_procscan::Scanner::new(volee_procscan::ProcRoot::default()),
            placing: HashSet::new(),
            seen: HashMap::new(),
        }
    }

    /// When the next periodic scan is due (none when discovery is off).
    pub(super) fn next_scan(&self, config: &Config) -> Option<Millis> {
        config
            .discovery_interval
            .map(|i| self.last_scan + i.as_millis() as u64)
    }

    pub(super) fn root(&self) -> volee_procscan::ProcRoot {
        self.scanner.root().clone()
    }

    /// Is a discovered agent's pid still its process: the user's, started when the one found
    /// was (when known), of its harness?
    pub(super) fn still_its_process(&self, agent: &AgentRecord) -> bool {
        let Some(p) = agent.pid.and_then(|pid| self.scanner.root().read(pid)) else {
            return false;
        };
        if !volee_procscan::owned_by(&p, nix::unistd::getuid().as_raw()) {
            return false;
        }
        match self.seen.get(&agent.id) {
            Some(seen) => p.stat.start_time == seen.start_time,
            None => self
                .rules
                .iter()
                .any(|r| r.harness == agent.harness && volee_procscan::matches(r, &p)),
        }
    }

    pub(super) fn forget(&mut self, id: &str) {
        self.seen.remove(id);
    }
}

impl Daemon {
    /// The pids of the live agents volee launched, or found.
    fn live_pids(&self, origin: Origin) -> HashSet<u32> {
        self.registry
            .iter()
            .filter(|a| a.origin == origin && !a.is_ended())
            .filter_map(|a| a.pid)
            .collect()
    }

    /// One pass over `/proc` for harness processes volee did not launch: new ones are recorded
    /// with their host (a tmux pane is then watched like a launched agent's), vanished ones end
    /// as `stopped`. At steady state this reads /proc only; `tmux list-panes -a` runs once per
    /// server and only when a new process must be placed.
    /// `done` is handed back when the scan's work is over, else it goes with the placing of new
    /// processes (answered once they are recorded).
    pub(super) fn rescan(&mut self, full: bool, done: Option<Reply>) -> Option<Reply> {
        let now = now_ms();
        self.discovery.last_scan = now;
        let root = self.discovery.root();
        let d = &mut self.discovery;
        if full {
            d.scanner.forget();
        }
        let rules = &d.rules;
        let procs = d
            .scanner
            .scan(|s| volee_procscan::could_match(rules, &s.comm));
        let parents = crate::discovery::parents(&procs);
        let mut launched = self.live_pids(Origin::Launched);
        // The daemon's own children are never agents: a discovered agent's `--version` run
        // (native `codex --version` looks like the agent) found as a new agent asked its
        // version again, and so on — hundreds of processes on a loaded machine (seen in CI).
        launched.insert(std::process::id());
        // Only the user's own processes: another user's `claude` is their program, not an agent.
        let uid = nix::unistd::getuid().as_raw();
        let found: Vec<volee_procscan::Found> =
            volee_procscan::find_agents(&procs, &self.discovery.rules, uid)
                .into_iter()
                .filter(|f| !crate::discovery::is_launched(f, &parents, &launched))
                .filter(|f| {
                    // A harness with its own server spawns helper processes of the same program.
                    !volee_harness::listing::has_own_server(&f.harness)
                        || !procs.iter().any(|p| {
                            p.stat.pid == f.pid
                                && volee_harness::listing::not_an_agent(
                                    &f.harness,
                                    &p.argv,
                                    &root.environ(f.pid).unwrap_or_default(),
                                )
                        })
                })
                .collect();
        // A harness may go on in another process: a launcher chain still growing when a scan
        // saw it (Qwen's launcher starts a second and then a third node process), or a relaunch
        // of its inner process (Gemini and Qwen restart it for more heap or new settings). The
        // agent follows it, same id, instead of ending and being found again as a new one.
        let by_pid: HashMap<u32, &volee_procscan::Proc> =
            procs.iter().map(|p| (p.stat.pid, p)).collect();
        let now_ticks = self.discovery.scanner.last_stats().now_ticks;
        let mut taken = self.live_pids(Origin::Discovered);
        let live_discovered: Vec<(String, String, u32)> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended())
            .filter_map(|a| Some((a.id.clone(), a.harness.clone(), a.pid?)))
            .collect();
        for (id, harness, pid) in live_discovered {
            let seen = self.discovery.seen.get(&id);
            let next = crate::discovery::successor(
                &harness, pid, seen, &found, &by_pid, &taken, now_ticks,
            );
            let Some(f) = next else {
                // Still its process: remember how it looks now (restored agents start unknown).
                if let Some(p) = found
                    .iter()
                    .find(|f| f.pid == pid && f.harness == harness)
                    .and(by_pid.get(&pid))
                {
                    let start_time = seen.map_or(p.stat.start_time, |s| s.start_time);
                    let wrappers = found
                        .iter()
                        .find(|f| f.pid == pid)
                        .map(|f| f.wrappers.clone())
                        .unwrap_or_default();
                    self.discovery.seen.insert(
                        id.clone(),
                        crate::discovery::Seen {
                            start_time,
                            wrappers,
                            tty_nr: p.stat.tty_nr,
                        },
                    );
                }
                continue;
            };
            tracing::info!(
                "agent {id} moves from pid {pid} to pid {} (its harness went on there)",
                f.pid
            );
            taken.remove(&pid);
            taken.insert(f.pid);
            if let Some(p) = by_pid.get(&f.pid) {
                self.discovery
                    .seen
                    .insert(id.clone(), Seen::of(p, f.wrappers.clone()));
            }
            self.registry.edit(&id, |agent| {
                agent.pid = Some(f.pid);
                // Published per process: ask again for the new one.
                agent.session_id = None;
                // Status files are named by pid (`sessions/<pid>.json`).
                agent.status_file = agent.status_file.as_deref().and_then(|status| {
                    let dir = Path::new(status).parent()?;
                    Some(dir.join(format!("{}.json", f.pid)).display().to_string())
                });
            });
        }
        // Discovered agents whose process is gone.
        let gone: Vec<String> = self
            .registry
            .iter()
            .filter(|a| {
                a.origin == Origin::Discovered
                    && !a.is_ended()
                    && !found
                        .iter()
                        .any(|f| Some(f.pid) == a.pid && f.harness == a.harness)
            })
            .map(|a| a.id.clone())
            .collect();
        for id in gone {
            self.registry
                .observe(&id, Observation::ProcessGone { at: now });
        }
        let live: HashSet<&str> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && a.signals().process_gone.is_none())
            .map(|a| a.id.as_str())
            .collect();
        self.discovery
            .seen
            .retain(|id, _| live.contains(id.as_str()));
        // A harness may publish its session id after it started (Qwen and Grok write theirs at
        // the first prompt; Codex opens its rollout file then): ask again for those without.
        let unnamed: Vec<(String, String, u32)> = self
            .registry
            .iter()
            .filter(|a| a.origin == Origin::Discovered && !a.is_ended() && a.session_id.is_none())
            .filter_map(|a| Some((a.id.clone(), a.harness.clone(), a.pid?)))
            .collect();
        for (id, harness, pid) in unnamed {
            let env = root.environ(pid).unwrap_or_default();
            if let Some(session) =
                crate::discovery::published_session_id(&root, &harness, pid, &env)
            {
                tracing::info!("agent {id} published its session id {session}");
                self.registry.edit(&id, |a| a.session_id = Some(session));
            }
        }
        let known = self.live_pids(Origin::Discovered);
        let new: Vec<&volee_procscan::Found> =
            found.iter().filter(|f| !known.contains(&f.pid)).collect();
        if new.is_empty() {
            return done;
        }
        let uid = nix::unistd::getuid().as_raw();
        let new: Vec<NewProcess> = new
            .into_iter()
            .filter(|f| !self.discovery.placing.contains(&f.pid))
            .filter_map(|f| {
                let proc_ = (*by_pid.get(&f.pid)?).clone();
                let env = root.environ(f.pid).unwrap_or_default();
                let tmux = env
                    .iter()
                    .find(|(k, _)| k == "TMUX")
                    .map(|(_, v)| volee_tmux::connection::default_socket(Some(v), None, uid));
                Some(NewProcess {
                    found: f.clone(),
                    tty: volee_procscan::pts_path(proc_.stat.tty_nr),
                    chain: crate::discovery::ancestry(f.pid, &parents),
                    proc_,
                    env,
                    tmux,
                })
            })
            .collect();
        // Placing a process in a tmux pane takes one `list-panes -a` per server: on a task.
        let sockets: BTreeSet<PathBuf> = new.iter().filter_map(|n| n.tmux.clone()).collect();
        if sockets.is_empty() {
            self.place(new, HashMap::new());
            return done;
        }
        self.discovery
            .placing
            .extend(new.iter().map(|n| n.found.pid));
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let mut panes = HashMap::new();
            for socket in sockets {
                let listed = panes::list_for_discovery(&socket).await;
                panes.insert(socket, listed);
            }
            let _ = tx.send(Msg::Placed(Box::new(Placing { new, panes, done })));
        });
        None
    }

    /// Record new harness processes in their hosts (`panes`: each tmux server's panes).
    pub(super) fn place(
        &mut self,
        new: Vec<NewProcess>,
        panes: HashMap<PathBuf, Vec<crate::discovery::PaneInfo>>,
    ) {
        let now = now_ms();
        let root = self.discovery.root();
        for n in new {
            self.discovery.placing.remove(&n.found.pid);
            let known = self.registry.iter().any(|a| {
                a.origin == Origin::Discovered && !a.is_ended() && a.pid == Some(n.found.pid)
            });
            if known {
                continue;
            }
            let (f, proc_, env, tty) = (&n.found, &n.proc_, &n.env, &n.tty);
            let var = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
            let mut host = match (tty, var("ZELLIJ_SESSION_NAME"), var("ZELLIJ_PANE_ID")) {
                (_, Some(session), Some(pane)) => Host::Zellij {
                    session,
                    tab: 0,
                    pane: format!("terminal_{pane}"),
                },
                (Some(tty), _, _) => Host::Tty { tty: tty.clone() },
                _ => Host::None,
            };
            if let Some(socket) = &n.tmux {
                if let Some(p) = panes
                    .get(socket)
                    .and_then(|panes| crate::discovery::pane_of(&n.chain, tty.as_deref(), panes))
                {
                    host = Host::Tmux {
                        socket: socket.display().to_string(),
                        session: p.session.clone(),
                        window: p.window.clone(),
                        pane: p.pane.clone(),
                    };
                }
            }
            let Some(id) = self.registry.new_id(&volee_os::random::unique_bytes(64), 4) else {
                continue;
            };
            let name = self
                .registry
                .default_name(&[format!("{}-{}", f.harness, f.pid)]);
            let cwd = root
                .cwd(f.pid)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            // The installed version decides the screen rules (profile_fit), as at launch. Learnt
            // off the actor (a native binary's `--version` can take seconds: Copilot unpacks
            // itself on its first run); generic rules until it is known.
            {
                let ask = crate::discovery::VersionAsk {
                    root: root.clone(),
                    pid: f.pid,
                    uid: nix::unistd::getuid().as_raw(),
                    start_time: proc_.stat.start_time,
                    argv: proc_.argv.clone(),
                    package: volee_harness::profile(&f.harness).and_then(|p| p.package),
                    home: var("HOME"),
                };
                let (tx, id) = (self.tx.clone(), id.clone());
                tokio::spawn(async move {
                    if let Some(version) = crate::discovery::learn_version(ask).await {
                        let _ = tx.send(Msg::VersionRead { id, version });
                    }
                });
            }
            let version = None;
            let fit = ProfileFit::Generic;
            let mut record = AgentRecord::launched(
                NewAgent {
                    id: id.clone(),
                    name,
                    harness: f.harness.clone(),
                    command: proc_.argv.clone(),
                    cwd,
                    host: host.clone(),
                    harness_version: version,
                    profile_fit: fit,
                    session_id: None,
                },
                // Found, not started now: no "just launched" working window.
                now.saturating_sub(self.arbiter().working_window_ms),
                &self.arbiter(),
            );
            record.origin = Origin::Discovered;
            record.pid = Some(f.pid);
            self.discovery
                .seen
                .insert(id.clone(), Seen::of(proc_, f.wrappers.clone()));
            record.worktree = crate::worktree::linked_worktree(Path::new(&record.cwd));
            record.status_file = var("HOME")
                .and_then(|home| {
                    volee_harness::listing::status_file(
                        &f.harness,
                        std::path::Path::new(&home),
                        f.pid,
                    )
                })
                .map(|p| p.display().to_string());
            record.listing_socket = listing_socket(&f.harness, env);
            // A zellij pane is watched like a launched agent's, with the process's own zellij
            // variables (its server may use another socket directory than the daemon's).
            if matches!(host, Host::Zellij { .. }) {
                record.host_env = crate::host::zellij::zellij_env(env);
            }
            // Identity from what the harness publishes, never from the newest transcript file.
            record.session_id =
                crate::discovery::published_session_id(&root, &f.harness, f.pid, env);
            tracing::info!(
                "discovered {} agent {id} (pid {}) at {:?}",
                f.harness,
                f.pid,
                host
            );
            self.hosts.index(&record);
            self.registry.insert(record);
            self.watch_agent(&id);
        }
    }
}
