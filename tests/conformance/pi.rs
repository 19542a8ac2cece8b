//! Pi 0.73.1 (`@mariozechner/pi-coding-agent`), a harness volee has **no code for**: its
//! profile is one file (`crates/volee-harness/profiles/pi.toml`, written from `volee probe --new`)
//! and this drives the real program through it, against the scripted loopback model server
//! (OpenAI chat completions, named in a throwaway HOME's `~/.pi/agent/models.json` as a user
//! would).
//!
//! Pi has no permission prompt of its own; a user who wants one writes an extension. The test
//! launches Pi with such an extension (its `-e FILE` after `--`, as any extra arguments): before
//! a bash tool call it asks in Pi's select dialog. Asserted, every state from Pi's screen rules
//! and output activity: working (rule `pi.working`) → needs_you:question (rule
//! `pi.select-dialog`) → `volee send ID` (Enter on "Yes") → the command ran → idle (quiet) →
//! `volee send` a second prompt → working → idle → `/quit` → done (exit 0); then `volee resume` (`pi -c`) carries the conversation on; and Pi started by
//! hand in a tmux window is discovered by its process name.

use std::time::Duration;

use volee_test_support::model_server::{ModelServer, Turn};
use volee_test_support::wait_until;

const MODEL: &str = "volee-test-model";

/// `~/.pi/agent/models.json`: one OpenAI-compatible provider, the scripted server.
fn seed_home(home: &std::path::Path, server: &ModelServer) {
    let dir = home.join(".pi/agent");
    std::fs::create_dir_all(&dir).unwrap();
    let models = serde_json::json!({ "providers": { "volee": {
        "baseUrl": format!("{}/v1", server.base_url()),
        "api": "openai-completions",
        "apiKey": "test-key",
        "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },
        "models": [ { "id": MODEL, "name": "volee test model", "reasoning": false } ]
    } } });
    std::fs::write(dir.join("models.json"), models.to_string()).unwrap();
}

/// The user's extension: asks in Pi's select dialog before each bash command.
const ASK_EXTENSION: &str = r#"import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
export default function (pi: ExtensionAPI) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (event.toolName !== "bash" || !ctx.hasUI) return undefined;
    const choice = await ctx.ui.select(`Allow command?\n\n  ${event.input.command}\n`, ["Yes", "No"]);
    return choice === "Yes" ? undefined : { block: true, reason: "Blocked by the user" };
  });
}
"#;

