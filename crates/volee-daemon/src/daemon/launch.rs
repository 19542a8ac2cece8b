//! Launching an agent, written once for every host: the request is checked and its id and name
//! reserved; the host opens the pane on a task (its session watched before the agent's command
//! runs: `volee pane-exec` waits for its environment file); then the actor records the agent,
//! writes the files the launch keeps under HOME and, last, the environment file.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use nix::sys::signal::Signal;
use volee_core::{AgentRecord, NewAgent, Observation};
use volee_protocol::{Amount, Host, LaunchRequest, Response};
use volee_tmux::connection::{ControlConnection, SessionKey};

use super::request_error::RequestError;
use super::rescan::listing_socket;
use super::{now_ms, Daemon, Msg, Reply};
use crate::host::tmux::OpenTmux;
use crate::host::zellij::{OpenZellij, ZellijHost};
use crate::host::{HostError, PaneRef};
use crate::persist;

/// A pane opened for a launch, whatever the host.
struct OpenedPane {
    host: Host,
    pid: Option<u32>,
    /// The variables that say which server the pane is on (zellij).
    host_env: Vec<(String, String)>,
    pane: PaneRef,
    /// A new watch of the pane's session, attached before the agent's command runs.
    conn: Option<(SessionKey, ControlConnection)>,
}

/// A launch whose pane is being opened.
pub(super) struct Launching {
    req: LaunchRequest,
    id: String,
    name: String,
    volee_bin: PathBuf,
    env_file: PathBuf,
    opened: Result<OpenedPane, HostError>,
    reply: Reply,
}

type Opening = Pin<Box<dyn Future<Output = Result<OpenedPane, HostError>> + Send>>;

impl Daemon {
    pub(super) fn launch(&mut self, req: LaunchRequest, reply: Reply) {
        if let Err(e) = self.start_launch(req, reply) {
            let (e, reply) = *e;
            let _ = reply.send(e.response());
        }
    }

