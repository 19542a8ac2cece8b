//! The screen-rule engine: rules are data (TOML), classification is a pure function of the pane's
//! text and title, so real captures test it as fixtures (`tests/fixtures/`, run by `tests/runner.rs`).
//!
//! A rules file is a list of `[[rule]]` tables:
//!
//! ```toml
//! [[rule]]
//! id = "claude.permission-prompt"   # unique in the file; a user file replaces a rule by id
//! region = "last_lines"             # last_line | last_lines | screen | title
//! lines = 10                        # only for last_lines: how many non-empty lines, 1..=200
//! match = '''Do you want to proceed\?'''
//! not_match = '''…'''               # optional: the rule does not fire when this also matches
//! state = "needs_you"               # working | needs_you | idle | failed
//! priority = 100                    # optional, default 0: higher wins, ties keep file order
//! ```
//!
//! Regions: `last_line` is the last non-empty line; `last_lines` the last `lines` non-empty lines
//! joined with `"\n"` (each trimmed at the end, blank lines dropped, so `$` without `(?m)` is the end
//! of the last line); `screen` the whole text as given; `title` the pane title as given.
//! Patterns are Rust `regex` syntax (linear time, no look-around): a rule cannot hang or panic on
//! any input, and every pattern is compiled once, when the file is loaded.

use regex::Regex;
use serde::{Deserialize, Serialize};
use volee_protocol::{AgentState, Reason};

/// The most lines a `last_lines` rule may read.
pub const MAX_LINES: usize = 200;

/// At most this many characters of matched text are kept as evidence.
const EVIDENCE_CHARS: usize = 200;

/// Which part of the screen a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// The last non-empty line of the pane.
    LastLine,
    /// The last N non-empty lines, joined with `"\n"`.
    LastLines(usize),
    /// The whole pane text.
    Screen,
    /// The pane title.
    Title,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionKind {
    LastLine,
    LastLines,
    Screen,
    Title,
}

/// One `[[rule]]` as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub id: String,
    pub region: RegionKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<usize>,
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(default, rename = "not_match", skip_serializing_if = "Option::is_none")]
    pub not_pattern: Option<String>,
    pub state: AgentState,
    /// Why the state (`failed`: api_error, auth, usage_limit, network; `needs_you`: permission,
    /// question, login).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    #[serde(default)]
    pub priority: i32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rule: Vec<RuleSpec>,
}

/// One compiled screen rule.
#[derive(Debug, Clone)]
pub struct ScreenRule {
    pub id: String,
    pub region: Region,
    pattern: Regex,
    not_pattern: Option<Regex>,
    pub state: AgentState,
    pub reason: Option<Reason>,
    /// Higher wins; equal priorities keep file order.
    pub priority: i32,
}

impl ScreenRule {
    /// The pattern's source text.
    pub fn pattern(&self) -> &str {
        self.pattern.as_str()
    }

    /// The not-pattern's source text, if any.
    pub fn not_pattern(&self) -> Option<&str> {
        self.not_pattern.as_ref().map(Regex::as_str)
    }

    /// Does this rule fire on `text` (the text of its region)?
    fn fires(&self, text: &str) -> bool {
        self.pattern.is_match(text) && !self.not_pattern.as_ref().is_some_and(|n| n.is_match(text))
    }

    fn hit(&self, text: &str) -> RuleMatch {
        RuleMatch {
            rule: self.id.clone(),
            state: self.state,
            reason: self.reason,
            text: evidence(&self.pattern, text),
            from_title: self.region == Region::Title,
        }
    }
}

/// What matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    pub rule: String,
    pub state: AgentState,
    /// Why, when the rule says (`reason = "usage_limit"`).
    pub reason: Option<Reason>,
    /// The whole lines of the region that the match touched, at most 200 characters
    /// (agent-controlled: escape before display).
    pub text: String,
    /// The rule read the title, not the screen: the match is as old as the title.
    pub from_title: bool,
}

