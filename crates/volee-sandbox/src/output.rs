//! Bounded capture of a command's output: the first and the last half of the limit are kept, the
//! middle is dropped and replaced by a marker (compiler errors and test summaries come last).

/// The start of the marker that replaces dropped output.
pub const TRUNCATION_MARKER: &str = "[volee: ";

/// One stream's capture, bounded at `limit` bytes of content (plus the marker).
#[derive(Debug, Clone)]
pub struct CappedOutput {
    limit: usize,
    head: Vec<u8>,
    /// A ring of the last bytes once the head is full.
    tail: Vec<u8>,
    tail_start: usize,
    total: u64,
}

impl CappedOutput {
    pub fn new(limit: usize) -> CappedOutput {
        CappedOutput {
            limit,
            head: Vec::new(),
            tail: Vec::new(),
            tail_start: 0,
            total: 0,
        }
    }

    fn head_limit(&self) -> usize {
        self.limit.div_ceil(2)
    }
    fn tail_limit(&self) -> usize {
        self.limit - self.head_limit()
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_limit().saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        let cap = self.tail_limit();
        if bytes.is_empty() || cap == 0 {
            return;
        }
        if bytes.len() >= cap {
            self.tail = bytes[bytes.len() - cap..].to_vec();
            self.tail_start = 0;
            return;
        }
        for &b in bytes {
            if self.tail.len() < cap {
                self.tail.push(b);
            } else {
                self.tail[self.tail_start] = b;
                self.tail_start = (self.tail_start + 1) % cap;
            }
        }
    }

    /// Bytes seen in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// More was seen than kept.
    pub fn truncated(&self) -> bool {
        self.total > self.limit as u64
    }

    /// The kept bytes; when truncated, with a marker line where the middle was dropped.
    pub fn render(&self, stream: &str) -> Vec<u8> {
        let mut out = self.head.clone();
        if self.truncated() {
            let dropped = self.total - (self.head.len() + self.tail.len()) as u64;
            out.extend_from_slice(
                format!(
                    "\n{TRUNCATION_MARKER}{dropped} bytes of {stream} omitted, {} in all]\n",
                    self.total
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(&self.tail[self.tail_start..]);
        out.extend_from_slice(&self.tail[..self.tail_start]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_limit() {
        let mut c = CappedOutput::new(10);
        c.push(b"hello");
        c.push(b"world");
        assert!(!c.truncated());
        assert_eq!(c.render("stdout"), b"helloworld");
    }

    #[test]
    fn keeps_head_and_tail_with_a_marker() {
        for chunk in [1usize, 3, 7, 100] {
            let mut c = CappedOutput::new(10);
            let data: Vec<u8> = (b'a'..=b'z').collect();
            for piece in data.chunks(chunk) {
                c.push(piece);
            }
            assert!(c.truncated());
            assert_eq!(c.total(), 26);
            let text = String::from_utf8(c.render("stdout")).unwrap();
            assert_eq!(
                text, "abcde\n[volee: 16 bytes of stdout omitted, 26 in all]\nvwxyz",
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn zero_limit_keeps_only_the_marker() {
        let mut c = CappedOutput::new(0);
        c.push(b"abc");
        assert_eq!(
            String::from_utf8(c.render("stderr")).unwrap(),
            "\n[volee: 3 bytes of stderr omitted, 3 in all]\n"
        );
    }
}