    fn start_launch(
        &mut self,
        req: LaunchRequest,
        reply: Reply,
    ) -> Result<(), Box<(RequestError, Reply)>> {
        let checked = self.check_launch(&req);
        let (id, name, volee_bin) = match checked {
            Ok(x) => x,
            Err(e) => return Err(Box::new((e, reply))),
        };
        let env_file = self.paths.launch_dir().join(format!("{id}.env"));
        let mut command = vec![
            volee_bin.display().to_string(),
            "pane-exec".into(),
            env_file.display().to_string(),
            "--".into(),
        ];
        command.extend(req.command.iter().cloned());
        let opening: Opening = match &req.zellij_session {
            Some(session) => {
                let open = ZellijHost::open(OpenZellij {
                    session: session.clone(),
                    env: req.env.clone(),
                    tab_name: format!("{} ({id})", name.replace(['"', '\\'], "_")),
                    cwd: req.cwd.clone(),
                    command,
                });
                Box::pin(async move {
                    let o = open.await?;
                    Ok(OpenedPane {
                        host: o.host,
                        pid: None,
                        host_env: o.host_env,
                        pane: o.pane,
                        conn: None,
                    })
                })
            }
            None => {
                let socket = PathBuf::from(&req.tmux_socket);
                let open = self.hosts.tmux.open(OpenTmux {
                    socket: socket.clone(),
                    session: req.tmux_session.clone(),
                    caller_pane: req.caller_pane.clone(),
                    cwd: req.cwd.clone(),
                    window_name: name.replace('#', "_"),
                    command,
                    marks: vec![
                        ("@volee-agent", id.clone()),
                        ("@volee-name", name.clone()),
                        ("@volee-harness", req.harness.clone()),
                    ],
                    place: req.window.clone(),
                });
                Box::pin(async move {
                    let o = open.await?;
                    let conn = o.conn.map(|c| (c.key().clone(), c));
                    Ok(OpenedPane {
                        host: o.host,
                        pid: o.pid,
                        host_env: Vec::new(),
                        pane: o.pane,
                        conn,
                    })
                })
            }
        };
        self.registry.reserve(&id, &name);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let opened = opening.await;
            let launching = Launching {
                req,
                id,
                name,
                volee_bin,
                env_file,
                opened,
                reply,
            };
            let _ = tx.send(Msg::Opened(Box::new(launching)));
        });
        Ok(())
    }

    /// The launch's harness, name, id and volee's own executable.
    fn check_launch(&self, req: &LaunchRequest) -> Result<(String, String, PathBuf), RequestError> {
        if req.command.is_empty() {
            return Err(RequestError::user("nothing to launch: no command"));
        }
        if volee_harness::profile(&req.harness).is_none() {
            let names: Vec<&str> = volee_harness::profiles().iter().map(|p| p.name).collect();
            return Err(RequestError::User {
                message: format!("unknown harness {:?}", req.harness),
                hints: vec![format!("known harnesses: {}", names.join(", "))],
            });
        }
        // `volee restore`: the agent comes back with its own id and name.
        if let Some(old) = &req.restore {
            let agent = self
                .registry
                .get(old)
                .ok_or_else(|| RequestError::user(format!("no agent {old} to restore")))?;
            if !agent.is_restorable() {
                return Err(RequestError::user(format!(
                    "agent {old} ({}) is not restorable: it is {} ({})",
                    agent.name, agent.decision.state, agent.decision.evidence
                )));
            }
            if self.registry.is_reserved(old) {
                return Err(RequestError::user(format!(
                    "agent {old} is being restored already"
                )));
            }
            let volee_bin = std::env::current_exe()
                .map_err(|_| RequestError::Internal("cannot find the volee executable".into()))?;
            return Ok((old.clone(), agent.name.clone(), volee_bin));
        }
        let name = match &req.name {
            Some(n) => {
                self.registry
                    .check_name(n)
                    .map_err(|e| RequestError::user(e.to_string()))?;
                n.clone()
            }
            None => self.registry.default_name(&req.command),
        };
        let id = self
            .registry
            .new_id(&volee_os::random::unique_bytes(64), 4)
            .ok_or_else(|| RequestError::Internal("could not draw a free agent id".into()))?;
        let volee_bin = std::env::current_exe()
            .map_err(|_| RequestError::Internal("cannot find the volee executable".into()))?;
        Ok((id, name, volee_bin))
    }

    /// The pane is open (or not): record the agent, then hand the pane its environment.
    pub(super) fn on_opened(&mut self, l: Launching) {
        self.registry.release(&l.id);
        let o = match l.opened {
            Ok(o) => o,
            Err(e) => {
                let _ = l.reply.send(RequestError::from(e).response());
                return;
            }
        };
        if let Some((key, conn)) = o.conn {
            self.on_connected(key, Ok(conn));
        }
        let req = &l.req;
        // A restored agent: its old record gives way to the new one (kept to put back if the
        // launch fails after all), which keeps its place and the times it was restored.
        let replaced = req
            .restore
            .as_ref()
            .and_then(|id| self.forget_for_restore(id));
        let mut record = AgentRecord::launched(
            NewAgent {
                id: l.id.clone(),
                name: l.name.clone(),
                harness: req.harness.clone(),
                command: req.command.clone(),
                cwd: req.cwd.clone(),
                host: o.host.clone(),
                harness_version: req.harness_version.clone(),
                profile_fit: req.profile_fit,
                session_id: req.session_id.clone(),
            },
            now_ms(),
            &self.arbiter(),
        );
        record.pid = o.pid;
        let home = req
            .env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v));
        record.status_file = home
            .zip(record.pid)
            .and_then(|(home, pid)| volee_harness::listing::status_file(&req.harness, &home, pid))
            .map(|p| p.display().to_string());
        record.listing_socket = listing_socket(&req.harness, &req.env);
        record.typed_prompt = req.typed_prompt.clone().filter(|p| !p.is_empty());
        record.worktree = crate::worktree::linked_worktree(Path::new(&req.cwd));
        record.host_env = o.host_env.clone();
        record.budget = match (req.budget, req.budget_usd) {
            (Some(tokens), _) => Some(volee_protocol::Budget::new(Amount::Tokens(tokens))),
            (None, Some(usd)) => Some(volee_protocol::Budget::new(Amount::Usd(usd))),
            (None, None) => None,
        };
        if let Some(old) = &replaced {
            // Its place, not its old server's identity: until listed on the new one, its pane
            // is never taken for one an earlier server lost.
            record.placement = old.placement.clone().map(|p| volee_protocol::Placement {
                server_pid: 0,
                server_started: 0,
                ..p
            });
            record.restored = old.restored.clone();
            record.restored.push(now_ms());
        }
        let view = record.view();
        self.hosts.index(&record);
        self.registry.insert(record);
        self.save();
        let ready = self
            .prepare_launch(req, &l.id, &l.volee_bin, &l.env_file)
            .and_then(|()| match &o.host {
                Host::Zellij { session, .. } => {
                    Ok(self.hosts.zellij.watch(session, &o.host_env)?)
                }
                _ => Ok(()),
            });
        if let Err(e) = ready {
            let pane = o.pane;
            tokio::spawn(async move {
                let _ = pane.close().await;
            });
            self.forget(&l.id);
            if let Some(old) = replaced {
                self.registry.insert(old);
            }
            let _ = l.reply.send(e.response());
            return;
        }
        self.hosts.sync(&self.registry);
        self.registry.touch(&l.id);
        // Where it sits (window name, index, layout, the server's start) is recorded at once:
        // a server lost before any other change still leaves it restorable.
        if let Host::Tmux { socket, .. } = &o.host {
            self.resync(Path::new(socket), None);
        }
        let _ = l.reply.send(Response::Agent { agent: view });
    }

    /// What every launch needs once its agent is recorded, whatever the host: volee's hooks
    /// file or extension where the harness needs one, and the environment file the pane's
    /// `volee pane-exec` waits for (the caller's environment, the agent id for hooks, the
    /// profile's variables). On error the caller closes its pane.
    fn prepare_launch(
        &mut self,
        req: &LaunchRequest,
        id: &str,
        volee_bin: &Path,
        env_file: &Path,
    ) -> Result<(), RequestError> {
        // The instrumentation plan's files under HOME; the CLI carried out the rest.
        let kept = crate::instrument::write_kept_files(req, volee_bin)
            .map_err(|e| RequestError::Environment(e.to_string()))?;
        for path in kept {
            self.hooks.kept.insert(path, req.harness.clone());
        }
        let mut env = req.env.clone();
        env.retain(|(k, _)| k != "VOLEE_AGENT_ID" && k != "VOLEE_AGENT_TOKEN");
        // Hooks find their agent by this id, never by guessing from transcript files.
        env.push(("VOLEE_AGENT_ID".into(), id.to_string()));
        // And prove they run in its pane with this secret: the id alone is no secret.
        let token = new_hook_token().map_err(|e| {
            RequestError::Internal(format!("could not make the agent's hook token: {e}"))
        })?;
        env.push(("VOLEE_AGENT_TOKEN".into(), token.0.clone()));
        self.registry.edit(id, |a| a.hook_token = Some(token));
        // The end-to-end test of a daemon killed mid-launch stops here (debug builds only).
        if cfg!(debug_assertions)
            && std::env::var_os("VOLEE_FAULT").is_some_and(|v| v == "die-before-handover")
        {
            let _ = nix::sys::signal::raise(Signal::SIGKILL);
        }
        write_env_file(env_file, &req.cwd, &env).map_err(|e| {
            RequestError::Internal(format!("could not hand the environment to the pane: {e}"))
        })
    }

    /// Panes whose `volee pane-exec` still waits for the environment file of a launch the last
    /// daemon never finished: their agents failed now (not idle until the pane's timeout), and
    /// the panes are told to give up at once.
    pub(super) fn cancel_unfinished_launches(&mut self) {
        let now = now_ms();
        let waiting = crate::handover::waiting_panes(
            Path::new("/proc"),
            &self.paths.launch_dir(),
            nix::unistd::getuid().as_raw(),
        );
        for pane in waiting {
            tracing::warn!(
                "launch of agent {} never finished (pane-exec pid {} still waits): failed",
                pane.agent,
                pane.pid
            );
            if let Err(e) = persist::write_atomic(&pane.env_file, crate::handover::CANCELLED) {
                tracing::warn!("could not tell pane-exec pid {}: {e}", pane.pid);
            }
            self.registry
                .observe(&pane.agent, Observation::LaunchInterrupted { at: now });
        }
    }
}

/// A fresh hook token: 256 bits from the kernel, as hex.
fn new_hook_token() -> std::io::Result<volee_protocol::HookToken> {
    volee_os::random::hex(32).map(volee_protocol::HookToken)
}

/// Hand the caller's cwd and environment to `volee pane-exec`: NUL-separated, 0600, renamed into
/// place so the pane never reads half a file; the pane deletes it at once.
fn write_env_file(path: &Path, cwd: &str, env: &[(String, String)]) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(cwd.as_bytes());
    bytes.push(0);
    for (k, v) in env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            continue;
        }
        bytes.extend_from_slice(k.as_bytes());
        bytes.push(b'=');
        bytes.extend_from_slice(v.as_bytes());
        bytes.push(0);
    }
    persist::write_atomic(path, &bytes).map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_tokens_are_long_random_and_never_printed() {
        let (a, b) = (new_hook_token().unwrap(), new_hook_token().unwrap());
        assert_eq!(a.0.len(), 64, "256 bits as hex");
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(&a.0));
        assert!(a.matches(Some(&a.clone())));
        assert!(!a.matches(Some(&b)));
        assert!(!a.matches(None));
        assert!(!a.matches(Some(&volee_protocol::HookToken(a.0[..63].to_string()))));
    }
}
