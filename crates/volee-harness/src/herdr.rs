//! herdr's agent-detection manifests (`herdrdev/herdr`, `src/detect/manifest.rs`: `id`,
//! `[[rules]]` of `state`, `priority`, `region` and matchers — `contains` (case-insensitive),
//! `regex`, `line_regex`, nested `all`/`any`/`not` gates — ANDed) converted to volee's screen rules,
//! with a report of what did not map. `volee profiles import-herdr FILE` prints the rules as a
//! rules file for the config dir's `rules/NAME.toml` (merged over the profile's by id).
//!
//! How each part maps:
//! - states: `idle` → idle, `working` → working, `blocked` → needs_you (reason question);
//!   `unknown` and `skip_state_update` have no volee counterpart;
//! - regions: `whole_recent` → screen, `bottom_non_empty_lines(N)` → last_lines N (exact),
//!   `bottom_lines(N)` → last_lines N (volee counts non-empty lines: said in the report),
//!   `osc_title` → title; the prompt-box, prompt-marker, horizontal-rule, top and progress regions
//!   have none;
//! - matchers: each becomes a pattern of the same Rust `regex` syntax (`contains` escaped and
//!   case-insensitive, `line_regex` in multi-line mode), `any` an alternation, `not` the rule's
//!   `not_match`; several ANDed patterns (volee's one pattern per rule, and `regex` has no
//!   look-ahead) become their orders joined by `.*` across lines — up to three, which may also
//!   accept overlapping matches herdr would not (said in the report); more do not map.

use serde::Deserialize;
use volee_protocol::{AgentState, Reason};

use crate::rules::{RegionKind, RuleSet, RuleSpec};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    id: String,
    #[serde(default)]
    #[allow(dead_code)]
    version: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    min_engine_version: Option<u32>,
    #[serde(default)]
    #[allow(dead_code)]
    updated_at: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    aliases: Vec<String>,
    #[serde(default)]
    rules: Vec<ManifestRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestRule {
    id: String,
    state: Option<String>,
    #[serde(default)]
    priority: i32,
    #[serde(default = "whole_recent")]
    region: String,
    #[serde(default)]
    visible_idle: bool,
    #[serde(default)]
    visible_blocker: bool,
    #[serde(default)]
    visible_working: bool,
    #[serde(default)]
    skip_state_update: bool,
    #[serde(default)]
    all: Vec<Gate>,
    #[serde(default)]
    any: Vec<Gate>,
    #[serde(default, rename = "not")]
    not_gate: Vec<Gate>,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    regex: Vec<String>,
    #[serde(default)]
    line_regex: Vec<String>,
}