/// A rules file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("{origin}: {message}")]
    Profile { origin: String, message: String },
    #[error("rules file {origin} is not valid TOML")]
    Toml {
        origin: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("rule {id} in {origin} has an invalid pattern")]
    Pattern {
        origin: String,
        id: String,
        #[source]
        source: regex::Error,
    },
    #[error("rule {id} in {origin} says {state}: a screen rule may only say working, needs_you, idle or failed")]
    State {
        origin: String,
        id: String,
        state: AgentState,
    },
    #[error("rule {id} in {origin}: {problem}")]
    Lines {
        origin: String,
        id: String,
        problem: &'static str,
    },
    #[error("rule {id} in {origin}: reason {reason} is not one for {state} (failed: exit_nonzero, killed, api_error, auth, usage_limit, network, crashed_silently; needs_you: permission, question, login, budget, bell)")]
    Reason {
        origin: String,
        id: String,
        reason: Reason,
        state: AgentState,
    },
    #[error("rule {id} appears twice in {origin}")]
    DuplicateId { origin: String, id: String },
}

impl RulesError {
    /// The rule it is about, when it is about one.
    pub fn rule_id(&self) -> Option<&str> {
        match self {
            RulesError::Pattern { id, .. }
            | RulesError::State { id, .. }
            | RulesError::Lines { id, .. }
            | RulesError::Reason { id, .. }
            | RulesError::DuplicateId { id, .. } => Some(id),
            RulesError::Toml { .. } | RulesError::Profile { .. } => None,
        }
    }
}

/// A set of rules, ordered by priority (highest first, ties in file order); the first that fires
/// wins.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<ScreenRule>,
    /// The largest N any `last_line`/`last_lines` rule reads (0 when none does).
    tail_lines: usize,
}

impl RuleSet {
    /// Parse and compile rules; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<RuleSet, RulesError> {
        let file: RulesFile = toml::from_str(text).map_err(|source| RulesError::Toml {
            origin: origin.into(),
            source,
        })?;
        RuleSet::from_specs(file.rule, origin)
    }

    /// Compile rules as written (a profile file's `[[rule]]`s).
    pub fn from_specs(specs: Vec<RuleSpec>, origin: &str) -> Result<RuleSet, RulesError> {
        let mut rules: Vec<ScreenRule> = Vec::with_capacity(specs.len());
        for spec in specs {
            if rules.iter().any(|r| r.id == spec.id) {
                return Err(RulesError::DuplicateId {
                    origin: origin.into(),
                    id: spec.id,
                });
            }
            rules.push(compile(spec, origin)?);
        }
        Ok(RuleSet::ordered(rules))
    }

    /// `base` with `overrides` applied: a rule of `overrides` whose id is in `base` replaces it
    /// (taking its place among rules of equal priority), the others are added after `base`'s.
    /// For a user rules file in the config dir over the embedded rules of a harness.
    pub fn merged(base: &RuleSet, overrides: &RuleSet) -> RuleSet {
        let mut rules = base.rules.clone();
        for rule in &overrides.rules {
            match rules.iter_mut().find(|r| r.id == rule.id) {
                Some(slot) => *slot = rule.clone(),
                None => rules.push(rule.clone()),
            }
        }
        RuleSet::ordered(rules)
    }

    fn ordered(mut rules: Vec<ScreenRule>) -> RuleSet {
        // Stable: equal priorities keep their order.
        rules.sort_by_key(|r| std::cmp::Reverse(r.priority));
        let tail_lines = rules
            .iter()
            .map(|r| match r.region {
                Region::LastLine => 1,
                Region::LastLines(n) => n,
                Region::Screen | Region::Title => 0,
            })
            .max()
            .unwrap_or(0);
        RuleSet { rules, tail_lines }
    }

    /// The rules as written, in the order they are tried.
    pub fn specs(&self) -> Vec<RuleSpec> {
        self.rules
            .iter()
            .map(|r| {
                let (region, lines) = match r.region {
                    Region::LastLine => (RegionKind::LastLine, None),
                    Region::LastLines(n) => (RegionKind::LastLines, Some(n)),
                    Region::Screen => (RegionKind::Screen, None),
                    Region::Title => (RegionKind::Title, None),
                };
                RuleSpec {
                    id: r.id.clone(),
                    region,
                    lines,
                    pattern: r.pattern().to_string(),
                    not_pattern: r.not_pattern().map(str::to_string),
                    state: r.state,
                    reason: r.reason,
                    priority: r.priority,
                }
            })
            .collect()
    }

    /// The rules in the order they are tried.
    pub fn rules(&self) -> &[ScreenRule] {
        &self.rules
    }

    /// The rule with this id.
    pub fn rule(&self, id: &str) -> Option<&ScreenRule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Classify a screen: `screen` is the pane's plain text (no escape sequences), `title` its
    /// title. The highest-priority rule that fires wins; None when no rule fires.
    pub fn classify(&self, screen: &str, title: &str) -> Option<RuleMatch> {
        let mut regions = Regions::new(screen, title, self.tail_lines);
        self.rules.iter().find_map(|rule| {
            let text = regions.get(rule.region);
            rule.fires(text).then(|| rule.hit(text))
        })
    }

    /// Every rule that fires, in the order they are tried (the first is what `classify` returns).
    /// For `volee explain` and for tests.
    pub fn matches(&self, screen: &str, title: &str) -> Vec<RuleMatch> {
        let mut regions = Regions::new(screen, title, self.tail_lines);
        self.rules
            .iter()
            .filter_map(|rule| {
                let text = regions.get(rule.region);
                rule.fires(text).then(|| rule.hit(text))
            })
            .collect()
    }
}

