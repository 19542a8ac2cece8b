//! volee's own sandbox image, built locally (no registry is needed): the host's static busybox
//! (Debian's `busybox-static`) as `/bin/busybox` plus one symlink per applet, a minimal
//! `/etc/passwd`, imported with `docker import` semantics (`POST /images/create?fromSrc=-`) from a
//! tar stream made here. See docs/adr/0006-sandbox-image.md.

use std::path::{Path, PathBuf};

use bollard::query_parameters::CreateImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

use crate::error::SandboxError;

/// The image volee builds and uses unless told otherwise.
pub const BUSYBOX_IMAGE: &str = "volee-sandbox:busybox";

/// Where a static busybox is looked for (`VOLEE_BUSYBOX` first when set).
pub const BUSYBOX_PATHS: &[&str] = &["/bin/busybox", "/usr/bin/busybox", "/sbin/busybox"];

/// Is `elf` a static executable (an ELF with no `PT_INTERP` program header)? False for anything
/// that is not a 64- or 32-bit little-endian ELF.
pub fn is_static_elf(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if elf.len() < 0x34 || &elf[..4] != b"\x7fELF" || elf[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    let (phoff, phentsize, phnum) = match elf[4] {
        2 => (u64_at(0x20).map(|v| v as usize), u16_at(0x36), u16_at(0x38)),
        1 => (u32_at(0x1c).map(|v| v as usize), u16_at(0x2a), u16_at(0x2c)),
        _ => return false,
    };
    let (Some(phoff), Some(size), Some(num)) = (phoff, phentsize, phnum) else {
        return false;
    };
    for i in 0..usize::from(num) {
        let Some(at) = phoff.checked_add(i * usize::from(size)) else {
            return false;
        };
        match u32_at(at) {
            Some(PT_INTERP) => return false,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// The first static busybox among `VOLEE_BUSYBOX` and [`BUSYBOX_PATHS`].
pub fn find_busybox() -> Result<PathBuf, SandboxError> {
    let mut tried: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("VOLEE_BUSYBOX") {
        tried.push(PathBuf::from(p));
    }
    tried.extend(BUSYBOX_PATHS.iter().map(PathBuf::from));
    let mut dynamic = None;
    for path in &tried {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        if is_static_elf(&bytes) {
            return Ok(path.clone());
        }
        dynamic.get_or_insert_with(|| path.clone());
    }
    match dynamic {
        Some(path) => Err(SandboxError::BusyboxNotStatic { path }),
        None => Err(SandboxError::BusyboxMissing { tried }),
    }
}

/// The applets of a busybox binary as paths relative to `/` (`bin/sh`, `usr/bin/timeout`…), from
/// `busybox --list-full` (run on the host: the binary is static).
pub async fn applets(busybox: &Path) -> Result<Vec<String>, SandboxError> {
    let out = tokio::process::Command::new(busybox)
        .arg("--list-full")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|source| SandboxError::Io {
            what: format!("run {} --list-full", busybox.display()),
            source,
        })?;
    let list = String::from_utf8_lossy(&out.stdout);
    Ok(parse_applets(&list))
}

/// `--list-full` output → clean relative paths (no `..`, no absolute, no busybox itself).
pub fn parse_applets(list: &str) -> Vec<String> {
    let mut out: Vec<String> = list
        .lines()
        .map(|l| l.trim().trim_start_matches('/').to_string())
        .filter(|l| {
            !l.is_empty()
                && l != "bin/busybox"
                && l.split('/')
                    .all(|part| !part.is_empty() && part != "." && part != "..")
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// The image's root filesystem as an uncompressed tar: directories, `/bin/busybox` (mode 0755),
/// a symlink to it per applet, `/etc/passwd` and `/etc/group`. Reproducible: owner 0, mtime 0.
pub fn rootfs_tar(busybox: &[u8], applets: &[String]) -> Result<Vec<u8>, SandboxError> {
    let io = |source| SandboxError::Io {
        what: "build the sandbox image's tar".into(),
        source,
    };
    let mut b = tar::Builder::new(Vec::new());
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_size(size);
        h
    };
    let mut dirs: Vec<String> = [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "root",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for a in applets {
        let mut parent = Path::new(a).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.push(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in &dirs {
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        b.append_data(&mut h, format!("{d}/"), std::io::empty())
            .map_err(io)?;
    }
    let mut h = header(tar::EntryType::Directory, 0o1777, 0);
    b.append_data(&mut h, "tmp/", std::io::empty())
        .map_err(io)?;
    let mut h = header(tar::EntryType::Regular, 0o755, busybox.len() as u64);
    b.append_data(&mut h, "bin/busybox", busybox).map_err(io)?;
    for (path, text) in [("etc/passwd", PASSWD), ("etc/group", GROUP)] {
        let mut h = header(tar::EntryType::Regular, 0o644, text.len() as u64);
        b.append_data(&mut h, path, text.as_bytes()).map_err(io)?;
    }
    for a in applets {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        b.append_link(&mut h, a, "/bin/busybox").map_err(io)?;
    }
    b.into_inner().map_err(io)
}

static BUILDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Does the daemon have `image`?
pub async fn image_exists(docker: &Docker, image: &str) -> Result<bool, SandboxError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(false),
        Err(source) => Err(SandboxError::Docker {
            what: format!("inspect image {image}"),
            source,
        }),
    }
}

/// Build [`BUSYBOX_IMAGE`]-style image `name` (`repo:tag`) from the host's busybox.
pub async fn build_busybox_image(docker: &Docker, name: &str) -> Result<(), SandboxError> {
    let path = find_busybox()?;
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|source| SandboxError::Io {
            what: format!("read {}", path.display()),
            source,
        })?;
    let list = applets(&path).await?;
    let tar = rootfs_tar(&bytes, &list)?;
    let (repo, tag) = match name.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, t),
        _ => (name, "latest"),
    };
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .changes(vec![
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            "LABEL dev.volee.image=busybox".into(),
        ])
        .build();
    let mut progress = docker.create_image(
        Some(options),
        Some(bollard::body_full(bytes::Bytes::from(tar))),
        None,
    );
    while let Some(item) = progress.next().await {
        item.map_err(|source| SandboxError::Docker {
            what: format!("import the sandbox image {name}"),
            source,
        })?;
    }
    tracing::info!(
        "built sandbox image {name} from {} ({} applets)",
        path.display(),
        list.len()
    );
    Ok(())
}

/// Make sure `image` exists: [`BUSYBOX_IMAGE`] is built on first use; any other image must be
/// there already (no registry to pull from).
pub async fn ensure_image(docker: &Docker, image: &str) -> Result<(), SandboxError> {
    if image_exists(docker, image).await? {
        return Ok(());
    }
    if image == BUSYBOX_IMAGE {
        // Sandboxes started together build it once (a second import would leave an untagged
        // copy behind).
        let _building = BUILDING.lock().await;
        if image_exists(docker, image).await? {
            return Ok(());
        }
        return build_busybox_image(docker, image).await;
    }
    Err(SandboxError::ImageMissing {
        image: image.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applet_list_is_cleaned() {
        let list = "usr/bin/[\nbin/sh\n/bin/ls\nbin/busybox\n../etc/x\nusr/bin/timeout\n\nbin/sh\n";
        assert_eq!(
            parse_applets(list),
            vec!["bin/ls", "bin/sh", "usr/bin/[", "usr/bin/timeout"]
        );
    }

    #[test]
    fn static_and_dynamic_elves_are_told_apart() {
        // A minimal ELF64 header with one program header of the given type.
        let elf = |p_type: u32| {
            let mut v = vec![0u8; 0x40 + 0x38];
            v[..4].copy_from_slice(b"\x7fELF");
            v[4] = 2;
            v[5] = 1;
            v[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
            v[0x36..0x38].copy_from_slice(&0x38u16.to_le_bytes());
            v[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
            v[0x40..0x44].copy_from_slice(&p_type.to_le_bytes());
            v
        };
        assert!(is_static_elf(&elf(1)));
        assert!(!is_static_elf(&elf(3)));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
        assert!(!is_static_elf(&elf(1)[..0x40]));
        // The host's own shell is dynamic on Debian.
        if let Ok(sh) = std::fs::read("/bin/bash") {
            assert!(!is_static_elf(&sh));
        }
    }

    #[test]
    fn rootfs_tar_has_busybox_links_and_passwd() {
        let tar = rootfs_tar(b"BB", &["bin/sh".into(), "usr/bin/timeout".into()]).unwrap();
        let mut a = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for e in a.entries().unwrap() {
            let e = e.unwrap();
            let path = e.path().unwrap().to_string_lossy().into_owned();
            let link = e
                .link_name()
                .unwrap()
                .map(|l| l.to_string_lossy().into_owned());
            seen.push((path, e.header().mode().unwrap(), link));
        }
        assert!(seen.contains(&("bin/busybox".into(), 0o755, None)));
        assert!(seen.contains(&("bin/sh".into(), 0o777, Some("/bin/busybox".into()))));
        assert!(seen.contains(&("usr/bin/timeout".into(), 0o777, Some("/bin/busybox".into()))));
        assert!(seen.contains(&("tmp/".into(), 0o1777, None)));
        assert!(seen.iter().any(|(p, _, _)| p == "etc/passwd"));
    }
}
