use std::time::{Duration, Instant};

use serde_json::json;
use volee_ollama::{
    Message, OllamaClient, OllamaConfig, OllamaError, RetryPolicy, StreamEvent, Tool,
};
use volee_test_support::ollama_server::{FakeModel, OllamaServer, OllamaTurn};

fn fast_retries(n: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries: n,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
    }
}

fn client_for(server: &OllamaServer) -> OllamaClient {
    OllamaClient::new(OllamaConfig {
        base_url: server.base_url(),
        num_ctx: 8192,
        retry: fast_retries(2),
        ..OllamaConfig::default()
    })
    .unwrap()
}

fn shell_tool() -> Tool {
    Tool::function(
        "shell",
        "Run a command in the sandbox",
        json!({"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}),
    )
}

#[tokio::test]
async fn streams_text_as_deltas_and_reports_done() {
    let server = OllamaServer::start(vec![OllamaTurn::text(
        "The answer is forty two, as always.",
    )]);
    server.set_line_delay(Duration::from_millis(5));
    let client = client_for(&server);
    let mut events = Vec::new();
    let r = client
        .chat(&[Message::user("What is the answer?")], &[], |e| {
            events.push(e.clone())
        })
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.summary()));
    assert_eq!(r.message.content, "The answer is forty two, as always.");
    assert!(events.len() > 1, "several deltas expected: {events:?}");
    let joined: String = events
        .iter()
        .map(|e| match e {
            StreamEvent::Content(c) => c.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(joined, r.message.content);
    assert_eq!(r.done_reason.as_deref(), Some("stop"));
    assert_eq!(r.retries, 0);
    assert!(r.tool_calls().is_empty());
    assert!(r.total_duration.is_some());
    server.check_invariants().unwrap();
}

#[tokio::test]
async fn every_request_says_truncate_shift_off_and_num_ctx() {
    let server = OllamaServer::start(vec![OllamaTurn::text("ok")]);
    let client = client_for(&server);
    client
        .chat(
            &[Message::system("be brief"), Message::user("hi")],
            &[shell_tool()],
            |_| {},
        )
        .await
        .unwrap();
    let req = &server.chat_requests()[0];
    assert_eq!(req.body["truncate"], json!(false));
    assert_eq!(req.body["shift"], json!(false));
    assert_eq!(req.body["options"]["num_ctx"], json!(8192));
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["model"], json!("gemma4"));
    assert_eq!(req.body["tools"][0]["function"]["name"], json!("shell"));
    assert_eq!(
        req.body["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    server.check_invariants().unwrap();
}

#[tokio::test]
async fn tool_call_round_trip() {
    let server = OllamaServer::start(vec![
        OllamaTurn::tool("shell", json!({"cmd": "ls src"})),
        OllamaTurn::text("There are two files."),
    ]);
    let client = client_for(&server);
    let tools = [shell_tool()];
    let mut conversation = vec![Message::user("List src/")];
    let mut seen_calls = Vec::new();
    let first = client
        .chat(&conversation, &tools, |e| {
            if let StreamEvent::ToolCall(c) = e {
                seen_calls.push(c.clone());
            }
        })
        .await
        .unwrap();
    assert_eq!(first.tool_calls().len(), 1);
    assert_eq!(seen_calls, first.tool_calls());
    let call = first.tool_calls()[0].clone();
    assert_eq!(call.function.name, "shell");
    assert_eq!(call.function.arguments, json!({"cmd": "ls src"}));
    assert!(call.id.as_deref().unwrap().starts_with("call_"));
    assert!(!first.raw_tool_call_text);
    conversation.push(first.message.clone());
    conversation.push(Message::tool_result(&call, "main.rs\nlib.rs"));
    let second = client.chat(&conversation, &tools, |_| {}).await.unwrap();
    assert_eq!(second.message.content, "There are two files.");
    // The assistant message went back as Ollama sent it, the result with its id and tool name.
    let req = &server.chat_requests()[1];
    assert_eq!(
        req.body["messages"][1]["tool_calls"][0]["id"],
        json!(call.id)
    );
    assert_eq!(
        req.body["messages"][2],
        json!({"role": "tool", "content": "main.rs\nlib.rs", "tool_name": "shell", "tool_call_id": call.id})
    );
    server
        .check_invariants()
        .unwrap_or_else(|e| panic!("{e}\n{}", server.summary()));
}

#[tokio::test]
async fn tool_calls_without_ids_get_ids() {
    let server = OllamaServer::start(vec![OllamaTurn::ToolCalls {
        text: "Looking.".into(),
        calls: vec![
            ("shell".into(), json!({"cmd": "ls"})),
            ("shell".into(), json!({"cmd": "pwd"})),
        ],
        with_ids: false,
    }]);
    let r = client_for(&server)
        .chat(&[Message::user("x")], &[shell_tool()], |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.content, "Looking.");
    let ids: Vec<_> = r
        .tool_calls()
        .iter()
        .map(|c| c.id.clone().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(r.tool_calls()[1].function.index, Some(1));
}

#[tokio::test]
async fn in_stream_error_after_text_ends_the_turn_without_retry() {
    let server = OllamaServer::start(vec![
        OllamaTurn::in_stream_error("Partial answ", "model runner has unexpectedly stopped"),
        OllamaTurn::text("never played"),
    ]);
    let client = client_for(&server);
    let mut content = String::new();
    let err = client
        .chat(&[Message::user("x")], &[], |e| {
            if let StreamEvent::Content(c) = e {
                content.push_str(c);
            }
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OllamaError::InStream { message } if message.contains("unexpectedly stopped")),
        "{err:?}"
    );
    assert_eq!(content, "Partial answ");
    assert!(err.hint().unwrap().contains("ollama serve"));
    assert_eq!(server.chat_requests().len(), 1, "{}", server.summary());
    assert_eq!(client.retries_total(), 0);
}

#[tokio::test]
async fn in_stream_prompt_too_long_is_recognised() {
    let server = OllamaServer::start(vec![OllamaTurn::in_stream_error(
        "",
        "the prompt is longer than the context length currently available to the model; try a shorter prompt",
    )]);
    let err = client_for(&server)
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, OllamaError::PromptTooLong { num_ctx: 8192, .. }),
        "{err:?}"
    );
    assert!(err.hint().unwrap().contains("--max-context-tokens"));
}

#[tokio::test]
async fn model_missing_says_ollama_pull() {
    let server = OllamaServer::start_with_models(vec![OllamaTurn::text("unused")], vec![]);
    let client = client_for(&server);
    let err = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OllamaError::ModelMissing { model, .. } if model == "gemma4"),
        "{err:?}"
    );
    assert_eq!(
        err.hint().unwrap(),
        "download the model with `ollama pull gemma4`"
    );
    // The stand-in records the status after it wrote the answer: the client may have it first
    // (a whole-suite run once read 0 here).
    let status = volee_test_support::wait_until(
        "the 404 recorded",
        std::time::Duration::from_secs(5),
        || Some(server.chat_requests()[0].status).filter(|s| *s != 0),
        || format!("{:?}", server.chat_requests()[0].status),
    );
    assert_eq!(status, 404);
    // The same through /api/show, and no retry: a missing model is not transient.
    let err = client.ensure_ready(true).await.unwrap_err();
    assert!(matches!(err, OllamaError::ModelMissing { .. }), "{err:?}");
    assert_eq!(client.retries_total(), 0);
}