fn compile(spec: RuleSpec, origin: &str) -> Result<ScreenRule, RulesError> {
    let RuleSpec {
        id,
        region,
        lines,
        pattern,
        not_pattern,
        state,
        reason,
        priority,
    } = spec;
    if !matches!(
        state,
        AgentState::Working | AgentState::NeedsYou | AgentState::Idle | AgentState::Failed
    ) {
        return Err(RulesError::State {
            origin: origin.into(),
            id,
            state,
        });
    }
    if let Some(r) = reason.filter(|r| r.state() != state) {
        return Err(RulesError::Reason {
            origin: origin.into(),
            id,
            reason: r,
            state,
        });
    }
    let lines_error = |id: String, problem| RulesError::Lines {
        origin: origin.into(),
        id,
        problem,
    };
    let region = match (region, lines) {
        (RegionKind::LastLines, Some(n)) if (1..=MAX_LINES).contains(&n) => Region::LastLines(n),
        (RegionKind::LastLines, _) => {
            return Err(lines_error(id, "region last_lines needs lines = 1..=200"))
        }
        (_, Some(_)) => {
            return Err(lines_error(id, "lines is only for region last_lines"));
        }
        (RegionKind::LastLine, None) => Region::LastLine,
        (RegionKind::Screen, None) => Region::Screen,
        (RegionKind::Title, None) => Region::Title,
    };
    let regex = |p: &str| {
        Regex::new(p).map_err(|source| RulesError::Pattern {
            origin: origin.into(),
            id: id.clone(),
            source,
        })
    };
    let pattern = regex(&pattern)?;
    let not_pattern = not_pattern.as_deref().map(regex).transpose()?;
    Ok(ScreenRule {
        id,
        region,
        pattern,
        not_pattern,
        state,
        reason,
        priority,
    })
}

/// The regions of one screen, cut lazily: the tail lines once, each `last_lines` join once.
struct Regions<'a> {
    screen: &'a str,
    title: &'a str,
    want: usize,
    /// The last `want` non-empty lines, trimmed at the end, top to bottom (None until needed).
    tail: Option<Vec<&'a str>>,
    joined: Vec<(usize, String)>,
}

impl<'a> Regions<'a> {
    fn new(screen: &'a str, title: &'a str, want: usize) -> Regions<'a> {
        Regions {
            screen,
            title,
            want,
            tail: None,
            joined: Vec::new(),
        }
    }

    fn tail(&mut self) -> &[&'a str] {
        let (screen, want) = (self.screen, self.want);
        self.tail.get_or_insert_with(|| tail_lines(screen, want))
    }

    fn get(&mut self, region: Region) -> &str {
        match region {
            Region::Title => self.title,
            Region::Screen => self.screen,
            Region::LastLine => self.tail().last().copied().unwrap_or(""),
            Region::LastLines(n) => {
                let index = match self.joined.iter().position(|(k, _)| *k == n) {
                    Some(i) => i,
                    None => {
                        let tail = self.tail();
                        let text = tail[tail.len().saturating_sub(n)..].join("\n");
                        self.joined.push((n, text));
                        self.joined.len() - 1
                    }
                };
                self.joined.get(index).map_or("", |(_, s)| s.as_str())
            }
        }
    }
}

/// The last `n` non-empty lines, each trimmed at the end, top to bottom.
fn tail_lines(screen: &str, n: usize) -> Vec<&str> {
    let mut tail: Vec<&str> = screen
        .lines()
        .rev()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect();
    tail.reverse();
    tail
}

/// The last line with something on it, trimmed of trailing blanks.
pub fn last_line(screen: &str) -> &str {
    screen
        .lines()
        .map(str::trim_end)
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
}

