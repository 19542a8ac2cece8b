//! The shell tool in the real sandbox: no network, and a command over its time limit is killed
//! and reported, the sandbox usable afterwards.

use std::time::{Duration, Instant};

use serde_json::json;
use volee_agent::Approval;
use volee_test_support::ollama_server::OllamaTurn;

use crate::support::{call_ids, finish, tool_result, ScriptedUi, World};

#[tokio::test]
async fn the_network_is_really_unavailable_in_the_sandbox() {
    let script = vec![
        OllamaTurn::tool(
            "shell",
            json!({"command": "ls /sys/class/net; if nc -w 2 1.1.1.1 53 </dev/null; then echo CONNECTED; else echo no-connection; fi; wget -q -T 2 -O - http://1.1.1.1/ 2>&1; echo wget=$?"}),
        ),
        OllamaTurn::text("No network."),
    ];
    let Some(mut w) = World::new("network", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[Approval::Once]);
    agent.turn("is there a network?", &mut ui).await.unwrap();
    let ids = call_ids(&w.server);
    let r = tool_result(&w.request(1), &ids[0]);
    assert!(r.contains("[stdout]\nlo\n"), "{r}");
    assert!(
        r.contains("no-connection") && !r.contains("CONNECTED"),
        "{r}"
    );
    assert!(!r.contains("wget=0"), "{r}");
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn a_command_over_its_time_limit_is_killed_and_reported() {
    let script = vec![
        OllamaTurn::tool(
            "shell",
            json!({"command": "echo started; sleep 60; echo never", "timeout_secs": 1}),
        ),
        OllamaTurn::text("It timed out."),
        OllamaTurn::tool("shell", json!({"command": "echo alive"})),
        OllamaTurn::text("Alive."),
    ];
    let Some(mut w) = World::new("time_limit", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[Approval::Always]);
    let started = Instant::now();
    agent.turn("sleep a minute", &mut ui).await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let ids = call_ids(&w.server);
    let r = tool_result(&w.request(1), &ids[0]);
    assert!(
        r.starts_with("exit code 137: killed at the time limit of 1 s"),
        "{r}"
    );
    assert!(r.contains("started") && !r.contains("never"), "{r}");
    agent.turn("still there?", &mut ui).await.unwrap();
    let ids = call_ids(&w.server);
    let r = tool_result(&w.request(3), &ids[1]);
    assert_eq!(r, "exit code 0\n[stdout]\nalive\n");
    w.check();
    finish(agent).await;
}