#[tokio::test]
async fn scripted_http_404_is_model_missing() {
    let server = OllamaServer::start(vec![OllamaTurn::http_error(
        404,
        "model \"gemma4\" not found, try pulling it first",
    )]);
    let err = client_for(&server)
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_err();
    assert!(
        err.hint().unwrap().contains("ollama pull gemma4"),
        "{err:?}"
    );
}

#[tokio::test]
async fn connection_refused_says_ollama_serve_after_counted_retries() {
    // A port nothing listens on: bind, note, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = OllamaClient::new(OllamaConfig {
        base_url: format!("http://127.0.0.1:{port}"),
        retry: fast_retries(2),
        ..OllamaConfig::default()
    })
    .unwrap();
    let started = Instant::now();
    let err = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OllamaError::GaveUp { attempts: 3, last } if matches!(**last, OllamaError::NotRunning { .. })),
        "{err:?}"
    );
    assert!(matches!(err.root(), OllamaError::NotRunning { .. }));
    let hint = err.hint().unwrap();
    assert!(hint.contains("`ollama serve`"), "{hint}");
    assert!(hint.contains(&port.to_string()), "{hint}");
    assert_eq!(client.retries_total(), 2);
    assert!(started.elapsed() < Duration::from_secs(5));
    // Without retries: the plain error.
    let once = OllamaClient::new(OllamaConfig {
        base_url: format!("http://127.0.0.1:{port}"),
        retry: RetryPolicy::none(),
        ..OllamaConfig::default()
    })
    .unwrap();
    let err = once.show().await.unwrap_err();
    assert!(matches!(err, OllamaError::NotRunning { .. }), "{err:?}");
}

