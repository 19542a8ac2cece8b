//! `volee restore --all` after the tmux server went away (issue 22): the time from starting the
//! command to every restored agent `working` again, with AGENTS generic agents (default 10) in
//! two windows' worth of panes, against a real tmux on a private socket and the real `volee`.
//!
//! ```sh
//! RUNS=10 AGENTS=10 cargo bench -p volee-cli --bench restore
//! ```
//!
//! Each run: `tmux kill-server` (the server's agents become `stopped`, restorable), then
//! `volee restore --all` is spawned and the daemon's agent list is asked every 5 ms until every
//! agent is `working` (each agent prints a line every 200 ms). The command's own time (it
//! returns once every agent's pane is open) is given apart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{agents, paths};
use volee_daemon::Paths;
use volee_protocol::AgentState;
use volee_test_support::bench::{env_num, summary};
use volee_test_support::{require, wait_until, TestEnv};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !require("tmux", "the restore benchmark") {
        return;
    }
    let runs = env_num("RUNS", 10) as usize;
    let count = env_num("AGENTS", 10) as usize;
    let volee = std::env::var_os("VOLEE_BENCH_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_volee").into());
    let env = TestEnv::new(volee);
    env.start_tmux();
    env.ok(["tmux-init"]);
    let paths = paths(&env);
    let script = "while :; do echo tick; sleep 0.2; done";
    let ids: Vec<String> = (0..count)
        .map(|n| {
            env.ok([
                "launch",
                "--host",
                "tmux:main",
                "--name",
                &format!("r{n}"),
                "--",
                "sh",
                "-c",
                script,
            ])
        })
        .collect();
    let all_working = |paths: &Paths| {
        let list = agents(paths, true);
        ids.iter().all(|id| {
            list.iter()
                .any(|a| &a.id == id && a.state == AgentState::Working)
        })
    };
    wait_until(
        "every agent working",
        Duration::from_secs(30),
        || all_working(&paths).then_some(()),
        || format!("{:#?}", agents(&paths, true)),
    );
    let (mut to_working, mut command) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let server: i32 = env
            .tmux(&["display-message", "-p", "#{pid}"])
            .trim()
            .parse()
            .unwrap();
        env.tmux(&["kill-server"]);
        wait_until(
            "every agent restorable",
            Duration::from_secs(30),
            || {
                let list = agents(&paths, true);
                (list.iter().filter(|a| a.restorable).count() == count
                    && nix::sys::signal::kill(nix::unistd::Pid::from_raw(server), None).is_err())
                .then_some(())
            },
            || format!("{:#?}", agents(&paths, true)),
        );
        let started = Instant::now();
        let mut child = env
            .volee(["restore", "--all"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut returned = None;
        loop {
            if returned.is_none() && child.try_wait().unwrap().is_some() {
                returned = Some(started.elapsed());
            }
            if all_working(&paths) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "not all working after 60 s: {:#?}",
                agents(&paths, true)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        to_working.push(started.elapsed().as_secs_f64() * 1e3);
        let status = child.wait().unwrap();
        assert!(status.success(), "volee restore --all: {status}");
        command.push(returned.unwrap_or_else(|| started.elapsed()).as_secs_f64() * 1e3);
    }
    println!("| restore --all, {count} agents | measure |");
    println!("|---|---|");
    println!("| to every agent working | {} |", summary(to_working, 0));
    println!("| the command returns | {} |", summary(command, 0));
}
