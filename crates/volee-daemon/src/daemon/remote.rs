//! Machines (issue 20, docs/adr/0013): the daemon's kept connection to each
//! (`machines::link`), the mirror of their agents, and requests for `MACHINE:ID` forwarded.
//!
//! The mirror holds what each machine last sent, cleaned (remote text is hostile): ids checked,
//! control characters dropped, lengths bounded, `machine` set. While a machine is down its agents
//! keep their last state with `reachable: false` — a flag, never a state of its own. Watches of
//! remote agents (`wait`, `watch`) are answered from the mirror; everything else that names a
//! remote agent is sent down its machine's connection and the answer tagged with the machine.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use volee_core::registry::rfc3339;
use volee_core::Millis;
use volee_protocol::{AgentView, Host, MachineLink, Request, Response, REMOTE_COMMANDS};

use super::request_error::{user_error, RequestError};
use super::{now_ms, Daemon, Msg, Reply};
use crate::machines::link::{self, Link, LinkEvent};
use crate::machines::ssh::SshOptions;
use crate::machines::{self, Machine};
use crate::persist::Loaded;

/// How long a `volee ls` waits for machines still making their first connection (after the
/// daemon started or a machine was added): the mirror is rebuilt, not shown empty.
const FIRST_CONNECT_WAIT_MS: Millis = 3000;
/// The most agents kept of one machine.
const MAX_AGENTS: usize = 2000;
/// How long `machine ls` waits for a round trip.
const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// The machines and what they last said.
#[derive(Default)]
pub(super) struct Remote {
    machines: BTreeMap<String, Mirror>,
    /// `wait`/`watch` streams of remote agents, by `MACHINE:ID`.
    watchers: Vec<(String, mpsc::UnboundedSender<Response>)>,
    /// `volee ls` answers held until first connections settle, with their deadline.
    held: Vec<(bool, Reply, Millis)>,
    /// Requests and watches naming an agent of a machine still making its first connection.
    held_requests: Vec<(Request, Reply, Millis)>,
    held_watches: Vec<(String, mpsc::UnboundedSender<Response>, Millis)>,
}

/// One machine's connection and agents.
struct Mirror {
    machine: Machine,
    link: Link,
    status: &'static str,
    /// False until its first connection was made (agents came) or failed.
    settled: bool,
    version: Option<String>,
    protocol: Option<u32>,
    ssh_pid: Option<u32>,
    /// Connected since, or unreachable since.
    since: Millis,
    error: Option<String>,
    agents: Vec<AgentView>,
}

impl Remote {
    /// The machine of a `MACHINE:ID` query, and the id part, when MACHINE is a machine.
    fn split<'a>(&self, query: &'a str) -> Option<(&'a str, &'a str)> {
        let (machine, id) = query.split_once(':')?;
        self.machines.contains_key(machine).then_some((machine, id))
    }

    pub(super) fn views(&self, all: bool) -> impl Iterator<Item = AgentView> + '_ {
        self.machines
            .values()
            .flat_map(|m| m.agents.iter())
            .filter(move |a| all || !a.state.is_final())
            .cloned()
    }

    /// When a held `ls` must be answered anyway.
    pub(super) fn next_due(&self) -> Option<Millis> {
        let lists = self.held.iter().map(|(_, _, at)| *at);
        let requests = self.held_requests.iter().map(|(_, _, at)| *at);
        let watches = self.held_watches.iter().map(|(_, _, at)| *at);
        lists.chain(requests).chain(watches).min()
    }

    /// Must `req` wait for a first connection to settle? (It names an agent of, or runs on, a
    /// machine still making it; `machine ls` waits for them all.)
    fn waits_for_first_connection(&self, req: &Request) -> bool {
        match req {
            Request::RunOn { machine, .. } => self.unsettled_machine(machine),
            Request::Machines { .. } => self.unsettled(),
            req => request_query(req)
                .and_then(|q| q.split_once(':'))
                .is_some_and(|(m, _)| self.unsettled_machine(m)),
        }
    }

    /// Is `machine` still making its first connection?
    fn unsettled_machine(&self, machine: &str) -> bool {
        self.machines.get(machine).is_some_and(|m| !m.settled)
    }

    fn unsettled(&self) -> bool {
        self.machines.values().any(|m| !m.settled)
    }
}

