//! `volee agent --prune-sessions [--dry-run] [--json]`: the retention policy of config.toml's
//! `[sessions]` applied to the store (the logic is `volee_store::retention`; the daemon applies
//! the same once a day).

use volee_daemon::config::Config;
use volee_store::{RetentionKind, Store};
use volee_view::text::plain_text;

use crate::ask::paths;
use crate::error::{CliError, CliResult, Exit};
use crate::output::out;

pub fn run(store: &Store, dry_run: bool, json: bool) -> CliResult {
    let config_file = paths().config_file();
    let config = Config::load(&config_file)?;
    let policy = volee_daemon::session_retention::policy(&config.sessions);
    if !policy.is_set() {
        let text = format!(
            "no retention policy: set [sessions] archive_after and/or delete_archived_after in {} (e.g. \"30d\", \"180d\")",
            config_file.display()
        );
        if json {
            let v = serde_json::json!({"dry_run": dry_run, "policy_set": false, "actions": []});
            return print(&v);
        }
        out(&text);
        return Ok(());
    }
    let outcomes = store.apply_retention(&policy, volee_store::now_ms(), dry_run)?;
    let failed = outcomes.iter().filter(|o| o.status == "failed").count();
    if json {
        let v = serde_json::json!({"dry_run": dry_run, "policy_set": true, "actions": outcomes});
        print(&v)?;
    } else if outcomes.is_empty() {
        out("nothing to archive or delete");
    } else {
        let mut text = String::new();
        for o in &outcomes {
            let verb = match o.planned.action {
                RetentionKind::Archive => "archive",
                RetentionKind::Delete => "delete",
            };
            let head = match o.status {
                "planned" => format!("would {verb}"),
                "done" => format!("{verb}d"),
                other => format!("{verb}: {other}"),
            };
            text.push_str(&format!(
                "{head} {}  {}  (idle {} days){}\n",
                o.planned.id,
                plain_text(&o.planned.title, 48),
                o.planned.idle_ms / 86_400_000,
                o.reason
                    .as_deref()
                    .map(|r| format!(": {}", plain_text(r, 200)))
                    .unwrap_or_default()
            ));
        }
        out(&text);
    }
    if failed > 0 {
        return Err(CliError::new(
            Exit::Negative,
            format!("{failed} retention action(s) failed (the others ran)"),
        ));
    }
    Ok(())
}

fn print(v: &serde_json::Value) -> CliResult {
    let text =
        serde_json::to_string_pretty(v).map_err(|e| CliError::from_error(Exit::Internal, &e))?;
    out(&text);
    Ok(())
}
