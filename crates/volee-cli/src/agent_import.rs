//! `volee agent --import FILE [--project DIR] [--keep-id]`: an export (`volee agent --export`)
//! made a session of this store. The checks and the atomic write are the store's
//! (`Store::import`, docs/store.md "Import"); this prints what was made.

use std::path::Path;

use volee_store::{ImportOptions, Store};
use volee_view::text::plain_text;

use crate::error::CliResult;
use crate::output::out;

/// Run `volee agent --import`.
pub fn run(
    store: &Store,
    file: &Path,
    project: Option<&Path>,
    keep_id: bool,
    json: bool,
) -> CliResult {
    let imported = store.import(
        file,
        &ImportOptions {
            project_root: project.map(Path::to_path_buf),
            keep_id,
            ..ImportOptions::default()
        },
    )?;
    if json {
        let mut v = serde_json::to_value(&imported)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("file".into(), file.display().to_string().into());
        }
        return crate::output::json(&v);
    }
    let mut text = format!(
        "imported {} as {} (session {} there): {} context messages, {} transcript lines, project {}\n",
        plain_text(&file.display().to_string(), 300),
        imported.id,
        imported.original_id,
        imported.messages,
        imported.transcript_lines,
        plain_text(&imported.project_root.display().to_string(), 300),
    );
    if imported.recovered_tail {
        text.push_str(
            "note: the export had transcript lines after its last checkpoint; they are kept and the context is the checkpoint's\n",
        );
    }
    text.push_str(
        "note: its text is the export's, with secrets redacted ([REDACTED]); the originals are not in the file\n",
    );
    text.push_str(&format!(
        "resume it from {}: volee agent --resume {}\n",
        plain_text(&imported.project_root.display().to_string(), 300),
        imported.id
    ));
    out(&text);
    Ok(())
}
