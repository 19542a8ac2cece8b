//! Compaction against the Ollama stand-in (with scripted token counts): it fires at the
//! threshold and not below, keeps the system prompt and the complete current turn, stores the
//! summary as a user message and logs it; a non-shrinking summary changes nothing, and past the
//! hard limit the turn stops instead of dropping history.

use serde_json::json;
use volee_agent::{AgentError, SUMMARY_ACK, SUMMARY_PREFIX, SYSTEM_PROMPT};
use volee_store::{read_transcript, TranscriptItem};
use volee_test_support::ollama_server::OllamaTurn;

use crate::support::{finish, ScriptedUi, World};

fn with_prompt_tokens(n: u64, turn: OllamaTurn) -> OllamaTurn {
    OllamaTurn::with_usage(Some(n), Some(1), turn)
}

fn compactions(w: &World, id: &str) -> Vec<serde_json::Value> {
    let text =
        std::fs::read_to_string(w.store().session_dir(id).join("compactions.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn automatic_compaction_fires_at_the_threshold_and_keeps_the_current_turn() {
    // 80 % of 4000 tokens: 3200 (the summary request fits above it).
    let trigger = 3200;
    let script = vec![
        with_prompt_tokens(trigger - 200, OllamaTurn::text("First answer.")),
        with_prompt_tokens(
            trigger + 50,
            OllamaTurn::tool("todo", json!({"action": "add", "text": "finish"})),
        ),
        OllamaTurn::text("SUMMARY: the user asked a first question and got an answer."),
        OllamaTurn::text("Second answer."),
    ];
    let Some(mut w) = World::new("auto_compaction", script) else {
        return;
    };
    let mut agent = w.agent(4000).await;
    assert_eq!(agent.compaction_trigger(), trigger);
    let mut ui = ScriptedUi::default();
    agent.turn("first question", &mut ui).await.unwrap();
    let below = agent.context_tokens();
    assert!(below < trigger, "{below}");
    let outcome = agent.turn("second question", &mut ui).await.unwrap();
    assert_eq!(outcome.compactions, 1);
    assert_eq!(outcome.answer, "Second answer.");
    let reqs = w.server.chat_requests();
    assert_eq!(reqs.len(), 4, "{}", w.server.summary());
    // #1, below the threshold, was a normal request: nothing compacted before it.
    assert!(reqs[1].body.get("tools").is_some());
    // #2 is the summary request: no tools, the same num_ctx, only the turns before the current.
    let summary_req = &reqs[2];
    assert!(summary_req.body.get("tools").is_none());
    assert_eq!(summary_req.body["options"]["num_ctx"], json!(4000));
    // The summary is capped at a tenth of the budget; normal turns are not.
    assert_eq!(summary_req.body["options"]["num_predict"], json!(400));
    assert!(reqs[1].body["options"].get("num_predict").is_none());
    let m = summary_req.messages();
    assert_eq!(m.len(), 2, "{m:#?}");
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[1]["role"], "user");
    let quoted = m[1]["content"].as_str().unwrap();
    assert!(
        quoted.contains("[user]\nfirst question\n\n[assistant]\nFirst answer."),
        "{quoted}"
    );
    assert!(!quoted.contains("second question") && !quoted.contains(SYSTEM_PROMPT));
    // #3: the system prompt, the summary as a user message, the acknowledgement, and the whole
    // current turn (the prompt, the tool call and its result).
    let m = reqs[3].messages();
    assert_eq!(m.len(), 6, "{m:#?}");
    assert_eq!(m[0]["content"], SYSTEM_PROMPT);
    assert_eq!(m[1]["role"], "user");
    let summary = m[1]["content"].as_str().unwrap();
    assert!(summary.starts_with(SUMMARY_PREFIX), "{summary}");
    assert!(summary.contains("SUMMARY: the user asked"), "{summary}");
    assert_eq!(m[2]["content"], SUMMARY_ACK);
    assert_eq!(m[3]["content"], "second question");
    assert_eq!(m[4]["tool_calls"][0]["function"]["name"], "todo");
    assert_eq!(m[5]["role"], "tool");
    w.check();

    let id = agent.session_id().to_string();
    assert_eq!(agent.state().compaction_count, 1);
    assert!(agent.context_tokens() < trigger);
    finish(agent).await;
    // Logged, and the transcript keeps every original.
    let logged = compactions(&w, &id);
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0]["replaced_messages"], json!(2));
    let before = logged[0]["tokens_before"].as_u64().unwrap();
    let after = logged[0]["tokens_after"].as_u64().unwrap();
    assert!(before >= trigger && after < before, "{before} → {after}");
    let t = read_transcript(&w.store(), &id).unwrap();
    let texts: Vec<String> = t
        .items
        .iter()
        .filter_map(|l| match &l.item {
            TranscriptItem::Message { message } => Some(message.content.clone()),
            _ => None,
        })
        .collect();
    for original in ["first question", "First answer.", "second question"] {
        assert!(
            texts.iter().any(|t| t == original),
            "{original} lost: {texts:?}"
        );
    }
    assert!(t
        .items
        .iter()
        .any(|l| matches!(l.item, TranscriptItem::Compaction { .. })));
}

