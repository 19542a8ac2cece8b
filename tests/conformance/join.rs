//! Join, on real harnesses: `volee launch --harness H --join` gives the harness volee's MCP
//! server for that launch only (Claude Code `--mcp-config` with a file of volee's own, the prompt
//! after `--`; OpenCode `OPENCODE_CONFIG_CONTENT`; Qwen Code `--mcp-config`; Codex CLI
//! `-c mcp_servers.volee.*`; Copilot CLI `--additional-mcp-config @FILE`; Gemini CLI a
//! system-defaults file of volee's); the scripted model asks
//! for volee's `list_agents` tool; the call goes through `volee mcp` to the daemon, whose answer —
//! the agents, and which one is asking — comes back to the model as the tool result. Nothing of
//! the user's configuration names volee's server.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use volee_test_support::model_server::{Exchange, ModelServer, Turn};
use volee_test_support::{require, wait_until, TestEnv};

/// Claude Code 2.1.332 defers MCP tools: the model loads the schema with ToolSearch first (as
/// its system reminder tells it), then calls the tool.
#[test]
fn claude_code_calls_volees_list_agents_through_volee_mcp() {
    const TOOL: &str = "mcp__volee__list_agents";
    let script = vec![
        Turn::tool(
            "ToolSearch",
            json!({"query": format!("select:{TOOL}"), "max_results": 5}),
        ),
        Turn::tool(TOOL, json!({})),
        Turn::text("done"),
    ];
    let prepare = |env: &mut TestEnv, server: &ModelServer, bin_dir: &Path, work: &Path| {
        let hook_log = env.root().join("hook-payloads");
        std::fs::create_dir_all(&hook_log).unwrap();
        crate::claude::seed_home(&env.home(), work, &hook_log);
        server.set_main_delay(Duration::from_millis(500));
        let claude_tmp = env.root().join("claude-tmp");
        crate::claude::claude_env(env, bin_dir, server, &claude_tmp);
        Prepared {
            user_config: env.home().join(".claude/settings.json"),
            never: "mcp",
            allow: "1",
            _keep: None,
        }
    };
    let inspect = |launched: &Value, server: &ModelServer, answered: &Exchange| {
        // `--mcp-config FILE` of volee's own, before the `--` that ends the options.
        let command: Vec<String> = serde_json::from_value(launched["command"].clone()).unwrap();
        let config_at = command
            .iter()
            .position(|a| a == "--mcp-config")
            .expect("--mcp-config in the launch line");
        let dash = command
            .iter()
            .position(|a| a == "--")
            .expect("-- before the prompt");
        assert!(config_at < dash, "{command:?}");
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(&command[config_at + 1]).unwrap())
                .unwrap();
        assert_eq!(config["mcpServers"]["volee"]["args"][0], "mcp", "{config}");
        assert!(
            !server.main_exchanges()[0]
                .tool_names()
                .iter()
                .any(|n| n == TOOL),
            "deferred until ToolSearch loads it"
        );
        assert!(
            answered.tool_names().iter().any(|n| n == TOOL),
            "loaded by ToolSearch: {:?}",
            answered.tool_names()
        );
    };
    joined_list_agents("claude", script, 2, "/exit", prepare, inspect);
}

/// What a joined harness needs besides volee: its HOME seeded, its environment, the user's config
/// file that must stay without volee's server, and whatever must live as long as the test.
struct Prepared {
    /// The user's own config file, and what must never appear in it.
    user_config: PathBuf,
    never: &'static str,
    /// What `volee send` types to allow the call once when the harness asks.
    allow: &'static str,
    _keep: Option<Box<dyn std::any::Any>>,
}

/// A joined `harness` whose model (the script) calls volee's `list_agents`: the call goes through
/// `volee mcp` to the daemon, whose answer — the other agent, and the caller named — comes back
/// to the model once `results` tool results are in one request. The harness is allowed once
/// should it ask before the call; it ends with `exit`.
fn joined_list_agents(
    harness: &str,
    script: Vec<Turn>,
    results: usize,
    exit: &str,
    prepare: impl FnOnce(&mut TestEnv, &ModelServer, &Path, &Path) -> Prepared,
    inspect: impl FnOnce(&Value, &ModelServer, &Exchange),
) {
    joined_list_agents_in(
        |_| Some(TestEnv::new(env!("CARGO_BIN_EXE_volee"))),
        harness,
        script,
        results,
        exit,
        prepare,
        inspect,
    );
}