#[test]
fn pi_runs_from_its_profile_file_alone() {
    let Some(mut w) = crate::common::world("pi", "the Pi conformance test") else {
        return;
    };
    let marker = w.work.join("pi-marker");
    let server = ModelServer::start(vec![
        Turn::tool(
            "bash",
            serde_json::json!({ "command": format!("touch {}", marker.display()) }),
        ),
        Turn::text("The marker file exists now."),
        Turn::text("Second answer."),
        Turn::text("Third answer, after the resume."),
    ]);
    seed_home(&w.env.home(), &server);
    let extension = w.env.root().join("ask.ts");
    std::fs::write(&extension, ASK_EXTENSION).unwrap();
    w.env.extra_env.extend(
        [
            ("PATH", crate::path_with(&w.bin_dir)),
            // No start-up downloads of fd and ripgrep (no network here).
            ("PI_OFFLINE", "1".to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    let env = &w.env;
    let shown = |id: &str| {
        format!(
            "{}\n{}\n{}",
            env.ok(["explain", id]),
            env.ok(["peek", id]),
            server.summary()
        )
    };

    let id = env.ok([
        "launch",
        "--harness",
        "pi",
        "--host",
        "tmux:main",
        "--name",
        "pi-agent",
        "--model",
        &format!("volee/{MODEL}"),
        "Create the marker file with touch.",
        "--",
        "-e",
        &extension.display().to_string(),
    ]);
    let a = env.agent(&id);
    assert_eq!(a["harness"], "pi");
    assert_eq!(a["profile_fit"], "measured", "{a}");
    assert_eq!(a["harness_version"], "0.73.1", "{a}");

    // The extension asks before the bash call: needs_you from Pi's select dialog.
    let asked = wait_until(
        "needs_you:question",
        Duration::from_secs(60),
        || {
            let a = env.agent(&id);
            (a["state"] == "needs_you").then_some(a)
        },
        || shown(&id),
    );
    assert_eq!(asked["reason"], "question", "{asked}");
    assert!(
        asked["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("pi.select-dialog"),
        "{asked}"
    );
    assert!(!marker.exists(), "the command ran before it was allowed");
    // Enter on the preselected "Yes".
    env.ok(["send", &id, "--raw", "\r"]);
    wait_until(
        "the allowed command ran",
        Duration::from_secs(30),
        || marker.exists().then_some(()),
        || shown(&id),
    );
    assert_eq!(env.wait_state(&id, "idle", 30), "idle", "{}", shown(&id));
    assert!(server.main_exchanges().len() >= 2, "{}", server.summary());
    // Pi redraws every ~2 s while idle: its idle rule keeps it idle, no flapping to working.
    std::thread::sleep(Duration::from_secs(5));
    let still = env.agent(&id);
    assert_eq!(still["state"], "idle", "{}", shown(&id));
    assert!(
        still["evidence"]
            .as_str()
            .unwrap_or("")
            .contains("pi.idle-footer"),
        "{still}"
    );

    // A second prompt: working, then idle again.
    env.ok(["send", &id, "Say something else."]);
    wait_until(
        "the second prompt at the model",
        Duration::from_secs(30),
        || (server.main_exchanges().len() >= 3).then_some(()),
        || shown(&id),
    );
    assert_eq!(env.wait_state(&id, "idle", 30), "idle", "{}", shown(&id));

    // `/quit` ends it: done.
    env.ok(["send", &id, "/quit"]);
    assert_eq!(env.wait_state(&id, "done", 20), "done", "{}", shown(&id));
    assert_eq!(env.agent(&id)["exit_status"], 0);

    // Resumed with `pi -c` (a new agent of the same name): the conversation goes on.
    let again = env.ok(["resume", &id]);
    assert_ne!(again, id);
    assert_eq!(env.agent(&again)["name"], "pi-agent");
    assert!(
        env.agent(&again)["command"]
            .as_array()
            .is_some_and(|c| c.iter().any(|a| a == "-c")),
        "{}",
        env.agent(&again)
    );
    assert_eq!(
        env.wait_state(&again, "idle", 30),
        "idle",
        "{}",
        shown(&again)
    );
    env.ok(["send", &again, "And after the resume?"]);
    let resumed_request = wait_until(
        "the resumed conversation at the model",
        Duration::from_secs(30),
        || server.main_exchanges().into_iter().nth(3),
        || shown(&again),
    );
    let history = crate::common::all_text(&serde_json::Value::Array(
        resumed_request.messages().to_vec(),
    ));
    assert!(
        history.contains("Create the marker file with touch."),
        "the resumed session lost its first prompt: {history}"
    );
    assert_eq!(
        env.wait_state(&again, "idle", 30),
        "idle",
        "{}",
        shown(&again)
    );
    env.ok(["send", &again, "/quit"]);
    assert_eq!(
        env.wait_state(&again, "done", 20),
        "done",
        "{}",
        shown(&again)
    );

    // Started by hand in a tmux window: discovered by its process name.
    let pi = w.bin_dir.join("pi");
    let pane = env.tmux(&[
        "new-window",
        "-P",
        "-F",
        "#{pane_id}",
        "-t",
        "main",
        "-c",
        &w.work.display().to_string(),
        "-e",
        &format!("HOME={}", env.home().display()),
        "-e",
        "PI_OFFLINE=1",
        &pi.display().to_string(),
    ]);
    let pane = pane.trim().to_string();
    let found = wait_until(
        "the hand-started Pi discovered",
        Duration::from_secs(30),
        || {
            let all: serde_json::Value =
                serde_json::from_str(&env.ok(["ls", "--rescan", "--json"])).ok()?;
            all.as_array()?
                .iter()
                .find(|a| a["origin"] == "discovered" && a["harness"] == "pi")
                .cloned()
        },
        || env.ok(["ls", "--all"]),
    );
    assert_eq!(found["host"]["pane"], pane.as_str(), "{found}");
    env.tmux(&["kill-pane", "-t", &pane]);
}
