//! The generic profile's states on real panes: working, needs_you (bell, prompt), idle, done,
//! failed (exit 3, killed), stopped (volee stop, pane killed).

use crate::{launch_sh, setup};

#[test]
fn output_bell_silence_and_exits_map_to_states() {
    let Some((_serial, env)) = setup() else {
        return;
    };

    let ticker = launch_sh(&env, "ticker", "while :; do echo tick; sleep 0.3; done");
    let beller = launch_sh(
        &env,
        "beller",
        "echo start; sleep 3; printf '\\a'; exec sleep 60",
    );
    let quiet = launch_sh(&env, "quiet", "echo hello; exec sleep 60");
    let ok = launch_sh(&env, "ok", "echo bye; sleep 0.5; exit 0");
    let bad = launch_sh(&env, "bad", "echo oops; sleep 0.5; exit 3");

    assert_eq!(env.wait_state(&ticker, "working", 5), "working");
    assert_eq!(env.wait_state(&quiet, "idle", 8), "idle");
    assert_eq!(env.wait_state(&ok, "done", 8), "done");
    assert_eq!(env.wait_state(&bad, "failed", 8), "failed");
    assert_eq!(env.wait_state(&beller, "needs_you", 10), "needs_you");

    let ok_view = env.agent(&ok);
    assert_eq!(ok_view["exit_status"], 0);
    assert_eq!(ok_view["state_source"], "multiplexer");
    let bad_view = env.agent(&bad);
    assert_eq!(bad_view["exit_status"], 3, "{bad_view}\n{}", env.log_tail());
    assert_eq!(bad_view["evidence"], "exit 3");
    let bell_view = env.agent(&beller);
    assert_eq!(bell_view["evidence"], "bell");
    // Why, for a script: failed and needs_you carry a reason, the other states null.
    assert_eq!(bad_view["reason"], "exit_nonzero");
    assert_eq!(bell_view["reason"], "bell");
    assert_eq!(ok_view["reason"], serde_json::Value::Null);
    assert!(env.ok(["ls"]).contains("needs_you:bell"));
    // `wait --until STATE:REASON`: reached with that reason; another reason is exit 5.
    assert_eq!(
        env.ok(["wait", &bad, "--until", "failed:exit_nonzero"]),
        "failed"
    );
    let other = env.run(["wait", &bad, "--until", "failed:usage_limit"]);
    assert_eq!(other.status.code(), Some(5), "{other:?}");
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(said.contains("failed:exit_nonzero"), "{said}");
    let wrong = env.run(["wait", &bad, "--until", "failed:bell"]);
    assert_eq!(wrong.status.code(), Some(2), "{wrong:?}");
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("reasons for failed"));
    assert_eq!(bell_view["host"]["kind"], "tmux");
    assert_eq!(bell_view["host"]["session"], "main");

    // Still working after the window: the ticker keeps printing.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(env.agent(&ticker)["state"], "working");
    // The bell holds until new output: still needs_you.
    assert_eq!(env.agent(&beller)["state"], "needs_you");

    let explain = env.ok(["explain", &beller]);
    assert!(explain.contains("needs_you"), "{explain}");
    assert!(explain.contains("bell"), "{explain}");

    // ls hides ended agents; --all shows them.
    let live: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--json"])).unwrap();
    let ids: Vec<&str> = live
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&ticker.as_str()) && !ids.contains(&ok.as_str()),
        "{ids:?}"
    );
    let all: serde_json::Value = serde_json::from_str(&env.ok(["ls", "--all", "--json"])).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 5);

    // volee stop ends the whole process group: stopped.
    let stopped = env.ok(["stop", &ticker]);
    assert!(stopped.ends_with("stopped"), "{stopped}");
    assert_eq!(env.agent(&ticker)["state"], "stopped");
}

