//! `volee agent`: volee's own agent. The session management commands (no Docker, no model) are
//! here; the loop itself (interactive, `--resume`, `--prompt`) is in `agent_loop`.

use std::path::PathBuf;

use clap::ArgGroup;
use volee_store::{Health, Listed, Store};
use volee_view::text::{ago, pad_to, plain_text};

use crate::ask::paths;
use crate::error::{self, CliError, CliResult, Exit};
use crate::output::{now_secs, out};

const TITLE_MAX: usize = 48;
const SNIPPET_MAX: usize = 120;

/// `volee agent`.
#[derive(clap::Args)]
#[command(group(
    ArgGroup::new("action")
        .multiple(false)
        .args(["list_sessions", "search", "info", "rename", "fork", "archive", "unarchive", "export", "import", "delete", "resume", "sync", "sync_serve", "tag", "untag", "prune_sessions"])
))]
#[command(group(
    ArgGroup::new("checkpoint_action")
        .multiple(false)
        .args(["checkpoint", "checkpoints", "rewind"])
        .conflicts_with_all(["action", "prompt", "first_prompt"])
))]
pub struct AgentArgs {
    /// The session store (default: $XDG_DATA_HOME/volee/sessions, or $VOLEE_HOME/data/sessions).
    #[arg(long, value_name = "PATH")]
    memory_dir: Option<PathBuf>,
    /// The Ollama model (default gemma4; a resumed session keeps its own unless this is given).
    #[arg(long, value_name = "M")]
    model: Option<String>,
    /// The context budget in tokens, sent as num_ctx (default 32768, capped at the model's
    /// trained length); compaction starts at 80 %.
    #[arg(long, value_name = "N")]
    max_context_tokens: Option<u64>,
    /// A token budget for the session (prompt + completion tokens, `200k`, `1.5M`): once used,
    /// no model request is made and the turn says so (`volee launch --harness volee --budget`
    /// passes it).
    #[arg(long, value_name = "TOKENS", value_parser = volee_protocol::parse_tokens)]
    budget: Option<u64>,
    /// The Ollama server (default: $OLLAMA_HOST, else http://127.0.0.1:11434).
    #[arg(long, value_name = "URL")]
    ollama_url: Option<String>,
    /// The sandbox's Docker image, already loaded (default: volee's busybox image, built on
    /// first use).
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// Resume a session in the pane (a fresh sandbox; approvals are asked again).
    #[arg(long, value_name = "SESSION_ID")]
    resume: Option<String>,
    /// Run one turn without the interactive loop, then exit (0: answered; 1: calls were denied);
    /// with --resume, in that session.
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["list_sessions", "search", "info", "rename", "fork", "archive", "unarchive", "export", "import", "delete", "sync", "sync_serve"])]
    prompt: Option<String>,
    /// With --prompt: approve every tool call (without it, calls that need an approval are
    /// denied).
    #[arg(long)]
    approve_all: bool,
    /// Interactive: run this prompt as the first turn, then wait for the next (what
    /// `volee launch --harness volee PROMPT` uses).
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt")]
    first_prompt: Option<String>,
    /// List sessions, most recently updated first.
    #[arg(long)]
    list_sessions: bool,
    /// With --list-sessions or --search: include archived sessions.
    #[arg(long)]
    include_archived: bool,
    /// Search titles and transcripts (case-insensitive).
    #[arg(long, value_name = "QUERY")]
    search: Option<String>,
    /// Show one session.
    #[arg(long, value_name = "SESSION_ID")]
    info: Option<String>,
    /// Set a session's title.
    #[arg(long, num_args = 2, value_names = ["SESSION_ID", "TITLE"])]
    rename: Option<Vec<String>>,
    /// Copy a session into a new independent one; prints the new id.
    #[arg(long, value_name = "SESSION_ID")]
    fork: Option<String>,
    /// Hide a session from listings (it must be unarchived before it is resumed).
    #[arg(long, value_name = "SESSION_ID")]
    archive: Option<String>,
    /// Show an archived session in listings again, so it can be resumed.
    #[arg(long, value_name = "SESSION_ID")]
    unarchive: Option<String>,
    /// Print a session as one JSON document (messages, transcript, compactions, state; secrets
    /// redacted; schema in docs/store.md).
    #[arg(long, value_name = "SESSION_ID")]
    export: Option<String>,
    /// Make a session of an --export file, checked whole first (the shape of
    /// docs/session-export.schema.json, every tool call answered once, lines numbered in order,
    /// the context in the transcript): a bad file is refused with the JSON path of each problem
    /// and nothing is written. A new id unless --keep-id; the text stays redacted as exported.
    #[arg(long, value_name = "FILE")]
    import: Option<PathBuf>,
    /// With --import: keep the export's session id (refused when a session here has it).
    #[arg(long, requires = "import")]
    keep_id: bool,
    /// With --import: the project directory the session works on here (default: the
    /// export's); with --fork: the fork's project directory (the fork resumes there). It must
    /// exist.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Delete a session for good (needs --yes).
    #[arg(long, value_name = "SESSION_ID")]
    delete: Option<String>,
    /// Confirm --delete.
    #[arg(long)]
    yes: bool,
    /// Pull and push sessions between here and MACHINE (`volee machine add`) over ssh: a session
    /// changed on one side only goes to the other; one changed on both since the last sync comes
    /// in as a fork (pushed too; nothing is overwritten); one in use by a writer, or deleted on
    /// one side since the last sync, is skipped with the reason. Only the given SESSION_IDs, if
    /// any.
    #[arg(long, value_name = "MACHINE")]
    sync: Option<String>,
    /// With --sync: only these sessions (ids or unique prefixes, here or on the machine).
    #[arg(value_name = "SESSION_ID", requires = "sync")]
    sync_sessions: Vec<String>,
    /// With --sync: list what would move (push, pull, fork, skip and why); with
    /// --prune-sessions: what retention would archive and delete. Changes nothing.
    #[arg(long)]
    dry_run: bool,
    /// Apply the retention policy of config.toml's [sessions] (archive_after,
    /// delete_archived_after, keep_tagged; off by default) and print each action; a session held
    /// by an agent or tagged to keep is never touched.
    #[arg(long)]
    prune_sessions: bool,
    /// The machine's side of --sync, which --sync runs there over ssh (newline JSON on
    /// stdin/stdout, the default store); not for use by hand.
    #[arg(long)]
    sync_serve: bool,
    /// Record a named checkpoint of a session at its last turn boundary (the context,
    /// scratchpad, todos and counters, and the transcript line it was taken at); NAME is a short
    /// word ([A-Za-z0-9._-], up to 64), unique in the session.
    #[arg(long, num_args = 2, value_names = ["SESSION_ID", "NAME"])]
    checkpoint: Option<Vec<String>>,
    /// List a session's checkpoints: name, when, transcript line, messages.
    #[arg(long, value_name = "SESSION_ID")]
    checkpoints: Option<String>,
    /// Return a session's context, scratchpad and todos to its checkpoint NAME (the transcript
    /// keeps everything; usage stays cumulative). Files and shell effects are NOT undone: the
    /// tool calls since the checkpoint that may have changed files are listed.
    #[arg(long, num_args = 2, value_names = ["SESSION_ID", "NAME"])]
    rewind: Option<Vec<String>>,
    /// With --rewind: rewind a new fork of the session and leave the session as it is.
    #[arg(long, requires = "rewind")]
    into_fork: bool,
    /// Put tags on a session: short words (a-z, 0-9, '.', '_', '-'; up to 32 characters),
    /// shown by --info and the listing; a tag of [sessions] keep_tagged protects it from
    /// retention.
    #[arg(long, num_args = 2.., value_names = ["SESSION_ID", "TAG"])]
    tag: Option<Vec<String>>,
    /// Take tags off a session (one it does not have is no error).
    #[arg(long, num_args = 2.., value_names = ["SESSION_ID", "TAG"])]
    untag: Option<Vec<String>>,
    /// With --list-sessions or --search: only sessions with this tag.
    #[arg(long, value_name = "TAG")]
    with_tag: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Run `volee agent`.