#[tokio::test]
async fn a_non_shrinking_summary_changes_nothing_and_a_full_context_stops_the_turn() {
    let (trigger, hard) = (3200, 3600);
    // Summaries are capped (400 tokens here), so one can only fail to shrink the context when
    // what it replaces is smaller: a short first turn, then a long current one.
    let script = vec![
        OllamaTurn::text("ok"),
        // The summary (250 tokens) is longer than the turn it replaces.
        OllamaTurn::Text("word ".repeat(200)),
        with_prompt_tokens(hard + 10, OllamaTurn::text("second answer")),
        // An empty summary.
        OllamaTurn::text(""),
    ];
    let Some(mut w) = World::new("non_shrinking", script) else {
        return;
    };
    let mut agent = w.agent(4000).await;
    assert_eq!(
        (agent.compaction_trigger(), agent.hard_limit()),
        (trigger, hard)
    );
    let mut ui = ScriptedUi::default();
    agent.turn("first", &mut ui).await.unwrap();
    // Over the trigger, under the hard limit: the summary does not shrink the context, so the
    // request goes out with all of it.
    let base = agent.context_tokens();
    let long = "x".repeat(((trigger - base + 50) * 4) as usize);
    agent.turn(&long, &mut ui).await.unwrap();
    let reqs = w.server.chat_requests();
    assert_eq!(reqs.len(), 3, "{}", w.server.summary());
    assert!(
        reqs[1].body.get("tools").is_none(),
        "#1 is the summary request"
    );
    let contents: Vec<&str> = reqs[2]
        .messages()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents[1..], ["first", "ok", long.as_str()]);
    assert!(
        ui.notices.iter().any(|n| n.contains("unchanged")),
        "{:?}",
        ui.notices
    );
    // Over the hard limit, and the summary fails (empty): the turn stops, nothing is dropped.
    let err = agent.turn("third", &mut ui).await.unwrap_err();
    assert!(matches!(err, AgentError::ContextFull { .. }), "{err}");
    assert!(err.to_string().contains("nothing was dropped"), "{err}");
    assert!(err.hint().unwrap().contains("--max-context-tokens"));
    assert_eq!(
        w.server.chat_requests().len(),
        4,
        "no request after the failed summary"
    );
    let contents: Vec<String> = agent
        .state()
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(
        contents[1..],
        ["first", "ok", long.as_str(), "second answer", "third"]
    );
    assert_eq!(agent.state().compaction_count, 0);
    let id = agent.session_id().to_string();
    finish(agent).await;
    assert!(compactions(&w, &id).is_empty());
    let t = read_transcript(&w.store(), &id).unwrap();
    let failed = t
        .items
        .iter()
        .filter(|l| matches!(&l.item, TranscriptItem::Event { name, .. } if name == "compaction_failed"))
        .count();
    assert_eq!(failed, 2);
    w.check();
}

