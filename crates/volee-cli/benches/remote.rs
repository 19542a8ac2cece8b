//! Remote machines (issue 20, docs/adr/0013) over a real OpenSSH server on loopback, the fixture
//! of `tests/e2e/remote.rs` (`volee_test_support::sshd`: Debian's sshd on a free port, a second
//! Unix user as the remote account with this `volee` on its PATH). Needs root and
//! openssh-server.
//!
//! 1. A remote state change → the local `volee ls`: an agent on the remote (in the remote user's
//!    own tmux, started with `volee up --no-attach` and `volee launch`) writes its tty's path to a
//!    file; the bench (root) writes a line of output to that tty (→ `working`), waits until every
//!    watcher saw it, then takes the time and writes a BEL (→ `needs_you`) — exactly what the
//!    agent printing does, with no process start in the timed path. Watchers, each on a thread
//!    that stamps what it reads: the local daemon's `Watch` of `MACHINE:ID` (what `volee ls` and
//!    `volee wait` read, answered from the mirror) and, for the split, the remote daemon's own
//!    `Watch` of the agent (a copy of this binary run as the remote user: `--remote-watch`).
//! 2. The same sshd and remote user added as MACHINES (5) machines `box1`…: AGENTS (50) idle
//!    `sleep` agents there, so the local `ls` shows 250 remote agents. Over IDLE_SECS (60) with
//!    nothing changing: the local daemon's children (its `ssh` ControlMasters) sampled every
//!    5 ms, its CPU (`/proc/PID/stat`) and RSS; each connection's TCP payload (`ss -ti` of the
//!    ssh client's socket: `bytes_sent`, `bytes_received`, segments) and the bytes `volee serve`
//!    wrote there (its `/proc/PID/io` `wchar`: the frames); the CPU of the ssh clients and of the
//!    remote side. Then `ls` round trips over the socket and as whole commands.
//! 3. 1. again with the 5 × 50 agents mirrored, watched on every machine.
//!
//! `cargo bench -p volee-cli --bench remote` (env: RUNS=20 bells per measurement, LS_RUNS=100,
//! MACHINES=5, AGENTS=50, IDLE_SECS=60; VOLEE_BENCH_BIN=another volee build). Prints markdown
//! tables for docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde_json::Value;
use volee_daemon::{Client, Paths};
use volee_protocol::{AgentState, Request, Response};
use volee_test_support::bench::{cpu_ticks, env_num, percentile, rss_kib, sorted};
use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::{require, wait_until, TestEnv};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn clock_ticks_per_sec() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64
}

/// Every process: pid, parent pid, command name.
fn processes() -> Vec<(i32, i32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let open = stat.find('(')?;
            let close = stat.rfind(')')?;
            let ppid = stat[close + 2..].split(' ').nth(1)?.parse().ok()?;
            Some((pid, ppid, stat[open + 1..close].to_string()))
        })
        .collect()
}

/// The direct children of `pid`, with their command names.
fn children_of(pid: i32) -> Vec<(i32, String)> {
    processes()
        .into_iter()
        .filter(|(_, ppid, _)| *ppid == pid)
        .map(|(p, _, comm)| (p, comm))
        .collect()
}

/// Every descendant of `pid`, with its command name.
fn descendants_of(pid: i32) -> Vec<(i32, String)> {
    let all = processes();
    let mut found: Vec<(i32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, ppid, comm) in &all {
            if *ppid == parent {
                found.push((*p, comm.clone()));
                parents.push(*p);
            }
        }
    }
    found
}

/// The children of `pid` as the kernel lists them per thread (cheap enough to sample often).
fn task_children(pid: i32) -> BTreeSet<i32> {
    let mut kids = BTreeSet::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return kids;
    };
    for task in tasks.flatten() {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        kids.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    kids
}

