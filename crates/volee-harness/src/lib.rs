//! Harness profiles: how volee launches, interrupts and reads the state of each harness.
//!
//! This first slice holds the **generic profile** (any command line) and the screen-rule engine:
//! rules are data (TOML embedded in the binary, see `rules/`), each with an id, a screen region, a
//! pattern, an optional not-pattern and the state it means. Classification is a pure function over
//! the pane's text, so fixtures of real screens test it.

pub mod rules;

pub use rules::{last_line, Region, RuleMatch, RuleSet, RulesError, ScreenRule};

/// The generic profile's rules, embedded at build time.
pub const GENERIC_RULES: &str = include_str!("../rules/generic.toml");

/// A harness profile (this slice: what the generic profile needs).
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: &'static str,
    /// tmux key that interrupts the current turn without ending the agent.
    pub interrupt_key: &'static str,
    pub rules: RuleSet,
}

/// The profile for any command line.
pub fn generic() -> Result<Profile, RulesError> {
    Ok(Profile {
        name: "generic",
        interrupt_key: "C-c",
        rules: RuleSet::from_toml(GENERIC_RULES, "rules/generic.toml")?,
    })
}

