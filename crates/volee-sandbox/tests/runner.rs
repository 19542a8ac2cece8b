//! volee-sandbox against the real Docker engine: the lockdown (no network, non-root, read-only
//! root, no capabilities, only the project directory), exec limits, removal and leftover cleanup.
//!
//! Without a daemon these tests print SKIPPED, and fail when `CI` is set. Every test's containers
//! carry its own session label and are removed by a guard even when the test panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runner/support.rs"]
mod support;

#[path = "runner/errors.rs"]
mod errors;

#[path = "runner/exec.rs"]
mod exec;

#[path = "runner/lifecycle.rs"]
mod lifecycle;

#[path = "runner/lockdown.rs"]
mod lockdown;
