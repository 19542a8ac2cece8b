//! `volee agent --fork ID --project DIR`: a fork re-rooted in another project directory, so a
//! session of one checkout can go on in another (the resume hint for another project's session
//! says to do this). The fork is made whole in a hidden directory, re-rooted there with a
//! `reprojected` event, and only then renamed into place.

use std::path::{Path, PathBuf};

use crate::error::{io_err, Result};
use crate::model::TranscriptItem;
use crate::store::Store;

/// The transcript event of a fork re-rooted by `--fork ID --project DIR`.
pub const REPROJECTED_EVENT: &str = "reprojected";

impl Store {
    /// Fork a session (as [`Store::fork`]) with `project_root` as the fork's project directory
    /// (canonicalised; it must exist). Returns the fork's id and its root.
    pub fn fork_to_project(&self, id_or_prefix: &str, project: &Path) -> Result<(String, PathBuf)> {
        let root = std::fs::canonicalize(project).map_err(io_err("open", project))?;
        let fork = self.fork_hidden(id_or_prefix)?;
        let rerooted = (|| {
            let mut w = self.open_writer_at(&fork.id, &fork.tmp)?;
            let from = w.state().project_root.clone();
            w.state_mut().project_root = root.clone();
            w.record(TranscriptItem::Event {
                name: REPROJECTED_EVENT.into(),
                detail: serde_json::json!({"from": from, "to": root}),
            })?;
            w.checkpoint()
        })();
        if let Err(e) = rerooted {
            let _ = std::fs::remove_dir_all(&fork.tmp);
            return Err(e);
        }
        self.reveal(&fork)?;
        Ok((fork.id, root))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::store::NewSession;

    #[test]
    fn a_fork_into_another_project_resumes_there() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let store = Store::new(dir.path().join("s"));
        let mut w = store
            .create(NewSession {
                title: "t".into(),
                project_root: a.canonicalize().unwrap(),
                model: "m".into(),
            })
            .unwrap();
        w.push_message(crate::model::Message::user("hi")).unwrap();
        w.checkpoint().unwrap();
        let id = w.id().to_string();
        drop(w);
        assert!(store.open_for_resume(&id, &b).is_err());
        let (fork, root) = store.fork_to_project(&id, &b).unwrap();
        assert_eq!(root, b.canonicalize().unwrap());
        let state = store.load(&fork).unwrap();
        assert_eq!(state.project_root, root);
        assert_eq!(state.parent_id.as_deref(), Some(id.as_str()));
        assert_eq!(
            store.load(&id).unwrap().project_root,
            a.canonicalize().unwrap()
        );
        drop(store.open_for_resume(&fork, &b).unwrap());
        let lines = crate::read_transcript(&store, &fork).unwrap().items;
        assert!(matches!(
            &lines.last().unwrap().item,
            TranscriptItem::Event { name, .. } if name == REPROJECTED_EVENT
        ));
        // A directory that does not exist: nothing made.
        assert!(store
            .fork_to_project(&id, &dir.path().join("nope"))
            .is_err());
        assert_eq!(store.list(true).unwrap().len(), 2);
    }
}
