//! Ctrl-C during a turn ends the turn, not the session: the running command is killed in the real
//! sandbox, every call the model asked for gets a result saying what happened, and the next turn
//! goes on with a consistent context.

use std::time::{Duration, Instant};

use serde_json::json;
use volee_agent::{Approval, Shell, INTERRUPTED, NOT_RUN_INTERRUPTED};
use volee_store::{read_transcript, TranscriptItem};
use volee_test_support::ollama_server::OllamaTurn;

use crate::support::{call_ids, finish, tool_result, ScriptedUi, World};

#[tokio::test]
async fn an_interrupt_kills_the_running_command_and_answers_every_call() {
    let script = vec![
        OllamaTurn::ToolCalls {
            text: String::new(),
            calls: vec![
                (
                    "shell".into(),
                    json!({"command": "echo started > started.txt; sleep 97; echo never > never.txt", "timeout_secs": 300}),
                ),
                (
                    "shell".into(),
                    json!({"command": "echo second > second.txt"}),
                ),
            ],
            with_ids: true,
        },
        OllamaTurn::text("Stopped."),
    ];
    let Some(mut w) = World::new("interrupt_command", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[Approval::Always]);
    let root = w.root();
    let started = Instant::now();
    // The interrupt comes once the command is running.
    let interrupt = async {
        while !root.join("started.txt").exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let outcome = agent
        .turn_interruptible("sleep a while", &mut ui, interrupt)
        .await
        .unwrap();
    assert!(outcome.interrupted, "{outcome:?}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // Nothing of the command is left running, and its rest never ran; the second call neither.
    let ps = Shell::exec(agent.shell(), "ps -o args", Duration::from_secs(10))
        .await
        .unwrap();
    // (`ps` lists itself: the listing is real.)
    assert!(
        ps.stdout.contains("ps -o args") && !ps.stdout.contains("sleep 97"),
        "{}",
        ps.stdout
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!root.join("never.txt").exists());
    assert!(!root.join("second.txt").exists());
    assert!(
        ui.notices.iter().any(|n| n == "interrupted"),
        "{:?}",
        ui.notices
    );

    // The session was checkpointed with both calls answered and the interrupt in the transcript.
    let id = agent.session_id().to_string();
    let t = read_transcript(&w.store(), &id).unwrap();
    assert!(
        t.items.iter().any(|i| matches!(
            &i.item,
            TranscriptItem::Event { name, .. } if name == "interrupted"
        )),
        "{:#?}",
        t.items
    );
    assert!(agent.state().pending_tool_calls.is_empty());

    // The next turn: the model sees what happened to each call, answered once.
    agent.turn("what happened?", &mut ui).await.unwrap();
    let ids = call_ids(&w.server);
    let messages = w.request(1);
    assert_eq!(tool_result(&messages, &ids[0]), INTERRUPTED);
    assert_eq!(tool_result(&messages, &ids[1]), NOT_RUN_INTERRUPTED);
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn an_interrupt_while_the_model_answers_drops_the_answer_and_keeps_the_session() {
    let script = vec![
        OllamaTurn::slow(Duration::from_secs(30), OllamaTurn::text("Too late.")),
        OllamaTurn::text("Here now."),
    ];
    let Some(mut w) = World::new("interrupt_model", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::answering(&[]);
    let started = Instant::now();
    let outcome = agent
        .turn_interruptible(
            "take your time",
            &mut ui,
            tokio::time::sleep(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    assert!(
        outcome.interrupted && outcome.answer.is_empty(),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    let outcome = agent.turn("and now?", &mut ui).await.unwrap();
    assert_eq!(outcome.answer, "Here now.");
    // Both prompts are in the context the model got; the dropped answer is not.
    let messages = w.request(1);
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["take your time", "and now?"], "{messages:#?}");
    assert!(!messages.iter().any(|m| m["content"] == "Too late."));
    w.check();
    finish(agent).await;
}

/// The pane's output, shared with the thread that plays the user.
#[derive(Clone, Default)]
struct SharedOut(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn wait_for(&self, what: &str) {
        let began = Instant::now();
        while !self.text().contains(what) {
            assert!(
                began.elapsed() < Duration::from_secs(20),
                "{what:?} never shown:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[tokio::test]
async fn ctrl_c_at_an_approval_question_ends_the_turn() {
    use std::io::Write;
    let script = vec![
        OllamaTurn::ToolCalls {
            text: String::new(),
            calls: vec![
                ("shell".into(), json!({"command": "echo ran > ran.txt"})),
                (
                    "write_file".into(),
                    json!({"path": "written.txt", "content": "x"}),
                ),
            ],
            with_ids: true,
        },
        OllamaTurn::text("Nothing was run."),
    ];
    let Some(mut w) = World::new("interrupt_approval", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let interrupts = std::sync::Arc::new(volee_agent::Interrupts::new());
    let (input, mut typing) = std::io::pipe().unwrap();
    let out = SharedOut::default();
    let mut pane = volee_agent::Pane::new(
        volee_agent::InterruptibleInput::new(input, interrupts.clone()).unwrap(),
        out.clone(),
        volee_agent::ApprovalMode::Ask,
    );
    // The user: a prompt, Ctrl-C at the question (the signal handler calls `interrupt`), then
    // another prompt and `\exit`.
    let user = {
        let (interrupts, out) = (interrupts.clone(), out.clone());
        std::thread::spawn(move || {
            typing.write_all(b"run it\n").unwrap();
            out.wait_for("allow shell:");
            std::thread::sleep(Duration::from_millis(200));
            assert!(interrupts.interrupt(), "no turn was running");
            out.wait_for("interrupted");
            typing.write_all(b"what happened?\n").unwrap();
            out.wait_for("Nothing was run.");
            typing.write_all(b"\\exit\n").unwrap();
        })
    };
    volee_agent::interactive(&mut agent, &mut pane, None, &interrupts)
        .await
        .unwrap();
    user.join().unwrap();
    let root = w.root();
    assert!(!root.join("ran.txt").exists() && !root.join("written.txt").exists());
    // The model learned that neither call ran.
    let ids = call_ids(&w.server);
    let messages = w.request(1);
    assert_eq!(tool_result(&messages, &ids[0]), NOT_RUN_INTERRUPTED);
    assert_eq!(tool_result(&messages, &ids[1]), NOT_RUN_INTERRUPTED);
    // The question's answer is in the transcript as what it was.
    let id = agent.session_id().to_string();
    let t = read_transcript(&w.store(), &id).unwrap();
    let answers: Vec<String> = t
        .items
        .iter()
        .filter_map(|i| match &i.item {
            TranscriptItem::Event { name, detail } if name == "approval" => {
                Some(detail["answer"].as_str().unwrap_or("").to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["interrupted"], "{}", out.text());
    assert!(agent.state().pending_tool_calls.is_empty());
    w.check();
    finish(agent).await;
}