impl ManifestRule {
    /// Its matchers as one gate.
    fn gate(&self) -> Gate {
        Gate {
            all: self.all.clone(),
            any: self.any.clone(),
            not_gate: self.not_gate.clone(),
            contains: self.contains.clone(),
            regex: self.regex.clone(),
            line_regex: self.line_regex.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Gate {
    #[serde(default)]
    all: Vec<Gate>,
    #[serde(default)]
    any: Vec<Gate>,
    #[serde(default, rename = "not")]
    not_gate: Vec<Gate>,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    regex: Vec<String>,
    #[serde(default)]
    line_regex: Vec<String>,
}

fn whole_recent() -> String {
    "whole_recent".into()
}

/// The most ANDed patterns turned into their orders (3! = 6 alternatives).
const MAX_AND: usize = 3;

/// What a manifest became: the rules, and a line per thing that did not map (or only nearly).
#[derive(Debug)]
pub struct Converted {
    /// herdr's id for the agent (`claude`).
    pub agent: String,
    pub rules: Vec<RuleSpec>,
    pub report: Vec<String>,
}

/// Convert herdr manifest `text` (from `origin`, for messages).
pub fn convert(text: &str, origin: &str) -> Result<Converted, String> {
    let manifest: Manifest =
        toml::from_str(text).map_err(|e| format!("{origin} is no herdr manifest: {e}"))?;
    let mut report = Vec::new();
    let mut rules = Vec::new();
    let mut flags_noted = false;
    for r in &manifest.rules {
        let id = format!("herdr.{}.{}", manifest.id, r.id);
        let skip = |why: String| format!("rule {}: not imported: {why}", r.id);
        let (state, reason) = match (r.state.as_deref(), r.skip_state_update) {
            (_, true) => {
                report.push(skip(
                    "skip_state_update (keep the last state) has no volee counterpart".into(),
                ));
                continue;
            }
            (Some("idle"), _) => (AgentState::Idle, None),
            (Some("working"), _) => (AgentState::Working, None),
            (Some("blocked"), _) => (AgentState::NeedsYou, Some(Reason::Question)),
            (other, _) => {
                report.push(skip(format!("state {other:?} has no volee counterpart")));
                continue;
            }
        };
        let (region, lines) = match region_of(&r.region) {
            Ok((region, lines, note)) => {
                if let Some(note) = note {
                    report.push(format!("rule {}: {note}", r.id));
                }
                (region, lines)
            }
            Err(why) => {
                report.push(skip(why));
                continue;
            }
        };
        let (pattern, not_pattern, notes) = match gate_patterns(&r.gate(), 0) {
            Ok(p) => p,
            Err(why) => {
                report.push(skip(why));
                continue;
            }
        };
        let Some(pattern) = pattern else {
            report.push(skip("no positive matcher".into()));
            continue;
        };
        for note in notes {
            let line = format!("rule {}: {note}", r.id);
            if !report.contains(&line) {
                report.push(line);
            }
        }
        if (r.visible_idle || r.visible_blocker || r.visible_working) && !flags_noted {
            report.push("visible_idle / visible_blocker / visible_working (herdr's sidebar hints) are not used".into());
            flags_noted = true;
        }
        let spec = RuleSpec {
            id,
            region,
            lines,
            pattern,
            not_pattern,
            state,
            reason,
            priority: r.priority,
        };
        // Each rule must compile as volee's (the same `regex` crate; a size limit may differ).
        match RuleSet::from_specs(vec![spec.clone()], origin) {
            Ok(_) => rules.push(spec),
            Err(e) => report.push(skip(format!("its pattern does not compile: {e}"))),
        }
    }
    if !rules.is_empty() {
        report.push(format!(
            "priorities kept as herdr's ({}); volee's own rules use 10–100: check how they interleave",
            rules
                .iter()
                .map(|r| r.priority)
                .collect::<std::collections::BTreeSet<i32>>()
                .into_iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Converted {
        agent: manifest.id,
        rules,
        report,
    })
}

/// A herdr region as volee's, with a note when only near.
fn region_of(spec: &str) -> Result<(RegionKind, Option<usize>, Option<String>), String> {
    let spec = spec.trim();
    let count = |name: &str| {
        spec.strip_prefix(name)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0)
    };
    let clamp = |n: usize| {
        let lines = n.min(crate::rules::MAX_LINES);
        let note = (lines < n).then(|| format!("{n} lines read as {lines}, volee's most"));
        (lines, note)
    };
    if spec == "whole_recent" {
        return Ok((RegionKind::Screen, None, None));
    }
    if spec == "osc_title" {
        return Ok((RegionKind::Title, None, None));
    }
    if let Some(n) = count("bottom_non_empty_lines") {
        let (lines, note) = clamp(n);
        return Ok((RegionKind::LastLines, Some(lines), note));
    }
    if let Some(n) = count("bottom_lines") {
        let (lines, note) = clamp(n);
        let near = format!(
            "bottom_lines({n}) read as the last {lines} non-empty lines (volee drops blank lines){}",
            note.map(|n| format!("; {n}")).unwrap_or_default()
        );
        return Ok((RegionKind::LastLines, Some(lines), Some(near)));
    }
    Err(format!(
        "region {spec:?} has no volee counterpart (screen, last lines, title)"
    ))
}

/// A gate's positive pattern (its matchers ANDed), its negative one (its `not` gates, any of
/// them), and notes; an error when it cannot be said in volee's patterns.
#[allow(clippy::type_complexity)]
fn gate_patterns(
    gate: &Gate,
    depth: usize,
) -> Result<(Option<String>, Option<String>, Vec<String>), String> {
    if depth > 8 {
        return Err("gates nested more than 8 deep".into());
    }
    let mut and: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    and.extend(
        gate.contains
            .iter()
            .map(|c| format!("(?i:{})", regex::escape(c))),
    );
    and.extend(gate.regex.iter().map(|r| format!("(?:{r})")));
    and.extend(gate.line_regex.iter().map(|r| format!("(?m:{r})")));
    for g in &gate.all {
        let (p, n, more) = gate_patterns(g, depth + 1)?;
        if n.is_some() {
            return Err("a `not` inside `all` does not map".into());
        }
        and.extend(p);
        notes.extend(more);
    }
    if !gate.any.is_empty() {
        let mut alternatives = Vec::new();
        for g in &gate.any {
            let (p, n, more) = gate_patterns(g, depth + 1)?;
            if n.is_some() {
                return Err("a `not` inside `any` does not map".into());
            }
            alternatives.extend(p);
            notes.extend(more);
        }
        if !alternatives.is_empty() {
            and.push(format!("(?:{})", alternatives.join("|")));
        }
    }
    let mut nots = Vec::new();
    for g in &gate.not_gate {
        let (p, n, more) = gate_patterns(g, depth + 1)?;
        if n.is_some() {
            return Err("a `not` inside `not` does not map".into());
        }
        nots.extend(p);
        notes.extend(more);
    }
    let positive = match and.len() {
        0 => None,
        1 => and.pop(),
        n if n <= MAX_AND => {
            notes.push(format!(
                "{n} matchers that must all match: read as their {} orders (an overlap herdr would not count may count)",
                (1..=n).product::<usize>()
            ));
            Some(orders(&and).join("|"))
        }
        n => {
            return Err(format!(
                "{n} matchers that must all match (volee's patterns can say {MAX_AND})"
            ))
        }
    };
    let negative = (!nots.is_empty()).then(|| nots.join("|"));
    Ok((positive, negative, notes))
}

/// Every order of `parts`, each joined by "anything, across lines".
fn orders(parts: &[String]) -> Vec<String> {
    if parts.len() <= 1 {
        return parts.to_vec();
    }
    let mut out = Vec::new();
    for (i, first) in parts.iter().enumerate() {
        let rest: Vec<String> = parts
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| p.clone())
            .collect();
        for tail in orders(&rest) {
            out.push(format!("{first}(?s:.*){tail}"));
        }
    }
    out
}

/// The converted rules as a rules file (`$CONFIG/rules/NAME.toml`), the report as comments.
pub fn to_rules_file(c: &Converted, origin: &str) -> String {
    #[derive(serde::Serialize)]
    struct File<'a> {
        rule: &'a [RuleSpec],
    }
    let mut text = format!(
        "# Screen rules imported from herdr's manifest {origin} (agent {:?}) by `volee profiles \
         import-herdr`.\n# Put this file at the config dir's rules/NAME.toml (NAME: volee's harness); \
         a rule with the id of a built-in one replaces it.\n",
        c.agent
    );
    for line in &c.report {
        text.push_str(&format!("# {line}\n"));
    }
    text.push('\n');
    text.push_str(&toml::to_string(&File { rule: &c.rules }).unwrap_or_default());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest written in herdr's format (its schema, `src/detect/manifest.rs`).
    const MANIFEST: &str = r#"
id = "shout"
version = "2026.12.04.1"
min_engine_version = 3
aliases = ["herdr:shout"]

[[rules]]
id = "asks"
state = "blocked"
priority = 300
region = "bottom_non_empty_lines(3)"
visible_blocker = true
contains = ["Continue? [y/n]"]

[[rules]]
id = "working"
state = "working"
priority = 200
region = "bottom_lines(4)"
regex = ['(?m)^\s*[⠋⠙⠹] Working']
not = [{ contains = ["(paused)"] }]

[[rules]]
id = "idle-prompt"
state = "idle"
priority = 100
region = "whole_recent"
any = [{ line_regex = ['^shout> ?$'] }, { contains = ["Ready."] }]

[[rules]]
id = "footer-and-model"
state = "idle"
priority = 90
region = "whole_recent"
contains = ["? for help"]
line_regex = ['model: \S+']

[[rules]]
id = "title-busy"
state = "working"
priority = 50
region = "osc_title"
regex = ['^\* ']

[[rules]]
id = "menu"
state = "unknown"
skip_state_update = true
region = "whole_recent"
contains = ["Select a session"]

[[rules]]
id = "box"
state = "blocked"
region = "prompt_box_body"
contains = ["Allow?"]

[[rules]]
id = "many"
state = "idle"
contains = ["a", "b", "c", "d"]
"#;

    fn rule<'a>(c: &'a Converted, id: &str) -> Option<&'a RuleSpec> {
        c.rules.iter().find(|r| r.id == format!("herdr.shout.{id}"))
    }