/// [`joined_list_agents`] in a test world `new_env` makes (with the test lock held; given the
/// pinned version), or nothing when it makes none.
fn joined_list_agents_in(
    new_env: impl FnOnce(&str) -> Option<TestEnv>,
    harness: &str,
    script: Vec<Turn>,
    results: usize,
    exit: &str,
    prepare: impl FnOnce(&mut TestEnv, &ModelServer, &Path, &Path) -> Prepared,
    inspect: impl FnOnce(&Value, &ModelServer, &Exchange),
) {
    let _serial = crate::serial();
    if !require("tmux", "the join conformance test") {
        return;
    }
    let pinned = crate::pinned(harness);
    let Some(bin_dir) = crate::install(&pinned) else {
        return;
    };
    let Some(mut env) = new_env(&pinned.version) else {
        return;
    };
    env.start_tmux();
    let work = env.work().canonicalize().unwrap();
    let server = ModelServer::start(script);
    let prepared = prepare(&mut env, &server, &bin_dir, &work);
    let path = crate::path_with(&bin_dir);
    env.extra_env.push(("PATH".into(), path));
    let other = env.ok([
        "launch",
        "--host",
        "tmux:main",
        "--name",
        "other",
        "--",
        "sleep",
        "300",
    ]);
    let started = Instant::now();
    let id = env.ok([
        "launch",
        "--harness",
        harness,
        "--join",
        "--host",
        "tmux:main",
        "--name",
        "joined",
        "List the agents volee supervises.",
    ]);
    // Allowed once: a second "1" sent while the answered dialog is still on screen would become
    // a prompt.
    let allowed = std::cell::Cell::new(false);
    let answered = wait_until(
        "the tool result back at the model",
        Duration::from_secs(120),
        || {
            if !allowed.get() && env.agent(&id)["state"] == "needs_you" {
                let peek = env.ok(["peek", &id, "-n", "30"]);
                if peek.contains("1. ") {
                    let _ = env.run(["send", &id, prepared.allow]);
                    allowed.set(true);
                }
            }
            server
                .main_exchanges()
                .into_iter()
                .find(|e| e.tool_result_ids().len() >= results)
        },
        || {
            format!(
                "{}\n{}\ntools offered: {:?}\n{}",
                env.agent(&id),
                env.ok(["peek", &id, "-n", "40"]),
                server.exchanges().first().map(|e| e.tool_names()),
                server.summary()
            )
        },
    );
    // Some harnesses hand the tool's JSON on re-serialised, compacted.
    let body = answered.body.to_string().replace(' ', "");
    let last = answered.messages().last().cloned().unwrap_or_default();
    assert!(body.contains(&other), "the other agent listed: {last}");
    assert!(
        body.contains(&format!(r#"\"you\":\"{id}\""#)),
        "the calling agent named: {last}"
    );
    server.check_tool_results().unwrap();
    inspect(&env.agent(&id), &server, &answered);
    assert_eq!(env.wait_state(&id, "idle", 60), "idle");
    eprintln!(
        "joined {harness}: launch → tool result at the model {:.1} s",
        answered.received.duration_since(started).as_secs_f64()
    );
    let config = std::fs::read_to_string(&prepared.user_config).unwrap_or_default();
    assert!(
        !config.contains(prepared.never),
        "the user's config untouched: {config}"
    );
    assert!(!work.join(".opencode").exists());
    env.ok(["send", &id, exit]);
    wait_until(
        "the harness ends at its exit command",
        Duration::from_secs(30),
        || (env.agent(&id)["state"] == "done").then_some(()),
        || {
            format!(
                "{}\n{}\n{}",
                env.agent(&id),
                env.ok(["peek", &id, "-n", "40"]),
                server.summary()
            )
        },
    );
}

/// OpenCode 1.18.33: volee's server in `OPENCODE_CONFIG_CONTENT` for that launch; its tools
/// offered as `volee_<tool>`.
#[test]
fn opencode_calls_volees_list_agents_through_volee_mcp() {
    let script = vec![
        Turn::tool("volee_list_agents", json!({})),
        Turn::text("done"),
    ];
    joined_list_agents(
        "opencode",
        script,
        1,
        "/exit",
        |env, server, _, _| {
            crate::opencode::seed_home(&env.home(), &server.base_url());
            env.extra_env
                .push(("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()));
            Prepared {
                user_config: env.home().join(".config/opencode/opencode.json"),
                never: "mcp",
                allow: "1",
                _keep: None,
            }
        },
        |_, _, _| {},
    );
}

/// Gemini CLI 0.61.0: `mcpServers` in volee's own system-defaults file for that launch (read
/// only when root owns it and every directory above it: see `gemini::system_defaults_env`); MCP
/// tools are offered as `mcp_<server>_<tool>`.
#[test]
fn gemini_cli_calls_volees_list_agents_through_volee_mcp() {
    let script = vec![
        Turn::tool("mcp_volee_list_agents", json!({})),
        Turn::text("done"),
    ];
    joined_list_agents_in(
        crate::gemini::system_defaults_env,
        "gemini",
        script,
        1,
        "/quit",
        |env, server, _, work| {
            let hook_log = env.root().join("hook-payloads");
            std::fs::create_dir_all(&hook_log).unwrap();
            crate::gemini::seed_home(&env.home(), work, &hook_log);
            env.extra_env.extend(
                [
                    ("GEMINI_API_KEY", crate::gemini::API_KEY.to_string()),
                    ("GOOGLE_GEMINI_BASE_URL", server.base_url().to_string()),
                ]
                .map(|(k, v)| (k.to_string(), v)),
            );
            Prepared {
                user_config: env.home().join(".gemini/settings.json"),
                never: "mcpServers",
                // Enter takes the highlighted "Allow once": a "1" typed at this dialog stays in the
                // input box and prefixes the next prompt (seen: `1/quit`).
                allow: "",
                _keep: None,
            }
        },
        |_, _, _| {},
    );
}

/// Qwen Code 0.24.4: `--mcp-config FILE` of volee's own; MCP tools are deferred — the model finds
/// `mcp__volee__list_agents` with `tool_search`, then calls it through `tool_call`.
#[test]
fn qwen_code_calls_volees_list_agents_through_volee_mcp() {
    const TOOL: &str = "mcp__volee__list_agents";
    let script = vec![
        Turn::tool("tool_search", json!({"query": format!("select:{TOOL}")})),
        Turn::tool("tool_call", json!({"name": TOOL, "arguments": {}})),
        Turn::text("done"),
    ];
    joined_list_agents(
        "qwen",
        script,
        2,
        "/quit",
        |env, server, _, work| {
            let hook_log = env.root().join("hook-payloads");
            std::fs::create_dir_all(&hook_log).unwrap();
            crate::qwen::seed_home(&env.home(), work, &hook_log);
            env.extra_env.extend(
                [
                    ("OPENAI_API_KEY", crate::qwen::API_KEY.to_string()),
                    ("OPENAI_BASE_URL", format!("{}/v1", server.base_url())),
                    ("OPENAI_MODEL", crate::qwen::MODEL.to_string()),
                ]
                .map(|(k, v)| (k.to_string(), v)),
            );
            Prepared {
                user_config: env.home().join(".qwen/settings.json"),
                never: "mcpServers",
                allow: "1",
                _keep: None,
            }
        },
        |_, _, _| {},
    );
}

/// Codex CLI 0.171.0: `-c mcp_servers.volee.*`; each MCP server is offered as one Responses
/// `namespace` tool, so the model calls `list_agents` in namespace `mcp__volee`.
#[test]
fn codex_cli_calls_volees_list_agents_through_volee_mcp() {
    let script = vec![
        Turn::tool("mcp__volee/list_agents", json!({})),
        Turn::text("done"),
    ];
    joined_list_agents(
        "codex",
        script,
        1,
        "/quit",
        |env, server, bin_dir, work| {
            let home = env.home().canonicalize().unwrap();
            crate::codex::seed_home(&home, &format!("{}/v1", server.base_url()), work);
            env.extra_env.extend(
                [
                    ("VOLEE_TEST_MODEL_KEY", crate::codex::API_KEY.to_string()),
                    ("CODEX_HOME", home.join(".codex").display().to_string()),
                ]
                .map(|(k, v)| (k.to_string(), v)),
            );
            Prepared {
                user_config: home.join(".codex/config.toml"),
                never: "mcp_servers",
                allow: "1",
                _keep: Some(Box::new(crate::codex::DaemonCleanup {
                    bin: bin_dir.join(&crate::pinned("codex").bin),
                    home,
                })),
            }
        },
        |_, _, _| {},
    );
}

/// GitHub Copilot CLI 1.0.102: `--additional-mcp-config @FILE` of volee's own; its tools offered
/// as `volee-<tool>`; it re-serialises the tool's JSON compactly.
#[test]
fn copilot_cli_calls_volees_list_agents_through_volee_mcp() {
    let script = vec![
        Turn::tool("volee-list_agents", json!({})),
        Turn::text("done"),
    ];
    joined_list_agents(
        "copilot",
        script,
        1,
        "/exit",
        |env, server, _, work| {
            let hook_log = env.root().join("hook-payloads");
            std::fs::create_dir_all(&hook_log).unwrap();
            crate::copilot::seed_home(&env.home().join(".copilot"), work, &hook_log);
            env.extra_env.extend(crate::copilot::byok_env(server));
            Prepared {
                user_config: env.home().join(".copilot/mcp-config.json"),
                never: "volee",
                allow: "1",
                _keep: None,
            }
        },
        |_, _, _| {},
    );
}