pub fn run(args: AgentArgs) -> CliResult {
    let store = Store::new(
        args.memory_dir
            .clone()
            .unwrap_or_else(|| paths().data_dir.join("sessions")),
    );
    let json = args.json;
    // clap's `requires` lets these through beside another action flag of the group.
    if args.import.is_none() && args.keep_id {
        return Err(CliError::user("--keep-id goes with --import FILE"));
    }
    if args.import.is_none() && args.fork.is_none() && args.project.is_some() {
        return Err(CliError::user(
            "--project goes with --import FILE or --fork SESSION_ID",
        ));
    }
    if args.dry_run && args.sync.is_none() && !args.prune_sessions {
        return Err(CliError::user(
            "--dry-run goes with --sync MACHINE or --prune-sessions",
        ));
    }
    if args.prune_sessions {
        return crate::agent_retention::run(&store, args.dry_run, json);
    }
    if args.sync_serve {
        return crate::agent_sync::serve(&store);
    }
    if let Some(machine) = &args.sync {
        return crate::agent_sync::sync(&store, machine, &args.sync_sessions, args.dry_run, json);
    }
    if let Some(tag) = &args.with_tag {
        volee_store::check_tag(tag)?;
        if !args.list_sessions && args.search.is_none() {
            return Err(CliError::user(
                "--with-tag goes with --list-sessions or --search",
            ));
        }
    }
    let with_tag = args.with_tag.as_deref();
    if args.list_sessions {
        return list(&store, args.include_archived, with_tag, json);
    }
    for (given, add) in [(&args.tag, true), (&args.untag, false)] {
        if let Some(given) = given {
            return crate::agent_tags::run(&store, given, add, json);
        }
    }
    if let Some(pair) = &args.checkpoint {
        let (Some(id), Some(name)) = (pair.first(), pair.get(1)) else {
            return Err(CliError::user("--checkpoint needs SESSION_ID and NAME"));
        };
        return crate::agent_rewind::checkpoint(&store, id, name, json);
    }
    if let Some(id) = &args.checkpoints {
        return crate::agent_rewind::list(&store, id, json);
    }
    if let Some(pair) = &args.rewind {
        let (Some(id), Some(name)) = (pair.first(), pair.get(1)) else {
            return Err(CliError::user("--rewind needs SESSION_ID and NAME"));
        };
        return crate::agent_rewind::rewind(&store, id, name, args.into_fork, json);
    }
    if let Some(query) = &args.search {
        return search(&store, query, args.include_archived, with_tag, json);
    }
    if let Some(id) = &args.info {
        return info(&store, id, json);
    }
    if let Some(pair) = &args.rename {
        let (Some(id), Some(title)) = (pair.first(), pair.get(1)) else {
            return Err(CliError::user("--rename needs SESSION_ID and TITLE"));
        };
        let id = store.rename(id, title)?;
        return done(
            json,
            serde_json::json!({"id": id, "title": title}),
            &format!("renamed {id}"),
        );
    }
    if let Some(id) = &args.fork {
        let parent = store.resolve(id)?;
        if let Some(dir) = &args.project {
            if !dir.is_dir() {
                let mut e =
                    CliError::user(format!("--project {}: not a directory here", dir.display()));
                e.hints
                    .push("give the checkout the fork should work on; it must exist".into());
                return Err(e);
            }
            let (new, root) = store.fork_to_project(&parent, dir)?;
            return done(
                json,
                serde_json::json!({"id": new, "parent_id": parent, "project_root": root}),
                &format!(
                    "{new}\nforked into {}; resume it there: cd {} && volee agent --resume {new}",
                    root.display(),
                    root.display()
                ),
            );
        }
        let new = store.fork(&parent)?;
        return done(
            json,
            serde_json::json!({"id": new, "parent_id": parent}),
            &new,
        );
    }
    if let Some(id) = &args.archive {
        let id = store.set_archived(id, true)?;
        return done(
            json,
            serde_json::json!({"id": id, "archived": true}),
            &format!("archived {id}"),
        );
    }
    if let Some(id) = &args.unarchive {
        let id = store.set_archived(id, false)?;
        return done(
            json,
            serde_json::json!({"id": id, "archived": false}),
            &format!("unarchived {id}"),
        );
    }
    if let Some(id) = &args.export {
        let doc = store.export(id)?;
        return print_json(&doc);
    }
    if let Some(file) = &args.import {
        return crate::agent_import::run(&store, file, args.project.as_deref(), args.keep_id, json);
    }
    if let Some(id) = &args.delete {
        let id = store.resolve(id)?;
        if !args.yes {
            return Err(error::delete_needs_yes(&id));
        }
        let id = store.delete(&id)?;
        return done(
            json,
            serde_json::json!({"id": id, "deleted": true}),
            &format!("deleted {id}"),
        );
    }
    if args.yes || args.include_archived {
        return Err(CliError::user(
            "--yes goes with --delete, --include-archived with --list-sessions or --search",
        ));
    }
    if args.approve_all && args.prompt.is_none() {
        return Err(CliError::user(
            "--approve-all goes with --prompt (interactively, approvals are asked in the pane)",
        ));
    }
    crate::agent_loop::run(crate::agent_loop::LoopArgs {
        store,
        model: args.model,
        max_context_tokens: args.max_context_tokens,
        budget: args.budget,
        ollama_url: args.ollama_url,
        image: args.image,
        resume: args.resume,
        prompt: args.prompt,
        first_prompt: args.first_prompt,
        approve_all: args.approve_all,
    })
}