    #[test]
    fn a_manifest_maps_its_states_regions_and_matchers_and_reports_the_rest() {
        let c = convert(MANIFEST, "shout.toml").unwrap();
        assert_eq!(c.agent, "shout");
        assert_eq!(c.rules.len(), 5, "{:?}", c.report);
        let set = RuleSet::from_specs(c.rules.clone(), "x").unwrap();
        let state =
            |screen: &str, title: &str| set.classify(screen, title).map(|m| (m.rule, m.state));

        let asks = rule(&c, "asks").unwrap();
        assert_eq!(
            (asks.state, asks.reason),
            (AgentState::NeedsYou, Some(Reason::Question))
        );
        assert_eq!((asks.region, asks.lines), (RegionKind::LastLines, Some(3)));
        // `contains` is case-insensitive, and literal.
        assert_eq!(
            state("output\ncontinue? [Y/N]\n", ""),
            Some(("herdr.shout.asks".into(), AgentState::NeedsYou))
        );
        // A `not` gate: the working rule does not fire while "(paused)" shows.
        assert_eq!(
            state("x\n ⠙ Working on it\n", "").map(|m| m.0),
            Some("herdr.shout.working".into())
        );
        assert_ne!(
            state("x\n ⠙ Working on it (paused)\n", "").map(|m| m.0),
            Some("herdr.shout.working".into())
        );
        // `any`: either alternative.
        assert_eq!(
            state("done\nshout> \n", "").map(|m| m.0),
            Some("herdr.shout.idle-prompt".into())
        );
        assert_eq!(
            state("Ready.\n", "").map(|m| m.0),
            Some("herdr.shout.idle-prompt".into())
        );
        // Two matchers that must both match, in either order, across lines.
        assert_eq!(
            state("model: m1\nsomething\n? for help\n", "").map(|m| m.0),
            Some("herdr.shout.footer-and-model".into())
        );
        assert_eq!(
            state("? for help\nmodel: m1\n", "").map(|m| m.0),
            Some("herdr.shout.footer-and-model".into())
        );
        assert_eq!(state("? for help\n", ""), None);
        // The title region.
        assert_eq!(
            state("", "* busy").map(|m| m.0),
            Some("herdr.shout.title-busy".into())
        );
        // What did not map, said.
        let report = c.report.join("\n");
        for said in [
            "rule menu: not imported: skip_state_update",
            "rule box: not imported: region \"prompt_box_body\"",
            "rule many: not imported: 4 matchers",
            "bottom_lines(4) read as the last 4 non-empty lines",
            "footer-and-model: 2 matchers that must all match",
            "visible_idle / visible_blocker / visible_working",
            "priorities kept as herdr's (50, 90, 100, 200, 300)",
        ] {
            assert!(report.contains(said), "{said:?} not in\n{report}");
        }
        // The rules file reads back as volee's rules.
        let file = to_rules_file(&c, "shout.toml");
        let again = RuleSet::from_toml(&file, "rules/shout.toml").unwrap();
        assert_eq!(again.rules().len(), 5);
    }

    #[test]
    fn what_is_no_manifest_is_refused() {
        assert!(convert(
            "id = \"x\"\n[[rules]]\nid = \"r\"\nstate = \"idle\"\nsmell = 1\n",
            "m"
        )
        .is_err());
        assert!(convert("not toml at all [", "m").is_err());
        let c = convert(
            "id = \"x\"\n[[rules]]\nid = \"r\"\nstate = \"idle\"\nregex = ['(']\n",
            "m",
        )
        .unwrap();
        assert!(c.rules.is_empty());
        assert!(c.report[0].contains("does not compile"), "{:?}", c.report);
    }
}
