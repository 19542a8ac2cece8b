//! Loading fixtures, the manifest and the embedded rules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use volee_harness::rules::harnesses_with_rules;
use volee_harness::RuleSet;
use volee_protocol::AgentState;

/// One screen with what its harness's rules must say about it.
#[derive(Debug)]
pub struct Fixture {
    /// Path under `tests/fixtures/`, e.g. `claude/claude-35-mock-permission.txt`.
    pub file: String,
    /// The directory: the profile name whose rules classify it.
    pub harness: String,
    /// None: no rule may fire.
    pub state: Option<AgentState>,
    pub rule: Option<String>,
    pub reason: Option<volee_protocol::Reason>,
    pub title: String,
    pub screen: String,
    pub handmade: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    fixture: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    file: String,
    state: String,
    #[serde(default)]
    rule: Option<String>,
    /// The reason the winning rule gives (failed and needs_you fixtures).
    #[serde(default)]
    reason: Option<volee_protocol::Reason>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fixture file: header lines (`source: …`, `note: …`, `title: …`), a `---` line, then the
/// screen exactly as `capture-pane -p` printed it.
fn parse_fixture(text: &str, file: &str) -> (String, String, bool) {
    let (head, screen) = text
        .split_once("\n---\n")
        .unwrap_or_else(|| panic!("{file}: no '---' line after the header"));
    let mut title = None;
    let mut source = None;
    for line in head.lines() {
        let (key, value) = line
            .split_once(": ")
            .or_else(|| line.strip_suffix(':').map(|k| (k, "")))
            .unwrap_or_else(|| panic!("{file}: bad header line {line:?}"));
        match key {
            "title" => title = Some(value.to_string()),
            "source" => source = Some(value.to_string()),
            "note" => {}
            other => panic!("{file}: unknown header {other:?}"),
        }
    }
    let source = source.unwrap_or_else(|| panic!("{file}: no source header"));
    let handmade = source.starts_with("handmade");
    (
        title.unwrap_or_else(|| panic!("{file}: no title header")),
        screen.to_string(),
        handmade,
    )
}

/// Every fixture of the manifest, in manifest order.
pub fn load_fixtures() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let manifest = std::fs::read_to_string(dir.join("expected.toml")).expect("expected.toml");
    let manifest: Manifest = toml::from_str(&manifest).expect("expected.toml parses");
    manifest
        .fixture
        .into_iter()
        .map(|e| {
            let text = std::fs::read_to_string(dir.join(&e.file))
                .unwrap_or_else(|err| panic!("{}: {err}", e.file));
            let (title, screen, handmade) = parse_fixture(&text, &e.file);
            let harness = e
                .file
                .split_once('/')
                .map(|(h, _)| h.to_string())
                .unwrap_or_else(|| panic!("{}: not under a harness directory", e.file));
            let state = match e.state.as_str() {
                "none" => None,
                s => {
                    Some(AgentState::parse(s).unwrap_or_else(|| panic!("{}: state {s:?}", e.file)))
                }
            };
            assert_eq!(
                state.is_none(),
                e.rule.is_none(),
                "{}: a rule id goes with a state, none with none",
                e.file
            );
            Fixture {
                file: e.file,
                harness,
                state,
                rule: e.rule,
                reason: e.reason,
                title,
                screen,
                handmade,
            }
        })
        .collect()
}

/// The embedded rules of every harness that has its own (plus `generic`), compiled.
pub fn all_rules() -> BTreeMap<&'static str, RuleSet> {
    harnesses_with_rules()
        .iter()
        .chain(&["generic"])
        .map(|&h| {
            let profile = volee_harness::get(h).unwrap_or_else(|| panic!("no profile {h}"));
            (h, profile.rules.clone())
        })
        .collect()
}

pub fn state_name(state: Option<AgentState>) -> &'static str {
    state.map_or("none", AgentState::as_str)
}
