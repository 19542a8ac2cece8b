//! `volee sessions` against a real daemon and tmux: roots found in a live agent's environment,
//! and bad session ids refused. (The readers and the index have their own tests in
//! `volee-history`; the real harnesses' sessions are found and resumed in their conformance
//! tests.)

use serde_json::Value;

use crate::{launch_sh, setup};

const CLAUDE_SESSION: &str = "d4a8abe5-742d-4002-a1ab-379c1b005cb4";

/// A Claude Code transcript (the real one in volee-history's fixtures) under `config`, as
/// `CLAUDE_CONFIG_DIR=config` keeps it.
fn plant_claude_session(config: &std::path::Path) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../volee-history/tests/fixtures/home/.claude/projects/-tmp-work/{CLAUDE_SESSION}.jsonl"
    ));
    let dir = config.join("projects/-tmp-work");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&fixture, dir.join(format!("{CLAUDE_SESSION}.jsonl"))).unwrap();
}

#[test]
fn a_session_under_a_home_only_a_live_agents_environment_names_is_found() {
    let Some((_serial, env)) = setup() else {
        return;
    };
    let config = env.root().join("claude-elsewhere");
    plant_claude_session(&config);
    // Not under this environment's roots: nothing yet.
    let before: Value = serde_json::from_str(&env.ok(["sessions", "--json"])).unwrap();
    assert_eq!(
        before["sessions"].as_array().map(Vec::len),
        Some(0),
        "{before}"
    );

    // An agent whose environment moves Claude's home there.
    let id = launch_sh(
        &env,
        "holder",
        &format!("exec env CLAUDE_CONFIG_DIR={} sleep 600", config.display()),
    );
    volee_test_support::wait_until(
        "the agent's process has its environment",
        std::time::Duration::from_secs(10),
        || {
            let pid = env.agent(&id)["pid"].as_u64()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            String::from_utf8_lossy(&environ)
                .contains("CLAUDE_CONFIG_DIR=")
                .then_some(())
        },
        || env.agent(&id).to_string(),
    );
    let listing: Value = serde_json::from_str(&env.ok(["sessions", "--json"])).unwrap();
    let root = listing["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == config.join("projects").display().to_string())
        .unwrap_or_else(|| panic!("no root for the agent's CLAUDE_CONFIG_DIR: {listing}"))
        .clone();
    assert_eq!(root["harness"], "claude", "{root}");
    assert!(
        root["from"]
            .as_str()
            .unwrap()
            .contains(&format!("of agent {id}")),
        "{root}"
    );
    let sessions = listing["sessions"].as_array().unwrap();
    assert!(
        sessions.iter().any(|s| s["id"] == CLAUDE_SESSION),
        "{listing}"
    );
    // Found by a word, shown by a prefix.
    let hits: Value =
        serde_json::from_str(&env.ok(["sessions", "search", "marker", "--json"])).unwrap();
    assert_eq!(hits[0]["id"], CLAUDE_SESSION, "{hits}");
    let shown = env.ok(["sessions", "show", &CLAUDE_SESSION[..6]]);
    assert!(shown.contains("/tmp/volee-test-yFo20s/work"), "{shown}");
    assert!(
        shown.contains("user: Run the touch command to create the marker file."),
        "{shown}"
    );

    // Unknown ids: a clear error, exit 2.
    for bad in ["nonexistent", "../../etc/passwd", ""] {
        let out = env.run(["sessions", "show", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("no past session") || said.contains("a session id is needed"),
            "{bad:?}: {said}"
        );
    }
    // Resuming a session whose project directory is gone says so.
    let out = env.run(["sessions", "resume", CLAUDE_SESSION]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is gone"), "{said}");
}

/// `volee browse` typed into the user's shell pane, with a real client attached: the list holds
/// the live agent and the past session; typing filters; the preview shows the live agent's
/// screen in colour; `/` searches the messages; Enter on the live agent switches the client to
/// its pane.
#[test]
fn the_browser_filters_previews_in_colour_searches_and_jumps() {
    use std::time::Duration;
    use volee_test_support::wait_until;

    use crate::tmux_front::{viewer_client, Viewer};

    let Some((_serial, env)) = setup() else {
        return;
    };
    plant_claude_session(&env.home().join(".claude"));
    let painter = launch_sh(
        &env,
        "painter",
        "printf '\\033[31mred alert\\033[0m\\n'; exec sleep 600",
    );
    let pane = env.agent(&painter)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    let _viewer = Viewer::start(&env);
    let client = viewer_client(&env).unwrap();
    env.tmux(&["select-window", "-t", "main:0"]);
    let browse = |env: &volee_test_support::TestEnv| {
        let line = format!("{} browse", env.bin.display());
        env.tmux(&["send-keys", "-t", "main:0", "-l", &line]);
        env.tmux(&["send-keys", "-t", "main:0", "Enter"]);
    };
    let screen =
        |env: &volee_test_support::TestEnv| env.tmux(&["capture-pane", "-p", "-t", "main:0"]);
    let until = |what: &str, ok: &dyn Fn(&str) -> bool| {
        wait_until(
            what,
            Duration::from_secs(8),
            || {
                let s = screen(&env);
                ok(&s).then_some(())
            },
            || screen(&env),
        )
    };
    browse(&env);
    until("both rows", &|s| {
        s.contains("painter") && s.contains("d4a8abe5")
    });

    // Typing filters (name, title, project, harness, branch).
    env.tmux(&["send-keys", "-t", "main:0", "-l", "paint"]);
    until("only the live agent, its screen previewed", &|s| {
        s.contains("filter: paint") && !s.contains("d4a8abe5") && s.contains("red alert")
    });
    // In colour: the preview keeps the agent's red.
    let coloured = env.tmux(&["capture-pane", "-p", "-e", "-t", "main:0"]);
    let red = coloured
        .lines()
        .find(|l| l.contains("red alert"))
        .unwrap_or_default()
        .to_string();
    // Red: SGR 31, or colour 1 of the palette as the preview sets it.
    assert!(
        red.contains("\u{1b}[31m") || red.contains("\u{1b}[38;5;1m"),
        "{red:?}"
    );

    // Esc clears the filter; `/` searches every message.
    env.tmux(&["send-keys", "-t", "main:0", "Escape"]);
    until("the filter cleared", &|s| s.contains("d4a8abe5"));
    env.tmux(&["send-keys", "-t", "main:0", "-l", "/marker"]);
    env.tmux(&["send-keys", "-t", "main:0", "Enter"]);
    until("the search's hit", &|s| {
        s.contains("1 session(s) mention") && s.contains("d4a8abe5") && !s.contains("painter ")
    });
    // Esc leaves the browser; Enter on the live agent jumps there.
    env.tmux(&["send-keys", "-t", "main:0", "Escape"]);
    browse(&env);
    until("the list again", &|s| s.contains("painter"));
    env.tmux(&["send-keys", "-t", "main:0", "-l", "paint"]);
    until("filtered", &|s| s.contains("filter: paint"));
    env.tmux(&["send-keys", "-t", "main:0", "Enter"]);
    wait_until(
        "the client shows the agent's pane",
        Duration::from_secs(8),
        || {
            let active = env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"]);
            (active.trim() == pane).then_some(())
        },
        || screen(&env),
    );
}

/// The picker key on tmux ≥ 3.2: `prefix a` pressed in a real attached client opens the browser
/// in a `display-popup` over the user's pane; typing filters; Enter on a live agent switches that
/// client to it and closes the popup; Enter on a past session resumes it beside the user's pane
/// (a supervised agent with that session id, the resume line run in the session's project) and
/// the client goes there. The `claude` here is a stand-in that records its arguments: the real
/// programs resume in their conformance tests; this is the browser's side.
#[test]
fn the_picker_key_opens_the_browser_in_a_popup_that_jumps_and_resumes() {
    use std::time::Duration;
    use volee_test_support::wait_until;

    use crate::hooks::write_stand_in;
    use crate::tmux_front::{viewer_client, Viewer};

    let Some((_serial, mut env)) = setup() else {
        return;
    };
    write_stand_in(
        &mut env,
        "claude",
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"2.1.332 (Claude Code)\"; exit 0; fi\n\
         printf '%s\\n' \"$@\" > \"$PWD/claude-args\"\nexec sleep 600\n",
    );
    // The real transcript, its project moved to a directory that exists here.
    let work = env.root().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = env.home().join(".claude");
    plant_claude_session(&config);
    let planted = config.join(format!("projects/-tmp-work/{CLAUDE_SESSION}.jsonl"));
    let text = std::fs::read_to_string(&planted)
        .unwrap()
        .replace("/tmp/volee-test-yFo20s/work", &work.display().to_string());
    std::fs::write(&planted, text).unwrap();

    // What a popup runs gets the tmux server's environment: the user's PATH is there.
    let path = env
        .extra_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap();
    env.tmux(&["set-environment", "-g", "PATH", &path]);
    env.ok(["tmux-init"]);
    assert!(
        env.tmux(&["list-keys", "-T", "prefix", "a"])
            .contains("browse --popup"),
        "{}",
        env.tmux(&["list-keys", "-T", "prefix", "a"])
    );
    let painter = launch_sh(
        &env,
        "painter",
        "printf '\\033[31mred alert\\033[0m\\n'; exec sleep 600",
    );
    let painter_pane = env.agent(&painter)["host"]["pane"]
        .as_str()
        .unwrap()
        .to_string();
    let viewer = Viewer::start(&env);
    let client = viewer_client(&env).unwrap();
    let user_pane = env
        .tmux(&["display-message", "-p", "-t", "main:0", "#{pane_id}"])
        .trim()
        .to_string();
    let client_pane = || {
        env.tmux(&["display-message", "-p", "-c", &client, "#{pane_id}"])
            .trim()
            .to_string()
    };
    let until = |what: &str, ok: &dyn Fn(&str) -> bool| {
        wait_until(
            what,
            Duration::from_secs(10),
            || {
                let s = viewer.capture();
                ok(&s).then_some(s)
            },
            || viewer.capture(),
        )
    };
    let open = || {
        env.tmux(&["select-window", "-t", "main:0"]);
        viewer.keys(&["C-b", "a"]);
        until("the browser in its popup", &|s| {
            s.contains("painter") && s.contains(" live, ")
        })
    };

    // The popup is drawn over the user's pane, not in it.
    open();
    until("the past session listed", &|s| s.contains("d4a8abe5"));
    assert!(
        !env.tmux(&["capture-pane", "-p", "-t", &user_pane])
            .contains("d4a8abe5"),
        "the browser should be in a popup, not typed into the pane"
    );
    viewer.keys(&["-l", "paint"]);
    until("filtered to the live agent, its screen previewed", &|s| {
        s.contains("filter: paint") && !s.contains("d4a8abe5") && s.contains("red alert")
    });
    viewer.keys(&["Enter"]);
    wait_until(
        "the client that opened the popup shows the agent's pane",
        Duration::from_secs(8),
        || (client_pane() == painter_pane).then_some(()),
        || format!("{} {}", client_pane(), viewer.capture()),
    );
    until("the popup closed", &|s| !s.contains("filter: paint"));

    // A past session: Enter resumes it beside the user's pane, and the client goes there.
    open();
    until("the past session listed", &|s| s.contains("d4a8abe5"));
    viewer.keys(&["-l", "d4a8"]);
    until("filtered to the past session", &|s| {
        s.contains("filter: d4a8") && !s.contains("painter ")
    });
    viewer.keys(&["Enter"]);
    let resumed = wait_until(
        "a live agent holds the resumed session",
        Duration::from_secs(10),
        || {
            let ls: Value = serde_json::from_str(&env.ok(["ls", "--json"])).ok()?;
            ls.as_array()?
                .iter()
                .find(|a| a["session_id"] == CLAUDE_SESSION)
                .cloned()
        },
        || format!("{}{}", env.ok(["ls"]), env.tmux(&["show-messages"])),
    );
    assert_eq!(resumed["harness"], "claude", "{resumed}");
    assert_eq!(resumed["cwd"], work.display().to_string(), "{resumed}");
    let args = wait_until(
        "the resume line ran in the session's project",
        Duration::from_secs(10),
        || std::fs::read_to_string(work.join("claude-args")).ok(),
        || "no claude-args yet".into(),
    );
    let args: Vec<&str> = args.lines().collect();
    assert!(
        args.windows(2).any(|w| w == ["--resume", CLAUDE_SESSION]),
        "{args:?}"
    );
    let resumed_pane = resumed["host"]["pane"].as_str().unwrap().to_string();
    wait_until(
        "the client shows the resumed agent",
        Duration::from_secs(8),
        || (client_pane() == resumed_pane).then_some(()),
        client_pane,
    );
    // Opened again, the session shows as its live agent, once.
    let screen = open();
    assert_eq!(
        screen.matches("d4a8abe5").count(),
        0,
        "a live session is listed as its agent, not as a past session:\n{screen}"
    );
    viewer.keys(&["Escape"]);
    until("closed with Esc", &|s| !s.contains(" live, "));
}

/// The daemon keeps the index up to date by itself: a session written under a harness home that
/// only an agent's environment named — after that agent ended — is in the index with no volee
/// command run (read straight from the database), and the root is remembered across a daemon
/// restart, in a private file.
#[test]
fn the_daemon_indexes_what_is_written_under_an_ended_agents_home() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;
    use volee_test_support::wait_until;

    let Some((_serial, env)) = setup() else {
        return;
    };
    let config = env.root().join("claude-elsewhere");
    std::fs::create_dir_all(config.join("projects")).unwrap();
    let id = launch_sh(
        &env,
        "holder",
        &format!("exec env CLAUDE_CONFIG_DIR={} sleep 600", config.display()),
    );
    let remembered = env.volee_home().join("state/history-roots.json");
    wait_until(
        "the daemon remembers the agent's Claude home",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(&remembered)
                .ok()?
                .contains(&config.join("projects").display().to_string())
                .then_some(())
        },
        || env.log_tail(),
    );
    let mode = std::fs::metadata(&remembered).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    env.ok(["stop", &id]);
    env.wait_state(&id, "stopped", 10);

    // Written after the agent ended; no volee command reads it: the daemon does.
    plant_claude_session(&config);
    let db = env.volee_home().join("state/sessions.db");
    wait_until(
        "the daemon indexed the new session",
        Duration::from_secs(20),
        || {
            let index = volee_history::Index::open(&db).ok()?;
            let sessions = index.sessions().ok()?;
            sessions
                .iter()
                .any(|s| s.id == CLAUDE_SESSION)
                .then_some(())
        },
        || env.log_tail(),
    );

    // Asked by a command, the daemon reads what changed and says what it could not read: a
    // FIFO named like a transcript (nothing hangs on it).
    let fifo = config.join("projects/-tmp-work/0000fifo-0000-4000-8000-000000000000.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let listing: Value = serde_json::from_str(&env.ok(["sessions", "--json"])).unwrap();
    let unreadable = listing["unreadable"].as_array().unwrap();
    assert!(
        unreadable
            .iter()
            .any(|u| u["path"] == fifo.display().to_string()
                && u["reason"].as_str().is_some_and(|r| !r.is_empty())),
        "{listing}"
    );

    // A new daemon still knows the root: listed, with the agent it came from.
    env.ok(["daemon", "stop"]);
    let listing: Value = serde_json::from_str(&env.ok(["sessions", "--json"])).unwrap();
    let root = listing["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == config.join("projects").display().to_string())
        .unwrap_or_else(|| panic!("the ended agent's root is forgotten: {listing}"))
        .clone();
    assert!(
        root["from"]
            .as_str()
            .unwrap()
            .contains(&format!("CLAUDE_CONFIG_DIR of agent {id}")),
        "{root}"
    );
    assert!(
        listing["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == CLAUDE_SESSION),
        "{listing}"
    );
}