#[test]
fn prompt_line_needs_you_until_answered() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let asker = launch_sh(
        &env,
        "asker",
        "echo working; printf 'Overwrite notes.txt? [y/N] '; read answer; echo \"got $answer\"; while :; do echo busy; sleep 0.3; done",
    );
    assert_eq!(env.wait_state(&asker, "needs_you", 8), "needs_you");
    let view = env.agent(&asker);
    assert_eq!(view["state_source"], "screen");
    assert!(
        view["evidence"]
            .as_str()
            .unwrap()
            .contains("generic.yes-no"),
        "{view}"
    );

    let pane = view["host"]["pane"].as_str().unwrap().to_string();
    env.tmux(&["send-keys", "-t", &pane, "y", "Enter"]);
    assert_eq!(env.wait_state(&asker, "working", 5), "working");
    let peek = env.ok(["peek", &asker, "-n", "50"]);
    assert!(peek.contains("got y"), "{peek}");
}

#[test]
fn killed_process_fails_and_killed_pane_stops() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let victim = launch_sh(&env, "victim", "exec sleep 60");
    let doomed_pane = launch_sh(&env, "doomed", "exec sleep 60");
    env.wait_state(&victim, "idle", 8);

    let pid = env.agent(&victim)["pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(env.wait_state(&victim, "failed", 5), "failed");
    let view = env.agent(&victim);
    assert_eq!(view["exit_status"], 137);
    assert!(
        view["evidence"].as_str().unwrap().contains("signal 9"),
        "{view}"
    );
    // A plain command has no hooks to end its session with: a kill is a kill.
    assert_eq!(view["reason"], "killed", "{view}");
    assert_eq!(env.agent(&doomed_pane)["reason"], serde_json::Value::Null);

    let pane = env.agent(&doomed_pane)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    env.tmux(&["kill-pane", "-t", &pane]);
    assert_eq!(env.wait_state(&doomed_pane, "stopped", 5), "stopped");
    assert_eq!(env.agent(&doomed_pane)["evidence"], "pane closed");

    // Ended agents can be forgotten; live ones cannot.
    let live = launch_sh(&env, "live", "exec sleep 60");
    let out = env.run(["rm", &live]);
    assert_eq!(out.status.code(), Some(2));
    env.ok(["rm", &victim]);
    assert_eq!(env.run(["show", &victim]).status.code(), Some(2));
}

