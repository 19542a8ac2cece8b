//! The hook registrations volee gives a harness, in that harness's settings format (pure JSON
//! builders; the CLI and the daemon write them to files).

use serde_json::{json, Map, Value};

/// Quote for `sh` (harnesses run hook commands through the shell).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The registration of one event: a command `volee hook HARNESS EVENT`.
pub fn hook_entry(harness: &str, event: &str, volee_bin: &str) -> Value {
    let command = format!("{} hook {harness} {event}", sh_quote(volee_bin));
    match harness {
        // Gemini and Qwen take a matcher and a name; Gemini's timeout is in milliseconds.
        "gemini" => json!({"matcher": "*", "hooks": [{
            "name": format!("volee-{event}"), "type": "command", "command": command, "timeout": 10000
        }]}),
        "qwen" => json!({"matcher": "", "hooks": [{
            "name": format!("volee-{event}"), "type": "command", "command": command
        }]}),
        _ => json!({"hooks": [{"type": "command", "command": command, "timeout": 10}]}),
    }
}

/// `{"hooks": {EVENT: [entry], …}}` for every event volee reads from `harness`.
pub fn hooks_settings(harness: &str, volee_bin: &str) -> Value {
    let hooks: Map<String, Value> = crate::hooks::hook_events(harness)
        .into_iter()
        .map(|event| {
            (
                event.to_string(),
                json!([hook_entry(harness, event, volee_bin)]),
            )
        })
        .collect();
    json!({ "hooks": hooks })
}

/// Append volee's entries to an existing settings object (system defaults that must survive).
/// Returns false when `settings` or its `hooks` is not an object.
pub fn append_hooks(settings: &mut Value, harness: &str, volee_bin: &str) -> bool {
    let Some(root) = settings.as_object_mut() else {
        return false;
    };
    let Some(hooks) = root
        .entry("hooks")
        .or_insert_with(|| json!({}))
        .as_object_mut()
    else {
        return false;
    };
    for event in crate::hooks::hook_events(harness) {
        let list = hooks.entry(event.to_string()).or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(hook_entry(harness, event, volee_bin));
        }
    }
    true
}

/// volee's own Gemini extension, under HOME: its only content is volee's hooks
/// (`hooks/hooks.json`) and the manifest Gemini needs to load it. Used when Gemini would ignore
/// volee's system-defaults file (it reads one only when root owns it and every directory above).
pub const GEMINI_EXTENSION_DIR: &str = ".gemini/extensions/volee-hooks";

/// The files of volee's Gemini extension: (path relative to [`GEMINI_EXTENSION_DIR`], JSON).
pub fn gemini_extension(volee_bin: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "gemini-extension.json",
            json!({
                "name": "volee-hooks",
                "version": "1.0.0",
                "description": "volee's hooks: report this session's state to volee (written by volee while it supervises a Gemini agent, removed after)"
            }),
        ),
        ("hooks/hooks.json", hooks_settings("gemini", volee_bin)),
    ]
}

/// Name of volee's own file in `~/.grok/hooks/`.
pub const GROK_HOOKS_FILE: &str = "volee-hooks.json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_quote_the_binary_and_name_the_event() {
        let s = hooks_settings("claude", "/opt/it's/volee");
        let cmd = s["hooks"]["Stop"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        assert_eq!(cmd, r"'/opt/it'\''s/volee' hook claude Stop");
        let g = hook_entry("gemini", "AfterAgent", "/v");
        assert_eq!(g["hooks"][0]["timeout"], 10000);
    }

    #[test]
    fn the_gemini_extension_holds_only_volee_hooks() {
        let files = gemini_extension("/v");
        assert_eq!(files[0].1["name"], "volee-hooks");
        let hooks = &files[1].1["hooks"];
        assert_eq!(
            hooks["AfterAgent"][0]["hooks"][0]["command"],
            "'/v' hook gemini AfterAgent"
        );
        assert_eq!(files[1].0, "hooks/hooks.json");
    }

    #[test]
    fn appending_keeps_what_was_there() {
        let mut s = json!({"general": {"x": 1}, "hooks": {"AfterAgent": [{"hooks": []}]}});
        assert!(append_hooks(&mut s, "gemini", "/v"));
        assert_eq!(s["general"]["x"], 1);
        assert_eq!(s["hooks"]["AfterAgent"].as_array().unwrap().len(), 2);
        assert!(!append_hooks(&mut json!([1]), "gemini", "/v"));
        assert!(!append_hooks(&mut json!({"hooks": 3}), "gemini", "/v"));
    }
}
