//! Benchmarks of zellij hosts against a real zellij 0.45.1 with volee's plugin loaded, attached
//! inside a private tmux (the world of `tests/e2e/zellij.rs`):
//!
//! 1. title, bell and exit → the state `volee ls` shows, for an agent in the active tab (visible)
//!    and for agents in hidden tabs: from bytes written to the agent pane's tty (what the agent
//!    printing does) or a signal to its process, to the daemon's watch stream reporting it;
//!    A `(y/N)` prompt written to a hidden agent (the screen rules read it once the plugin read
//!    the pane);
//! 2. CPU of the zellij server (the plugin runs inside it) and of the daemon with N idle agents.
//!
//! `cargo bench -p volee-cli --bench zellij_daemon` (env: AGENTS=10, ROUNDS=10, IDLE_SECS=30).
//! Prints markdown tables for docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::time::{Duration, Instant};

use volee_daemon::{Client, Paths};
use volee_protocol::{AgentState, AgentView, Request, Response};
use volee_test_support::bench::{cpu_ticks, env_num, percentile};
use volee_test_support::zellij::{plugin_wasm, start_zellij_with, zellij_binary, KillSession};
use volee_test_support::{require, wait_until, TestEnv};

/// The zellij server of the session whose socket directory is `socket_dir`.
fn zellij_server_pid(socket_dir: &str) -> i32 {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "--server") && args.iter().any(|a| a.starts_with(socket_dir)) {
            return pid;
        }
    }
    panic!("no zellij server under {socket_dir}");
}

/// One agent under test: its id, its pane's tty (opened for writing) and its process.
struct Agent {
    id: String,
    tty: std::fs::File,
    pid: i32,
}

/// Reads the watch stream until `done` holds for the agent; the time since `t0` in ms.
fn until(watch: &mut Client, t0: Instant, done: impl Fn(&AgentView) -> bool) -> f64 {
    loop {
        match watch.next_response_within(Duration::from_secs(10)).unwrap() {
            Some(Response::Agent { agent }) if done(&agent) => {
                return t0.elapsed().as_secs_f64() * 1000.0
            }
            Some(Response::Agent { .. }) => {}
            Some(other) => panic!("{other:?}"),
            None => panic!("nothing within 10 s"),
        }
    }
}

