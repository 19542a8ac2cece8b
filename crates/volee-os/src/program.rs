//! A program on a `PATH`.

use std::ffi::OsStr;
use std::path::PathBuf;

/// `program` in the first directory of `path` (a `PATH` value) that holds a regular file of that
/// name, the way a shell would look (it does not check the execute bit: running a file that is
/// not executable then fails with a message that names it, rather than going on to a later one).
pub fn find_in(program: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `program` on this process's `PATH`.
pub fn find(program: &str) -> Option<PathBuf> {
    find_in(program, &std::env::var_os("PATH")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_directory_holding_the_file_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            tmp.path().join("a"),
            tmp.path().join("b"),
            tmp.path().join("c"),
        );
        for d in [&a, &b, &c] {
            std::fs::create_dir(d).unwrap();
        }
        // A directory of that name is not the program.
        std::fs::create_dir(a.join("tool")).unwrap();
        std::fs::write(b.join("tool"), "").unwrap();
        std::fs::write(c.join("tool"), "").unwrap();
        let path = std::env::join_paths([&a, &b, &c]).unwrap();
        assert_eq!(find_in("tool", &path), Some(b.join("tool")));
        assert_eq!(find_in("other", &path), None);
        assert_eq!(find_in("tool", OsStr::new("")), None);
    }
}
