//! The generic profile's rules (used when a harness runs outside its measured versions) must not
//! invent a prompt on any harness screen that is not one.

use volee_protocol::AgentState;

use crate::support::{all_rules, load_fixtures, state_name};

#[test]
fn generic_rules_never_say_needs_you_on_a_harness_screen_without_a_prompt() {
    let rules = all_rules();
    let generic = &rules["generic"];
    let mut wrong = Vec::new();
    let mut idle = 0;
    for f in load_fixtures() {
        if f.state == Some(AgentState::NeedsYou) {
            continue;
        }
        if f.state == Some(AgentState::Idle) {
            idle += 1;
        }
        if let Some(m) = generic.classify(&f.screen, &f.title) {
            if m.state == AgentState::NeedsYou {
                wrong.push(format!(
                    "{} ({}): {} on {:?}",
                    f.file,
                    state_name(f.state),
                    m.rule,
                    m.text
                ));
            }
        }
    }
    assert!(idle > 10, "too few idle fixtures: {idle}");
    assert!(
        wrong.is_empty(),
        "generic rules invent prompts:\n{}",
        wrong.join("\n")
    );
}
