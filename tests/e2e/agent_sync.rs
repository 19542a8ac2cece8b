//! `volee agent --sync MACHINE` (issue 20): sessions of volee's own agent pulled and pushed over
//! a real OpenSSH server on loopback with a second Unix user as the remote account
//! (`volee_test_support::sshd`). Needs root; without it the test is skipped by hand and fails
//! under CI.
//!
//! Sessions are made without a model, with the store's API. The remote user's store is its
//! default one, `REMOTE_HOME/.local/share/volee/sessions` (no XDG variables over ssh); the test,
//! being root, writes and reads it directly: it takes the tree back for root while it does
//! (the store only trusts directories of the user running it) and gives it to the remote user
//! again before any remote volee runs.

use std::collections::BTreeMap;
use std::os::unix::fs::lchown;
use std::path::{Path, PathBuf};

use serde_json::Value;
use volee_store::{Message, NewSession, Store};
use volee_test_support::sshd::{require_sshd, RemotePath, SshServer};
use volee_test_support::TestEnv;

fn chown_tree(path: &Path, uid: u32, gid: u32) {
    if !path.exists() {
        return;
    }
    lchown(path, Some(uid), Some(gid)).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid, gid);
        }
    }
}

/// The remote account's session store, as root sees it.
struct RemoteStore<'a> {
    server: &'a SshServer,
}

impl RemoteStore<'_> {
    fn tree(&self) -> PathBuf {
        self.server.remote_home().join(".local")
    }

    /// Run `f` on the remote store as root, then give the tree back to the remote user.
    fn with<T>(&self, f: impl FnOnce(&Store) -> T) -> T {
        chown_tree(&self.tree(), 0, 0);
        let store = Store::new(self.tree().join("share/volee/sessions"));
        let out = f(&store);
        chown_tree(&self.tree(), self.server.user.uid, self.server.user.gid);
        out
    }

    fn digests(&self) -> BTreeMap<String, String> {
        self.with(digests)
    }
}

fn digests(store: &Store) -> BTreeMap<String, String> {
    store
        .sync_manifest()
        .unwrap()
        .into_iter()
        .map(|e| (e.id, e.digest.unwrap()))
        .collect()
}

fn create(store: &Store, title: &str, messages: &[&str]) -> String {
    let mut w = store
        .create(NewSession {
            title: title.into(),
            project_root: "/work".into(),
            model: "gemma4".into(),
        })
        .unwrap();
    for m in messages {
        w.push_message(Message::user(*m)).unwrap();
    }
    w.checkpoint().unwrap();
    w.id().to_string()
}

fn add_message(store: &Store, id: &str, text: &str) {
    let mut w = store.open_writer(id).unwrap();
    w.push_message(Message::assistant(text)).unwrap();
    w.checkpoint().unwrap();
}