#[tokio::test]
async fn manual_compaction_summarizes_all_but_the_last_turn() {
    let long_answer = format!("one: {}", "details ".repeat(300));
    let script = vec![
        OllamaTurn::Text(long_answer),
        OllamaTurn::text("two"),
        OllamaTurn::text("Summary of turn one."),
        OllamaTurn::text("three"),
    ];
    let Some(mut w) = World::new("manual_compaction", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    let mut ui = ScriptedUi::default();
    // Nothing before the only turn: nothing to do, and no request.
    agent.turn("q1", &mut ui).await.unwrap();
    let r = agent.compact(&mut ui).await.unwrap();
    assert!(
        matches!(r, volee_agent::CompactOutcome::Unchanged { .. }),
        "{r:?}"
    );
    agent.turn("q2", &mut ui).await.unwrap();
    let r = agent.compact(&mut ui).await.unwrap();
    assert!(
        matches!(
            r,
            volee_agent::CompactOutcome::Compacted { replaced: 2, .. }
        ),
        "{r:?}"
    );
    agent.turn("q3", &mut ui).await.unwrap();
    let contents: Vec<String> = w
        .request(3)
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(contents.len(), 6, "{contents:?}");
    assert!(
        contents[1].starts_with(SUMMARY_PREFIX) && contents[1].ends_with("Summary of turn one.")
    );
    assert_eq!(contents[3..], ["q2", "two", "q3"]);
    // The summary replaced the long first turn; the transcript still has it.
    let id = agent.session_id().to_string();
    let t = read_transcript(&w.store(), &id).unwrap();
    assert!(t.items.iter().any(|l| matches!(&l.item,
        TranscriptItem::Message { message } if message.content.starts_with("one: details"))));
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn a_summary_cut_by_its_cap_says_so() {
    // 8192 tokens of budget: summaries of at most 819 tokens (the stand-in counts one per 4
    // bytes and cuts a longer answer there, with `done_reason: length`, as Ollama does).
    let rambling = format!("Summary: {}", "and then ".repeat(1000));
    let script = vec![
        OllamaTurn::Text(format!("one: {}", "details ".repeat(700))),
        OllamaTurn::text("two"),
        OllamaTurn::Text(rambling),
        OllamaTurn::text("three"),
    ];
    let Some(mut w) = World::new("capped_summary", script) else {
        return;
    };
    let mut agent = w.agent(8192).await;
    assert_eq!(agent.summary_answer_limit(), 819);
    let mut ui = ScriptedUi::default();
    agent.turn("q1", &mut ui).await.unwrap();
    agent.turn("q2", &mut ui).await.unwrap();
    let r = agent.compact(&mut ui).await.unwrap();
    assert!(
        matches!(r, volee_agent::CompactOutcome::Compacted { .. }),
        "{r:?}"
    );
    agent.turn("q3", &mut ui).await.unwrap();
    let summary = w.request(3)[1]["content"].as_str().unwrap().to_string();
    assert!(summary.starts_with(SUMMARY_PREFIX), "{summary}");
    assert!(
        summary.ends_with("[volee: the summary was cut at 819 tokens]"),
        "{summary}"
    );
    assert!(
        summary.len() < SUMMARY_PREFIX.len() + 819 * 4 + 100,
        "{}",
        summary.len()
    );
    w.check();
    finish(agent).await;
}

#[tokio::test]
async fn a_turn_too_large_for_the_window_stops_without_being_sent() {
    let script = vec![
        OllamaTurn::Text(format!("a long answer: {}", "words ".repeat(400))),
        OllamaTurn::text("S"),
    ];
    let Some(mut w) = World::new("too_large", script) else {
        return;
    };
    let mut agent = w.agent(4000).await;
    let mut ui = ScriptedUi::default();
    agent.turn("q1", &mut ui).await.unwrap();
    // The prompt alone exceeds the window: the earlier turn is summarized (it shrinks), and the
    // turn still stops, with everything kept.
    let huge = "x".repeat(20_000);
    let err = agent.turn(&huge, &mut ui).await.unwrap_err();
    match &err {
        AgentError::ContextFull { why, .. } => {
            assert!(why.contains("current turn alone"), "{why}")
        }
        other => panic!("{other}"),
    }
    assert_eq!(w.server.chat_requests().len(), 2, "{}", w.server.summary());
    assert_eq!(agent.state().compaction_count, 1);
    assert_eq!(agent.state().messages.last().unwrap().content, huge);
    w.check();
    finish(agent).await;
}
