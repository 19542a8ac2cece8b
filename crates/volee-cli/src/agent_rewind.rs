//! `volee agent --checkpoint SID NAME`, `--checkpoints SID` and `--rewind SID NAME
//! [--into-fork]`: named checkpoints of a session and rewind to them (issue 21; the store's
//! side is `volee_store::checkpoint`, the words `volee_agent::rewind`).

use volee_store::Store;
use volee_view::text::plain_text;

use crate::error::{CliError, CliResult, Exit};
use crate::output::out;

/// `--checkpoint SID NAME`: record the session's context at its last turn boundary.
pub fn checkpoint(store: &Store, id: &str, name: &str, json: bool) -> CliResult {
    let id = store.resolve(id)?;
    let cp = store.save_checkpoint(&id, name)?;
    if json {
        return print_json(&serde_json::json!({
            "id": id,
            "name": cp.name,
            "at_ms": cp.at_ms,
            "seq": cp.seq,
            "transcript_bytes": cp.transcript_bytes,
            "messages": cp.messages.len(),
        }));
    }
    out(&format!(
        "checkpoint {} of {id} at transcript line {} ({} messages); volee agent --rewind {id} {} returns here",
        cp.name,
        cp.seq,
        cp.messages.len(),
        cp.name
    ));
    Ok(())
}

/// `--checkpoints SID`: name, when, transcript line and messages of each, oldest first.
pub fn list(store: &Store, id: &str, json: bool) -> CliResult {
    let id = store.resolve(id)?;
    let list = store.checkpoints(&id)?;
    if json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("at".into(), volee_store::rfc3339(c.at_ms).into());
                }
                v
            })
            .collect();
        return print_json(&rows);
    }
    if list.is_empty() {
        out(&format!(
            "session {id} has no checkpoints (volee agent --checkpoint {id} NAME, or \\checkpoint NAME in its pane)"
        ));
        return Ok(());
    }
    let mut text = String::from("NAME  WHEN  LINE  MSGS\n");
    for c in &list {
        match &c.reason {
            None => text.push_str(&format!(
                "{}  {}  {}  {}\n",
                c.name,
                volee_store::rfc3339(c.at_ms),
                c.seq,
                c.messages
            )),
            Some(reason) => text.push_str(&format!(
                "{}  DAMAGED: {}\n",
                c.name,
                plain_text(reason, 200)
            )),
        }
    }
    out(&align(&text));
    Ok(())
}

/// `--rewind SID NAME [--into-fork]`.
pub fn rewind(store: &Store, id: &str, name: &str, into_fork: bool, json: bool) -> CliResult {
    let id = store.resolve(id)?;
    let (session, record) = if into_fork {
        store.rewind_into_fork(&id, name)?
    } else {
        store.rewind(&id, name)?
    };
    if json {
        let mut v =
            serde_json::to_value(&record).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("id".into(), session.clone().into());
            obj.insert("files_undone".into(), serde_json::Value::Bool(false));
        }
        return print_json(&v);
    }
    let mut lines = volee_agent::rewind::report_lines(&session, &record);
    if into_fork {
        lines.push(format!(
            "{id} is left as it was; the rewound copy is {session}: volee agent --resume {session}"
        ));
    }
    out(&lines.join("\n"));
    Ok(())
}

fn print_json(value: &impl serde::Serialize) -> CliResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    out(&text);
    Ok(())
}

/// Columns separated by two spaces, padded to the widest cell (the last one as it is).
fn align(text: &str) -> String {
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.splitn(4, "  ").collect()).collect();
    let mut widths = [0usize; 4];
    for row in &rows {
        if row.len() == 4 {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(volee_view::text::display_width(cell));
            }
        }
    }
    let mut outp = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&volee_view::text::pad_to(cell, widths[i]));
                line.push_str("  ");
            }
        }
        outp.push_str(line.trim_end());
        outp.push('\n');
    }
    outp
}