/// `volee agent --sync box ARGS… --json`: the report, after checking the exit code.
fn sync(env: &TestEnv, args: &[&str]) -> Value {
    let mut all = vec!["agent", "--sync", "box", "--json"];
    all.extend_from_slice(args);
    let out = crate::output_within(env.volee(&all), std::time::Duration::from_secs(30));
    assert!(
        out.status.success(),
        "volee {all:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `(id, action, status)` of a report, sorted.
fn moves(report: &Value) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["action"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

fn row<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {report:#}"))
}

fn mv(id: &str, action: &str, status: &str) -> (String, String, String) {
    (id.into(), action.into(), status.into())
}

#[test]
fn sessions_sync_both_ways_fork_when_both_changed_and_skip_what_is_held_or_deleted() {
    let Some((_guard, mut env)) = crate::setup_without_server() else {
        return;
    };
    if !require_sshd("the agent --sync tests") {
        return;
    }
    let server = SshServer::start(RemotePath::WithVolee(&env.bin));
    env.extra_env.push((
        "VOLEE_SSH_CONFIG".into(),
        server.ssh_config.to_string_lossy().into_owned(),
    ));
    server.trust_host_key();
    env.ok([
        "machine",
        "add",
        "box",
        &server.dest(),
        "--port",
        &server.port.to_string(),
    ]);
    let here = Store::new(env.volee_home().join("data/sessions"));
    let there = RemoteStore { server: &server };

    // Round 1: new sessions on each side.
    let a = create(&here, "alpha", &["a1", "a2"]);
    let c = create(&here, "gamma", &["c1"]);
    let d = create(&here, "delta", &["d1"]);
    let b = there.with(|s| create(s, "beta", &["b1", "b2", "b3"]));
    let (here_before, there_before) = (digests(&here), there.digests());

    let dry = sync(&env, &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        moves(&dry),
        {
            let mut v = vec![
                mv(&a, "push", "planned"),
                mv(&b, "pull", "planned"),
                mv(&c, "push", "planned"),
                mv(&d, "push", "planned"),
            ];
            v.sort();
            v
        },
        "{dry:#}"
    );
    assert_eq!(
        digests(&here),
        here_before,
        "--dry-run changed nothing here"
    );
    assert_eq!(
        there.digests(),
        there_before,
        "--dry-run changed nothing there"
    );

    let first = sync(&env, &[]);
    assert!(
        moves(&first).iter().all(|(_, _, s)| s == "done"),
        "{first:#}"
    );
    let (h, t) = (digests(&here), there.digests());
    assert_eq!(h.len(), 4, "{h:?}");
    assert_eq!(h, t, "both sides hold the same four sessions");
    assert_eq!(h[&b], there_before[&b], "pulled as it was");
    // Text output too, once: nothing left to do.
    let again = env.ok(["agent", "--sync", "box"]);
    assert!(
        again.contains("nothing to sync: 4 in sync with box"),
        "{again}"
    );
    let dry = sync(&env, &["--dry-run"]);
    assert!(moves(&dry).is_empty(), "{dry:#}");
    assert_eq!(dry["in_sync"], 4);

    // Round 2: alpha changed here only, gamma on both sides, delta held by a writer here (and
    // changed there), beta held by a writer there (and changed here).
    add_message(&here, &a, "alpha goes on here");
    add_message(&here, &c, "gamma here");
    there.with(|s| add_message(s, &c, "gamma there"));
    there.with(|s| add_message(s, &d, "delta there"));
    add_message(&here, &b, "beta here");
    let held_here = here.open_writer(&d).unwrap();
    let held_there = there.with(|s| s.open_writer(&b).unwrap());
    let (here_before, there_before) = (digests(&here), there.digests());

    let dry = sync(&env, &["--dry-run"]);
    assert_eq!(
        moves(&dry),
        {
            let mut v = vec![
                mv(&a, "push", "planned"),
                mv(&b, "skip", "skipped"),
                mv(&c, "fork", "planned"),
                mv(&d, "skip", "skipped"),
            ];
            v.sort();
            v
        },
        "{dry:#}"
    );
    assert_eq!(digests(&here), here_before);
    assert_eq!(there.digests(), there_before);
    let text = env.ok(["agent", "--sync", "box", "--dry-run"]);
    assert!(text.contains("would push"), "{text}");
    assert!(text.contains("would fork"), "{text}");
    assert!(text.contains("dry run: nothing was changed"), "{text}");

    let second = sync(&env, &[]);
    assert_eq!(row(&second, &a)["status"], "done", "{second:#}");
    let reason = |id: &str| row(&second, id)["reason"].as_str().unwrap().to_string();
    assert!(reason(&d).contains("in use here"), "{second:#}");
    assert!(reason(&b).contains("in use on box"), "{second:#}");
    assert_eq!(row(&second, &c)["status"], "done", "{second:#}");
    let fork = row(&second, &c)["fork_id"].as_str().unwrap().to_string();

    // alpha: the remote's copy is now the local one, byte for byte.
    let (h, t) = (digests(&here), there.digests());
    assert_eq!(t[&a], h[&a]);
    let local_transcript = std::fs::read(here.session_dir(&a).join("transcript.jsonl")).unwrap();
    let remote_transcript =
        there.with(|s| std::fs::read(s.session_dir(&a).join("transcript.jsonl")).unwrap());
    assert_eq!(remote_transcript, local_transcript);
    assert!(String::from_utf8_lossy(&remote_transcript).contains("alpha goes on here"));
    // gamma: both originals as they were; the remote's version came in as a fork, pushed too.
    assert_eq!(h[&c], here_before[&c], "gamma here untouched");
    assert_eq!(t[&c], there_before[&c], "gamma there untouched");
    assert_eq!(t[&fork], h[&fork], "the fork is on both sides");
    let info: Value = serde_json::from_str(&env.ok(["agent", "--info", &fork, "--json"])).unwrap();
    assert_eq!(info["parent_id"], c.as_str(), "{info:#}");
    assert_eq!(info["synced_from"]["machine"], "box", "{info:#}");
    let info_text = env.ok(["agent", "--info", &fork]);
    assert!(
        info_text.contains("synced from")
            && info_text.contains("changed on both sides since the last sync"),
        "{info_text}"
    );
    let fork_transcript =
        std::fs::read_to_string(here.session_dir(&fork).join("transcript.jsonl")).unwrap();
    assert!(fork_transcript.contains("gamma there"), "{fork_transcript}");
    assert!(!fork_transcript.contains("gamma here"), "{fork_transcript}");
    // Held ones: nothing moved either way.
    assert_eq!(h[&d], here_before[&d]);
    assert_eq!(t[&d], there_before[&d]);
    assert_eq!(h[&b], here_before[&b]);
    assert_eq!(t[&b], there_before[&b]);

    // The writers gone: delta's change there comes in, beta's goes out; the forked gamma pair
    // stays apart (skipped with why), nothing forks again.
    drop(held_here);
    drop(held_there);
    let third = sync(&env, &[]);
    assert_eq!(row(&third, &d)["action"], "pull", "{third:#}");
    assert_eq!(row(&third, &b)["action"], "push", "{third:#}");
    assert_eq!(row(&third, &c)["action"], "skip", "{third:#}");
    assert_eq!(
        moves(&third).iter().filter(|(_, a, _)| a == "fork").count(),
        0
    );
    let (h, t) = (digests(&here), there.digests());
    assert_eq!(
        (h[&d].clone(), h[&b].clone()),
        (t[&d].clone(), t[&b].clone())
    );

    // A session deleted here since the last sync is not brought back, and said so.
    env.ok(["agent", "--delete", &a, "--yes"]);
    let fourth = sync(&env, &[]);
    let gone = row(&fourth, &a);
    assert_eq!(gone["action"], "skip", "{fourth:#}");
    assert!(
        gone["reason"]
            .as_str()
            .unwrap()
            .contains("deleted here since the last sync"),
        "{fourth:#}"
    );
    assert!(
        gone["hint"].as_str().unwrap().contains("--delete"),
        "{fourth:#}"
    );
    assert!(here.resolve(&a).is_err(), "not pulled back");
    assert!(there.digests().contains_key(&a), "not deleted there either");

    // Only the sessions asked for.
    add_message(&here, &d, "delta again");
    add_message(&here, &b, "beta again");
    let only = sync(&env, &[&d[..6]]);
    assert_eq!(moves(&only), vec![mv(&d, "push", "done")], "{only:#}");

    // An unknown machine: a user error naming the saved ones.
    let unknown = env.run(["agent", "--sync", "nosuch"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no machine named"));
}
