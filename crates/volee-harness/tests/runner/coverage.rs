//! No dead rules, no stray fixtures, every rules file says what it was measured on.

use std::collections::BTreeSet;

use volee_harness::rules::{harnesses_with_rules, profile_text};

use crate::support::{all_rules, fixtures_dir, load_fixtures};

#[test]
fn every_rule_fires_on_at_least_one_fixture() {
    let rules = all_rules();
    let fixtures = load_fixtures();
    let mut dead = Vec::new();
    let mut never_wins = Vec::new();
    for harness in harnesses_with_rules() {
        let set = &rules[harness];
        let mine: Vec<_> = fixtures.iter().filter(|f| f.harness == harness).collect();
        for rule in set.rules() {
            let fires = mine.iter().any(|f| {
                set.matches(&f.screen, &f.title)
                    .iter()
                    .any(|m| m.rule == rule.id)
            });
            if !fires {
                dead.push(rule.id.clone());
            }
            let wins = mine.iter().any(|f| {
                set.classify(&f.screen, &f.title)
                    .is_some_and(|m| m.rule == rule.id)
            });
            if !wins {
                never_wins.push(rule.id.clone());
            }
        }
    }
    // Rules that always lose to a stronger one on the captures (a title that agrees with the
    // screen) are backups for a screen the rules do not know; they must still fire somewhere.
    println!("rules that fire but never decide a fixture: {never_wins:?}");
    assert!(dead.is_empty(), "rules that fire on no fixture: {dead:?}");
}

#[test]
fn every_fixture_file_is_in_the_manifest() {
    let listed: BTreeSet<String> = load_fixtures().into_iter().map(|f| f.file).collect();
    let dir = fixtures_dir();
    let mut on_disk = BTreeSet::new();
    for harness in std::fs::read_dir(&dir).expect("fixtures dir") {
        let harness = harness.expect("entry").path();
        if !harness.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&harness).expect("harness dir") {
            let path = file.expect("entry").path();
            let rel = path.strip_prefix(&dir).expect("under fixtures");
            on_disk.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    let missing: Vec<_> = on_disk.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "fixtures not in expected.toml: {missing:?}"
    );
}

#[test]
fn every_rules_file_names_its_harness_version_first() {
    for (harness, version) in [
        ("claude", "2.1.332"),
        ("codex", "0.171.0"),
        ("gemini", "0.61.0"),
        ("qwen", "0.24.4"),
        ("grok", "1.0.41"),
        ("copilot", "1.0.102"),
        ("opencode", "1.18.33"),
        ("aider", "0.86.2"),
        ("amp", "0.0.1790142911"),
    ] {
        let text = profile_text(harness).expect("embedded");
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with("# ") && first.contains("measured on") && text.contains(version),
            "profiles/{harness}.toml must start with a comment naming the measured versions"
        );
    }
}

#[test]
fn every_rule_cites_a_capture_or_the_reference() {
    for harness in harnesses_with_rules() {
        let text = profile_text(harness).expect("embedded");
        // The comment block right above each [[rule]].
        let mut comment = String::new();
        for line in text.lines() {
            if let Some(c) = line.strip_prefix('#') {
                comment.push_str(c);
                comment.push('\n');
            } else if line.trim() == "[[rule]]" {
                assert!(
                    comment.contains(&format!("{harness}-")) || comment.contains("grok-build-"),
                    "profiles/{harness}.toml: a rule without a capture cited above it:\n{comment}"
                );
                comment.clear();
            } else if line.trim().is_empty() {
                comment.clear();
            }
        }
    }
}

#[test]
fn no_pattern_uses_a_unicode_word_boundary() {
    // A Unicode `\b` makes the regex crate leave its DFA on non-ASCII text (every TUI screen):
    // claude.permission-prompt cost 27 µs with one, 1 µs without. `(?-u:\b)` is fine.
    for (harness, set) in all_rules() {
        for rule in set.rules() {
            for p in std::iter::once(rule.pattern()).chain(rule.not_pattern()) {
                let stripped = p.replace("(?-u:\\b)", "").replace("\\\\", "");
                assert!(
                    !stripped.contains("\\b") && !stripped.contains("\\B"),
                    "{harness}: {} uses \\b; use (?-u:\\b) or an explicit class",
                    rule.id
                );
            }
        }
    }
}