#[test]
fn agent_gets_callers_cwd_and_environment() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    env.extra_env
        .push(("VOLEE_TEST_SECRET".into(), "it's \"quoted\" $HOME".into()));
    let sub = env.work().join("sub dir");
    std::fs::create_dir_all(&sub).unwrap();
    let id = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--cwd",
        sub.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "pwd; printf 'secret=%s\\n' \"$VOLEE_TEST_SECRET\"; exec sleep 60",
    ]);
    env.wait_state(&id, "idle", 8);
    let peek = env.ok(["peek", &id]);
    assert!(peek.contains("sub dir"), "{peek}");
    assert!(peek.contains("secret=it's \"quoted\" $HOME"), "{peek}");
    // The handover file is gone once the pane started.
    let leftovers: Vec<_> = std::fs::read_dir(env.volee_home().join("run/launch"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn resume_relaunches_an_ended_agent_under_its_name() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let first = launch_sh(&env, "again", "echo run-$$; exit 3");
    env.wait_state(&first, "failed", 8);
    let out = env.run(["resume", "again"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_ne!(first, second);
    assert_eq!(env.agent(&second)["name"], "again");
    assert_eq!(env.agent(&second)["command"], env.agent(&first)["command"]);
    env.wait_state(&second, "failed", 8);
    // A live agent is not resumed.
    let live = launch_sh(&env, "live", "exec sleep 60");
    assert_eq!(env.run(["resume", &live]).status.code(), Some(2));
}

#[test]
fn send_types_into_a_generic_agent_and_confirms_it_reacted() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(
        &env,
        "echoer",
        "while read line; do echo \"got: $line\"; done",
    );
    env.wait_state(&id, "idle", 8);
    let sent = env.ok(["send", &id, "hello there"]);
    assert!(sent.contains("now working"), "{sent}");
    // The echo of the typed line is already a reaction; the shell's answer follows it (later
    // on a loaded machine).
    volee_test_support::wait_until(
        "the shell's answer on screen",
        std::time::Duration::from_secs(5),
        || {
            env.ok(["peek", &id])
                .contains("got: hello there")
                .then_some(())
        },
        || env.ok(["peek", &id]),
    );
    // An agent that shows nothing in response: send says so, exit 1.
    let deaf = launch_sh(&env, "deaf", "stty -echo; exec sleep 60");
    env.wait_state(&deaf, "idle", 8);
    let out = env.run(["send", &deaf, "anyone", "--wait", "2"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not react"));
}

#[test]
fn a_killed_pane_takes_its_hangup_ignoring_processes_with_it() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    // Like Gemini: the process ignores the hangup tmux sends when its pane is killed.
    let id = launch_sh(&env, "stubborn", "trap '' HUP; exec sleep 120");
    env.wait_state(&id, "idle", 8);
    let pid = env.agent(&id)["pid"].as_i64().unwrap();
    let pane = env.agent(&id)["host"]["pane"].as_str().unwrap().to_string();
    env.tmux(&["kill-pane", "-t", &pane]);
    assert_eq!(env.wait_state(&id, "stopped", 8), "stopped");
    volee_test_support::wait_process_gone(
        "the agent's process group is ended",
        pid,
        std::time::Duration::from_secs(8),
    );
    assert!(
        env.log_tail().contains("ending the process group"),
        "{}",
        env.log_tail()
    );
}

#[test]
fn a_session_watched_again_after_its_last_agent_ended_is_watched_once() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    // The last agent of `main` ends: its control client is closed. A new agent there opens a new
    // one; the old one's late "closed" report must not tear the new one down (it did: a loop of
    // reconnections, thousands of tmux processes a minute).
    let first = launch_sh(&env, "first", "exec sleep 60");
    env.wait_state(&first, "idle", 8);
    env.ok(["stop", &first]);
    let second = launch_sh(
        &env,
        "second",
        "echo hi; sleep 2.5; printf '\\a'; exec sleep 60",
    );
    assert_eq!(env.wait_state(&second, "needs_you", 10), "needs_you");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log = std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap();
    let closed = log.matches("control connection to").count();
    assert!(
        closed <= 2,
        "{closed} connection churns:\n{}",
        env.log_tail()
    );
}

/// A prompt a program redraws in three writes 30 ms apart (the way a TUI's frame can arrive) is
/// classified once, whole: the screen model is read only once output settled. Then a resize in
/// the middle of output: the model follows the pane's size, and agrees with tmux's own screen
/// when checked.
#[test]
fn a_prompt_drawn_in_three_writes_is_read_once_whole_and_the_model_follows_a_resize() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    use volee_protocol::{AgentState, Request, Response};

    let Some((_serial, env)) = setup() else {
        return;
    };
    let id = launch_sh(&env, "drawer", "echo ready; exec sleep 600");
    assert_eq!(env.wait_state(&id, "idle", 10), "idle");
    let view = env.agent(&id);
    let pane = view["host"]["pane"].as_str().unwrap().to_string();
    let tty = env.tmux(&["display-message", "-p", "-t", &pane, "#{pane_tty}"]);
    let mut pty = std::fs::OpenOptions::new()
        .write(true)
        .open(tty.trim())
        .unwrap();

    let home = env.volee_home();
    let paths = volee_daemon::Paths::from_env(
        |k| (k == "VOLEE_HOME").then(|| home.display().to_string()),
        nix::unistd::getuid().as_raw(),
    );
    let mut watch = volee_daemon::Client::connect(&paths).unwrap();
    watch.send(&Request::Watch { id: id.clone() }).unwrap();
    // The first answer is the view now.
    assert!(matches!(
        watch.next_response_within(Duration::from_secs(5)).unwrap(),
        Some(Response::Agent { .. })
    ));

    // Each write alone is a whole yes/no prompt the rules would take: only the last must be
    // read.
    for (i, text) in [
        "Apply the patch to 3 files? (y/n) ",
        "\r\x1b[2KApply the patch to 12 files? (y/n) ",
        "\r\x1b[2KApply the patch to 12 files in src/? (y/n) ",
    ]
    .iter()
    .enumerate()
    {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        pty.write_all(text.as_bytes()).unwrap();
    }
    let mut seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        match watch
            .next_response_within(Duration::from_millis(200))
            .unwrap()
        {
            Some(Response::Agent { agent }) => seen.push((agent.state, agent.evidence.clone())),
            Some(other) => panic!("{other:?}"),
            None if seen.iter().any(|(s, _)| *s == AgentState::NeedsYou) => break,
            None => {}
        }
    }
    let prompts: Vec<&String> = seen
        .iter()
        .filter(|(s, _)| *s == AgentState::NeedsYou)
        .map(|(_, e)| e)
        .collect();
    assert!(
        !prompts.is_empty(),
        "never needs_you: {seen:?}\n{}",
        env.log_tail()
    );
    assert!(
        prompts.iter().all(|e| e.contains("12 files in src/")),
        "a half-drawn prompt was read: {seen:?}"
    );

    // Output, a resize in the middle of it, more output: the model takes the new size and agrees
    // with tmux when checked (the check runs on the first read after a seed, then on a sample).
    pty.write_all(b"\r\nbefore the resize\r\n").unwrap();
    env.tmux(&["resize-window", "-t", &pane, "-x", "60", "-y", "15"]);
    for i in 0..40 {
        write!(pty, "after the resize, line {i} {}\r\n", "x".repeat(i * 2)).unwrap();
    }
    // The next read after MODEL_CHECK_MS (5 s) checks the model against tmux.
    std::thread::sleep(Duration::from_millis(5500));
    pty.write_all(b"Overwrite all of them? [y/N] ").unwrap();
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    // The check's capture comes back a moment after the read it follows.
    let explain = || -> serde_json::Value {
        serde_json::from_str(&env.ok(["explain", &id, "--json"])).unwrap()
    };
    let explained = volee_test_support::wait_until(
        "two checks of the model",
        Duration::from_secs(3),
        || {
            let e = explain();
            (e["screen"]["checks"].as_u64() >= Some(2)).then_some(e)
        },
        || explain().to_string(),
    );
    assert_eq!(explained["screen"]["kind"], "model", "{explained}");
    // No difference: the reader applies a seed at its place in tmux's stream. (Before
    // `feed_to_reply`, 1 run in 4: a read held the seed's last reply and then the 40 lines
    // printed after the resize, and they went to the model the seed then replaced.)
    assert!(
        explained["screen"]["differences"].as_u64() == Some(0),
        "{explained}\n{}",
        env.log_tail()
    );
    assert_eq!(explained["agent"]["state"], "needs_you", "{explained}");
    let peek = env.ok(["peek", &id, "-n", "3"]);
    assert!(peek.contains("Overwrite all of them? [y/N]"), "{peek}");
}

