//! Failed reasons on the real Claude Code 2.1.332, from the scripted model server's answers
//! (issue 24): a 401 → `failed:auth`, a 429 whose message says the usage limit was reached →
//! `failed:usage_limit` (after Claude's own retries, two with `CLAUDE_CODE_MAX_RETRIES=2`), from
//! its StopFailure hook's `error` (its screen rules say the same: fixtures claude-401, claude-429); and a Claude
//! killed with SIGKILL — its hooks worked, its `SessionEnd` hook never came →
//! `failed:crashed_silently`, where one that ends by `/exit` is `done`.

use std::time::{Duration, Instant};

use serde_json::json;
use volee_test_support::model_server::{Failure, ModelServer, Turn};
use volee_test_support::wait_until;

use crate::claude::{claude_env, seed_home};

/// A Claude agent launched against `server` with `prompt`; its id.
fn launch(w: &mut crate::common::World, server: &ModelServer, name: &str, prompt: &str) -> String {
    seed_home(&w.env.home(), &w.work, &w.hook_log);
    let claude_tmp = w.env.root().join(format!("claude-tmp-{name}"));
    claude_env(&mut w.env, &w.bin_dir, server, &claude_tmp);
    w.env.ok([
        "launch",
        "--harness",
        "claude",
        "--host",
        "tmux:main",
        "--name",
        name,
        prompt,
    ])
}

/// Wait until agent `id` is failed; its view.
fn failed(
    env: &volee_test_support::TestEnv,
    server: &ModelServer,
    id: &str,
    secs: u64,
) -> serde_json::Value {
    wait_until(
        "failed",
        Duration::from_secs(secs),
        || {
            let a = env.agent(id);
            (a["state"] == "failed").then_some(a)
        },
        || {
            format!(
                "{}\n{}\n{}",
                env.ok(["explain", id]),
                env.ok(["peek", id]),
                server.summary()
            )
        },
    )
}

#[test]
fn claude_codes_api_failures_carry_their_reason() {
    let Some(mut w) = crate::common::world("claude", "the Claude Code failure-reason test") else {
        return;
    };
    let server = ModelServer::start(vec![Turn::text("unused")]);
    // Two retries instead of ten (a setting of Claude Code's own): the same final screens,
    // sooner.
    w.env
        .extra_env
        .push(("CLAUDE_CODE_MAX_RETRIES".into(), "2".into()));

    // 401: the key is refused at once.
    server.set_failure(Some(Failure::Status {
        status: "401 Unauthorized",
        body: json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    }));
    let started = Instant::now();
    let id = launch(&mut w, &server, "refused", "Say hello in one word.");
    let a = failed(&w.env, &server, &id, 60);
    // From its StopFailure hook's `error`, or its screen rule (claude.auth-error-turn).
    assert_eq!(a["reason"], "auth", "{a}");
    eprintln!(
        "401 → failed:auth in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        a["evidence"]
    );
    assert_eq!(
        w.env
            .ok(["wait", &id, "--until", "failed:auth", "--timeout", "5"]),
        "failed"
    );
    let other = w.env.run([
        "wait",
        &id,
        "--until",
        "failed:usage_limit",
        "--timeout",
        "5",
    ]);
    assert_eq!(other.status.code(), Some(5), "{other:?}");

    // 429 with a usage-limit message: Claude retries, then shows it.
    server.set_failure(Some(Failure::Status {
        status: "429 Too Many Requests",
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "usage limit reached"}}),
    }));
    let started = Instant::now();
    let id = launch(&mut w, &server, "limited", "Say hello in one word.");
    let a = failed(&w.env, &server, &id, 120);
    // From its StopFailure hook's `error`, or its screen rule (claude.usage-limit-turn).
    assert_eq!(a["reason"], "usage_limit", "{a}");
    eprintln!(
        "429 → failed:usage_limit in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        a["evidence"]
    );
    assert!(w.env.ok(["ls", "--all"]).contains("failed:limit"));

    // A dropped connection.
    server.set_failure(Some(Failure::Drop));
    let started = Instant::now();
    let id = launch(&mut w, &server, "dropped", "Say hello in one word.");
    let a = failed(&w.env, &server, &id, 120);
    eprintln!(
        "dropped → failed:{} in {:.1} s ({}) {}",
        a["reason"],
        started.elapsed().as_secs_f64(),
        a["evidence"],
        w.env.ok(["peek", &id])
    );
    let a = wait_until(
        "failed:network",
        Duration::from_secs(20),
        || {
            let a = w.env.agent(&id);
            (a["reason"] == "network").then_some(a)
        },
        || {
            let payloads: Vec<String> = std::fs::read_dir(&w.hook_log)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter(|t| t.contains("StopFailure"))
                .collect();
            format!(
                "{}\n{}\n{payloads:?}",
                w.env.ok(["explain", &id]),
                w.env.ok(["peek", &id])
            )
        },
    );
    eprintln!("dropped → failed:network ({})", a["evidence"]);
}

#[test]
fn a_claude_killed_without_its_session_end_hook_crashed_silently() {
    let Some(mut w) = crate::common::world("claude", "the Claude Code crash test") else {
        return;
    };
    let server = ModelServer::start(vec![Turn::text("Hello."), Turn::text("Hello again.")]);
    let id = launch(&mut w, &server, "doomed", "Say hello in one word.");
    assert_eq!(w.env.wait_state(&id, "idle", 60), "idle");
    // Its hooks work (the turn's Stop came as a hook).
    assert_eq!(
        w.env.agent(&id)["state_source"],
        "hooks",
        "{}",
        w.env.agent(&id)
    );
    let pid = w.env.agent(&id)["pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let a = failed(&w.env, &server, &id, 20);
    assert_eq!(a["reason"], "crashed_silently", "{a}");
    assert!(
        a["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("no session-end hook"),
        "{a}"
    );

    // One that ends by /exit says so first: done, no reason.
    let id = launch(&mut w, &server, "tidy", "Say hello in one word.");
    assert_eq!(w.env.wait_state(&id, "idle", 60), "idle");
    w.env.ok(["send", &id, "/exit"]);
    assert_eq!(w.env.wait_state(&id, "done", 30), "done");
    assert_eq!(w.env.agent(&id)["reason"], serde_json::Value::Null);
}
