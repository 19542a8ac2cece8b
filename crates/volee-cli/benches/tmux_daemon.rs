//! Benchmarks of the tmux daemon against a real tmux on a private socket:
//!
//! 1. bell → `needs_you`: the time from a BEL written to an agent pane's tty (exactly what an agent
//!    printing does) to (a) the daemon's watch stream reporting `needs_you` — the state `volee ls`
//!    shows — and (b) tmux's `@volee-status` option containing "needs you";
//!    Then a `(y/N)` prompt → `needs_you`: the same agent writes a prompt line (read from its
//!    screen by the generic profile's rules once output settles); then a busy agent printing
//!    ≈200 KB/s: the daemon's CPU;
//! 2. the daemon at steady state with N idle agents: CPU, process spawns, RSS;
//! 3. `volee ls --json` round trip: socket request in-process, and the whole command.
//!
//! `cargo bench -p volee-cli --bench tmux_daemon` (env: BELLS=100, PROMPTS=100, BUSY_SECS=20,
//! AGENTS=50, IDLE_SECS=60, DISCOVERY=3s to include the periodic /proc scan, HISTORY=N to give
//! the daemon's past-sessions thread harness directories to watch: the real fixtures and N
//! Claude transcripts).
//! Prints a markdown table for docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::paths;
use volee_daemon::Client;
use volee_protocol::{AgentState, Request, Response};
use volee_test_support::bench::{cpu_ticks, env_num, forks_since_boot, percentile, rss_kib};
use volee_test_support::{require, wait_until, TestEnv};

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn plant_history(home: &std::path::Path, copies: usize) {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../volee-history/tests/fixtures/home");
    copy_tree(&fixtures, home);
    let claude =
        fixtures.join(".claude/projects/-tmp-work/d4a8abe5-742d-4002-a1ab-379c1b005cb4.jsonl");
    for n in 0..copies {
        let dir = home.join(format!(".claude/projects/-bench-{}", n % 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(
            &claude,
            dir.join(format!("{n:08}-0000-4000-8000-000000000000.jsonl")),
        )
        .unwrap();
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !require("tmux", "the tmux daemon benchmarks") {
        return;
    }
    let bells = env_num("BELLS", 100) as usize;
    let prompts = env_num("PROMPTS", 100) as usize;
    let busy_secs = env_num("BUSY_SECS", 20);
    let agents = env_num("AGENTS", 50) as usize;
    let idle_secs = env_num("IDLE_SECS", 60);

    // VOLEE_BENCH_BIN: another build of volee (an older commit's), to compare in one run.
    let volee = std::env::var_os("VOLEE_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_volee").into());
    let env = TestEnv::new(volee);
    // DISCOVERY=3s measures the daemon with its periodic /proc scan on (TestEnv turns it off).
    if let Ok(interval) = std::env::var("DISCOVERY") {
        std::fs::write(
            env.volee_home().join("config/config.toml"),
            format!("discovery_interval = \"{interval}\"\n"),
        )
        .unwrap();
    }
    // HISTORY=N: harness session directories under HOME (the real fixtures, and N copies of the
    // Claude transcript over 20 projects), so the daemon's index thread watches them while idle.
    let history = env_num("HISTORY", 0) as usize;
    if history > 0 {
        plant_history(&env.home(), history);
    }
    env.start_tmux();
    env.ok(["tmux-init"]);
    let paths = paths(&env);

    // 1. bell latency.
    let id = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        "bell",
        "--",
        "sleep",
        "100000",
    ]);
    let tty = env.tmux(&[
        "display-message",
        "-p",
        "-t",
        env.agent(&id)["host"]["pane"].as_str().unwrap(),
        "#{pane_tty}",
    ]);
    let mut pty = std::fs::OpenOptions::new()
        .write(true)
        .open(tty.trim())
        .unwrap();
    let mut watch = Client::connect(&paths).unwrap();
    watch.send(&Request::Watch { id: id.clone() }).unwrap();
    let next_state =
        |watch: &mut Client| match watch.next_response_within(Duration::from_secs(10)).unwrap() {
            Some(Response::Agent { agent }) => agent.state,
            Some(other) => panic!("{other:?}"),
            None => panic!("no state change within 10 s"),
        };
    let status = || env.tmux(&["show-option", "-gv", "@volee-status"]);
    let mut to_state = Vec::new();
    let mut to_status = Vec::new();
    for i in 0..bells {
        // New output first (working), so the bell is a fresh needs_you.
        writeln!(pty, "output {i}").unwrap();
        while next_state(&mut watch) != AgentState::Working {}
        wait_until(
            "the status line left needs you",
            Duration::from_secs(5),
            || (!status().contains("needs you")).then_some(()),
            status,
        );
        let t0 = Instant::now();
        pty.write_all(b"\x07").unwrap();
        while next_state(&mut watch) != AgentState::NeedsYou {}
        to_state.push(t0.elapsed().as_secs_f64() * 1000.0);
        wait_until(
            "the status line shows needs you",
            Duration::from_secs(5),
            || status().contains("needs you").then_some(()),
            status,
        );
        to_status.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    to_state.sort_by(f64::total_cmp);
    to_status.sort_by(f64::total_cmp);

    // 1b. prompt latency: output (working), then a prompt on the last line.
    let mut prompt_ms = Vec::new();
    for i in 0..prompts {
        write!(pty, "\r\noutput {i}\r\n").unwrap();
        while next_state(&mut watch) != AgentState::Working {}
        let t0 = Instant::now();
        pty.write_all(format!("Continue {i}? (y/N) ").as_bytes())
            .unwrap();
        while next_state(&mut watch) != AgentState::NeedsYou {}
        prompt_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    prompt_ms.sort_by(f64::total_cmp);
    env.ok(["stop", &id]);

    // 1c. a busy agent: ≈200 KB/s of base64 lines; it logs how many bytes it printed.
    let count = env.volee_home().join("busy.count");
    let chunk = env.volee_home().join("busy.chunk");
    let script = format!(
        "while :; do head -c 15000 /dev/urandom | base64 -w 100 > '{c}'; cat '{c}'; wc -c < '{c}' >> '{n}'; sleep 0.1; done",
        c = chunk.display(),
        n = count.display()
    );
    let busy = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        "busy",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    env.wait_state(&busy, "working", 30);
    std::thread::sleep(Duration::from_secs(2));
    let daemon = env.daemon_pid().unwrap();
    let clk = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let printed = || -> u64 {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum()
    };
    let (busy_cpu0, busy_bytes0, busy_t0) = (cpu_ticks(daemon), printed(), Instant::now());
    std::thread::sleep(Duration::from_secs(busy_secs));
    let (busy_cpu1, busy_bytes1, busy_elapsed) = (cpu_ticks(daemon), printed(), busy_t0.elapsed());
    let busy_pct = (busy_cpu1 - busy_cpu0) as f64 / clk / busy_elapsed.as_secs_f64() * 100.0;
    let busy_rate =
        busy_bytes1.saturating_sub(busy_bytes0) as f64 / busy_elapsed.as_secs_f64() / 1000.0;
    env.ok(["stop", &busy]);

    // 2. steady state with idle agents.
    let mut ids = Vec::new();
    for n in 0..agents {
        ids.push(env.ok([
            "launch",
            "--host",
            "tmux:main",
            "--name",
            &format!("idle{n}"),
            "--",
            "sleep",
            "100000",
        ]));
    }
    for id in &ids {
        env.wait_state(id, "idle", 30);
    }
    let pid = env.daemon_pid().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let ticks_per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let (cpu0, forks0, t0) = (cpu_ticks(pid), forks_since_boot(), Instant::now());
    // The daemon's own children, sampled every 2 ms (a tmux command lives longer than that).
    let mut children = std::collections::BTreeSet::new();
    while t0.elapsed() < Duration::from_secs(idle_secs) {
        let list =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        children.extend(list.split_whitespace().map(str::to_string));
        std::thread::sleep(Duration::from_millis(2));
    }
    let (cpu1, forks1, elapsed) = (cpu_ticks(pid), forks_since_boot(), t0.elapsed());
    // The long-lived control-mode client is a child from before the window.
    let before: std::collections::BTreeSet<String> =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
    let new_children = children.difference(&before).count();
    let cpu_pct = (cpu1 - cpu0) as f64 / ticks_per_sec / elapsed.as_secs_f64() * 100.0;
    let forks_per_sec = (forks1 - forks0) as f64 / elapsed.as_secs_f64();
    let rss = rss_kib(pid);

    // 3. ls round trips.
    let mut client = Client::connect(&paths).unwrap();
    let mut socket_ms = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        match client.request(&Request::List { all: false }).unwrap() {
            Response::Agents { agents: a } => assert!(
                a.len() >= agents,
                "{} live: {:?}",
                a.len(),
                a.iter()
                    .map(|x| (&x.name, x.state, &x.evidence))
                    .collect::<Vec<_>>()
            ),
            other => panic!("{other:?}"),
        }
        socket_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    socket_ms.sort_by(f64::total_cmp);
    let mut command_ms = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        env.ok(["ls", "--json"]);
        command_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    command_ms.sort_by(f64::total_cmp);
    for id in &ids {
        env.run(["stop", id]);
    }

    println!("| measurement | min | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    for (what, v) in [
        (format!("bell → needs_you in the registry/`volee ls` (ms, {bells} bells)"), &to_state),
        (format!("bell → \"needs you\" in `@volee-status` (ms, {bells} bells; includes ~2 ms per `tmux show` poll)"), &to_status),
        (format!("`(y/N)` prompt → needs_you in the registry (ms, {prompts} prompts, generic profile)"), &prompt_ms),
        (format!("`ls` request over the socket, {agents} agents (ms, 200 runs)"), &socket_ms),
        (format!("`volee ls --json` whole command, {agents} agents (ms, 50 runs)"), &command_ms),
    ] {
        println!(
            "| {what} | {:.2} | {:.2} | {:.2} | {:.2} |",
            v[0],
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1]
        );
    }
    println!();
    println!(
        "| daemon with {agents} idle agents over {} s | value |",
        elapsed.as_secs()
    );
    println!("|---|---|");
    println!("| CPU (% of one core) | {cpu_pct:.3} |");
    println!("| processes the daemon spawned in the window | {new_children} |");
    println!("| forks per second, whole machine (everything else included) | {forks_per_sec:.2} |");
    println!("| RSS (MiB) | {:.1} |", rss as f64 / 1024.0);
    println!();
    println!(
        "| a busy agent printing {busy_rate:.0} KB/s for {} s | value |",
        busy_elapsed.as_secs()
    );
    println!("|---|---|");
    println!("| daemon CPU (% of one core) | {busy_pct:.2} |");
}
