//! What the store finds where its files and directories should be but is not one: a FIFO (or
//! other special file) in place of a session file, a session directory or store root that is a
//! symlink. Nothing hangs, nothing is read or written through a symlink, and each is a clear
//! error naming the path (a listing reports the session instead and goes on).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use volee_store::{read_transcript, Health, NewSession, Store, StoreError};

use crate::session_with;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path().join("sessions"));
    (dir, store)
}

/// `f` on a thread of its own, given 5 s: an open that blocks on a FIFO fails the test instead
/// of hanging it.
fn within_5s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{what} hung (blocked opening a FIFO)"))
}

fn mkfifo(path: &Path) {
    let _ = fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// An error with its causes, as the CLI shows it.
fn text(e: &StoreError) -> String {
    let mut t = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        t.push_str(&format!(": {s}"));
        source = s.source();
    }
    t
}

/// Every store operation on `id`, each on its own thread with a time limit, in an order that
/// leaves `delete` last: (operation, its error if it failed). After each but `delete`, `watch`
/// (when given) must still be the FIFO it was.
fn every_operation(
    store: &Store,
    id: &str,
    project: &Path,
    watch: Option<&Path>,
) -> Vec<(&'static str, Option<String>)> {
    type Op = fn(&Store, &str, &Path) -> Result<(), StoreError>;
    let ops: [(&'static str, Op); 9] = [
        ("list", |s, _, _| s.list(true).map(drop)),
        ("search", |s, _, _| s.search("message", true).map(drop)),
        ("info", |s, id, _| s.info(id).map(drop)),
        ("export", |s, id, _| s.export(id).map(drop)),
        ("read_transcript", |s, id, _| {
            read_transcript(s, id).map(drop)
        }),
        ("fork", |s, id, _| s.fork(id).map(drop)),
        ("resume", |s, id, p| s.open_for_resume(id, p).map(drop)),
        ("rename", |s, id, _| s.rename(id, "renamed").map(drop)),
        ("delete", |s, id, _| s.delete(id).map(drop)),
    ];
    ops.into_iter()
        .map(|(name, op)| {
            let (store, id, project) = (store.clone(), id.to_string(), project.to_path_buf());
            let result = within_5s(name, move || op(&store, &id, &project));
            if let (Some(fifo), false) = (watch, name == "delete") {
                let kind = fs::symlink_metadata(fifo)
                    .unwrap_or_else(|e| panic!("{}, {name}: {e}", fifo.display()))
                    .file_type();
                assert!(
                    std::os::unix::fs::FileTypeExt::is_fifo(&kind),
                    "{}, {name}: the FIFO was replaced",
                    fifo.display()
                );
            }
            (name, result.err().map(|e| text(&e)))
        })
        .collect()
}

#[test]
fn a_fifo_in_place_of_any_session_file_is_a_clear_error_never_a_hang() {
    // (file, the operations that need it and so must fail)
    let cases: [(&str, &[&str]); 4] = [
        (
            "session.json",
            &["info", "export", "fork", "resume", "rename"],
        ),
        (
            "transcript.jsonl",
            &[
                "search",
                "export",
                "read_transcript",
                "fork",
                "resume",
                "rename",
            ],
        ),
        ("compactions.jsonl", &["export", "fork", "resume", "rename"]),
        ("lock", &["resume", "rename", "delete"]),
    ];
    for (file, failing) in cases {
        let (tmp, store) = store();
        let id = session_with(&store, tmp.path(), 2);
        let fifo = store.session_dir(&id).join(file);
        mkfifo(&fifo);
        for (op, error) in every_operation(&store, &id, tmp.path(), Some(&fifo)) {
            match error {
                Some(e) if failing.contains(&op) => assert!(
                    e.contains(file) && e.contains("FIFO, not a regular file"),
                    "{file}, {op}: {e}"
                ),
                Some(e) => panic!("{file}, {op} failed: {e}"),
                None => assert!(!failing.contains(&op), "{file}, {op} did not fail"),
            }
        }
        // A session whose lock is a FIFO is not deleted; any other is, FIFO and all.
        assert_eq!(store.session_dir(&id).exists(), file == "lock", "{file}");
    }
}

#[test]
fn a_fifo_meta_json_is_listed_as_damaged_and_hides_nothing() {
    let (tmp, store) = store();
    let good = session_with(&store, tmp.path(), 2);
    let bad = session_with(&store, tmp.path(), 2);
    mkfifo(&store.session_dir(&bad).join("meta.json"));
    let s = store.clone();
    let listed = within_5s("list", move || s.list(false)).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let b = listed.iter().find(|l| l.id == bad).unwrap();
    match &b.health {
        Health::Damaged { reason } => assert!(
            reason.contains("meta.json") && reason.contains("FIFO, not a regular file"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        listed.iter().find(|l| l.id == good).unwrap().health,
        Health::Ok
    );
    // Everything that needs only session.json still works; the FIFO is left as it is.
    let s = store.clone();
    let hits = within_5s("search", move || s.search("message", false)).unwrap();
    assert!(hits.iter().any(|h| h.id == good), "{hits:?}");
    let (s, b) = (store.clone(), bad.clone());
    within_5s("info", move || s.info(&b)).unwrap();
}

/// Every file under `dir` (symlinks not followed) with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let t = fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_dir() {
                todo.push(p);
            } else if t.is_file() {
                out.push((p.clone(), fs::read(&p).unwrap()));
            } else {
                out.push((p, Vec::new()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_symlinked_session_directory_is_refused_and_nothing_goes_through_it() {
    let (tmp, store) = store();
    let real = session_with(&store, tmp.path(), 2);
    // A directory elsewhere, and a valid id naming a symlink to it.
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("precious"), "keep me").unwrap();
    symlink(&elsewhere, store.root().join("aliaselsewhe")).unwrap();
    // A symlink to a real session: going through it must not touch that session either.
    symlink(store.session_dir(&real), store.root().join("aliastoreal0")).unwrap();
    let (before_elsewhere, before_real) =
        (snapshot(&elsewhere), snapshot(&store.session_dir(&real)));
    for alias in ["aliaselsewhe", "aliastoreal0"] {
        for (op, error) in every_operation(&store, alias, tmp.path(), None) {
            if matches!(op, "list" | "search") {
                assert_eq!(error, None, "{alias}, {op}");
                continue;
            }
            let e = error.unwrap_or_else(|| panic!("{alias}, {op} went through the symlink"));
            assert!(
                e.contains(alias) && e.contains("symbolic link"),
                "{alias}, {op}: {e}"
            );
        }
        let s = store.clone();
        let load = within_5s("load", move || s.load(alias));
        assert!(text(&load.unwrap_err()).contains("symbolic link"));
        assert!(fs::symlink_metadata(store.root().join(alias))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(
        snapshot(&elsewhere),
        before_elsewhere,
        "no lock, nothing deleted"
    );
    assert_eq!(snapshot(&store.session_dir(&real)), before_real);
    // The listing reports both and still shows the real session (once).
    let listed = store.list(true).unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");
    for alias in ["aliaselsewhe", "aliastoreal0"] {
        let l = listed.iter().find(|l| l.id == alias).unwrap();
        assert!(
            matches!(&l.health, Health::Damaged { reason } if reason.contains("symbolic link")),
            "{l:?}"
        );
    }
    assert!(listed
        .iter()
        .any(|l| l.id == real && l.health == Health::Ok));
    // A search reads no transcript through them: one hit, the real session.
    let hits = store.search("message", true).unwrap();
    assert_eq!(
        hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(),
        [real.as_str()]
    );
}

#[test]
fn a_symlinked_store_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real_root = tmp.path().join("real");
    let id = session_with(&Store::new(&real_root), tmp.path(), 1);
    symlink(&real_root, tmp.path().join("link")).unwrap();
    let store = Store::new(tmp.path().join("link"));
    let before = snapshot(&real_root);
    for (op, error) in every_operation(&store, &id, tmp.path(), None) {
        let e = error.unwrap_or_else(|| panic!("{op} went through the symlinked root"));
        assert!(
            e.contains("link") && e.contains("symbolic link"),
            "{op}: {e}"
        );
    }
    let created = store.create(NewSession {
        title: String::new(),
        project_root: tmp.path().to_path_buf(),
        model: "m".into(),
    });
    assert!(text(&created.unwrap_err()).contains("symbolic link"));
    assert_eq!(snapshot(&real_root), before);
}