#[tokio::test]
async fn transient_errors_are_retried_and_counted() {
    let server = OllamaServer::start(vec![
        OllamaTurn::http_error(
            503,
            "server busy, please try again.  maximum pending requests exceeded",
        ),
        OllamaTurn::http_error(500, "llama runner process has terminated"),
        OllamaTurn::text("third time lucky"),
    ]);
    let client = client_for(&server);
    let r = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", server.summary()));
    assert_eq!(r.message.content, "third time lucky");
    assert_eq!(r.retries, 2);
    assert_eq!(client.retries_total(), 2);
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn retries_run_out() {
    let server = OllamaServer::start(vec![
        OllamaTurn::http_error(503, "server busy"),
        OllamaTurn::http_error(503, "server busy"),
        OllamaTurn::http_error(503, "server busy"),
        OllamaTurn::text("too late"),
    ]);
    let client = client_for(&server);
    let err = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OllamaError::GaveUp { attempts: 3, last } if matches!(**last, OllamaError::Http { status: 503, .. })),
        "{err:?}"
    );
    assert!(err.hint().unwrap().contains("busy"));
    assert_eq!(client.retries_total(), 2);
    assert_eq!(server.chat_requests().len(), 3);
}

#[tokio::test]
async fn silence_is_a_stall_and_is_retried() {
    let server = OllamaServer::start(vec![
        OllamaTurn::slow(Duration::from_secs(2), OllamaTurn::text("too slow")),
        OllamaTurn::text("prompt"),
    ]);
    let client = OllamaClient::new(OllamaConfig {
        base_url: server.base_url(),
        retry: fast_retries(1),
        first_byte_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        ..OllamaConfig::default()
    })
    .unwrap();
    let started = Instant::now();
    let r = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.content, "prompt");
    assert_eq!(r.retries, 1);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_slow_model_within_the_limits_is_fine() {
    let server = OllamaServer::start(vec![OllamaTurn::slow(
        Duration::from_millis(300),
        OllamaTurn::text("one two three four five"),
    )]);
    server.set_line_delay(Duration::from_millis(50));
    let client = OllamaClient::new(OllamaConfig {
        base_url: server.base_url(),
        retry: RetryPolicy::none(),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(1),
        ..OllamaConfig::default()
    })
    .unwrap();
    let r = client
        .chat(&[Message::user("x")], &[], |_| {})
        .await
        .unwrap();
    assert_eq!(r.message.content, "one two three four five");
}

#[tokio::test]
async fn a_connection_cut_after_text_is_not_retried() {
    let server = OllamaServer::start(vec![
        OllamaTurn::Cut {
            text: "Half of it".into(),
        },
        OllamaTurn::text("never"),
    ]);
    let client = client_for(&server);
    let mut delivered = 0;
    let err = client
        .chat(&[Message::user("x")], &[], |_| delivered += 1)
        .await
        .unwrap_err();
    assert!(delivered > 0);
    assert!(
        matches!(
            err,
            OllamaError::Transport { .. } | OllamaError::Protocol { .. }
        ),
        "{err:?}"
    );
    assert_eq!(server.chat_requests().len(), 1);
}

