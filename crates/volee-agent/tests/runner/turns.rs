//! Tool turns against the Ollama stand-in and a real sandbox: every call answered once,
//! approvals asked for the tools that change things, denials reported to the model, "always"
//! forgotten on resume, path tricks refused.

use serde_json::json;
use volee_agent::{Agent, AgentOptions, Approval, NoReporter, DENIED};
use volee_ollama::OllamaClient;
use volee_sandbox::{Sandbox, SandboxConfig};
use volee_store::TranscriptItem;
use volee_test_support::ollama_server::OllamaTurn;

use crate::support::{call_ids, finish, tool_result, ContainerGuard, ScriptedUi, World};

fn calls(list: Vec<(&str, serde_json::Value)>) -> OllamaTurn {
    OllamaTurn::ToolCalls {
        text: String::new(),
        calls: list.into_iter().map(|(n, a)| (n.to_string(), a)).collect(),
        with_ids: true,
    }
}

#[tokio::test]
async fn tool_turns_run_every_tool_and_answer_every_call_once() {
    let script = vec![
        calls(vec![
            (
                "shell",
                json!({"command": "echo sandboxed > made-by-shell.txt; id -u; cat made-by-shell.txt"}),
            ),
            (
                "write_file",
                json!({"path": "src/notes.txt", "content": "alpha\nbeta\n"}),
            ),
        ]),
        calls(vec![
            (
                "edit_file",
                json!({"path": "src/notes.txt", "old_text": "beta", "new_text": "gamma"}),
            ),
            ("read_file", json!({"path": "src/notes.txt"})),
            ("todo", json!({"action": "add", "text": "check the notes"})),
            (
                "scratchpad",
                json!({"action": "append", "text": "notes edited"}),
            ),
            (
                "write_file",
                json!({"path": "src/second.txt", "content": "2"}),
            ),
            // The sandbox user may change what write_file created (it belongs to the owner).
            (
                "shell",
                json!({"command": "echo more >> src/notes.txt && cat src/notes.txt"}),
            ),
        ]),
        OllamaTurn::text("Done: the notes are edited."),
    ];
    let Some(mut w) = World::new("tool_turns", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[
        Approval::Once,
        Approval::Always,
        Approval::Once,
        Approval::Once,
    ]);
    let outcome = agent.turn("Make some notes", &mut ui).await.unwrap();
    assert_eq!(outcome.answer, "Done: the notes are edited.");
    assert_eq!(
        (outcome.steps, outcome.tool_calls, outcome.denied),
        (3, 8, 0)
    );
    // Asked for shell, write_file (always), edit_file, shell again (once); not for the second
    // write_file, nor for read_file, todo, scratchpad.
    let asked: Vec<&str> = ui.asked.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(asked, ["shell", "write_file", "edit_file", "shell"]);
    assert!(ui.asked[0].1.contains("echo sandboxed"), "{:?}", ui.asked);
    assert_eq!(ui.text, "Done: the notes are edited.");

    let root = w.root();
    assert_eq!(
        std::fs::read_to_string(root.join("made-by-shell.txt")).unwrap(),
        "sandboxed\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/notes.txt")).unwrap(),
        "alpha\ngamma\nmore\n"
    );
    let ids = call_ids(&w.server);
    assert_eq!(ids.len(), 8);
    let second = w.request(1);
    let shell = tool_result(&second, &ids[0]);
    assert!(shell.starts_with("exit code 0"), "{shell}");
    assert!(shell.contains("sandboxed"), "{shell}");
    if crate::support::is_root() {
        // The sandbox runs as the project's owner, not as root.
        assert!(shell.contains("\n1000\n"), "{shell}");
    }
    assert!(tool_result(&second, &ids[1]).starts_with("created src/notes.txt"));
    let third = w.request(2);
    assert_eq!(tool_result(&third, &ids[2]), "edited src/notes.txt");
    assert_eq!(tool_result(&third, &ids[3]), "alpha\ngamma\n");
    assert_eq!(tool_result(&third, &ids[4]), "1. [ ] check the notes");
    assert_eq!(tool_result(&third, &ids[5]), "notes edited");
    assert_eq!(
        tool_result(&third, &ids[7]),
        "exit code 0\n[stdout]\nalpha\ngamma\nmore\n"
    );
    w.check();

    // The state: counts, usage, notes; nothing pending; the checkpoint on disk is the same.
    let s = agent.state().clone();
    assert_eq!(s.tool_counts.get("write_file"), Some(&2));
    assert_eq!(s.tool_counts.get("shell"), Some(&2));
    assert_eq!(s.usage.requests, 3);
    assert!(s.usage.prompt_tokens > 0 && s.usage.completion_tokens > 0);
    assert!(s.pending_tool_calls.is_empty());
    assert_eq!(s.todos.len(), 1);
    assert_eq!(s.scratchpad, "notes edited");
    assert_eq!(s.title, "Make some notes");
    let saved = w.store().load(agent.session_id()).unwrap();
    assert_eq!(saved.messages, s.messages);
    assert_eq!(saved.tool_counts, s.tool_counts);
    let id = agent.session_id().to_string();
    finish(agent).await;
    let transcript = volee_store::read_transcript(&w.store(), &id).unwrap();
    let approvals = transcript
        .items
        .iter()
        .filter(|l| matches!(&l.item, TranscriptItem::Event { name, .. } if name == "approval"))
        .count();
    assert_eq!(approvals, 4);
}