/// The last `n` non-empty lines, each trimmed of trailing blanks, joined with `"\n"` (the text a
/// `last_lines` rule with `lines = n` reads).
pub fn last_lines(screen: &str, n: usize) -> String {
    tail_lines(screen, n).join("\n")
}

/// The whole lines of `text` touched by the first match of `pattern`, bounded in length.
fn evidence(pattern: &Regex, text: &str) -> String {
    let Some(m) = pattern.find(text) else {
        return text.chars().take(EVIDENCE_CHARS).collect();
    };
    // Match bounds are char boundaries; `get` keeps this panic-free regardless.
    let before = text.get(..m.start()).unwrap_or("");
    let after = text.get(m.end()..).unwrap_or("");
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let end = after.find('\n').map_or(text.len(), |i| m.end() + i);
    text.get(start..end)
        .unwrap_or(text)
        .chars()
        .take(EVIDENCE_CHARS)
        .collect()
}

/// The built-in profile file of a harness (the TOML text, with its screen rules and the
/// comments that cite their captures), None when volee has none.
pub fn profile_text(harness: &str) -> Option<&'static str> {
    crate::file::built_in_text(harness)
}

/// The built-in profiles that have screen rules of their own (`generic` excluded).
pub fn harnesses_with_rules() -> Vec<&'static str> {
    crate::file::BUILT_IN
        .iter()
        .filter_map(|text| {
            let p = crate::file::parse(text, "built-in").ok()?;
            (p.name != "generic" && !p.rules.rules().is_empty()).then_some(p.name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(screen: &str) -> Option<String> {
        let rules = crate::profile::get("generic")
            .expect("generic")
            .rules
            .clone();
        rules.classify(screen, "").map(|m| m.rule)
    }

    #[test]
    fn known_prompts_need_you() {
        for line in [
            "Overwrite file.txt? [y/N] ",
            "Proceed (y/n)?",
            "Do you want to continue? [Y/n]",
            "Are you sure you want to continue connecting (yes/no)? ",
            "Delete 3 files? (yes/no)",
            "Apply changes? y/n",
            "Press Enter to continue...",
            "[sudo] password for user: ",
        ] {
            assert!(
                classify(&format!("some output\n{line}\n\n")).is_some(),
                "{line}"
            );
        }
    }

    #[test]
    fn ordinary_output_is_not_a_prompt() {
        for line in [
            "compiling foo v0.1.0",
            "the answer is yes/no dependent",
            "y/n",
            "$ ",
            "",
            "Password changed successfully.",
        ] {
            assert_eq!(classify(&format!("x\n{line}")), None, "{line}");
        }
    }

    #[test]
    fn only_the_last_line_counts() {
        assert_eq!(classify("Continue? [y/N]\nok, continuing\n"), None);
    }

    #[test]
    fn bad_rules_are_clear_errors() {
        let err = RuleSet::from_toml(
            "[[rule]]\nid='x'\nregion='last_line'\nmatch='('\nstate='needs_you'\n",
            "user.toml",
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("rule x in user.toml has an invalid pattern")
        );
        assert!(RuleSet::from_toml("[[rule]]\nid=1", "user.toml").is_err());
    }

    fn err(text: &str) -> String {
        RuleSet::from_toml(text, "user.toml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn states_regions_and_ids_are_checked() {
        assert_eq!(
            err("[[rule]]\nid='x'\nregion='title'\nmatch='a'\nstate='done'\n"),
            "rule x in user.toml says done: a screen rule may only say working, needs_you, idle or failed"
        );
        assert_eq!(
            err("[[rule]]\nid='x'\nregion='last_lines'\nmatch='a'\nstate='idle'\n"),
            "rule x in user.toml: region last_lines needs lines = 1..=200"
        );
        assert_eq!(
            err("[[rule]]\nid='x'\nregion='last_lines'\nlines=0\nmatch='a'\nstate='idle'\n"),
            "rule x in user.toml: region last_lines needs lines = 1..=200"
        );
        assert_eq!(
            err("[[rule]]\nid='x'\nregion='screen'\nlines=3\nmatch='a'\nstate='idle'\n"),
            "rule x in user.toml: lines is only for region last_lines"
        );
        assert_eq!(
            err("[[rule]]\nid='x'\nregion='screen'\nmatch='a'\nstate='idle'\n[[rule]]\nid='x'\nregion='title'\nmatch='b'\nstate='idle'\n"),
            "rule x appears twice in user.toml"
        );
        assert!(
            err("[[rule]]\nid='x'\nregion='screen'\nmatch='a'\nstate='idle'\ncolour='red'\n")
                .contains("not valid TOML")
        );
    }

    const PRIORITIES: &str = r#"
[[rule]]
id = "low"
region = "screen"
match = "a"
state = "idle"

[[rule]]
id = "first-tie"
region = "screen"
match = "a"
state = "working"
priority = 5

[[rule]]
id = "second-tie"
region = "screen"
match = "a"
state = "failed"
priority = 5

[[rule]]
id = "high"
region = "title"
match = "^T"
state = "needs_you"
priority = 9
"#;

    #[test]
    fn higher_priority_wins_and_ties_keep_file_order() {
        let set = RuleSet::from_toml(PRIORITIES, "p.toml").expect("compile");
        let ids: Vec<&str> = set.rules().iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["high", "first-tie", "second-tie", "low"]);
        assert_eq!(
            set.classify("a", "T").map(|m| m.rule).as_deref(),
            Some("high")
        );
        assert_eq!(
            set.classify("a", "x").map(|m| m.rule).as_deref(),
            Some("first-tie")
        );
        let all: Vec<String> = set.matches("a", "x").into_iter().map(|m| m.rule).collect();
        assert_eq!(all, ["first-tie", "second-tie", "low"]);
    }

    #[test]
    fn merged_replaces_by_id_and_adds_new_ids() {
        let base = RuleSet::from_toml(PRIORITIES, "p.toml").expect("compile");
        let user = RuleSet::from_toml(
            r#"
[[rule]]
id = "first-tie"
region = "screen"
match = "zzz"
state = "working"
priority = 5

[[rule]]
id = "mine"
region = "screen"
match = "a"
state = "needs_you"
priority = 5
"#,
            "user.toml",
        )
        .expect("compile");
        let merged = RuleSet::merged(&base, &user);
        let ids: Vec<&str> = merged.rules().iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["high", "first-tie", "second-tie", "mine", "low"]);
        assert_eq!(
            merged.rule("first-tie").map(ScreenRule::pattern),
            Some("zzz")
        );
        assert_eq!(
            merged.classify("a", "").map(|m| m.rule).as_deref(),
            Some("second-tie")
        );
        // The inputs are untouched.
        assert_eq!(base.rule("first-tie").map(ScreenRule::pattern), Some("a"));
    }

    #[test]
    fn last_lines_skips_blank_lines_and_trims() {
        let screen = "one\n\ntwo  \n   \nthree\t\n\n\n";
        assert_eq!(last_lines(screen, 2), "two\nthree");
        assert_eq!(last_lines(screen, 9), "one\ntwo\nthree");
        assert_eq!(last_lines("", 3), "");
        assert_eq!(last_line(screen), "three");
        let set = RuleSet::from_toml(
            "[[rule]]\nid='two'\nregion='last_lines'\nlines=2\nmatch='^two\\nthree$'\nstate='idle'\n\
             [[rule]]\nid='three'\nregion='last_lines'\nlines=3\nmatch='^one\\n'\nstate='working'\npriority=1\n",
            "t.toml",
        )
        .expect("compile");
        assert_eq!(
            set.classify(screen, "").map(|m| m.rule).as_deref(),
            Some("three")
        );
        assert_eq!(set.matches(screen, "").len(), 2);
    }

    #[test]
    fn evidence_is_the_matched_lines() {
        let set = RuleSet::from_toml(
            "[[rule]]\nid='q'\nregion='screen'\nmatch='proceed\\?'\nstate='needs_you'\n",
            "t.toml",
        )
        .expect("compile");
        let m = set.classify("noise\n Do you want to proceed?\n 1. Yes\n", "");
        assert_eq!(
            m.map(|m| m.text).as_deref(),
            Some(" Do you want to proceed?")
        );
        let long = format!("{}proceed?", "x".repeat(500));
        let m = set.classify(&long, "");
        assert_eq!(m.map(|m| m.text.chars().count()), Some(EVIDENCE_CHARS));
    }

    #[test]
    fn every_harness_with_rules_has_them_in_its_profile() {
        for name in harnesses_with_rules().iter().chain(&["generic"]) {
            let p = crate::profile::get(name).expect("profile");
            assert!(!p.rules.rules().is_empty(), "{name}");
        }
        // Cursor (never measured) and volee's own agent have none: the generic ones apply.
        for name in ["cursor", "volee"] {
            assert!(crate::profile::get(name).unwrap().rules.rules().is_empty());
        }
    }
}