fn print_json(value: &impl serde::Serialize) -> CliResult {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    out(&text);
    Ok(())
}

fn done(json: bool, value: serde_json::Value, text: &str) -> CliResult {
    if json {
        print_json(&value)
    } else {
        out(text);
        Ok(())
    }
}

/// A listing row as JSON: the meta record flattened, with its health and RFC 3339 times.
fn listed_json(l: &Listed) -> serde_json::Value {
    let mut v = l
        .meta
        .as_ref()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("id".into(), l.id.clone().into());
        match &l.health {
            Health::Ok => {
                obj.insert("status".into(), "ok".into());
            }
            Health::Damaged { reason } => {
                obj.insert("status".into(), "damaged".into());
                obj.insert("reason".into(), reason.clone().into());
            }
            Health::NewerSchema { schema_version } => {
                obj.insert("status".into(), "newer_schema".into());
                obj.insert("schema_version".into(), (*schema_version).into());
            }
        }
        if let Some(m) = &l.meta {
            obj.insert("created_at".into(), rfc3339(m.created_at_ms).into());
            obj.insert("updated_at".into(), rfc3339(m.updated_at_ms).into());
        }
    }
    v
}

fn rfc3339(ms: u64) -> String {
    volee_store::rfc3339(ms)
}

fn age(ms: u64) -> String {
    ago(now_secs().saturating_sub(ms / 1000))
}

