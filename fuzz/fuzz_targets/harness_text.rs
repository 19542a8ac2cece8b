//! Fuzz what volee reads from agents and their multiplexer: `cargo +nightly fuzz run harness_text`
//! (from `fuzz/`). Screens and titles are whatever an agent prints; status and session files are
//! written by the harness (or by anything the agent runs); `zellij subscribe` and `list-panes`
//! lines carry screen text and titles. Never panic, and a rule match's evidence stays within its
//! 200 characters (it is shown in `ls`, `explain` and notifications).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use volee_harness::RuleSet;

/// Every profile's rule sets (measured and generic), compiled once: compiling them per input
/// left the fuzzer at 13 inputs a second.
fn rule_sets() -> &'static [(&'static str, RuleSet)] {
    static SETS: OnceLock<Vec<(&'static str, RuleSet)>> = OnceLock::new();
    SETS.get_or_init(|| {
        volee_harness::profiles()
            .into_iter()
            .flat_map(|p| [(p.name, false), (p.name, true)])
            .map(|(name, measured)| (name, volee_harness::screen_rules(name, measured)))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The first line is the title, the rest the screen.
    let (title, screen) = text.split_once('\n').unwrap_or(("", &text));
    for (name, rules) in rule_sets() {
        if let Some(m) = rules.classify(screen, title) {
            assert!(m.text.chars().count() <= 200, "{}: {:?}", m.rule, m.text);
        }
        let _ = volee_harness::listing::parse_status(name, &text);
        let _ = volee_harness::listing::parse_session_id(name, &text, 4242);
    }
    let _ = volee_zellij::parse_subscribe_line(&text);
    let _ = volee_zellij::parse_panes(&text);
});
