//! Notifications, end to end: a real tmux client attached in a pty (the `Viewer`: a second tmux
//! server whose pane runs `tmux attach`), agents in background windows. A needs-you transition
//! in a window the client does not show produces one message on that client and runs the
//! user's command with the agent's JSON; none when the agent's pane is the one shown; quiet
//! mode holds them; twenty at once are rate-limited to the burst and one summary; with a session
//! bus (a private `dbus-daemon`), one `Notify` call carries the message.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use volee_test_support::{wait_until, TestEnv};

use crate::tmux_front::Viewer;
use crate::{launch_sh, setup};

/// `config.toml` with the user's command appending each agent JSON as one line to `log`. The
/// commands of several notifications run at once: each holds a lock while it appends, so their
/// lines never interleave.
fn configure(env: &TestEnv, log: &Path, extra: &str) {
    let dir = env.volee_home().join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let cmd = format!(
        "exec 9>>'{0}.lock'; flock 9; (cat; echo) >> '{0}'",
        log.display()
    );
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[notify]\ndesktop = false\non_needs_you = \"{cmd}\"\non_finished = \"{cmd}\"\n{extra}"
        ),
    )
    .unwrap();
}

/// The agent JSON lines the user's command received so far.
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn window_of(env: &TestEnv, id: &str) -> String {
    env.agent(id)["host"]["window"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn one_message_where_the_user_is_not_looking_and_none_where_they_are() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let log = env.root().join("notified.jsonl");
    configure(&env, &log, "long_turn = \"1s\"\n");
    let viewer = Viewer::start(&env);
    let go = env.root().join("go");
    let waiting = |name: &str| {
        format!(
            "echo {name} ready; while [ ! -f '{}' ]; do sleep 0.05; done; printf 'Continue? [y/N] '; read x; sleep 60",
            go.display()
        )
    };
    // `bg` in a window nobody shows; `fg` in the window the client is switched to.
    let bg = launch_sh(&env, "bg", &waiting("bg"));
    let fg = launch_sh(&env, "fg", &waiting("fg"));
    env.tmux(&["select-window", "-t", &window_of(&env, &fg)]);
    wait_until(
        "the client shows fg's pane",
        Duration::from_secs(5),
        || viewer.capture().contains("fg ready").then_some(()),
        || viewer.capture(),
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(env.wait_state(&bg, "needs_you", 10), "needs_you");
    assert_eq!(env.wait_state(&fg, "needs_you", 10), "needs_you");

    // One message on the client, for bg only.
    let message = format!("volee: bg ({bg}) needs you");
    wait_until(
        "the message on the attached client",
        Duration::from_secs(5),
        || viewer.capture().contains(&message).then_some(()),
        || viewer.capture(),
    );
    let got = wait_until(
        "the user's command ran",
        Duration::from_secs(5),
        || {
            let r = received(&log);
            (!r.is_empty()).then_some(r)
        },
        || env.log_tail(),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let got = if received(&log).len() > got.len() {
        received(&log)
    } else {
        got
    };
    assert_eq!(got.len(), 1, "one notification, bg's: {got:#?}");
    assert_eq!(got[0]["id"], bg.as_str());
    assert_eq!(got[0]["state"], "needs_you");
    assert!(!viewer.capture().contains(&format!("fg ({fg})")));
    assert!(
        env.log_tail().contains("its pane is on screen"),
        "{}",
        env.log_tail()
    );
    // The status line flashed (reverse video around the counts) and settles again.
    let flashed = env.tmux(&["show-options", "-gv", "@volee-status"]);
    assert!(flashed.contains("#[reverse]"), "{flashed}");
    wait_until(
        "the flash to end",
        Duration::from_secs(6),
        || {
            (!env
                .tmux(&["show-options", "-gv", "@volee-status"])
                .contains("#[reverse]"))
            .then_some(())
        },
        || env.tmux(&["show-options", "-gv", "@volee-status"]),
    );

    // Quiet: nothing; then on again.
    env.ok(["quiet", "10m"]);
    // It outlives the daemon: a killed one's successor keeps quiet.
    env.kill_daemon();
    let quiet = launch_sh(&env, "quiet", "sleep 1; printf 'Proceed? [y/N] '; sleep 60");
    assert_eq!(env.wait_state(&quiet, "needs_you", 10), "needs_you");
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(received(&log).len(), 1, "quiet mode holds it");
    // The status line says quiet is on, until it is off again.
    let status_says = |quiet: bool| {
        wait_until(
            &format!(
                "the status line {}says quiet",
                if quiet { "" } else { "no longer " }
            ),
            Duration::from_secs(5),
            || {
                (env.tmux(&["show-options", "-gv", "@volee-status"])
                    .contains("quiet")
                    == quiet)
                    .then_some(())
            },
            || env.tmux(&["show-options", "-gv", "@volee-status"]),
        )
    };
    status_says(true);
    // `volee status` says it too, in each format.
    let status: serde_json::Value =
        serde_json::from_str(&env.ok(["status", "--format", "json"])).unwrap();
    assert!(
        status["quiet_until"]
            .as_str()
            .is_some_and(|u| u.ends_with('Z')),
        "{status}"
    );
    assert!(env
        .ok(["status", "--format", "tmux"])
        .ends_with("#[dim]quiet#[default]"));
    assert!(env
        .ok(["status", "--format", "plain"])
        .contains("; quiet until "));
    assert!(env.ok(["quiet", "off"]).contains("notifications on"));
    status_says(false);
    let status: serde_json::Value =
        serde_json::from_str(&env.ok(["status", "--format", "json"])).unwrap();
    assert!(status["quiet_until"].is_null(), "{status}");
    assert!(!env.ok(["status", "--format", "plain"]).contains("quiet"));
    // A quiet that runs out ends by itself.
    env.ok(["quiet", "2s"]);
    status_says(true);
    status_says(false);
    let bad = env.run(["quiet", "soon"]);
    assert_eq!(bad.status.code(), Some(2));

    // A turn longer than long_turn that ends: "finished".
    let long = launch_sh(
        &env,
        "long",
        "i=0; while [ $i -lt 30 ]; do echo working $i; sleep 0.1; i=$((i+1)); done; sleep 60",
    );
    assert_eq!(env.wait_state(&long, "idle", 15), "idle");
    let finished = wait_until(
        "the finished notification",
        Duration::from_secs(5),
        || {
            received(&log)
                .into_iter()
                .find(|a| a["id"] == long.as_str())
        },
        || env.log_tail(),
    );
    assert_eq!(finished["state"], "idle");
}

#[test]
fn twenty_at_once_are_held_to_the_burst_and_summed_up() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let log = env.root().join("notified.jsonl");
    configure(&env, &log, "burst = 3\nburst_window = \"4s\"\n");
    let _viewer = Viewer::start(&env);
    let go = env.root().join("go");
    let ids: Vec<String> = (0..20)
        .map(|i| {
            launch_sh(
                &env,
                &format!("a{i}"),
                &format!(
                    "while [ ! -f '{}' ]; do sleep 0.05; done; printf 'Continue? [y/N] '; sleep 60",
                    go.display()
                ),
            )
        })
        .collect();
    std::fs::write(&go, "").unwrap();
    let started = Instant::now();
    for id in &ids {
        assert_eq!(env.wait_state(id, "needs_you", 15), "needs_you");
    }
    std::thread::sleep(Duration::from_millis(1000));
    let first = received(&log);
    assert_eq!(
        first.len(),
        3,
        "the burst: {} in {:?}",
        first.len(),
        started.elapsed()
    );
    wait_until(
        "one summary of the 17 held back",
        Duration::from_secs(10),
        || {
            env.log_tail()
                .contains("17 more agent changes")
                .then_some(())
        },
        || env.log_tail(),
    );
    assert_eq!(
        received(&log).len(),
        3,
        "the summary runs no per-agent command"
    );
}

/// A private session bus (a real `dbus-daemon`) and a `dbus-monitor` on it recording
/// `org.freedesktop.Notifications.Notify` calls; both ended on drop.
struct SessionBus {
    address: String,
    daemon: std::process::Child,
    monitor: std::process::Child,
    seen: std::path::PathBuf,
}

impl SessionBus {
    fn start(env: &TestEnv) -> SessionBus {
        use std::process::{Command, Stdio};
        let socket = env.root().join("bus");
        let address = format!("unix:path={}", socket.display());
        let daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--nosyslog"])
            .arg(format!("--address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until(
            "the session bus listens",
            Duration::from_secs(5),
            || socket.exists().then_some(()),
            || format!("no {}", socket.display()),
        );
        let seen = env.root().join("notify-calls.txt");
        let monitor = Command::new("dbus-monitor")
            .args(["--address", &address])
            .arg("type='method_call',interface='org.freedesktop.Notifications',member='Notify'")
            .stdout(std::fs::File::create(&seen).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Monitoring has begun when the monitor has said so (its first signal, NameLost/
        // NameAcquired, is printed before any call it sees).
        wait_until(
            "dbus-monitor is watching",
            Duration::from_secs(5),
            || {
                (!std::fs::read_to_string(&seen)
                    .unwrap_or_default()
                    .is_empty())
                .then_some(())
            },
            || "dbus-monitor printed nothing".into(),
        );
        SessionBus {
            address,
            daemon,
            monitor,
            seen,
        }
    }

    /// The bodies of the Notify calls seen so far (the 5th argument of each).
    fn bodies(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.seen).unwrap_or_default();
        let mut bodies = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with("method call") && line.contains("member=Notify") {
                let args: Vec<&str> = lines.by_ref().take(5).collect();
                if let Some(body) = args.get(4) {
                    bodies.push(body.trim().to_string());
                }
            }
        }
        bodies
    }
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        for child in [&mut self.monitor, &mut self.daemon] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// With a session bus, a needs-you reaches the desktop: one `Notify` call with the message,
/// through the real bus daemon; `volee doctor` says notifications go there.
#[test]
fn a_desktop_notification_goes_over_the_session_bus() {
    let Some((_guard, mut env)) = setup() else {
        return;
    };
    if !volee_test_support::require("dbus-daemon", "the desktop notification test")
        || !volee_test_support::require("dbus-monitor", "the desktop notification test")
    {
        return;
    }
    let bus = SessionBus::start(&env);
    env.extra_env
        .push(("DBUS_SESSION_BUS_ADDRESS".into(), bus.address.clone()));
    let doctor = env.ok(["doctor"]);
    assert!(
        !doctor.contains("no session bus"),
        "doctor sees the bus: {doctor}"
    );
    let id = launch_sh(
        &env,
        "desk<b>&",
        "sleep 1; printf 'Proceed? [y/N] '; sleep 60",
    );
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    let bodies = wait_until(
        "a Notify call on the bus",
        Duration::from_secs(5),
        || {
            let b = bus.bodies();
            (!b.is_empty()).then_some(b)
        },
        || {
            format!(
                "{}\n{}",
                std::fs::read_to_string(&bus.seen).unwrap_or_default(),
                env.log_tail()
            )
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    let bodies = if bus.bodies().len() > bodies.len() {
        bus.bodies()
    } else {
        bodies
    };
    // The name is markup-escaped: notification servers may read the body as markup.
    assert_eq!(
        bodies,
        vec![format!(
            "string \"volee: desk&lt;b&gt;&amp; ({id}) needs you — question: rule generic.yes-no-brackets: \"Proceed? [y/N]\"\""
        )],
        "one notification"
    );
}

#[test]
fn strftime_sequences_in_an_agent_name_show_literally() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    let log = env.root().join("notified.jsonl");
    configure(&env, &log, "");
    let viewer = Viewer::start(&env);
    // tmux runs display-message texts through strftime: `%H%M%S` would show the time.
    let name = "at%H%M%S%%";
    let id = launch_sh(
        &env,
        name,
        "sleep 1; printf 'Continue? [y/N] '; read x; sleep 60",
    );
    assert_eq!(env.wait_state(&id, "needs_you", 10), "needs_you");
    let message = format!("volee: {name} ({id}) needs you");
    wait_until(
        "the message, literally, on the attached client",
        Duration::from_secs(5),
        || viewer.capture().contains(&message).then_some(()),
        || viewer.capture(),
    );
}
