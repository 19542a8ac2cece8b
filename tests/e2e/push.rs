//! Pushes to the phone, end to end: the real daemon with `[notify] push` set, agents in the
//! private tmux, a real tmux client attached (the `Viewer`), and a stand-in for an ntfy server:
//! it speaks ntfy's publish API — a POST to the topic with Title/Priority headers — on loopback,
//! and records every request.
//!
//! The push takes the other channels' path: one POST for a needs-you in a window the client does
//! not show, none for the agent whose pane it shows, none for the same agent asking again within
//! 15 s, none while `volee quiet` holds; a server answering 500 gets the push again a second
//! later, and it arrives once. The token and the topic stay out of the log.

use std::time::Duration;

use volee_test_support::ntfy_server::NtfyServer;
use volee_test_support::{wait_until, TestEnv};

use crate::tmux_front::Viewer;
use crate::{launch_sh, setup};

const TOKEN: &str = "tk_e2e_do_not_log";
const TOPIC: &str = "volee-e2e-secret-topic";

fn full_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.volee_home().join("state/volee.log")).unwrap_or_default()
}

#[test]
fn a_needs_you_is_pushed_once_retried_after_a_500_and_held_by_quiet() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    // The first publish fails as a restarting server's would.
    let ntfy = NtfyServer::start_answering(&[500]);
    std::fs::write(
        env.volee_home().join("config/config.toml"),
        format!(
            "discovery_interval = \"off\"\n[notify]\ndesktop = false\npush = \"{}\"\npush_token = \"{TOKEN}\"\n",
            ntfy.topic_url(TOPIC)
        ),
    )
    .unwrap();
    let viewer = Viewer::start(&env);
    let go = env.root().join("go");
    let wait_for_go = format!("while [ ! -f '{}' ]; do sleep 0.05; done", go.display());
    // `asker` in a window nobody shows asks, works two seconds once answered, and asks again;
    // `watched` asks in the window the client shows.
    let asker = launch_sh(
        &env,
        "asker",
        &format!(
            "{wait_for_go}; printf 'Continue? [y/N] '; read x; \
             i=0; while [ $i -lt 20 ]; do echo going on $i; sleep 0.1; i=$((i+1)); done; \
             printf 'Continue? [y/N] '; read x; sleep 60"
        ),
    );
    let watched = launch_sh(
        &env,
        "watched",
        &format!("echo watched ready; {wait_for_go}; printf 'Proceed? [y/N] '; sleep 60"),
    );
    let window = env.agent(&watched)["host"]["window"]
        .as_str()
        .unwrap()
        .to_string();
    env.tmux(&["select-window", "-t", &window]);
    wait_until(
        "the client shows watched's pane",
        Duration::from_secs(5),
        || viewer.capture().contains("watched ready").then_some(()),
        || viewer.capture(),
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(env.wait_state(&asker, "needs_you", 10), "needs_you");
    assert_eq!(env.wait_state(&watched, "needs_you", 10), "needs_you");

    // One push, asker's, delivered on the second try.
    wait_until(
        "the push delivered",
        Duration::from_secs(5),
        || (!ntfy.delivered().is_empty()).then_some(()),
        || format!("{}\n{}", ntfy.summary(), env.log_tail()),
    );
    std::thread::sleep(Duration::from_millis(500));
    let got = ntfy.requests();
    assert_eq!(
        got.iter().map(|p| p.status).collect::<Vec<_>>(),
        [500, 200],
        "tried again after the 500, and only asker is pushed:\n{}",
        ntfy.summary()
    );
    assert!(got[1].at - got[0].at >= Duration::from_millis(900));
    let p = &got[1];
    assert_eq!(p.method, "POST");
    assert_eq!(p.path, format!("/{TOPIC}"));
    assert_eq!(p.header("title"), Some("volee: asker needs you"));
    assert_eq!(p.header("priority"), Some("4"));
    assert_eq!(
        p.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let first_line = p.body.lines().next().unwrap_or("");
    assert!(
        first_line.starts_with(&format!("asker ({asker}) on "))
            && first_line.ends_with(": needs_you"),
        "{:?}",
        p.body
    );
    assert!(p.body.contains("Continue? [y/N]"), "{:?}", p.body);
    assert_eq!(got[0].body, p.body, "the same push again");
    assert!(
        full_log(&env).contains(&format!("{watched} needs_you: its pane is on screen")),
        "{}",
        env.log_tail()
    );

    // Answered, it works, then asks again within 15 s: no second push.
    let pane = env.agent(&asker)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    env.tmux(&["send-keys", "-t", &pane, "y", "Enter"]);
    wait_until(
        "asker's second question is held back as a repeat",
        Duration::from_secs(10),
        || {
            full_log(&env)
                .contains(&format!("{asker} needs_you: Repeat"))
                .then_some(())
        },
        || env.log_tail(),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ntfy.requests().len(), 2, "{}", ntfy.summary());

    // Quiet holds the push too.
    env.ok(["quiet", "10m"]);
    let hushed = launch_sh(
        &env,
        "hushed",
        "sleep 1; printf 'Proceed? [y/N] '; sleep 60",
    );
    assert_eq!(env.wait_state(&hushed, "needs_you", 10), "needs_you");
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(ntfy.requests().len(), 2, "{}", ntfy.summary());

    // The log names the host, never the token or the topic.
    let log = full_log(&env);
    assert!(
        log.contains(&format!("pushed to {}", ntfy.addr())),
        "{}",
        env.log_tail()
    );
    assert!(log.contains("HTTP 500"), "{}", env.log_tail());
    assert!(!log.contains(TOKEN) && !log.contains(TOPIC), "{log}");
}
