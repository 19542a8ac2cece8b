//! Harness profiles: how volee launches, interrupts and reads the state of each harness.
//!
//! - [`profile`]: one value per harness (launch, resume, processes, session, states, join, input
//!   rules, measured versions) and the generic profile for any command line;
//! - [`rules`]: screen rules as data (TOML embedded in the binary, see `rules/`), each with an id,
//!   a screen region, a pattern, an optional not-pattern and the state it means; classification is
//!   a pure function over the pane's text, so fixtures of real screens test it;
//! - [`hooks`]: what each harness's hook events mean, as data;
//! - [`input`]: text made inert before it is typed into an agent.

pub mod hooks;
pub mod input;
pub mod instrument;
pub mod listing;
pub mod profile;
pub mod rules;

pub use hooks::{hook_events, hook_meaning, HookMeaning};
pub use input::sanitize_input;
pub use profile::{
    profile, profiles, AppServer, History, HistoryKind, HttpServer, InputRules, Instrumentation,
    ListingSource, Profile, PromptStyle, Source, UsageSource,
};

pub use rules::{
    last_line, last_lines, rules_for, Region, RuleMatch, RuleSet, RulesError, ScreenRule,
    HARNESSES_WITH_RULES,
};

/// The generic profile's rules, embedded at build time.
pub const GENERIC_RULES: &str = include_str!("../rules/generic.toml");

/// The embedded screen rules of a harness (the TOML text), None when it has none.
pub fn embedded_rules(harness: &str) -> Option<&'static str> {
    rules::rules_for(harness)
}

/// The compiled screen rules volee uses for a harness: its own when the installed version is the
/// measured one, otherwise the generic rules (ARCHITECTURE.md section 4, `profile_fit`).
pub fn screen_rules(harness: &str, measured: bool) -> Result<RuleSet, RulesError> {
    let name = if measured { harness } else { "generic" };
    match embedded_rules(name) {
        Some(text) => RuleSet::from_toml(text, &format!("rules/{name}.toml")),
        None => RuleSet::from_toml(GENERIC_RULES, "rules/generic.toml"),
    }
}
