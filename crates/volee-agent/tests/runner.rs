//! volee-agent with real parts: the scripted Ollama stand-in (`volee-test-support`, Ollama's
//! exact streaming format, every request captured and checked) and a real Docker engine.
//!
//! Without Docker these tests print SKIPPED, and fail when `CI` is set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runner/support.rs"]
mod support;

#[path = "runner/turns.rs"]
mod turns;

#[path = "runner/sandbox.rs"]
mod sandbox;

#[path = "runner/compaction.rs"]
mod compaction;

#[path = "runner/interrupt.rs"]
mod interrupt;

#[path = "runner/approvals.rs"]
mod approvals;