/// A counter of `/proc/PID/io` (`rchar`, `wchar`).
fn io_counter(pid: i32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// TCP counters of one connection, from the client's socket.
#[derive(Debug, Clone, Copy, Default)]
struct Tcp {
    /// Payload bytes client → server (`bytes_sent`: ssh's encrypted packets, TCP/IP headers not
    /// counted).
    sent: u64,
    /// Payload bytes server → client (`bytes_received`).
    received: u64,
    /// Segments out and in, pure ACKs included.
    segs_out: u64,
    segs_in: u64,
}

/// The established TCP connections of `ssh` clients to `port`, by the client's pid (`ss -tinp`).
fn tcp_by_ssh_pid(port: u16) -> BTreeMap<i32, Tcp> {
    let out = Command::new("ss")
        .args(["-tinpOH", "state", "established"])
        .arg(format!("dport = :{port}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ss: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(pid) = line
            .split("pid=")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        found.insert(
            pid,
            Tcp {
                sent: field("bytes_sent:"),
                received: field("bytes_received:"),
                segs_out: field("segs_out:"),
                segs_in: field("segs_in:"),
            },
        );
    }
    found
}

/// `--remote-watch HOME ID`, run as the remote user: its own daemon's `Watch` of agent ID (what
/// `volee serve` relays), one state a line on stdout.
fn remote_watch(home: &str, id: &str) {
    let uid = nix::unistd::getuid().as_raw();
    let paths = Paths::from_env(|k| (k == "HOME").then(|| home.to_string()), uid);
    let mut client = Client::connect(&paths).unwrap();
    client.send(&Request::Watch { id: id.into() }).unwrap();
    let mut out = std::io::stdout().lock();
    while let Ok(response) = client.next_response() {
        let Response::Agent { agent } = response else {
            panic!("the remote's watch: {response:?}");
        };
        let line = serde_json::to_string(&agent.state).unwrap();
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

/// What a watcher saw: its index, when it read it, the state.
type Event = (usize, Instant, AgentState);

/// The bench's world: the local volee (daemon, its ssh), the sshd and remote user, the remote
/// watch helpers. Everything is ended at drop, also on panic.
struct World {
    env: Option<TestEnv>,
    server: Option<SshServer>,
    helpers: Vec<Child>,
}

impl World {
    fn env(&self) -> &TestEnv {
        self.env.as_ref().unwrap()
    }

    fn server(&self) -> &SshServer {
        self.server.as_ref().unwrap()
    }

    fn paths(&self) -> Paths {
        let home = self.env().volee_home();
        Paths::from_env(
            |k| (k == "VOLEE_HOME").then(|| home.display().to_string()),
            nix::unistd::getuid().as_raw(),
        )
    }

    /// `volee LINE` on the remote as its user runs it (an ssh of the bench's own).
    fn remote(&self, line: &str) -> String {
        self.remote_sh(&format!("volee {line}"))
    }

    /// A shell line on the remote as its user runs it (an ssh of the bench's own).
    fn remote_sh(&self, line: &str) -> String {
        let server = self.server();
        let out = server.ssh().arg(line).output().unwrap();
        assert!(
            out.status.success(),
            "remote {line}: {}\nsshd log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            server.log()
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The remote agents the local `volee ls --json` shows (live ones).
    fn remote_agents(&self) -> Vec<Value> {
        let all: Vec<Value> = serde_json::from_str(&self.env().ok(["ls", "--json"])).unwrap();
        all.into_iter()
            .filter(|a| a["machine"].is_string())
            .collect()
    }

    /// The remote daemon's pid (its runtime directory is the default one: /tmp/volee-UID).
    fn remote_daemon_pid(&self) -> i32 {
        let uid = self.server().user.uid;
        std::fs::read_to_string(format!("/tmp/volee-{uid}/daemon.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The remote's `volee serve --stdio` processes (one per kept connection).
    fn serve_pids(&self) -> Vec<i32> {
        self.server()
            .user
            .pids()
            .into_iter()
            .filter(|pid| cmdline(*pid).iter().any(|a| a == "serve"))
            .collect()
    }

    /// The sshd processes serving connections (the listener's descendants named sshd…).
    fn sshd_session_pids(&self) -> Vec<i32> {
        let listener: i32 = std::fs::read_to_string(self.server().dir.path().join("sshd.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        descendants_of(listener)
            .into_iter()
            .filter(|(_, comm)| comm.starts_with("sshd"))
            .map(|(p, _)| p)
            .collect()
    }

    /// A watcher of the remote daemon's view of agent `id`, as the remote user (a copy of this
    /// binary, which the remote user can run).
    fn watch_remote_daemon(&mut self, id: &str, source: usize, tx: mpsc::Sender<Event>) {
        let server = self.server();
        let helper = server.dir.path().join("bench-helper");
        if !helper.exists() {
            std::fs::copy(std::env::current_exe().unwrap(), &helper).unwrap();
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut child = server
            .user
            .command(helper.to_str().unwrap())
            .args(["--remote-watch", server.remote_home().to_str().unwrap(), id])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", server.remote_home())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        self.helpers.push(child);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let at = Instant::now();
                let state: AgentState = serde_json::from_str(&line).unwrap();
                if tx.send((source, at, state)).is_err() {
                    return;
                }
            }
        });
    }

    /// End the remote watch helpers.
    fn stop_helpers(&mut self) {
        for mut h in self.helpers.drain(..) {
            let _ = h.kill();
            let _ = h.wait();
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop_helpers();
        // The local daemon and its ssh ControlMasters (killed with it: nothing else ends them).
        if let Some(pid) = self.env.as_ref().and_then(TestEnv::daemon_pid) {
            let kids = children_of(pid);
            for p in std::iter::once(pid).chain(kids.into_iter().map(|(p, _)| p)) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        drop(self.env.take());
        // sshd, then the remote user with every process of its (daemon, tmux, agents).
        let uid = self.server.as_ref().map(|s| s.user.uid);
        drop(self.server.take());
        // What the remote user's volee and tmux left in /tmp, if still its.
        if let Some(uid) = uid {
            for dir in [format!("/tmp/volee-{uid}"), format!("/tmp/tmux-{uid}")] {
                if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir() && m.uid() == uid) {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
    }
}

/// A watcher of the local daemon's view of `query` (`MACHINE:ID`), on a thread, until `stop`.
fn watch_local(
    paths: Paths,
    query: String,
    source: usize,
    tx: mpsc::Sender<Event>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let mut client = Client::connect(&paths).unwrap();
    client.send(&Request::Watch { id: query.clone() }).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match client.next_response_within(Duration::from_millis(200)) {
                Ok(Some(Response::Agent { agent })) => {
                    let at = Instant::now();
                    if tx.send((source, at, agent.state)).is_err() {
                        return;
                    }
                }
                Ok(Some(other)) => panic!("watch {query}: {other:?}"),
                Ok(None) => {}
                Err(e) => panic!("watch {query}: {e}"),
            }
        }
    })
}

/// Read events until each of `sources` watchers has reported `state`: when each first did.
fn until_all(rx: &mpsc::Receiver<Event>, sources: usize, state: AgentState) -> Vec<Instant> {
    let mut seen: Vec<Option<Instant>> = vec![None; sources];
    let mut other = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.iter().any(Option::is_none) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((source, at, s)) if s == state => {
                seen[source].get_or_insert(at);
            }
            Ok((source, _, s)) => other.push((source, s)),
            Err(_) => panic!(
                "not every watcher saw {state:?} within 20 s: {seen:?}; saw instead {other:?}"
            ),
        }
    }
    seen.into_iter().map(Option::unwrap).collect()
}

/// `runs` bells on the agent whose pane's tty is `tty`: for each, the time from the BEL to
/// `needs_you` at each watcher, in ms (`[watcher][bell]`, in the bells' order).
fn bells(tty: &Path, rx: &mpsc::Receiver<Event>, sources: usize, runs: usize) -> Vec<Vec<f64>> {
    let mut pty = std::fs::OpenOptions::new().write(true).open(tty).unwrap();
    let mut took = vec![Vec::new(); sources];
    for i in 0..runs {
        // Output first (working), so the bell is a fresh needs_you.
        write!(pty, "output {i}\r\n").unwrap();
        until_all(rx, sources, AgentState::Working);
        let t0 = Instant::now();
        pty.write_all(b"\x07").unwrap();
        for (source, at) in until_all(rx, sources, AgentState::NeedsYou)
            .into_iter()
            .enumerate()
        {
            took[source].push(ms(at.duration_since(t0)));
        }
    }
    took
}

/// Launch a bell agent on the remote: it writes its tty's path to a file and sleeps. Its id and
/// its tty, once the local mirror of each of `machines` shows it idle.
fn bell_agent(world: &World, name: &str, machines: &[String]) -> (String, PathBuf) {
    let file = world.server().remote_home().join(format!("{name}.tty"));
    world.remote(&format!(
        "launch --name {name} -- sh -c 'tty > {}; exec sleep 100000'",
        file.display()
    ));
    let tty = wait_until(
        "the bell agent's tty",
        Duration::from_secs(20),
        || {
            let t = std::fs::read_to_string(&file).ok()?;
            t.trim()
                .starts_with("/dev/")
                .then(|| PathBuf::from(t.trim()))
        },
        || format!("{} not written", file.display()),
    );
    let id = wait_until(
        "the bell agent idle in the local ls, on every machine",
        Duration::from_secs(30),
        || {
            let agents = world.remote_agents();
            let on: Vec<&Value> = agents.iter().filter(|a| a["name"] == name).collect();
            // Idle: its daemon there reads its pane (output before that would be missed).
            (on.len() == machines.len() && on.iter().all(|a| a["state"] == "idle"))
                .then(|| on[0]["id"].as_str().unwrap().to_string())
        },
        || format!("{:#?}\n{}", world.remote_agents(), world.env().log_tail()),
    );
    (id, tty)
}

/// Agents by state, as text.
fn by_state(agents: &[Value]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for a in agents {
        *counts
            .entry(format!(
                "{}{}",
                a["state"].as_str().unwrap_or("?"),
                if a["reachable"] == false { "?" } else { "" }
            ))
            .or_default() += 1;
    }
    format!("{counts:?}")
}

fn row(what: &str, v: &[f64], target: &str) {
    println!(
        "| {what} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {target} |",
        v.len(),
        v[0],
        percentile(v, 0.5),
        percentile(v, 0.99),
        v[v.len() - 1]
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--remote-watch") {
        remote_watch(&args[2], &args[3]);
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if !require("tmux", "the remote machine benchmarks")
        || !require("ss", "the remote machine benchmarks (iproute2)")
        || !require_sshd("the remote machine benchmarks")
    {
        return;
    }
    let runs = env_num("RUNS", 20) as usize;
    let ls_runs = env_num("LS_RUNS", 100) as usize;
    let machines_n = env_num("MACHINES", 5) as usize;
    let agents_n = env_num("AGENTS", 50) as usize;
    let idle_secs = env_num("IDLE_SECS", 60);
    let clk = clock_ticks_per_sec();

    let volee = std::env::var_os("VOLEE_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_volee").into());
    let mut env = TestEnv::new(&volee);
    let server = SshServer::start(RemotePath::WithVolee(&volee));
    env.extra_env.push((
        "VOLEE_SSH_CONFIG".into(),
        server.ssh_config.to_string_lossy().into_owned(),
    ));
    // The daemon logs as a user's does (TestEnv asks for debug).
    env.extra_env.push(("VOLEE_LOG".into(), "info".into()));
    let mut world = World {
        env: Some(env),
        server: Some(server),
        helpers: Vec::new(),
    };
    world.server().trust_host_key();
    let port = world.server().port;
    let dest = world.server().dest();
    let names: Vec<String> = (1..=machines_n).map(|n| format!("box{n}")).collect();

    // 1. One machine, one agent.
    world.env().ok([
        "machine",
        "add",
        &names[0],
        &dest,
        "--port",
        &port.to_string(),
    ]);
    world.remote("up --no-attach");
    let (bell_id, tty) = bell_agent(&world, "bell", &names[..1]);
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    world.watch_remote_daemon(&bell_id, 0, tx.clone());
    let local = watch_local(
        world.paths(),
        format!("{}:{bell_id}", names[0]),
        1,
        tx.clone(),
        stop.clone(),
    );
    let one = bells(&tty, &rx, 2, runs);
    stop.store(true, Ordering::Relaxed);
    local.join().unwrap();
    world.stop_helpers();
    drop((tx, rx));
    world.env().ok(["stop", &format!("{}:{bell_id}", names[0])]);

    // 2. AGENTS idle agents there, the machine added MACHINES times.
    let launch_started = Instant::now();
    world.remote_sh(&format!(
        "for i in $(seq 1 {agents_n}); do volee launch --name idle$i -- sleep 100000 >/dev/null || exit 1; done"
    ));
    let launch_secs = launch_started.elapsed().as_secs_f64();
    for name in &names[1..] {
        world
            .env()
            .ok(["machine", "add", name, &dest, "--port", &port.to_string()]);
    }
    let want = agents_n * machines_n;
    wait_until(
        "every remote agent idle in the local ls",
        Duration::from_secs(120),
        || {
            let agents = world.remote_agents();
            (agents.len() == want
                && agents
                    .iter()
                    .all(|a| a["state"] == "idle" && a["reachable"] == true))
            .then_some(())
        },
        || {
            let agents = world.remote_agents();
            format!(
                "{} remote agents: {}\n{}",
                agents.len(),
                by_state(&agents),
                world.env().log_tail()
            )
        },
    );
    // Let anything held (quiet changes go out at most every 2 s) and the remote's own scans settle.
    std::thread::sleep(Duration::from_secs(5));
    let daemon = world.env().daemon_pid().unwrap();
    let kids = children_of(daemon);
    let ssh_pids: Vec<i32> = kids
        .iter()
        .filter(|(_, c)| c == "ssh")
        .map(|(p, _)| *p)
        .collect();
    let other_kids: Vec<&(i32, String)> = kids.iter().filter(|(_, c)| c != "ssh").collect();
    let serve_pids = world.serve_pids();
    let sshd_pids = world.sshd_session_pids();
    let remote_daemon = world.remote_daemon_pid();
    let remote_ls = world.remote_agents();
    assert_eq!(remote_ls.len(), want, "{}", by_state(&remote_ls));
    let sum_ticks = |pids: &[i32]| -> u64 { pids.iter().map(|p| cpu_ticks(*p)).sum() };
    let wchar =
        |pids: &[i32]| -> Vec<u64> { pids.iter().map(|p| io_counter(*p, "wchar")).collect() };

    let before_kids = task_children(daemon);
    let (cpu0, ssh_cpu0, serve_cpu0, sshd_cpu0, rd_cpu0) = (
        cpu_ticks(daemon),
        sum_ticks(&ssh_pids),
        sum_ticks(&serve_pids),
        sum_ticks(&sshd_pids),
        cpu_ticks(remote_daemon),
    );
    let (tcp0, serve_w0, t0) = (tcp_by_ssh_pid(port), wchar(&serve_pids), Instant::now());
    let mut seen_kids = BTreeSet::new();
    while t0.elapsed() < Duration::from_secs(idle_secs) {
        seen_kids.extend(task_children(daemon));
        std::thread::sleep(Duration::from_millis(5));
    }
    let (tcp1, serve_w1, elapsed) = (tcp_by_ssh_pid(port), wchar(&serve_pids), t0.elapsed());
    let (cpu1, ssh_cpu1, serve_cpu1, sshd_cpu1, rd_cpu1) = (
        cpu_ticks(daemon),
        sum_ticks(&ssh_pids),
        sum_ticks(&serve_pids),
        sum_ticks(&sshd_pids),
        cpu_ticks(remote_daemon),
    );
    let secs = elapsed.as_secs_f64();
    let per_min = |bytes: u64| bytes as f64 * 60.0 / secs;
    let pct = |ticks: u64| ticks as f64 / clk / secs * 100.0;
    let spawned = seen_kids.difference(&before_kids).count();
    let rss = rss_kib(daemon);
    let mut conns: Vec<(i32, Tcp)> = Vec::new();
    for pid in &ssh_pids {
        let (a, b) = (tcp0.get(pid), tcp1.get(pid));
        let (Some(a), Some(b)) = (a, b) else {
            panic!("no TCP connection of ssh {pid} to port {port}: {tcp0:?} {tcp1:?}");
        };
        conns.push((
            *pid,
            Tcp {
                sent: b.sent - a.sent,
                received: b.received - a.received,
                segs_out: b.segs_out - a.segs_out,
                segs_in: b.segs_in - a.segs_in,
            },
        ));
    }
    let frame_bytes: Vec<u64> = serve_w0.iter().zip(&serve_w1).map(|(a, b)| b - a).collect();

    // ls with MACHINES × AGENTS remote agents.
    let mut client = Client::connect(&world.paths()).unwrap();
    let mut socket_ms = Vec::new();
    for _ in 0..ls_runs {
        let t = Instant::now();
        match client.request(&Request::List { all: false }).unwrap() {
            Response::Agents { agents } => assert_eq!(agents.len(), want),
            other => panic!("{other:?}"),
        }
        socket_ms.push(ms(t.elapsed()));
    }
    drop(client);
    let socket_ms = sorted(socket_ms);
    let json_bytes = world.env().ok(["ls", "--json"]).len();
    let mut json_ms = Vec::new();
    let mut table_ms = Vec::new();
    for _ in 0..ls_runs {
        let t = Instant::now();
        world.env().ok(["ls", "--json"]);
        json_ms.push(ms(t.elapsed()));
        let t = Instant::now();
        world.env().ok(["ls"]);
        table_ms.push(ms(t.elapsed()));
    }
    let (json_ms, table_ms) = (sorted(json_ms), sorted(table_ms));

    // 3. Bells again, with every machine's mirror holding the idle agents, watched on each.
    let (bell2, tty2) = bell_agent(&world, "bell2", &names);
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    world.watch_remote_daemon(&bell2, 0, tx.clone());
    let watchers: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            watch_local(
                world.paths(),
                format!("{name}:{bell2}"),
                i + 1,
                tx.clone(),
                stop.clone(),
            )
        })
        .collect();
    let serve_w2 = wchar(&serve_pids);
    let loaded = bells(&tty2, &rx, machines_n + 1, runs);
    let serve_w3 = wchar(&serve_pids);
    stop.store(true, Ordering::Relaxed);
    for w in watchers {
        w.join().unwrap();
    }
    world.stop_helpers();
    drop((tx, rx));
    // Bell by bell, the last of the machines' mirrors to show it.
    let slowest: Vec<f64> = (0..runs)
        .map(|i| {
            loaded[1..]
                .iter()
                .map(|v| v[i])
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    let frames_per_bell: Vec<f64> = serve_w2
        .iter()
        .zip(&serve_w3)
        .map(|(a, b)| (b - a) as f64 / (2 * runs) as f64)
        .collect();

    println!("| remote state change → local (ms) | n | min | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|---|");
    row(
        "bell → needs_you in the remote's own daemon (its `Watch`; 1 machine, 1 agent)",
        &sorted(one[0].clone()),
        "—",
    );
    row(
        "bell → needs_you in the local daemon (`Watch` of `box1:ID`: what `volee ls` shows; 1 machine, 1 agent)",
        &sorted(one[1].clone()),
        "p50 ≤ 100, p99 ≤ 300",
    );
    row(
        &format!(
            "the same, the remote's own daemon; {machines_n} machines × {} live agents mirrored",
            agents_n + 1
        ),
        &sorted(loaded[0].clone()),
        "—",
    );
    row(
        &format!(
            "the same, local, `box1`; {machines_n} machines × {} live agents",
            agents_n + 1
        ),
        &sorted(loaded[1].clone()),
        "p50 ≤ 100, p99 ≤ 300",
    );
    row(
        &format!("the same, local, the last of the {machines_n} machines to show it"),
        &sorted(slowest),
        "—",
    );
    println!();
    println!("| `ls`, {want} remote agents ({machines_n} machines × {agents_n}) (ms) | n | min | p50 | p99 | max | target |");
    println!("|---|---|---|---|---|---|---|");
    row("`ls` request over the socket", &socket_ms, "≤ 20");
    row(
        &format!("`volee ls --json` whole command ({json_bytes} bytes of output)"),
        &json_ms,
        "≤ 20",
    );
    row("`volee ls` (table) whole command", &table_ms, "≤ 20");
    println!();
    println!(
        "| {machines_n} machines × {agents_n} idle agents, nothing changing, {:.0} s | value | target |",
        secs
    );
    println!("|---|---|---|");
    println!(
        "| `ssh` processes, children of the local daemon | {} (pids {ssh_pids:?}) | one per machine |",
        ssh_pids.len()
    );
    println!("| other children of the local daemon | {other_kids:?} | — |");
    println!("| processes the local daemon spawned in the window (children sampled every 5 ms) | {spawned} | 0 |");
    println!(
        "| local daemon CPU (% of one core) | {:.3} ({} clock ticks of {:.0} ms) | < 0.2 % |",
        pct(cpu1 - cpu0),
        cpu1 - cpu0,
        1000.0 / clk
    );
    println!(
        "| local daemon RSS (MiB) | {:.1} | — |",
        rss as f64 / 1024.0
    );
    println!(
        "| the {} local `ssh` clients together (% of one core) | {:.3} ({} ticks) | — |",
        ssh_pids.len(),
        pct(ssh_cpu1 - ssh_cpu0),
        ssh_cpu1 - ssh_cpu0
    );
    for (pid, c) in &conns {
        println!(
            "| connection of ssh {pid}: TCP payload per minute, client → server / server → client (bytes); segments out / in | {:.0} / {:.0}; {:.0} / {:.0} | keep-alives only |",
            per_min(c.sent),
            per_min(c.received),
            per_min(c.segs_out),
            per_min(c.segs_in)
        );
    }
    println!(
        "| `volee serve` frames written per minute, each connection (bytes, its `wchar`) | {:?} | 0 |",
        frame_bytes
            .iter()
            .map(|b| per_min(*b).round() as u64)
            .collect::<Vec<_>>()
    );
    println!(
        "| remote: the {} `volee serve` together / its daemon / the sshd processes of the connections (% of one core) | {:.3} / {:.3} / {:.3} | — |",
        serve_pids.len(),
        pct(serve_cpu1 - serve_cpu0),
        pct(rd_cpu1 - rd_cpu0),
        pct(sshd_cpu1 - sshd_cpu0)
    );
    println!();
    println!(
        "{agents_n} agents launched on the remote in {launch_secs:.1} s (one ssh, `volee launch` in a loop); a state change of one agent there sends each connection ≈{:?} bytes (a frame: the whole list of {} agents, one of them ended)",
        frames_per_bell.iter().map(|b| b.round() as u64).collect::<Vec<_>>(),
        agents_n + 2
    );
}
