//! volee-ollama against the scripted Ollama stand-in (`volee_test_support::ollama_server`): the
//! wire format, tool call round trips, errors and their hints, retries, usage.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runner/chat.rs"]
mod chat;
