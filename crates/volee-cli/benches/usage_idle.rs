//! What following usage costs the daemon (issue 23): AGENTS (default 50) Claude Code agents —
//! the profile's launch line run by a stand-in `claude` that answers `--version` and then
//! sleeps (no model, no network), each with its transcript (the real fixture's lines) in
//! `~/.claude/projects` — whose usage the daemon follows. Measured: every agent's usage read
//! once; then IDLE_SECS (default 60) of nothing: the daemon's CPU, its new children and the
//! machine's forks; then TURNS (default 50) appended responses: from the write of a response's
//! line to the new usage in the daemon's agent list.
//!
//! `AGENTS=50 IDLE_SECS=60 TURNS=50 cargo bench -p volee-cli --bench usage_idle`

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::{agents, paths};
use volee_test_support::bench::{cpu_ticks, env_num, forks_since_boot, summary};
use volee_test_support::{require, wait_until, TestEnv};

/// One assistant line of a response with its usage.
fn response_line(n: usize) -> String {
    format!(
        r#"{{"type":"assistant","sessionId":"s","message":{{"id":"msg_bench_{n}","model":"m","role":"assistant","usage":{{"input_tokens":1000,"output_tokens":10,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}},"content":[{{"type":"text","text":"ok"}}]}}}}"#
    ) + "\n"
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !require("tmux", "the usage benchmark") {
        return;
    }
    let count = env_num("AGENTS", 50) as usize;
    let idle_secs = env_num("IDLE_SECS", 60);
    let turns = env_num("TURNS", 50) as usize;
    let volee = std::env::var_os("VOLEE_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_volee").into());
    let mut env = TestEnv::new(volee);
    // The stand-in program: a version, then nothing.
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\ncase \"$1\" in --version) echo '2.1.332 (Claude Code)'; exit 0;; esac\nexec sleep 100000\n",
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.extra_env.push(("PATH".into(), path));
    let projects = env.home().join(".claude/projects/-bench");
    std::fs::create_dir_all(&projects).unwrap();
    env.start_tmux();
    env.ok(["tmux-init"]);
    let paths = paths(&env);
    let fixture = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/d4a8abe5-742d-4002-a1ab-379c1b005cb4.jsonl"),
    )
    .unwrap();
    let mut files = Vec::new();
    for n in 0..count {
        let id = env.ok([
            "launch",
            "--harness",
            "claude",
            "--host",
            "tmux:main",
            "--name",
            &format!("u{n}"),
        ]);
        let session = env.agent(&id)["session_id"].as_str().unwrap().to_string();
        let file = projects.join(format!("{session}.jsonl"));
        std::fs::write(&file, &fixture).unwrap();
        files.push(file);
    }
    let t = Instant::now();
    wait_until(
        "every agent's usage read",
        Duration::from_secs(60),
        || {
            let list = agents(&paths, false);
            (list.len() == count && list.iter().all(|a| a.usage.is_some())).then_some(())
        },
        || format!("{:#?}", agents(&paths, false)),
    );
    let first = t.elapsed();

    // Idle: nothing written.
    std::thread::sleep(Duration::from_secs(3));
    let pid = env.daemon_pid().unwrap();
    let ticks_per_sec = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .unwrap()
        .unwrap() as f64;
    let children = |pid: i32| -> std::collections::BTreeSet<String> {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let before = children(pid);
    let (cpu0, forks0, t0) = (cpu_ticks(pid), forks_since_boot(), Instant::now());
    let mut seen = std::collections::BTreeSet::new();
    while t0.elapsed() < Duration::from_secs(idle_secs) {
        seen.extend(children(pid));
        std::thread::sleep(Duration::from_millis(2));
    }
    let (cpu1, forks1, elapsed) = (cpu_ticks(pid), forks_since_boot(), t0.elapsed());
    let cpu_pct = (cpu1 - cpu0) as f64 / ticks_per_sec / elapsed.as_secs_f64() * 100.0;
    let new_children = seen.difference(&before).count();

    // A response's line written → the new usage in the daemon's list.
    let mut latency = Vec::new();
    for n in 0..turns {
        let i = n % count;
        let want = agents(&paths, false)
            .into_iter()
            .find(|a| a.name == format!("u{i}"))
            .and_then(|a| a.usage)
            .unwrap()
            .output
            + 10;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&files[i])
            .unwrap();
        let t = Instant::now();
        f.write_all(response_line(n).as_bytes()).unwrap();
        drop(f);
        loop {
            let got = agents(&paths, false)
                .into_iter()
                .find(|a| a.name == format!("u{i}"))
                .and_then(|a| a.usage)
                .unwrap()
                .output;
            if got >= want {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "no new usage");
            std::thread::sleep(Duration::from_millis(1));
        }
        latency.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("| usage followed, {count} Claude Code agents | measure |");
    println!("|---|---|");
    println!(
        "| every agent's usage read after its transcript appeared | {:.0} ms |",
        first.as_secs_f64() * 1e3
    );
    println!(
        "| daemon idle {idle_secs} s | {cpu_pct:.3} % of a core, {new_children} processes started, {} forks machine-wide |",
        forks1 - forks0
    );
    println!(
        "| a response's line written → its usage in the daemon's list | {} |",
        summary(latency, 1)
    );
}