#[tokio::test]
async fn usage_is_the_larger_of_reported_and_estimated() {
    let long_prompt = "word ".repeat(2000); // 10000 bytes → 2500 estimated tokens
    let server = OllamaServer::start(vec![
        // KV-cache reuse: Ollama reports only the new tokens.
        OllamaTurn::with_usage(Some(12), Some(3), OllamaTurn::text("short answer here")),
        // Counts left out (omitempty).
        OllamaTurn::with_usage(None, None, OllamaTurn::text("abcdefgh")),
        // Ollama counts more than the estimate (template, tokenizer).
        OllamaTurn::with_usage(Some(90_000), Some(500), OllamaTurn::text("x")),
    ]);
    let client = client_for(&server);
    let msgs = [Message::user(&long_prompt)];
    let r = client.chat(&msgs, &[], |_| {}).await.unwrap();
    assert_eq!(r.usage.reported_prompt_tokens, Some(12));
    assert_eq!(r.usage.estimated_prompt_tokens, 2500 + 4);
    assert_eq!(r.usage.prompt_tokens, 2504);
    assert_eq!(r.usage.reported_completion_tokens, Some(3));
    assert_eq!(r.usage.completion_tokens, 5); // 17 bytes → 5
    let r = client.chat(&msgs, &[], |_| {}).await.unwrap();
    assert_eq!(r.usage.reported_prompt_tokens, None);
    assert_eq!(r.usage.prompt_tokens, 2504);
    assert_eq!(r.usage.completion_tokens, 2);
    let r = client.chat(&msgs, &[], |_| {}).await.unwrap();
    assert_eq!(r.usage.prompt_tokens, 90_000);
    assert_eq!(r.usage.completion_tokens, 500);
    assert_eq!(r.usage.total(), 90_500);
}

#[tokio::test]
async fn show_reports_capabilities_and_context_length() {
    let server =
        OllamaServer::start_with_models(vec![], vec![FakeModel::gemma4(), FakeModel::gemma3()]);
    let client = client_for(&server);
    let info = client.ensure_ready(true).await.unwrap();
    assert!(info.supports_tools());
    assert!(info.supports_thinking());
    assert_eq!(info.context_length, Some(131_072));
    assert_eq!(info.fit_num_ctx(1_000_000), 131_072);
    assert_eq!(info.family.as_deref(), Some("gemma4"));
    assert_eq!(
        client.version().await.unwrap(),
        volee_test_support::ollama_server::VERSION
    );
    let mut names = client.list_models().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["gemma3:4b", "gemma4:latest"]);

    let g3 = OllamaClient::new(OllamaConfig {
        base_url: server.base_url(),
        model: "gemma3:4b".into(),
        ..OllamaConfig::default()
    })
    .unwrap();
    let err = g3.ensure_ready(true).await.unwrap_err();
    assert!(matches!(err, OllamaError::NoToolSupport { .. }), "{err:?}");
    assert!(err.hint().unwrap().contains("ollama pull gemma4"));
    assert!(g3.ensure_ready(false).await.is_ok());
}

#[tokio::test]
async fn tools_refused_by_the_server_say_so() {
    let server = OllamaServer::start(vec![OllamaTurn::http_error(
        400,
        "registry.ollama.ai/library/gemma3:4b does not support tools",
    )]);
    let err = client_for(&server)
        .chat(&[Message::user("x")], &[shell_tool()], |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, OllamaError::NoToolSupport { .. }), "{err:?}");
}

#[tokio::test]
async fn stand_in_answers_unstreamed_requests_and_flags_broken_promises() {
    let server = OllamaServer::start(vec![OllamaTurn::tool("shell", json!({"cmd": "ls"}))]);
    // A request that breaks volee's promises: no truncate/shift, no num_ctx, not streamed.
    let body = reqwest::Client::new()
        .post(format!("{}/api/chat", server.base_url()))
        .json(&json!({"model": "gemma4", "messages": [{"role": "user", "content": "x"}], "stream": false}))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let (msg, done) = volee_ollama::parse_whole(&body, "gemma4", "u", 1).unwrap();
    assert_eq!(msg.tool_calls[0].function.name, "shell");
    assert_eq!(done.done_reason.as_deref(), Some("stop"));
    let err = server.check_invariants().unwrap_err();
    assert!(err.contains("truncate"), "{err}");
}
