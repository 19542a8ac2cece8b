//! `recall`: the agent's own search of its session's transcript, so what a compaction
//! summarised away can be read again when precision matters. The store's search, on one
//! session, bounded (the match count and the first few snippets) and redacted like every
//! snippet.

use crate::error::Result;
use crate::search::{Matcher, Snippet};
use crate::store::{Store, TRANSCRIPT_FILE};

/// What `recall` found in one session's transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recalled {
    /// Transcript lines that match.
    pub matches: u64,
    /// The first few, with the text around the match (redacted).
    pub snippets: Vec<Snippet>,
}

impl Store {
    /// Search session `id`'s transcript for `query` (case-insensitive), without its lock (the
    /// writer may be the caller).
    pub fn recall(&self, id: &str, query: &str) -> Result<Recalled> {
        let path = self.checked_session_dir(id)?.join(TRANSCRIPT_FILE);
        let mut snippets = Vec::new();
        let (matches, _) = Matcher::new(query).scan_file(&path, &mut snippets)?;
        Ok(Recalled { matches, snippets })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::model::Message;
    use crate::store::NewSession;

    #[test]
    fn recall_finds_its_own_lines_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let mut w = store
            .create(NewSession {
                title: "t".into(),
                project_root: dir.path().into(),
                model: "m".into(),
            })
            .unwrap();
        w.push_message(Message::user("the port is 8443, key API_KEY=Xk9fQ2mLzzq1"))
            .unwrap();
        w.push_message(Message::user("nothing")).unwrap();
        w.checkpoint().unwrap();
        let r = store.recall(w.id(), "PORT IS").unwrap();
        assert_eq!(r.matches, 1);
        assert!(r.snippets[0].text.contains("8443"), "{:?}", r.snippets);
        assert!(!r.snippets[0].text.contains("Xk9fQ2mLzzq1"));
        assert_eq!(store.recall(w.id(), "absent").unwrap().matches, 0);
    }
}