/// Resolve `query` among one machine's agents the way the registry resolves local ones: an
/// exact id, a name (a live one first), an id prefix.
fn resolve<'a>(
    machine: &str,
    agents: &'a [AgentView],
    query: &str,
) -> Result<&'a AgentView, RequestError> {
    if let Some(a) = agents.iter().find(|a| a.id == query) {
        return Ok(a);
    }
    let named: Vec<&AgentView> = agents.iter().filter(|a| a.name == query).collect();
    let live: Vec<&AgentView> = named
        .iter()
        .copied()
        .filter(|a| !a.state.is_final())
        .collect();
    let ambiguous = |pool: &[&AgentView]| RequestError::User {
        message: format!(
            "{machine}:{query} is ambiguous: {}",
            pool.iter()
                .map(|a| format!("{}:{} ({})", machine, a.id, a.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        hints: vec!["type more of the id, or use the exact name".into()],
    };
    match (live.as_slice(), named.as_slice()) {
        ([one], _) | ([], [one]) => return Ok(one),
        ([], []) => {}
        (live, all) => return Err(ambiguous(if live.is_empty() { all } else { live })),
    }
    let prefixed: Vec<&AgentView> = if query.is_empty() {
        Vec::new()
    } else {
        agents.iter().filter(|a| a.id.starts_with(query)).collect()
    };
    match prefixed.as_slice() {
        [one] => Ok(one),
        [] => Err(RequestError::User {
            message: format!("no agent {query} on machine {machine}"),
            hints: vec![format!("list them with: volee ls --all --on {machine}")],
        }),
        many => Err(ambiguous(many)),
    }
}

/// An id a machine may send: what volee's own ids and kept names look like, nothing a shell or
/// tmux would read.
fn plausible_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Remote text as volee keeps it: no control characters, at most `max` characters.
fn clean(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// A remote agent view made safe to keep and show, marked with its machine; None for one whose
/// id is not an id.
fn clean_view(mut v: AgentView, machine: &str) -> Option<AgentView> {
    if !plausible_id(&v.id) {
        return None;
    }
    v.name = clean(&v.name, 128);
    v.harness = clean(&v.harness, 64);
    v.harness_version = v.harness_version.map(|s| clean(&s, 64));
    v.state_since = clean(&v.state_since, 40);
    v.evidence = clean(&v.evidence, 512);
    v.cwd = clean(&v.cwd, 4096);
    v.session_id = v.session_id.map(|s| clean(&s, 256));
    v.title = v.title.map(|s| clean(&s, 256));
    v.command = v.command.iter().take(64).map(|s| clean(s, 1024)).collect();
    v.created_at = clean(&v.created_at, 40);
    v.ended_at = v.ended_at.map(|s| clean(&s, 40));
    v.last_output = v.last_output.map(|s| clean(&s, 40));
    if let Some(w) = v.worktree.as_mut() {
        w.path = clean(&w.path, 4096);
        w.branch = w.branch.as_ref().map(|b| clean(b, 256));
    }
    v.host = match v.host {
        Host::Tmux {
            socket,
            session,
            window,
            pane,
        } => Host::Tmux {
            socket: clean(&socket, 1024),
            session: clean(&session, 256),
            window: clean(&window, 32),
            pane: clean(&pane, 32),
        },
        Host::Zellij { session, tab, pane } => Host::Zellij {
            session: clean(&session, 256),
            tab,
            pane: clean(&pane, 32),
        },
        Host::Tty { tty } => Host::Tty {
            tty: clean(&tty, 256),
        },
        Host::None => Host::None,
    };
    if let Some(p) = v.placement.as_mut() {
        p.window_name = clean(&p.window_name, 256);
        p.window_layout = clean(&p.window_layout, 4096);
    }
    v.restored = v.restored.iter().take(64).map(|t| clean(t, 40)).collect();
    if let Some(u) = v.usage.as_mut() {
        u.model = u.model.as_ref().map(|m| clean(m, 128));
        u.source = clean(&u.source, 1024);
    }
    v.machine = Some(machine.to_string());
    v.reachable = true;
    v.unreachable_since = None;
    Some(v)
}

/// Mark the agents of an answer with their machine.
fn tag(response: Response, machine: &str) -> Response {
    let mark = |v: AgentView| clean_view(v, machine);
    match response {
        Response::Agent { agent } => match mark(agent) {
            Some(agent) => Response::Agent { agent },
            None => user_error(
                "the machine answered with an agent volee cannot show",
                vec![],
            ),
        },
        Response::Agents { agents } => Response::Agents {
            agents: agents.into_iter().filter_map(mark).collect(),
        },
        Response::Explanation { mut explanation } => match mark(explanation.agent) {
            Some(agent) => {
                explanation.agent = agent;
                explanation.decision = clean(&explanation.decision, 1024);
                for o in &mut explanation.observations {
                    o.kind = clean(&o.kind, 32);
                    o.at = clean(&o.at, 40);
                    o.evidence = clean(&o.evidence, 512);
                }
                Response::Explanation { explanation }
            }
            None => user_error(
                "the machine answered with an agent volee cannot show",
                vec![],
            ),
        },
        Response::Error {
            kind,
            message,
            hints,
        } => Response::Error {
            kind,
            message: format!("{machine}: {}", clean(&message, 1024)),
            hints: hints.iter().take(4).map(|h| clean(h, 256)).collect(),
        },
        other => other,
    }
}

impl Daemon {
    /// Read `machines.toml` and keep a connection to each machine in it: new ones are connected,
    /// removed or changed ones dropped (their ssh killed).
    pub(super) fn reload_machines(&mut self) {
        let path = self.paths.machines_file();
        let file = match machines::load(&path, now_ms()) {
            Ok(Loaded::Ok(file)) => file,
            Ok(Loaded::Missing) => machines::MachinesFile::default(),
            Ok(Loaded::Corrupt { kept_as, error }) => {
                tracing::error!(
                    "machines.toml was not one volee wrote ({error}); kept as {}",
                    kept_as.display()
                );
                machines::MachinesFile::default()
            }
            Err(e) => {
                tracing::error!("could not read machines.toml: {e}");
                return;
            }
        };
        let before = self.remote.machines.len();
        self.remote
            .machines
            .retain(|name, m| file.get(name).is_some_and(|f| *f == m.machine));
        let mut changed = before != self.remote.machines.len();
        for machine in file.machines {
            if let Some(status) = self.remote.machines.get(&machine.name).map(|m| m.status) {
                // Asked again (`machine install` put volee there, `add` of another): one that
                // is down is tried now rather than after its backoff.
                if status != "connected" {
                    let link = self.link_to(&machine);
                    if let Some(m) = self.remote.machines.get_mut(&machine.name) {
                        m.link = link;
                    }
                }
                continue;
            }
            changed = true;
            let link = self.link_to(&machine);
            tracing::info!("machine {}: connecting to {}", machine.name, machine.dest);
            self.remote.machines.insert(
                machine.name.clone(),
                Mirror {
                    machine,
                    link,
                    status: "connecting",
                    settled: false,
                    version: None,
                    protocol: None,
                    ssh_pid: None,
                    since: now_ms(),
                    error: None,
                    agents: Vec::new(),
                },
            );
        }
        if changed {
            self.remote_changed();
        }
    }

    /// A new kept connection to `machine`, reporting to the actor.
    fn link_to(&self, machine: &Machine) -> Link {
        let (tx, name) = (self.tx.clone(), machine.name.clone());
        let on_event = Arc::new(move |event| {
            let _ = tx.send(Msg::Link(name.clone(), event));
        });
        Link::start(
            machine.clone(),
            SshOptions::from_process_env(),
            self.paths.ssh_control(&machine.name),
            on_event,
        )
    }

    /// What a machine's link said.
    pub(super) fn on_link(&mut self, name: &str, event: LinkEvent) {
        let now = now_ms();
        let Some(m) = self.remote.machines.get_mut(name) else {
            return;
        };
        match event {
            LinkEvent::Connecting => {
                if m.status == "connected" {
                    m.status = "connecting";
                }
            }
            LinkEvent::Up { version, ssh_pid } => {
                m.status = "connected";
                m.version = Some(version);
                m.protocol = Some(volee_protocol::PROTOCOL_VERSION);
                m.ssh_pid = ssh_pid;
                m.since = now;
                m.error = None;
            }
            LinkEvent::Agents(agents) => {
                let mut fresh: Vec<AgentView> = agents
                    .into_iter()
                    .filter_map(|v| clean_view(v, name))
                    .take(MAX_AGENTS)
                    .collect();
                fresh.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
                fresh.dedup_by(|a, b| a.id == b.id);
                let before = std::mem::replace(&mut m.agents, fresh);
                m.settled = true;
                let after = m.agents.clone();
                self.mirror_changed(name, &before, &after);
            }
            LinkEvent::Down {
                error,
                incompatible,
            } => {
                let was_reachable = m.status == "connected" || !m.settled;
                m.status = if incompatible.is_some() {
                    "incompatible"
                } else {
                    "unreachable"
                };
                if let Some((protocol, version)) = incompatible {
                    m.protocol = Some(protocol);
                    m.version = Some(version);
                }
                if was_reachable {
                    m.since = now;
                }
                m.error = Some(clean(&error, 400));
                m.ssh_pid = None;
                m.settled = true;
                let since = rfc3339(m.since);
                let before = m.agents.clone();
                for a in &mut m.agents {
                    a.reachable = false;
                    a.unreachable_since = Some(since.clone());
                }
                let after = m.agents.clone();
                self.mirror_changed(name, &before, &after);
            }
        }
        self.release_held();
    }

    /// A machine's agents changed from `before` to `after`: watchers, notifications, status line.
    fn mirror_changed(&mut self, machine: &str, before: &[AgentView], after: &[AgentView]) {
        let old: BTreeMap<&str, &AgentView> = before.iter().map(|a| (a.id.as_str(), a)).collect();
        let now = now_ms();
        for a in after {
            if let Some(was) = old.get(a.id.as_str()) {
                if was.state != a.state && a.reachable {
                    self.notify_remote(was, a, now);
                }
            }
        }
        let new: BTreeMap<&str, &AgentView> = after.iter().map(|a| (a.id.as_str(), a)).collect();
        let prefix = format!("{machine}:");
        self.remote.watchers.retain(|(key, tx)| {
            let Some(id) = key.strip_prefix(&prefix) else {
                return !tx.is_closed();
            };
            match (old.get(id), new.get(id)) {
                (_, Some(now)) if old.get(id).is_some_and(|was| *was == *now) => !tx.is_closed(),
                (_, Some(now)) => tx
                    .send(Response::Agent {
                        agent: (*now).clone(),
                    })
                    .is_ok(),
                (_, None) => {
                    let _ = tx.send(user_error(&format!("agent {key} was removed"), vec![]));
                    false
                }
            }
        });
        if before != after {
            self.remote_changed();
        }
    }

    /// The mirror changed: draw the status line again.
    fn remote_changed(&mut self) {
        self.notices.status_dirty = true;
    }

    /// An agent's view by its address: `ID` here, `MACHINE:ID` from the mirror.
    pub(super) fn view_of(&self, address: &str) -> Option<AgentView> {
        match self.remote.split(address) {
            Some((machine, id)) => self
                .remote
                .machines
                .get(machine)?
                .agents
                .iter()
                .find(|a| a.id == id)
                .cloned(),
            None => self.registry.get(address).map(|a| a.view()),
        }
    }

    /// Answer what was held for first connections: all of it once its machines settled, the
    /// rest once past its deadline.
    pub(super) fn release_held(&mut self) {
        let now = now_ms();
        // A first connection that takes longer than the wait holds nothing up any more.
        for m in self.remote.machines.values_mut() {
            if !m.settled && now >= m.since + FIRST_CONNECT_WAIT_MS {
                m.settled = true;
            }
        }
        for (req, reply, at) in std::mem::take(&mut self.remote.held_requests) {
            if self.remote.waits_for_first_connection(&req) && now < at {
                self.remote.held_requests.push((req, reply, at));
            } else {
                self.on_request(req, reply);
            }
        }
        for (query, tx, at) in std::mem::take(&mut self.remote.held_watches) {
            let machine = query.split_once(':').map(|(m, _)| m.to_string());
            match machine {
                Some(m) if self.remote.unsettled_machine(&m) && now < at => {
                    self.remote.held_watches.push((query, tx, at));
                }
                _ => self.on_msg(Msg::Watch(query, tx)),
            }
        }
        if self.remote.held.is_empty() {
            return;
        }
        let all_settled = !self.remote.unsettled();
        let held = std::mem::take(&mut self.remote.held);
        for (all, reply, at) in held {
            if all_settled || now >= at {
                let _ = reply.send(Response::Agents {
                    agents: self.views(all),
                });
            } else {
                self.remote.held.push((all, reply, at));
            }
        }
    }

    /// `volee ls`: answered now, or once machines still connecting for the first time answer.
    pub(super) fn list(&mut self, all: bool, reply: Reply) {
        if self.remote.unsettled() {
            self.remote
                .held
                .push((all, reply, now_ms() + FIRST_CONNECT_WAIT_MS));
            return;
        }
        let _ = reply.send(Response::Agents {
            agents: self.views(all),
        });
    }

    /// Every agent: local ones, then each machine's.
    pub(super) fn views(&self, all: bool) -> Vec<AgentView> {
        let mut views = self.local_views(all);
        views.extend(self.remote.views(all));
        views
    }

    /// A request that names `MACHINE:ID`: answered from the mirror or sent down the machine's
    /// connection. Gives the request back when it is not one.
    pub(super) fn route_remote(&mut self, req: Request, reply: Reply) -> Option<(Request, Reply)> {
        let Some(query) = request_query(&req).map(str::to_string) else {
            return Some((req, reply));
        };
        let Some((machine, id)) = self.remote.split(&query) else {
            return Some((req, reply));
        };
        let machine = machine.to_string();
        let Some(m) = self.remote.machines.get(&machine) else {
            return Some((req, reply));
        };
        if !m.settled {
            let at = now_ms() + FIRST_CONNECT_WAIT_MS;
            self.remote.held_requests.push((req, reply, at));
            return None;
        }
        let agent = match resolve(&machine, &m.agents, id) {
            Ok(a) => a.clone(),
            Err(e) => {
                let _ = reply.send(e.response());
                return None;
            }
        };
        if let Request::Show { .. } = req {
            let _ = reply.send(Response::Agent { agent });
            return None;
        }
        if !agent.reachable {
            let _ = reply.send(unreachable_error(m));
            return None;
        }
        let full = agent.id.clone();
        let req = match req {
            Request::Explain { .. } => Request::Explain { id: full },
            Request::Stop { .. } => Request::Stop { id: full },
            Request::Interrupt { .. } => Request::Interrupt { id: full },
            Request::Send { text, raw, .. } => Request::Send {
                id: full,
                text,
                raw,
            },
            Request::Peek { lines, .. } => Request::Peek { id: full, lines },
            Request::Remove { .. } => Request::Remove { id: full },
            Request::Budget { change, .. } => Request::Budget { id: full, change },
            other => other,
        };
        let answer = m.link.request(req);
        tokio::spawn(async move {
            let response = answer
                .await
                .unwrap_or_else(|_| link::unreachable("its connection has ended"));
            let _ = reply.send(tag(response, &machine));
        });
        None
    }

    /// `volee wait`/`watch MACHINE:ID`: the view now and after every change, from the mirror.
    /// Gives the query back when it is not a remote one.
    pub(super) fn watch_remote(
        &mut self,
        query: String,
        tx: mpsc::UnboundedSender<Response>,
    ) -> Option<(String, mpsc::UnboundedSender<Response>)> {
        let Some((machine, id)) = self.remote.split(&query) else {
            return Some((query, tx));
        };
        let Some(m) = self.remote.machines.get(machine) else {
            return Some((query, tx));
        };
        if !m.settled {
            let at = now_ms() + FIRST_CONNECT_WAIT_MS;
            self.remote.held_watches.push((query, tx, at));
            return None;
        }
        match resolve(machine, &m.agents, id) {
            Ok(agent) => {
                let key = format!("{machine}:{}", agent.id);
                let _ = tx.send(Response::Agent {
                    agent: agent.clone(),
                });
                self.remote.watchers.push((key, tx));
            }
            Err(e) => {
                let _ = tx.send(e.response());
            }
        }
        None
    }

    /// `volee machine ls`: each machine's connection and agents, with a round trip timed on
    /// the connected ones when `ping`.
    pub(super) fn machines_request(&mut self, ping: bool, reply: Reply) {
        if self.remote.unsettled() {
            let at = now_ms() + FIRST_CONNECT_WAIT_MS;
            self.remote
                .held_requests
                .push((Request::Machines { ping }, reply, at));
            return;
        }
        let mut links = Vec::new();
        let mut pings = Vec::new();
        for (name, m) in &self.remote.machines {
            let mut agents: BTreeMap<String, u32> = BTreeMap::new();
            for a in m.agents.iter().filter(|a| !a.state.is_final()) {
                *agents.entry(a.state.as_str().to_string()).or_default() += 1;
            }
            links.push(MachineLink {
                name: name.clone(),
                status: m.status.to_string(),
                version: m.version.clone(),
                protocol: m.protocol,
                rtt_ms: None,
                since: (m.settled || m.status == "connected").then(|| rfc3339(m.since)),
                error: m.error.clone(),
                agents,
                ssh_pid: m.ssh_pid,
            });
            pings.push((ping && m.status == "connected").then(|| {
                (
                    Instant::now(),
                    m.link.request(Request::Hello {
                        version: volee_protocol::PROTOCOL_VERSION,
                    }),
                )
            }));
        }
        tokio::spawn(async move {
            for (link, ping) in links.iter_mut().zip(pings) {
                let Some((sent, answer)) = ping else {
                    continue;
                };
                if let Ok(Ok(Response::Hello { .. })) =
                    tokio::time::timeout(PING_TIMEOUT, answer).await
                {
                    link.rtt_ms =
                        Some(u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX));
                }
            }
            let _ = reply.send(Response::Machines { machines: links });
        });
    }

    /// `volee launch --on M`, `volee sessions … --on M`: `volee ARGS` run on the machine.
    pub(super) fn run_on(&mut self, machine: &str, args: Vec<String>, reply: Reply) {
        let Some(m) = self.remote.machines.get(machine) else {
            let _ = reply.send(unknown_machine(machine, &self.remote));
            return;
        };
        if !m.settled {
            let at = now_ms() + FIRST_CONNECT_WAIT_MS;
            let req = Request::RunOn {
                machine: machine.to_string(),
                args,
            };
            self.remote.held_requests.push((req, reply, at));
            return;
        }
        if !args
            .first()
            .is_some_and(|a| REMOTE_COMMANDS.contains(&a.as_str()))
        {
            let _ = reply.send(user_error(
                &format!("only {} run on a machine", REMOTE_COMMANDS.join(" and ")),
                vec![],
            ));
            return;
        }
        if m.status != "connected" {
            let _ = reply.send(unreachable_error(m));
            return;
        }
        let answer = m.link.request(Request::RunOn {
            machine: String::new(),
            args,
        });
        let machine = machine.to_string();
        tokio::spawn(async move {
            let response = answer
                .await
                .unwrap_or_else(|_| link::unreachable("its connection has ended"));
            let _ = reply.send(tag(response, &machine));
        });
    }

    /// A request that names `M:ID` where `M` looks like a machine name but is none.
    pub(super) fn unknown_machine_query(&self, query: &str) -> Option<Response> {
        let (machine, _) = query.split_once(':')?;
        if self.registry.resolve(query).is_ok() || machines::check_name(machine).is_err() {
            return None;
        }
        Some(unknown_machine(machine, &self.remote))
    }
}

/// The agent a request names, if it names one.
pub(super) fn request_query(req: &Request) -> Option<&str> {
    match req {
        Request::Show { id }
        | Request::Explain { id }
        | Request::Stop { id }
        | Request::Interrupt { id }
        | Request::Send { id, .. }
        | Request::Peek { id, .. }
        | Request::Budget { id, .. }
        | Request::Remove { id } => Some(id),
        _ => None,
    }
}

fn unknown_machine(machine: &str, remote: &Remote) -> Response {
    let known: Vec<&str> = remote.machines.keys().map(String::as_str).collect();
    user_error(
        &format!("no machine named {machine}"),
        vec![if known.is_empty() {
            "add one: volee machine add NAME SSH-DEST".into()
        } else {
            format!("machines: {} (volee machine ls)", known.join(", "))
        }],
    )
}

fn unreachable_error(m: &Mirror) -> Response {
    let why = m.error.as_deref().unwrap_or("not connected yet");
    Response::Error {
        kind: volee_protocol::ErrorKind::Environment,
        message: format!(
            "machine {} is unreachable since {}: {why}",
            m.machine.name,
            rfc3339(m.since)
        ),
        hints: vec!["volee machine ls".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volee_protocol::AgentState;

    fn view(id: &str, name: &str, state: AgentState) -> AgentView {
        let json = serde_json::json!({
            "id": id, "name": name, "harness": "claude", "harness_version": null,
            "profile_fit": "generic", "origin": "launched", "state": state,
            "state_source": "screen", "state_since": "2026-12-04T10:00:00Z", "evidence": "x",
            "exit_status": null, "pid": null, "cwd": "/", "session_id": null,
            "host": {"kind": "none"}
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn remote_views_are_cleaned_and_marked() {
        let mut v = view("ab12", "fix\u{1b}[31m#[fg=red]", AgentState::Idle);
        v.title = Some("\u{7}t".repeat(500));
        v.machine = Some("evil".into());
        v.reachable = false;
        let v = clean_view(v, "box").unwrap();
        assert_eq!(v.name, "fix[31m#[fg=red]");
        assert_eq!(v.title.as_deref().map(|t| t.chars().count()), Some(256));
        assert_eq!(v.machine.as_deref(), Some("box"));
        assert!(v.reachable);
        assert_eq!(v.address(), "box:ab12");
        for bad in ["", "a:b", "a b", "x\ny", &"a".repeat(65), "../x"] {
            assert!(
                clean_view(view(bad, "n", AgentState::Idle), "box").is_none(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn remote_ids_resolve_like_local_ones() {
        let agents = vec![
            view("ab12", "fixer", AgentState::Done),
            view("cd34", "fixer", AgentState::Working),
            view("ab99", "other", AgentState::Idle),
        ];
        let id = |q: &str| resolve("box", &agents, q).map(|a| a.id.clone());
        assert_eq!(id("ab12").ok().as_deref(), Some("ab12"));
        assert_eq!(id("fixer").ok().as_deref(), Some("cd34"));
        assert_eq!(id("c").ok().as_deref(), Some("cd34"));
        assert!(id("ab").is_err());
        let Err(e) = id("zz") else { panic!() };
        assert!(e.to_string().contains("no agent zz on machine box"), "{e}");
    }

    #[test]
    fn answers_are_tagged_with_their_machine() {
        let Response::Agent { agent } = tag(
            Response::Agent {
                agent: view("ab12", "n", AgentState::Idle),
            },
            "box",
        ) else {
            panic!()
        };
        assert_eq!(agent.machine.as_deref(), Some("box"));
        let Response::Error { message, .. } = tag(user_error("no\u{1b}pe", vec![]), "box") else {
            panic!()
        };
        assert_eq!(message, "box: nope");
    }
}
