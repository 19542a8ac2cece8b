//! The screen-rule engine: rules are data (TOML), classification is a pure function of the pane's
//! text and title, so real captures test it as fixtures.

use regex::Regex;
use serde::Deserialize;
use volee_protocol::AgentState;


/// Which part of the screen a rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// The last non-empty line of the pane.
    LastLine,
    /// The pane title.
    Title,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    id: String,
    region: Region,
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default, rename = "not_match")]
    not_pattern: Option<String>,
    state: AgentState,
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
}

/// What matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    pub rule: String,
    pub state: AgentState,
    /// The text the rule read (agent-controlled: escape before display).
    pub text: String,
}

/// A rules file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
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
}

/// An ordered set of rules; the first that matches wins.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<ScreenRule>,
}

impl RuleSet {
    /// Parse and compile rules; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<RuleSet, RulesError> {
        let file: RulesFile = toml::from_str(text).map_err(|source| RulesError::Toml {
            origin: origin.into(),
            source,
        })?;
        let compile = |id: &str, p: &str| {
            Regex::new(p).map_err(|source| RulesError::Pattern {
                origin: origin.into(),
                id: id.into(),
                source,
            })
        };
        let rules = file
            .rule
            .into_iter()
            .map(|r| {
                Ok(ScreenRule {
                    pattern: compile(&r.id, &r.pattern)?,
                    not_pattern: r
                        .not_pattern
                        .as_deref()
                        .map(|p| compile(&r.id, p))
                        .transpose()?,
                    id: r.id,
                    region: r.region,
                    state: r.state,
                })
            })
            .collect::<Result<Vec<_>, RulesError>>()?;
        Ok(RuleSet { rules })
    }

    pub fn rules(&self) -> &[ScreenRule] {
        &self.rules
    }

    /// Classify a screen: `screen` is the pane's plain text (no escape sequences), `title` its title.
    pub fn classify(&self, screen: &str, title: &str) -> Option<RuleMatch> {
        let last_line = last_line(screen);
        self.rules.iter().find_map(|rule| {
            let text = match rule.region {
                Region::LastLine => last_line,
                Region::Title => title,
            };
            let hit = rule.pattern.is_match(text)
                && !rule.not_pattern.as_ref().is_some_and(|n| n.is_match(text));
            hit.then(|| RuleMatch {
                rule: rule.id.clone(),
                state: rule.state,
                text: text.chars().take(200).collect(),
            })
        })
    }
}

/// The last line with something on it, trimmed of trailing blanks.
pub fn last_line(screen: &str) -> &str {
    screen
        .lines()
        .map(str::trim_end)
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(screen: &str) -> Option<String> {
        let rules = RuleSet::from_toml(crate::GENERIC_RULES, "generic.toml").expect("rules compile");
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
}
