//! `volee mcp`, volee's MCP server, driven by an MCP client (the `rmcp` SDK's) over its stdio, as
//! a harness would run it: initialize, tools/list, every tool against real agents in a private
//! tmux, and the errors a model's bad arguments get.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use volee_test_support::TestEnv;

use crate::{launch_sh, setup};

type Client = RunningService<RoleClient, ()>;

/// `volee mcp` of this environment, started as agent `caller` would start it (None: from a plain
/// shell, with the reduced environment harnesses give MCP servers, so the caller is found by
/// ancestry or not at all).
async fn connect(env: &TestEnv, caller: Option<&str>) -> Client {
    let mut cmd = env.volee(["mcp"]);
    if let Some(id) = caller {
        cmd.env("VOLEE_AGENT_ID", id);
    } else {
        cmd.env_remove("VOLEE_AGENT_ID");
    }
    let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).unwrap();
    ().serve(transport).await.expect("MCP initialize")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.expect("tools/call")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[test]
fn every_tool_answers_and_bad_arguments_get_clear_errors() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    // A peer that answers each line it reads, one that asks a question, and the caller.
    let peer = launch_sh(
        &env,
        "peer",
        "echo ready; while read l; do echo \"got: $l\"; done",
    );
    let asking = launch_sh(
        &env,
        "asking",
        "printf 'Continue? [y/N] '; read x; sleep 60",
    );
    let caller = launch_sh(&env, "caller", "sleep 120");
    assert_eq!(env.wait_state(&peer, "idle", 15), "idle");
    assert_eq!(env.wait_state(&asking, "needs_you", 15), "needs_you");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = connect(&env, Some(&caller)).await;
        let info = client.peer_info().expect("server info");
        assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("volee"));

        // tools/list: the five tools, each with an object schema.
        let tools = client.list_all_tools().await.unwrap();
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            ["agent_state", "list_agents", "read_screen", "send_message", "wait_for_state"]
        );
        for t in &tools {
            assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{}", t.name);
            assert!(t.description.as_ref().is_some_and(|d| d.len() > 20), "{}", t.name);
        }

        // list_agents: every live agent, and who is asking.
        let listed = call(&client, "list_agents", json!({})).await;
        assert!(!is_error(&listed), "{}", text(&listed));
        let listed: Value = serde_json::from_str(&text(&listed)).unwrap();
        assert_eq!(listed["you"], caller.as_str());
        let ids: Vec<&str> = listed["agents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["id"].as_str())
            .collect();
        for id in [&peer, &asking, &caller] {
            assert!(ids.contains(&id.as_str()), "{id} in {ids:?}");
        }

        // agent_state: the state with its evidence and the deciding rule.
        let state = call(&client, "agent_state", json!({"id": "asking"})).await;
        let state: Value = serde_json::from_str(&text(&state)).unwrap();
        assert_eq!(state["agent"]["id"], asking.as_str());
        assert_eq!(state["agent"]["state"], "needs_you");
        assert!(state["decision"].as_str().is_some_and(|d| !d.is_empty()), "{state}");

        // read_screen: the last lines, plain text.
        let screen = call(&client, "read_screen", json!({"id": peer, "lines": 5})).await;
        assert!(text(&screen).contains("ready"), "{}", text(&screen));

        // send_message: typed into the peer, signed with the caller, confirmed.
        let sent = call(&client, "send_message", json!({"id": peer, "text": "hello peer"})).await;
        assert!(!is_error(&sent), "{}", text(&sent));
        assert!(text(&sent).contains("sent to"), "{}", text(&sent));
        let signed = format!("got: (message from volee agent {caller}) hello peer");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen = call(&client, "read_screen", json!({"id": peer, "lines": 5})).await;
            if text(&screen).contains(&signed) {
                break;
            }
            assert!(Instant::now() < deadline, "{}", text(&screen));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // wait_for_state: reached, and a timeout that is answered, not hung.
        let waited = call(
            &client,
            "wait_for_state",
            json!({"id": peer, "states": ["idle"], "timeout_secs": 20}),
        )
        .await;
        let waited: Value = serde_json::from_str(&text(&waited)).unwrap();
        assert_eq!(waited["reached"], true, "{waited}");
        assert_eq!(waited["state"], "idle");
        let started = Instant::now();
        let timed_out = call(
            &client,
            "wait_for_state",
            json!({"id": peer, "states": ["done"], "timeout_secs": 1}),
        )
        .await;
        let timed_out: Value = serde_json::from_str(&text(&timed_out)).unwrap();
        assert_eq!(timed_out["reached"], false, "{timed_out}");
        assert!(started.elapsed() < Duration::from_secs(10));

        // Errors a model's bad arguments get: a tool error with a clear message.
        let errors = [
            ("agent_state", json!({"id": "nosuch"}), "nosuch"),
            ("read_screen", json!({"id": peer, "lines": 0}), "lines is 1 to 200"),
            ("read_screen", json!({"id": peer, "lines": 5000}), "lines is 1 to 200"),
            (
                "wait_for_state",
                json!({"id": peer, "states": ["sleeping"]}),
                "unknown state",
            ),
            ("wait_for_state", json!({"id": peer, "states": []}), "no state"),
            (
                "wait_for_state",
                json!({"id": peer, "states": ["idle"], "timeout_secs": 100000}),
                "at most 600",
            ),
            ("send_message", json!({"id": peer, "text": "  "}), "empty"),
            // Never into its own input, never an answer to another agent's prompt.
            ("send_message", json!({"id": caller, "text": "hi"}), "cannot send a message to itself"),
            ("wait_for_state", json!({"id": caller, "states": ["idle"]}), "cannot wait for itself"),
            ("send_message", json!({"id": asking, "text": "y"}), "needs_you"),
        ];
        for (tool, args, expect) in errors {
            let r = call(&client, tool, args.clone()).await;
            assert!(is_error(&r), "{tool} {args}: {}", text(&r));
            assert!(text(&r).contains(expect), "{tool} {args}: {}", text(&r));
        }
        assert_eq!(env.agent(&asking)["state"], "needs_you", "nothing answered it");
        // Arguments of the wrong shape are refused by the protocol layer.
        let params = CallToolRequestParams::new("read_screen")
            .with_arguments(json!({"id": 3}).as_object().cloned().unwrap());
        match client.call_tool(params).await {
            Err(e) => assert!(e.to_string().contains("id"), "{e}"),
            Ok(r) => assert!(is_error(&r) && text(&r).contains("id"), "{}", text(&r)),
        }
        let params = CallToolRequestParams::new("no_such_tool");
        match client.call_tool(params).await {
            Err(e) => assert!(e.to_string().contains("no_such_tool") || e.to_string().contains("not found"), "{e}"),
            Ok(r) => assert!(is_error(&r), "{}", text(&r)),
        }
        client.cancel().await.unwrap();

        // Started inside an agent's pane with no VOLEE_AGENT_ID (harnesses pass MCP servers a
        // reduced environment), spoken to on the raw wire with an older protocol version: the
        // caller is found by its process ancestry.
        let out = env.root().join("inside-mcp.jsonl");
        let requests = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}"#,
        ];
        let script = format!(
            "(printf '%s\\n' '{}'; sleep 5) | env -u VOLEE_AGENT_ID '{}' mcp > '{}'; sleep 120",
            requests.join("' '"),
            env!("CARGO_BIN_EXE_volee"),
            out.display()
        );
        let inside = launch_sh(&env, "inside", &script);
        let deadline = Instant::now() + Duration::from_secs(20);
        let answer = loop {
            let lines = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(line) = lines.lines().find(|l| l.contains(r#""id":2"#)) {
                break serde_json::from_str::<Value>(line).unwrap();
            }
            assert!(Instant::now() < deadline, "no answer to tools/call: {lines:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let first: Value =
            serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap())
                .unwrap();
        assert_eq!(first["result"]["protocolVersion"], "2025-06-18", "{first}");
        let listed: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(listed["you"], inside.as_str(), "{listed}");

        // From a plain shell: no caller.
        let client = connect(&env, None).await;
        let listed = call(&client, "list_agents", json!({"all": true})).await;
        let listed: Value = serde_json::from_str(&text(&listed)).unwrap();
        assert_eq!(listed["you"], Value::Null, "a plain shell is no agent");
        client.cancel().await.unwrap();
    });
}

