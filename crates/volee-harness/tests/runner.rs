//! Screen rules against real captures: every fixture in `tests/fixtures/` is classified by its
//! harness's embedded rules and checked against `tests/fixtures/expected.toml`.
//!
//! `cargo test -p volee-harness --test runner -- --nocapture` prints the per-harness accuracy and
//! the cost of one classification.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "runner/support.rs"]
mod support;

#[path = "runner/accuracy.rs"]
mod accuracy;
#[path = "runner/coverage.rs"]
mod coverage;
#[path = "runner/generic.rs"]
mod generic;
#[path = "runner/merge.rs"]
mod merge;
#[path = "runner/model.rs"]
mod model;
#[path = "runner/robustness.rs"]
mod robustness;
#[path = "runner/timing.rs"]
mod timing;