fn list(store: &Store, include_archived: bool, with_tag: Option<&str>, json: bool) -> CliResult {
    let mut sessions = store.list(include_archived)?;
    if let Some(tag) = with_tag {
        sessions.retain(|l| crate::agent_tags::has_tag(l.meta.as_ref(), tag));
    }
    // On stderr: the listing (and its JSON) stays what it is.
    if let Some(note) =
        crate::agent_seed_store::note(crate::agent_seed_store::home().as_deref(), store.root())
    {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{note}");
    }
    if json {
        let rows: Vec<serde_json::Value> = sessions.iter().map(listed_json).collect();
        return print_json(&rows);
    }
    if sessions.is_empty() {
        match with_tag {
            Some(tag) => out(&format!(
                "no sessions tagged {tag} in {}",
                store.root().display()
            )),
            None => out(&format!("no sessions in {}", store.root().display())),
        }
        return Ok(());
    }
    let mut rows = vec![[
        "ID".to_string(),
        "UPDATED".into(),
        "MSGS".into(),
        "TITLE".into(),
    ]];
    for l in &sessions {
        let (updated, msgs, title) = match (&l.meta, &l.health) {
            (Some(m), Health::Ok) => (
                age(m.updated_at_ms),
                m.message_count.to_string(),
                format!(
                    "{}{}{}",
                    plain_text(&m.title, TITLE_MAX),
                    if m.archived { " (archived)" } else { "" },
                    crate::agent_tags::shown(&m.tags)
                ),
            ),
            (_, Health::NewerSchema { schema_version }) => (
                "-".into(),
                "-".into(),
                format!("NEWER SCHEMA {schema_version}: upgrade volee to open it"),
            ),
            (_, Health::Damaged { reason }) => (
                "-".into(),
                "-".into(),
                format!("DAMAGED: {}", plain_text(reason, 200)),
            ),
            (None, Health::Ok) => ("-".into(), "-".into(), String::new()),
        };
        rows.push([l.id.clone(), updated, msgs, title]);
    }
    out(&columns(&rows));
    Ok(())
}

fn columns(rows: &[[String; 4]]) -> String {
    let mut widths = [0usize; 4];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(volee_view::text::display_width(cell));
        }
    }
    let mut text = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&pad_to(cell, widths[i]));
                line.push_str("  ");
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