#[test]
fn send_message_with_a_carriage_return_is_one_signed_input() {
    let Some((_guard, env)) = setup() else {
        return;
    };
    if !volee_test_support::require("python3", "the raw-terminal receiver") {
        return;
    }
    let (peer, record) = crate::input::launch_receiver(&env, "recv");
    let caller = launch_sh(&env, "caller", "sleep 120");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = connect(&env, Some(&caller)).await;
        let sent = call(
            &client,
            "send_message",
            json!({"id": peer, "text": "run the tests\ry\u{1b}[201~"}),
        )
        .await;
        assert!(!is_error(&sent), "{}", text(&sent));
        // Only control characters: nothing to send.
        let empty = call(
            &client,
            "send_message",
            json!({"id": peer, "text": "\r\u{1b}[B\u{3}"}),
        )
        .await;
        assert!(
            is_error(&empty) && text(&empty).contains("empty"),
            "{}",
            text(&empty)
        );
        client.cancel().await.unwrap();
    });
    let inputs = crate::input::settled_inputs(&env, &record, 1);
    assert_eq!(
        inputs,
        [format!(
            "(message from volee agent {caller}) run the tests y"
        )],
        "one input, signed whole; nothing answered the prompt"
    );
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error() {
    use std::io::{BufRead, BufReader, Write};
    let env = TestEnv::new(env!("CARGO_BIN_EXE_volee"));
    let mut child = env
        .volee(["mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is { not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ];
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers: Vec<Value> = Vec::new();
    // Three answers (initialize, the parse error, tools/list); a missing one would hang, so the
    // child is killed after 20 s.
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(20));
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    });
    while answers.len() < 3 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        answers.push(serde_json::from_str(&line).unwrap());
    }
    drop(stdin);
    let _ = child.wait();
    drop(watchdog);
    let parse: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32700)
        .collect();
    assert_eq!(parse.len(), 1, "{answers:?}");
    assert_eq!(parse[0]["id"], Value::Null);
    assert_eq!(parse[0]["jsonrpc"], "2.0");
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 2 && a["result"]["tools"].is_array()),
        "the server goes on after it: {answers:?}"
    );
}
