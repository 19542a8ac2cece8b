//! A user rules file over the embedded ones: same id replaces, new ids add.

use volee_harness::RuleSet;
use volee_protocol::AgentState;

use crate::support::load_fixtures;

#[test]
fn a_user_file_replaces_rules_by_id_and_adds_new_ones() {
    let base = volee_harness::get("claude").expect("claude").rules.clone();
    let user = RuleSet::from_toml(
        r#"
# Turn the idle footer off (a pattern that cannot match) and add a rule of my own.
[[rule]]
id = "claude.idle-footer"
region = "last_line"
match = '''\A\z'''
state = "idle"
priority = 20

[[rule]]
id = "user.manual-mode-idle"
region = "last_line"
match = '''manual mode on · \? for shortcuts$'''
state = "idle"
priority = 19
"#,
        "config/rules/claude.toml",
    )
    .unwrap();
    let merged = RuleSet::merged(&base, &user);
    assert_eq!(merged.rules().len(), base.rules().len() + 1);
    let done = load_fixtures()
        .into_iter()
        .find(|f| f.file == "claude/claude-36-mock-done.txt")
        .unwrap();
    let before = base.classify(&done.screen, &done.title).unwrap();
    assert_eq!(before.rule, "claude.idle-footer");
    let after = merged.classify(&done.screen, &done.title).unwrap();
    assert_eq!(
        (after.rule.as_str(), after.state),
        ("user.manual-mode-idle", AgentState::Idle)
    );
    // A prompt still wins over the user's rule.
    let prompt = load_fixtures()
        .into_iter()
        .find(|f| f.file == "claude/claude-35-mock-permission.txt")
        .unwrap();
    assert_eq!(
        merged
            .classify(&prompt.screen, &prompt.title)
            .map(|m| m.rule),
        Some("claude.permission-prompt".to_string())
    );
}
