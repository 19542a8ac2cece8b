//! `volee agent --tag SID TAG…` / `--untag SID TAG…`, and how tags show in listings.

use volee_store::{SessionMeta, Store};
use volee_view::text::plain_text;

use crate::error::{CliError, CliResult, Exit};
use crate::output::out;

/// Tag or untag: `given` is the session id then the tags.
pub fn run(store: &Store, given: &[String], add: bool, json: bool) -> CliResult {
    let flag = if add { "--tag" } else { "--untag" };
    let Some((id, tags)) = given.split_first().filter(|(_, t)| !t.is_empty()) else {
        return Err(CliError::user(format!("{flag} needs SESSION_ID and TAG…")));
    };
    let (id, now) = if add {
        store.tag(id, tags)?
    } else {
        store.untag(id, tags)?
    };
    if json {
        let v = serde_json::json!({"id": id, "tags": now});
        let text = serde_json::to_string_pretty(&v)
            .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
        out(&text);
    } else if now.is_empty() {
        out(&format!("{id}: no tags"));
    } else {
        out(&format!("{id}: tags {}", now.join(", ")));
    }
    Ok(())
}

/// Does a listed session carry `tag`?
pub fn has_tag(meta: Option<&SessionMeta>, tag: &str) -> bool {
    meta.is_some_and(|m| m.tags.iter().any(|t| t == tag))
}

/// Tags after a title in a listing: ` [keep, bug]`, or nothing.
pub fn shown(tags: &[String]) -> String {
    if tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", plain_text(&tags.join(", "), 200))
    }
}
