//! OpenCode's database (`opencode.db`, OpenCode 1.2 and later): every session in one SQLite
//! file, read from a private copy ([`crate::index`] makes it) so OpenCode's own files are never
//! opened by SQLite. Tables read: `session` (`id`, `directory`, `title`, `parent_id`, times,
//! `tokens_*`, `model`), `message` (`session_id`, `time_created`, JSON `data`: `role`,
//! `modelID`, `tokens`, `path.cwd`) and `part` (`message_id`, JSON `data`: `type` `text` /
//! `tool` with `state.input` and `state.output` / `reasoning` / `step-*` …).

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use crate::read::{cut, first_line, Message, Role, SessionInfo, Usage};

/// Each top-level session's id and a mark that changes whenever the session, one of its
/// messages or one of its parts does (subagents' sessions, `parent_id` set, are part of the
/// session that started them and are not listed).
pub(crate) fn marks(db: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = db.prepare(
        "SELECT s.id,
                s.time_updated || '/' ||
                (SELECT count(*) || ':' || coalesce(max(time_updated), 0)
                   FROM message m WHERE m.session_id = s.id) || '/' ||
                (SELECT count(*) || ':' || coalesce(max(time_updated), 0)
                   FROM part p WHERE p.session_id = s.id)
         FROM session s WHERE s.parent_id IS NULL",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// One session: what is known of it and its messages, oldest first.
pub(crate) fn session(
    db: &Connection,
    id: &str,
) -> rusqlite::Result<Option<(SessionInfo, Vec<Message>)>> {
    type Row = (String, String, i64, i64, Option<String>, [i64; 4]);
    let row: Option<Row> = db
        .query_row(
            "SELECT directory, title, time_created, time_updated, model,
                    tokens_input, tokens_output, tokens_cache_read, tokens_cache_write
             FROM session WHERE id = ?1",
            params![id],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    [r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?],
                ))
            },
        )
        .optional()?;
    let Some((directory, title, created, updated, model, tokens)) = row else {
        return Ok(None);
    };
    let mut info = SessionInfo {
        id: Some(id.to_owned()),
        project: Some(directory).filter(|d| !d.is_empty()),
        // OpenCode names a session `New session - <time>` until its small model titles it.
        title: Some(title).filter(|t| !t.is_empty() && !t.starts_with("New session - ")),
        started: Some(created),
        last: Some(updated),
        ..SessionInfo::default()
    };
    let mut usage = Usage {
        input: tokens[0].max(0) as u64,
        output: tokens[1].max(0) as u64,
        cache_read: tokens[2].max(0) as u64,
        cache_write: tokens[3].max(0) as u64,
        requests: 0,
    };
    // The session's `model` column is JSON (`{"id","providerID"}`) when set.
    info.model = model.and_then(|m| {
        serde_json::from_str::<Value>(&m)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_owned))
    });

    let mut out = Vec::new();
    let mut summed = Usage::default();
    let mut stmt = db.prepare(
        "SELECT m.id, m.time_created, m.data FROM message m WHERE m.session_id = ?1
         ORDER BY m.time_created, m.id",
    )?;
    let messages: Vec<(String, i64, String)> = stmt
        .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut parts_of =
        db.prepare("SELECT data FROM part WHERE message_id = ?1 ORDER BY time_created, id")?;
    for (message_id, at, data) in messages {
        let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
        let role = match data["role"].as_str() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => continue,
        };
        if role == Role::Assistant {
            if let Some(m) = data["modelID"].as_str().filter(|m| !m.is_empty()) {
                info.model = Some(m.to_owned());
            }
            let t = &data["tokens"];
            summed.input += u(&t["input"]);
            summed.output += u(&t["output"]);
            summed.cache_read += u(&t["cache"]["read"]);
            summed.cache_write += u(&t["cache"]["write"]);
            summed.requests += 1;
        }
        if info.project.is_none() {
            info.project = data["path"]["cwd"].as_str().map(str::to_owned);
        }
        let at = Some(at);
        let parts: Vec<String> = parts_of
            .query_map(params![message_id], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for part in parts {
            let part: Value = serde_json::from_str(&part).unwrap_or(Value::Null);
            match part["type"].as_str() {
                // Text OpenCode adds itself (a file's contents, a reminder) is not what was said.
                Some("text") if part["synthetic"].as_bool() != Some(true) => {
                    let text = part["text"].as_str().unwrap_or("").trim();
                    if !text.is_empty() {
                        if role == Role::User && info.first_prompt.is_none() {
                            info.first_prompt = Some(first_line(text));
                        }
                        info.messages += 1;
                        out.push(Message {
                            role,
                            text: text.to_owned(),
                            at,
                        });
                    }
                }
                Some("tool") => {
                    let state = &part["state"];
                    let name = part["tool"].as_str().unwrap_or("tool");
                    let input = match &state["input"] {
                        Value::Null => String::new(),
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    out.push(Message {
                        role: Role::Tool,
                        text: format!("{name} {input}"),
                        at,
                    });
                    let output = state["output"]
                        .as_str()
                        .or_else(|| state["error"].as_str())
                        .unwrap_or("");
                    if !output.trim().is_empty() {
                        out.push(Message {
                            role: Role::Tool,
                            text: cut(output),
                            at,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    // The session's own totals when it keeps them, else the sum of its answers'.
    if usage == Usage::default() {
        usage = summed;
    } else {
        usage.requests = summed.requests;
    }
    if usage != Usage::default() {
        info.usage = Some(usage);
    }
    Ok(Some((info, out)))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}
