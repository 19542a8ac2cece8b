//! The client requests, one function each. A request answered by the actor alone is answered at
//! once; one that needs host I/O is answered by the task that does it.

use std::future::Future;
use std::path::PathBuf;

use volee_core::Millis;
use volee_protocol::{Request, Response, PROTOCOL_VERSION};

use super::request_error::RequestError;
use super::{now_ms, Daemon, Reply};

/// Answer `reply` with what `work` (run on a task) gives.
fn answer_later(
    reply: Reply,
    work: Result<
        impl Future<Output = Result<Response, RequestError>> + Send + 'static,
        RequestError,
    >,
) {
    match work {
        Ok(work) => {
            tokio::spawn(async move {
                let answer = work.await.unwrap_or_else(|e| e.response());
                let _ = reply.send(answer);
            });
        }
        Err(e) => {
            let _ = reply.send(e.response());
        }
    }
}

impl Daemon {
    pub(super) fn on_request(&mut self, req: Request, reply: Reply) {
        let Some((req, reply)) = self.route_remote(req, reply) else {
            return;
        };
        if let Some(error) =
            super::remote::request_query(&req).and_then(|id| self.unknown_machine_query(id))
        {
            let _ = reply.send(error);
            return;
        }
        let answer = match req {
            Request::Hello { .. } => Ok(Response::Hello {
                version: PROTOCOL_VERSION,
                pid: std::process::id(),
            }),
            Request::List { all } => return self.list(all, reply),
            Request::Show { id } => self.show(&id),
            Request::Explain { id } => self.explain(&id),
            Request::Launch(req) => return self.launch(*req, reply),
            Request::Hook(event) => {
                self.on_hook(event);
                Ok(Response::Ok)
            }
            Request::Stop { id } => self.stop(&id),
            Request::Interrupt { id } => return answer_later(reply, self.interrupt(&id)),
            Request::Budget { id, change } => self.budget(&id, change),
            Request::Send { id, text, raw } => return self.send(&id, &text, raw, reply),
            Request::Peek { id, lines } => return answer_later(reply, self.peek(&id, lines)),
            Request::Remove { id } => self.remove(&id),
            Request::Rescan => {
                // Asked for: read every process, not only those due; answered once new
                // processes are recorded.
                if let Some(reply) = self.rescan(true, Some(reply)) {
                    let _ = reply.send(Response::Ok);
                }
                return;
            }
            Request::Prune => Ok(self.prune_now()),
            Request::Watch { .. } => Err(RequestError::user("watch is a streaming request")),
            Request::TmuxInit {
                socket,
                status_cost,
                ..
            } => {
                let socket = PathBuf::from(socket);
                if status_cost {
                    self.notices.cost_sockets.insert(socket.clone());
                } else {
                    self.notices.cost_sockets.remove(&socket);
                }
                return self.tmux_init(socket, reply);
            }
            Request::TmuxDown { socket } => Ok(self.tmux_down(PathBuf::from(socket))),
            Request::Shutdown => Ok(Response::Ok),
            Request::QuietState => Ok(Response::Quiet {
                until_ms: self.notices.quiet_until.filter(|u| *u > now_ms()),
            }),
            Request::Quiet { until_ms } => Ok(self.quiet(until_ms)),
            Request::ZellijSessions => Ok(Response::ZellijSessions {
                sessions: self.hosts.zellij.sessions(),
            }),
            Request::WatchAll => Err(RequestError::user("watch_all is a streaming request")),
            Request::Machines { ping } => return self.machines_request(ping, reply),
            Request::MachinesChanged => {
                self.reload_machines();
                Ok(Response::Ok)
            }
            Request::RunOn { machine, args } => return self.run_on(&machine, args, reply),
            Request::IndexSessions { roots } => {
                // The index thread answers when it has read them.
                self.history.index_now(roots, reply);
                return;
            }
        };
        let _ = reply.send(answer.unwrap_or_else(|e| e.response()));
    }

    fn show(&self, query: &str) -> Result<Response, RequestError> {
        let agent = self.registry.resolve(query)?.view();
        Ok(Response::Agent { agent })
    }

    fn explain(&self, query: &str) -> Result<Response, RequestError> {
        let agent = self.registry.resolve(query)?;
        let mut explanation = agent.explain();
        explanation.screen = self.hosts.screen_source(agent);
        Ok(Response::Explanation { explanation })
    }

    /// `volee rm`: forget an ended agent (and close its dead pane).
    fn remove(&mut self, query: &str) -> Result<Response, RequestError> {
        let agent = self.registry.resolve(query)?;
        let id = agent.id.clone();
        if !agent.is_ended() {
            return Err(RequestError::StillRunning { id });
        }
        self.forget(&id);
        Ok(Response::Ok)
    }

    fn prune_now(&mut self) -> Response {
        let before = self.registry.len();
        self.prune();
        Response::Text {
            text: format!("pruned {}", before - self.registry.len()),
        }
    }

    /// `volee tmux-init`: the server's status line is pushed from now on; answered once its
    /// panes are listed (agents rebuilt from their pane options).
    fn tmux_init(&mut self, socket: PathBuf, reply: Reply) {
        self.hosts.tmux.set_initialised(&socket, true);
        self.registry.mark_unsaved();
        self.notices.status_dirty = true;
        let (ack, listed) = tokio::sync::oneshot::channel();
        self.resync(&socket, Some(ack));
        tokio::spawn(async move {
            let _ = listed.await;
            let _ = reply.send(Response::Ok);
        });
    }

    /// `volee down`: the server's status line is no longer volee's business.
    fn tmux_down(&mut self, socket: PathBuf) -> Response {
        self.hosts.tmux.set_initialised(&socket, false);
        self.registry.mark_unsaved();
        Response::Ok
    }

    /// `volee quiet`: saved before the answer, so a daemon killed right after still keeps it.
    fn quiet(&mut self, until_ms: Option<Millis>) -> Response {
        self.notices.quiet_until = until_ms.filter(|u| *u > now_ms());
        self.save();
        self.notices.status_dirty = true;
        Response::Text {
            text: match self.notices.quiet_until {
                Some(u) => format!("quiet until {}", volee_core::registry::rfc3339(u)),
                None => "notifications on".into(),
            },
        }
    }
}
