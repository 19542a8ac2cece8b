//! Budgets with the real Claude Code (issue 23): launched with a budget of 300 tokens, its first
//! model response (about 14k input tokens: Claude's system prompt and tools) crosses it; volee
//! reads that response's usage from Claude's transcript, interrupts the turn with Claude's
//! interrupt key and holds the agent `needs_you` ("budget reached: N of 300 tokens"): the tool
//! the response asked for never runs and no further request reaches the model; `volee send` is
//! refused naming `volee budget`; `volee budget ID +100k` lets it go on. Then a budget in money
//! (Claude's model is in the price table) set below what it cost holds it again, and `+1usd`
//! lets it go.

use std::time::{Duration, Instant};

use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::wait_until;

use crate::claude::{claude_env, seed_home};

#[test]
fn claude_code_is_interrupted_at_its_budget_and_goes_on_when_raised() {
    let Some(mut w) = crate::common::world("claude", "the Claude Code budget test") else {
        return;
    };
    seed_home(&w.env.home(), &w.work, &w.hook_log);
    let marker = w.work.join("volee-budget-touched");
    let server = ModelServer::start(vec![
        Turn::bash(
            &format!("touch {}", marker.display()),
            "Create the budget marker file",
        ),
        Turn::text("after the raise"),
    ]);
    let claude_tmp = w.env.root().join("claude-tmp");
    claude_env(&mut w.env, &w.bin_dir, &server, &claude_tmp);
    let env = &w.env;
    let id = env.ok([
        "launch",
        "--harness",
        "claude",
        "--host",
        "tmux:main",
        "--name",
        "budgeted",
        "--budget",
        "300",
        "Run the touch command to create the marker file.",
    ]);
    let started = Instant::now();
    let held = wait_until(
        "held at its budget",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you"
                && a["evidence"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("budget reached")))
            .then_some(a)
        },
        || {
            format!(
                "{}\n{}\n{}",
                env.agent(&id),
                server.summary(),
                env.log_tail()
            )
        },
    );
    let used = held["usage"]["input"].as_u64().unwrap()
        + held["usage"]["output"].as_u64().unwrap()
        + held["usage"]["cache_write"].as_u64().unwrap();
    assert_eq!(held["budget"]["tokens"], 300, "{held}");
    assert_eq!(held["budget"]["reached"], true, "{held}");
    assert_eq!(
        held["evidence"],
        format!("budget reached: {used} of 300 tokens"),
        "{held}"
    );
    // One response and no more: what crossed it, exactly that response's usage.
    std::thread::sleep(Duration::from_secs(3));
    let mains = server.main_exchanges();
    assert_eq!(mains.len(), 1, "{}", server.summary());
    assert_eq!(
        used,
        mains[0].input_tokens() + volee_test_support::model_server::OUTPUT_TOKENS,
        "{held}"
    );
    assert!(!marker.exists(), "the tool of the crossing response ran");
    assert_eq!(env.agent(&id)["state"], "needs_you");
    eprintln!(
        "budget 300 tokens: held at {used} ({} over, one response) {:.1} s after the launch",
        used - 300,
        started.elapsed().as_secs_f64()
    );
    let explain = env.ok(["explain", &id]);
    assert!(explain.contains("budget reached"), "{explain}");

    // Nothing is typed into it.
    let refused = env.run(["send", &id, "go on"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("volee budget"), "{said}");
    assert_eq!(server.main_exchanges().len(), 1);

    // Raised: let go; the user's next prompt reaches the model.
    let raised = env.ok(["budget", &id, "+100k"]);
    assert!(raised.contains("budget"), "{raised}");
    let after = env.agent(&id);
    assert_eq!(after["budget"]["tokens"], 100_300, "{after}");
    assert_eq!(after["budget"]["reached"], false, "{after}");
    // Its own state again: the interrupted Claude waits at its prompt.
    wait_until(
        "let go",
        Duration::from_secs(10),
        || (env.agent(&id)["state"] != "needs_you").then_some(()),
        || format!("{}\n{}", env.ok(["explain", &id]), env.ok(["peek", &id])),
    );
    env.ok(["send", &id, "Please go on."]);
    wait_until(
        "the next prompt at the model",
        Duration::from_secs(30),
        || (server.main_exchanges().len() >= 2).then_some(()),
        || format!("{}\n{}", server.summary(), env.ok(["peek", &id])),
    );
    assert_eq!(env.wait_state(&id, "idle", 30), "idle");

    // A budget in money, at the price table's price for Claude's model: set below what it
    // already cost, it holds the agent at once; raised by a dollar, it is let go.
    let spent = wait_until(
        "the second response's usage read",
        Duration::from_secs(10),
        || {
            let a = env.agent(&id);
            (a["usage"]["requests"].as_u64() >= Some(2)).then_some(a)
        },
        || env.agent(&id).to_string(),
    )["usage"]["cost_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cost for Claude's model: {}", env.agent(&id)));
    let limit = spent / 2.0;
    env.ok(["budget", &id, &format!("{limit}usd")]);
    let held = wait_until(
        "held at its budget in money",
        Duration::from_secs(10),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || env.ok(["explain", &id]),
    );
    assert_eq!(held["budget"]["usd"].as_f64(), Some(limit), "{held}");
    assert_eq!(
        held["evidence"],
        format!(
            "budget reached: {} of {}",
            volee_protocol::Amount::Usd(spent),
            volee_protocol::Amount::Usd(limit)
        ),
        "{held}"
    );
    let refused = env.run(["send", &id, "more"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let raised = env.ok(["budget", &id, "+1usd"]);
    assert!(
        raised.contains(&format!("budget ${:.2}", limit + 1.0)),
        "{raised}"
    );
    wait_until(
        "let go from the money budget",
        Duration::from_secs(10),
        || (env.agent(&id)["state"] != "needs_you").then_some(()),
        || env.ok(["explain", &id]),
    );
    env.ok(["send", &id, "/exit"]);
    assert_eq!(env.wait_state(&id, "done", 30), "done");
}