/// volee in the C locale (a fresh Debian, a container: no `LANG`): tmux then prints `_` for the
/// control character volee's formats split on and for every non-ASCII character, unless asked
/// for UTF-8 (`tmux -u`). Seen on a fresh Debian 12: `volee launch` failed with "tmux new-window
/// printed an unexpected line".
#[test]
fn volee_in_the_c_locale_launches_and_keeps_names_and_titles_whole() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    env.extra_env.push(("LANG".into(), "C".into()));
    env.extra_env.push(("LC_ALL".into(), "C".into()));
    let id = launch_sh(
        &env,
        "café",
        "printf '\\033]2;%s\\033\\\\' 'résumé ✓'; echo 'Überschreiben? [y/N] '; exec sleep 60",
    );
    let view = env.agent(&id);
    assert_eq!(view["name"], "café", "{view}");
    assert!(
        view["host"]["pane"].as_str().unwrap().starts_with('%'),
        "{view}"
    );
    volee_test_support::wait_until(
        "the title is recorded whole",
        std::time::Duration::from_secs(5),
        || (env.agent(&id)["title"] == "résumé ✓").then_some(()),
        || env.agent(&id).to_string(),
    );
    assert_eq!(env.wait_state(&id, "needs_you", 8), "needs_you");
    let peek = env.ok(["peek", &id]);
    assert!(peek.contains("Überschreiben? [y/N]"), "{peek}");
}