fn row(what: &str, v: &mut [f64]) {
    if v.is_empty() {
        // ROUNDS=0: the idle figures only.
        println!("| {what} | 0 | | | | |");
        return;
    }
    v.sort_by(f64::total_cmp);
    println!(
        "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        v.len(),
        v[0],
        percentile(v, 0.5),
        percentile(v, 0.9),
        v[v.len() - 1]
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !require("tmux", "the zellij benchmarks") {
        return;
    }
    let (Some(bin), Some(wasm)) = (zellij_binary(), plugin_wasm()) else {
        return;
    };
    let agents = env_num("AGENTS", 10).max(2) as usize;
    let rounds = env_num("ROUNDS", 10) as usize;
    let idle_secs = env_num("IDLE_SECS", 30);

    // VOLEE_BENCH_BIN: another build of volee (an older commit's), to compare in one run.
    let volee = std::env::var_os("VOLEE_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_volee").into());
    let mut env = TestEnv::new(volee);
    env.start_tmux();
    let vars = start_zellij_with(&mut env, &bin, "bz", Some(&wasm));
    let socket_dir = vars
        .iter()
        .find(|(k, _)| k == "ZELLIJ_SOCKET_DIR")
        .unwrap()
        .1
        .clone();
    let _kill = KillSession::new(&bin, "bz", vars);
    let home = env.volee_home();
    let paths = Paths::from_env(
        |k| (k == "VOLEE_HOME").then(|| home.display().to_string()),
        nix::unistd::getuid().as_raw(),
    );

    // Each agent writes its pid and tty, then sleeps as that pid. The last one launched holds
    // the active tab; the others are in hidden tabs.
    let dir = env.root().join("bench");
    std::fs::create_dir_all(&dir).unwrap();
    let mut all = Vec::new();
    for n in 0..agents {
        let file = dir.join(format!("a{n}"));
        let script = format!(
            "echo \"$$ $(tty)\" > {}.tmp && mv {0}.tmp {0}; exec sleep 100000",
            file.display()
        );
        let id = env.ok([
            "launch",
            "--host",
            "zellij:bz",
            "--name",
            &format!("a{n}"),
            "--",
            "sh",
            "-c",
            &script,
        ]);
        let line = wait_until(
            "the agent wrote its tty",
            Duration::from_secs(20),
            || std::fs::read_to_string(&file).ok(),
            String::new,
        );
        let (pid, tty) = line.trim().split_once(' ').unwrap();
        all.push(Agent {
            id,
            tty: std::fs::OpenOptions::new().write(true).open(tty).unwrap(),
            pid: pid.parse().unwrap(),
        });
    }
    for a in &all {
        env.wait_state(&a.id, "idle", 30);
    }

    // 2. idle CPU first, with every agent watched.
    std::thread::sleep(Duration::from_secs(3));
    let ticks_per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let server = zellij_server_pid(&socket_dir);
    let daemon = env.daemon_pid().unwrap();
    let (s0, d0, t0) = (cpu_ticks(server), cpu_ticks(daemon), Instant::now());
    std::thread::sleep(Duration::from_secs(idle_secs));
    let (s1, d1, elapsed) = (cpu_ticks(server), cpu_ticks(daemon), t0.elapsed());
    let pct = |ticks: u64| ticks as f64 / ticks_per_sec / elapsed.as_secs_f64() * 100.0;

    // 1. latencies.
    let (mut title_hidden, mut title_visible) = (Vec::new(), Vec::new());
    let mut bell_hidden = Vec::new();
    let mut prompt_hidden = Vec::new();
    let visible = agents - 1;
    for r in 0..rounds {
        for (n, a) in all.iter_mut().enumerate() {
            let mut watch = Client::connect(&paths).unwrap();
            watch.send(&Request::Watch { id: a.id.clone() }).unwrap();
            // Drain what the watch sends first.
            while let Some(Response::Agent { .. }) = watch
                .next_response_within(Duration::from_millis(100))
                .unwrap()
            {}
            let title = format!("t-{r}-{n}");
            let t0 = Instant::now();
            write!(a.tty, "\x1b]2;{title}\x07").unwrap();
            let ms = until(&mut watch, t0, |v| {
                v.title.as_deref() == Some(title.as_str())
            });
            if n == visible {
                title_visible.push(ms);
                continue;
            }
            title_hidden.push(ms);
            // New output first (working), so the bell is a fresh needs_you.
            writeln!(a.tty, "output {r}").unwrap();
            until(&mut watch, Instant::now(), |v| {
                v.state == AgentState::Working
            });
            let t0 = Instant::now();
            a.tty.write_all(b"\x07").unwrap();
            bell_hidden.push(until(&mut watch, t0, |v| v.state == AgentState::NeedsYou));
            // A prompt on the screen (the generic rules read it): output first, then the prompt.
            write!(a.tty, "\r\noutput again {r}\r\n").unwrap();
            until(&mut watch, Instant::now(), |v| {
                v.state == AgentState::Working
            });
            let t0 = Instant::now();
            write!(a.tty, "Continue {r}? (y/N) ").unwrap();
            prompt_hidden.push(until(&mut watch, t0, |v| v.state == AgentState::NeedsYou));
        }
    }
    // Exits: every hidden agent, then the visible one.
    let (mut exit_hidden, mut exit_visible) = (Vec::new(), Vec::new());
    for (n, a) in all.iter().enumerate() {
        let mut watch = Client::connect(&paths).unwrap();
        watch.send(&Request::Watch { id: a.id.clone() }).unwrap();
        while let Some(Response::Agent { .. }) = watch
            .next_response_within(Duration::from_millis(100))
            .unwrap()
        {}
        let t0 = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let ms = until(&mut watch, t0, |v| v.state == AgentState::Failed);
        if n == visible {
            exit_visible.push(ms);
        } else {
            exit_hidden.push(ms);
        }
    }

    println!("| signal → state in `volee ls` (ms) | n | min | p50 | p90 | max |");
    println!("|---|---|---|---|---|---|");
    row("OSC 2 title, active tab", &mut title_visible);
    row("OSC 2 title, hidden tab", &mut title_hidden);
    row("BEL → needs_you, hidden tab", &mut bell_hidden);
    row("`(y/N)` prompt → needs_you, hidden tab", &mut prompt_hidden);
    row("SIGTERM → failed, active tab", &mut exit_visible);
    row("SIGTERM → failed, hidden tab", &mut exit_hidden);
    println!();
    println!(
        "| {agents} idle agents ({} in hidden tabs), {} s | CPU (% of one core) |",
        agents - 1,
        elapsed.as_secs()
    );
    println!("|---|---|");
    println!("| zellij server, plugin included | {:.2} |", pct(s1 - s0));
    println!("| volee daemon | {:.2} |", pct(d1 - d0));
    std::io::stdout().flush().unwrap();
}
