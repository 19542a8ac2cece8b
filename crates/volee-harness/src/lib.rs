//! Harness profiles: how volee launches, interrupts and reads the state of each harness.
//!
//! - [`profile`]: one value per harness (launch, resume, processes, session, states, join, input
//!   rules, measured versions) and the generic profile for any command line, read from
//!   [`file`]s: one TOML file per harness (`profiles/`, embedded; a user's in
//!   `$CONFIG/profiles` overrides one by name or adds a harness);
//! - [`rules`]: screen rules as data (each profile file's `[[rule]]`s), each with an id,
//!   a screen region, a pattern, an optional not-pattern and the state it means; classification is
//!   a pure function over the pane's text, so fixtures of real screens test it;
//! - [`hooks`]: what each harness's hook events mean (each profile file's `[[hook]]`s);
//! - [`input`]: text made inert before it is typed into an agent.

pub mod file;
pub mod herdr;
pub mod hooks;
pub mod input;
pub mod instrument;
pub mod listing;
pub mod profile;
pub mod rules;

pub use file::{use_profiles_dir, Problem, ProfileFile};
pub use hooks::{hook_events, hook_meaning, HookMeaning};
pub use input::sanitize_input;
pub use profile::{
    get, profile, profiles, AppServer, History, HistoryKind, HttpServer, InputRules,
    Instrumentation, ListingSource, Profile, PromptStyle, Source, UsageSource,
};

pub use rules::{
    harnesses_with_rules, last_line, last_lines, profile_text, Region, RuleMatch, RuleSet,
    RulesError, ScreenRule,
};

/// The screen rules volee uses for a harness: its profile's when the installed version is the
/// measured one, otherwise the generic profile's (ARCHITECTURE.md section 4, `profile_fit`).
pub fn screen_rules(harness: &str, measured: bool) -> RuleSet {
    let name = if measured { harness } else { "generic" };
    profile::get(name)
        .or_else(|| profile::get("generic"))
        .map(|p| p.rules.clone())
        .unwrap_or_default()
}
