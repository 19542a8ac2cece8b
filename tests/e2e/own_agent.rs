//! volee's own agent as a harness in a tmux pane: `volee launch --harness volee PROMPT` runs
//! `volee agent` against the Ollama stand-in (the only stand-in) with its tools in a real Docker
//! sandbox, and the agent reports its states to the daemon itself (source `hooks`): an approval
//! is `needs_you`, the answer sent with `volee send` makes it `working`, the turn's end `idle`,
//! Ctrl-C (`volee interrupt`) during a command or at an approval question `idle` again, `\exit`
//! `done`.

use std::time::Duration;

use serde_json::json;
use volee_test_support::ollama_server::{OllamaServer, OllamaTurn};
use volee_test_support::wait_until;

use crate::setup;

#[test]
fn the_volee_harness_in_a_tmux_pane_reports_exact_states() {
    if !volee_test_support::require_docker("volee's own agent in a pane") {
        return;
    }
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let server = OllamaServer::start(vec![
        OllamaTurn::tool("shell", json!({"command": "echo made > made.txt"})),
        OllamaTurn::text("Made it."),
        OllamaTurn::text("Noted."),
        OllamaTurn::tool(
            "shell",
            json!({"command": "echo waiting > waiting.txt; sleep 97; echo never > never.txt", "timeout_secs": 300}),
        ),
        OllamaTurn::tool("shell", json!({"command": "echo nope > nope.txt"})),
    ]);
    env.extra_env
        .push(("OLLAMA_HOST".into(), server.base_url().to_string()));
    // The sandbox runs as the project's owner, never root.
    let project = env.work();
    if nix::unistd::getuid().is_root() {
        std::os::unix::fs::chown(&project, Some(1000), Some(1000)).unwrap();
    }
    let id = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--harness",
        "volee",
        "--name",
        "own",
        "make a file",
    ]);
    let asked = wait_until(
        "the approval question is needs_you, from the agent's own report",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || {
            format!(
                "{}\n{}\n{}",
                env.agent(&id),
                env.ok(["peek", &id]),
                env.log_tail()
            )
        },
    );
    assert_eq!(asked["state_source"], "hooks", "{asked}");
    assert!(
        env.ok(["peek", &id]).contains("echo made > made.txt"),
        "{}",
        env.ok(["peek", &id])
    );
    env.ok(["send", &id, "o"]);
    let done = wait_until(
        "the turn ends: idle",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "idle" && project.join("made.txt").exists()).then_some(a)
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    assert_eq!(done["state_source"], "hooks", "{done}");
    assert!(env.ok(["peek", &id]).contains("Made it."));
    assert_eq!(
        std::fs::read_to_string(project.join("made.txt")).unwrap(),
        "made\n"
    );

    // A prompt of several lines is one prompt (pasted bracketed into the pane's terminal).
    let prompt = "First line.\n\n  Third line, indented.";
    env.ok(["send", &id, prompt]);
    wait_until(
        "the multi-line prompt answered",
        Duration::from_secs(30),
        || {
            (env.agent(&id)["state"] == "idle" && env.ok(["peek", &id]).contains("Noted."))
                .then_some(())
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    let requests = server.chat_requests();
    let users: Vec<String> = requests
        .last()
        .unwrap()
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(users, ["make a file", prompt], "{}", server.summary());
    assert!(
        !env.ok(["peek", &id]).contains("[200~"),
        "the paste markers are not echoed: {}",
        env.ok(["peek", &id])
    );

    // Ctrl-C (`volee interrupt`) while a command runs stops the turn, not the agent: idle again,
    // the command killed.
    env.ok(["send", &id, "wait a long time"]);
    wait_until(
        "the second approval",
        Duration::from_secs(30),
        || (env.agent(&id)["state"] == "needs_you").then_some(()),
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    env.ok(["send", &id, "o"]);
    wait_until(
        "the command runs",
        Duration::from_secs(30),
        || {
            (project.join("waiting.txt").exists() && env.agent(&id)["state"] == "working")
                .then_some(())
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    env.ok(["interrupt", &id]);
    let stopped = wait_until(
        "the interrupted turn ends: idle",
        Duration::from_secs(30),
        || {
            let a = env.agent(&id);
            (a["state"] == "idle" && env.ok(["peek", &id]).contains("interrupted")).then_some(a)
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    assert_eq!(stopped["state_source"], "hooks", "{stopped}");
    // At the prompt, one Ctrl-C only says how to leave.
    env.ok(["interrupt", &id]);
    wait_until(
        "the hint",
        Duration::from_secs(10),
        || env.ok(["peek", &id]).contains("Ctrl-C again").then_some(()),
        || env.ok(["peek", &id]),
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(env.agent(&id)["state"], "idle");
    assert!(!project.join("never.txt").exists());

    // Ctrl-C at an approval question ends that turn too: idle, the call never run.
    env.ok(["send", &id, "one more"]);
    wait_until(
        "the third approval",
        Duration::from_secs(30),
        || {
            (env.agent(&id)["state"] == "needs_you" && env.ok(["peek", &id]).contains("echo nope"))
                .then_some(())
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    let interrupted_before = env
        .ok(["peek", &id, "-n", "200"])
        .matches("interrupted")
        .count();
    env.ok(["interrupt", &id]);
    let answered = wait_until(
        "the question gives up: idle",
        Duration::from_secs(30),
        || {
            let a = env.agent(&id);
            let shown = env
                .ok(["peek", &id, "-n", "200"])
                .matches("interrupted")
                .count();
            (a["state"] == "idle" && shown > interrupted_before).then_some(a)
        },
        || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id])),
    );
    assert_eq!(answered["state_source"], "hooks", "{answered}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!project.join("nope.txt").exists());

    env.ok(["send", &id, "\\exit"]);
    env.wait_state(&id, "done", 30);
    server
        .check_invariants()
        .unwrap_or_else(|e| panic!("{e}\n{}", server.summary()));
}

/// The same harness in a zellij tab (no plugin: the daemon's `subscribe` watch): the agent's
/// own reports make its states there too — needs_you at the approval, idle after the answer,
/// idle again after Ctrl-C at a second approval, done at `\exit`.
#[test]
fn the_volee_harness_in_a_zellij_tab_reports_the_same_states() {
    use volee_test_support::zellij::{start_zellij, zellij_binary, KillSession};
    if !volee_test_support::require_docker("volee's own agent in a zellij tab") {
        return;
    }
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let Some(bin) = zellij_binary() else {
        return;
    };
    let server = OllamaServer::start(vec![
        OllamaTurn::tool("shell", json!({"command": "echo made > made.txt"})),
        OllamaTurn::text("Made it."),
        OllamaTurn::tool("shell", json!({"command": "echo nope > nope.txt"})),
    ]);
    env.extra_env
        .push(("OLLAMA_HOST".into(), server.base_url().to_string()));
    let project = env.work();
    if nix::unistd::getuid().is_root() {
        std::os::unix::fs::chown(&project, Some(1000), Some(1000)).unwrap();
    }
    let vars = start_zellij(&mut env, &bin, "vo");
    let _kill = KillSession::new(&bin, "vo", vars);
    let id = env.ok([
        "launch",
        "--host",
        "zellij:vo",
        "--harness",
        "volee",
        "--name",
        "own-zj",
        "make a file",
    ]);
    let show = || format!("{}\n{}", env.agent(&id), env.ok(["peek", &id]));
    let asked = wait_until(
        "the approval question is needs_you",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || format!("{}\n{}", show(), env.log_tail()),
    );
    assert_eq!(asked["host"]["kind"], "zellij", "{asked}");
    assert_eq!(asked["state_source"], "hooks", "{asked}");
    env.ok(["send", &id, "o"]);
    let done = wait_until(
        "the turn ends: idle",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "idle" && project.join("made.txt").exists()).then_some(a)
        },
        show,
    );
    assert_eq!(done["state_source"], "hooks", "{done}");

    env.ok(["send", &id, "one more"]);
    wait_until(
        "the second approval",
        Duration::from_secs(30),
        || (env.agent(&id)["state"] == "needs_you").then_some(()),
        show,
    );
    env.ok(["interrupt", &id]);
    let stopped = wait_until(
        "Ctrl-C at the question: idle",
        Duration::from_secs(30),
        || {
            let a = env.agent(&id);
            (a["state"] == "idle").then_some(a)
        },
        show,
    );
    assert_eq!(stopped["state_source"], "hooks", "{stopped}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(!project.join("nope.txt").exists());

    env.ok(["send", &id, "\\exit"]);
    env.wait_state(&id, "done", 30);
    server
        .check_invariants()
        .unwrap_or_else(|e| panic!("{e}\n{}", server.summary()));
}

/// `volee doctor` asks the Ollama that `OLLAMA_HOST` names for its version (`GET /api/version`),
/// and says how to start one when nothing answers.
#[test]
fn doctor_reads_the_ollama_version() {
    let Some((_serial, mut env)) = setup() else {
        return;
    };
    let server = OllamaServer::start(vec![]);
    env.extra_env
        .push(("OLLAMA_HOST".into(), server.base_url().to_string()));
    let out = env.run(["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("ollama"))
        .unwrap_or_else(|| panic!("no ollama line: {text}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "ok",
            "ollama",
            volee_test_support::ollama_server::VERSION,
            "at",
            server.base_url().trim_end_matches('/')
        ],
        "{text}"
    );
    drop(server);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    env.extra_env.retain(|(k, _)| k != "OLLAMA_HOST");
    env.extra_env
        .push(("OLLAMA_HOST".into(), format!("127.0.0.1:{port}")));
    let text = String::from_utf8_lossy(&env.run(["doctor"]).stdout).into_owned();
    assert!(
        text.contains(&format!(
            "warn  ollama   not reachable at http://127.0.0.1:{port}"
        )),
        "{text}"
    );
    assert!(text.contains("run `ollama serve`"), "{text}");
}
