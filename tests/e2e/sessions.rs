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