fn search(
    store: &Store,
    query: &str,
    include_archived: bool,
    with_tag: Option<&str>,
    json: bool,
) -> CliResult {
    let mut hits = store.search(query, include_archived)?;
    if let Some(tag) = with_tag {
        hits.retain(|h| h.tags.iter().any(|t| t == tag));
    }
    if json {
        let rows: Vec<serde_json::Value> = hits
            .iter()
            .map(|h| {
                let mut v = serde_json::to_value(h).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("updated_at".into(), rfc3339(h.updated_at_ms).into());
                }
                v
            })
            .collect();
        return print_json(&rows);
    }
    if hits.is_empty() {
        out(&format!("no session matches {:?}", plain_text(query, 80)));
        return Ok(());
    }
    let mut text = String::new();
    for h in &hits {
        text.push_str(&format!(
            "{}  {}{}{}  ({} matching line{})\n",
            h.id,
            plain_text(&h.title, TITLE_MAX),
            if h.archived { " (archived)" } else { "" },
            crate::agent_tags::shown(&h.tags),
            h.transcript_matches,
            if h.transcript_matches == 1 { "" } else { "s" }
        ));
        for s in &h.snippets {
            let place = if s.seq == 0 {
                "title".to_string()
            } else {
                format!("#{}", s.seq)
            };
            text.push_str(&format!(
                "  {place}: {}\n",
                plain_text(&s.text, SNIPPET_MAX)
            ));
        }
    }
    out(&text);
    Ok(())
}

fn info(store: &Store, id: &str, json: bool) -> CliResult {
    let info = store.info(id)?;
    if json {
        let mut v =
            serde_json::to_value(&info).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("created_at".into(), rfc3339(info.meta.created_at_ms).into());
            obj.insert("updated_at".into(), rfc3339(info.meta.updated_at_ms).into());
        }
        return print_json(&v);
    }
    let m = &info.meta;
    let mut lines = vec![
        ("id", m.id.clone()),
        ("title", plain_text(&m.title, 200)),
        (
            "project",
            plain_text(&m.project_root.display().to_string(), 500),
        ),
        ("model", plain_text(&m.model, 100)),
        ("created", rfc3339(m.created_at_ms)),
        (
            "updated",
            format!(
                "{} ({} ago)",
                rfc3339(m.updated_at_ms),
                age(m.updated_at_ms)
            ),
        ),
        (
            "archived",
            if m.archived { "yes" } else { "no" }.to_string(),
        ),
        (
            "tags",
            if m.tags.is_empty() {
                "none".to_string()
            } else {
                m.tags.join(", ")
            },
        ),
        ("messages", m.message_count.to_string()),
        (
            "transcript",
            format!("{} lines, {} bytes", m.last_seq, info.transcript_file_bytes),
        ),
        ("compactions", info.compaction_count.to_string()),
        (
            "tokens",
            format!(
                "{} in, {} out, {} requests",
                m.usage.prompt_tokens, m.usage.completion_tokens, m.usage.requests
            ),
        ),
        ("directory", info.dir.display().to_string()),
    ];
    if let Some(parent) = &m.parent_id {
        let at = info
            .forked_at_seq
            .map(|s| format!(" at #{s}"))
            .unwrap_or_default();
        lines.insert(2, ("forked from", format!("{parent}{at}")));
    }
    if let Some(synced) = &info.synced_from {
        lines.insert(
            3,
            (
                "synced from",
                format!(
                    "{} at {}: {}",
                    plain_text(&synced.machine, 40),
                    rfc3339(synced.at_ms),
                    plain_text(&synced.note, 400)
                ),
            ),
        );
    }
    if let Some(from) = &info.imported_from {
        lines.push((
            "imported from",
            format!(
                "{} (session {} there, exported {}) at {}",
                plain_text(&from.file.display().to_string(), 300),
                plain_text(&from.original_id, 64),
                rfc3339(from.exported_at_ms),
                rfc3339(from.at_ms)
            ),
        ));
    }
    if !info.tool_counts.is_empty() {
        let calls: Vec<String> = info
            .tool_counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        lines.push(("tool calls", calls.join(", ")));
    }
    let retries: Vec<String> = info
        .retry_counts
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    lines.push((
        "retries",
        if retries.is_empty() {
            "none".to_string()
        } else {
            retries.join(", ")
        },
    ));
    if !info.pending_tool_names.is_empty() {
        lines.push((
            "pending calls",
            format!(
                "{} (if the agent was interrupted, answered \"outcome unknown\" on resume, never re-run)",
                info.pending_tool_names.join(", ")
            ),
        ));
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let text: String = lines
        .iter()
        .map(|(k, v)| format!("{}  {v}\n", pad_to(&format!("{k}:"), width)))
        .collect();
    out(&text);
    Ok(())
}