#[tokio::test]
async fn a_denied_call_is_not_run_and_always_is_forgotten_on_resume() {
    let script = vec![
        calls(vec![
            ("shell", json!({"command": "touch denied.txt"})),
            ("write_file", json!({"path": "a.txt", "content": "a"})),
        ]),
        OllamaTurn::text("The shell call was denied."),
        calls(vec![(
            "write_file",
            json!({"path": "b.txt", "content": "b"}),
        )]),
        OllamaTurn::text("Wrote b."),
        // After resume: asked again.
        calls(vec![(
            "write_file",
            json!({"path": "c.txt", "content": "c"}),
        )]),
        OllamaTurn::text("Not written."),
    ];
    let Some(mut w) = World::new("denied", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[Approval::Deny, Approval::Always]);
    let outcome = agent.turn("touch a file", &mut ui).await.unwrap();
    assert_eq!((outcome.tool_calls, outcome.denied), (1, 1));
    let root = w.root();
    assert!(!root.join("denied.txt").exists(), "a denied call ran");
    assert!(root.join("a.txt").exists());
    let ids = call_ids(&w.server);
    assert_eq!(tool_result(&w.request(1), &ids[0]), DENIED);
    // "always" holds for the rest of this run: b.txt is written without a question.
    agent.turn("write b", &mut ui).await.unwrap();
    assert_eq!(ui.asked.len(), 2);
    assert!(root.join("b.txt").exists());
    let id = agent.session_id().to_string();
    finish(agent).await;

    // Resumed: a fresh sandbox, and the approval is asked again (and denied this time).
    let store = w.store();
    let writer = store.open_for_resume(&id, &root).unwrap();
    w.guards.push(ContainerGuard(id.clone()));
    let docker = volee_sandbox::connect().await.unwrap();
    let sandbox = Sandbox::start(&docker, &SandboxConfig::new(&root, &id))
        .await
        .unwrap();
    let mut agent: Agent<OllamaClient, Sandbox> = Agent::new(
        w.client(8192),
        sandbox,
        store,
        writer,
        &root,
        AgentOptions::new(8192),
        Box::new(NoReporter),
    )
    .unwrap();
    let mut ui = ScriptedUi::answering(&[]);
    let outcome = agent.turn("write c", &mut ui).await.unwrap();
    assert_eq!(ui.asked.len(), 1, "approvals must not survive a resume");
    assert_eq!(outcome.denied, 1);
    assert!(!root.join("c.txt").exists());
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn path_tricks_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().canonicalize().unwrap();
    std::fs::write(outside_dir.join("secret.txt"), "do not touch").unwrap();
    let o = outside_dir.display().to_string();
    let script = vec![
        calls(vec![
            (
                "write_file",
                json!({"path": "../escape.txt", "content": "x"}),
            ),
            ("read_file", json!({"path": "/etc/passwd"})),
            ("write_file", json!({"path": "out/new.txt", "content": "x"})),
            (
                "edit_file",
                json!({"path": "secret-link", "old_text": "do not", "new_text": "did"}),
            ),
            ("read_file", json!({"path": "src/../../secret.txt"})),
            (
                "write_file",
                json!({"path": format!("{o}/abs.txt"), "content": "x"}),
            ),
            ("read_file", json!({"path": "secret-link"})),
        ]),
        OllamaTurn::text("All refused."),
    ];
    let Some(mut w) = World::new("path_tricks", script) else {
        return;
    };
    let root = w.root();
    std::fs::create_dir(root.join("src")).unwrap();
    std::os::unix::fs::symlink(&outside_dir, root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside_dir.join("secret.txt"), root.join("secret-link")).unwrap();
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[Approval::Always, Approval::Always]);
    agent.turn("try to escape", &mut ui).await.unwrap();
    let ids = call_ids(&w.server);
    let answer = w.request(1);
    for id in &ids {
        let r = tool_result(&answer, id);
        assert!(r.contains("refused"), "{id}: {r}");
    }
    assert_eq!(
        std::fs::read_to_string(outside_dir.join("secret.txt")).unwrap(),
        "do not touch"
    );
    assert_eq!(std::fs::read_dir(&outside_dir).unwrap().count(), 1);
    assert!(!root.parent().unwrap().join("escape.txt").exists());
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn retries_and_usage_are_counted_and_saved() {
    let script = vec![
        OllamaTurn::http_error(503, "server busy, please try again."),
        OllamaTurn::with_usage(Some(5000), Some(40), OllamaTurn::text("Fine.")),
    ];
    let Some(mut w) = World::new("retries", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::default();
    agent.turn("hello", &mut ui).await.unwrap();
    let s = agent.state().clone();
    assert_eq!(s.retry_counts.get("model"), Some(&1));
    assert_eq!(s.usage.requests, 1);
    // The larger of Ollama's count and the local estimate.
    assert_eq!(s.usage.prompt_tokens, 5000);
    assert_eq!(s.usage.completion_tokens, 40);
    let saved = w.store().load(agent.session_id()).unwrap();
    assert_eq!((saved.retry_counts, saved.usage), (s.retry_counts, s.usage));
    w.check();
    finish(agent).await;
}

/// `--budget`: the loop makes no model request once the session's tokens reach it, so a budget
/// is passed by one response at most, and it says so (issue 23).
#[tokio::test]
async fn the_request_past_the_budget_is_refused_and_said() {
    let script = vec![
        OllamaTurn::with_usage(Some(5000), Some(40), OllamaTurn::text("First.")),
        OllamaTurn::text("Never asked."),
    ];
    let Some(mut w) = World::new("budget", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    agent.set_budget(Some(3000));
    let mut ui = ScriptedUi::default();
    // Under the budget when it starts: the request is made, and its response passes it.
    agent.turn("hello", &mut ui).await.unwrap();
    assert_eq!(agent.state().usage.prompt_tokens, 5000);
    let e = agent.turn("again", &mut ui).await.unwrap_err();
    assert!(
        matches!(
            e,
            volee_agent::AgentError::BudgetReached {
                used: 5040,
                budget: 3000
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("5040 of 3000 tokens"), "{e}");
    assert_eq!(w.server.chat_requests().len(), 1, "{}", w.server.summary());
    assert_eq!(agent.state().usage.requests, 1);
    // Raised: it goes on.
    agent.set_budget(Some(100_000));
    agent.turn("and again", &mut ui).await.unwrap();
    assert_eq!(w.server.chat_requests().len(), 2);
    finish(agent).await;
}
