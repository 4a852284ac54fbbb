//! Files only their owner may read or replace, such as a server's bearer token: refused when
//! others could read them or swap them (as ssh refuses such a private key), created exclusively
//! and never through a symbolic link.

use std::fs::{DirBuilder, Metadata, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mcpgw_sys::fs::euid;

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("."),
    }
}

/// Makes `path`'s directory (and its parents) when missing, mode 0700.
pub fn make_directory(path: &Path) -> Result<(), String> {
    let dir = directory_of(path);
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))
}

/// Refuses the private file `path` (`what` names it in messages, e.g. "token file") when
/// others could read it or replace it: its directory belongs to another user (root aside), or
/// others may write to it without the sticky bit; it is a symbolic link (it could point
/// anywhere, and be changed), not a regular file, another user's, or readable or writable by
/// group or others. `Ok(None)`: it does not exist (its directory passed).
pub fn check(path: &Path, what: &str) -> Result<Option<Metadata>, String> {
    let shown = path.display();
    let dir = directory_of(path);
    if let Ok(meta) = std::fs::metadata(&dir) {
        let mode = meta.permissions().mode();
        if meta.uid() != euid() && meta.uid() != 0 {
            return Err(format!(
                "refusing {what} {shown}: its directory {} belongs to another user (uid {}), \
                 who could replace it; use a directory of your own",
                dir.display(),
                meta.uid()
            ));
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            let who = if mode & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            };
            return Err(format!(
                "refusing {what} {shown}: its directory {} is writable by {who} (mode {:o}) \
                 without the sticky bit, so others could replace it; use a private directory",
                dir.display(),
                mode & 0o7777
            ));
        }
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot inspect {what} {shown}: {e}")),
    };
    if meta.file_type().is_symlink() {
        return Err(format!(
            "refusing {what} {shown}: it is a symbolic link; give the path of the file itself"
        ));
    }
    if !meta.file_type().is_file() {
        return Err(format!("refusing {what} {shown}: it is not a regular file"));
    }
    if meta.uid() != euid() {
        return Err(format!(
            "refusing {what} {shown}: it belongs to another user (uid {})",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "refusing {what} {shown}: others may read or change it (mode {mode:o}); make it \
             private with `chmod 600 {shown}`"
        ));
    }
    Ok(Some(meta))
}

/// Creates the private file `path` with `contents`, mode 0600, exclusively and not through a
/// symbolic link; its directory is made (0700) when missing. A file of this user's that
/// passes [`check`] is replaced; anything else there is refused.
pub fn create(path: &Path, contents: &[u8], what: &str) -> Result<(), String> {
    let shown = path.display();
    make_directory(path)?;
    if check(path, what)?.is_some() {
        std::fs::remove_file(path).map_err(|e| format!("cannot replace {what} {shown}: {e}"))?;
    }
    let mut file = match open_new(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(format!(
                "refusing {what} {shown}: something else created it meanwhile"
            ));
        }
        Err(e) => return Err(format!("cannot create {what} {shown}: {e}")),
    };
    file.write_all(contents)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {what} {shown}: {e}"))
}

/// Opens `path` for writing when it does not exist yet: mode 0600, never through a symbolic
/// link.
pub fn open_new(path: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(mcpgw_sys::fs::O_NOFOLLOW)
        .open(path)
}

/// Opens the private file `path` for reading, never through a symbolic link.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(mcpgw_sys::fs::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "mcpgw-private-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    fn set_mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    }

    #[test]
    fn a_private_file_is_made_and_replaced_but_never_through_a_link() {
        let dir = temp_dir();
        let file = dir.join("sub/token");
        create(&file, b"one", "token file").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&file), mode(file.parent().unwrap())), (0o600, 0o700));
        create(&file, b"two", "token file").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        // A link is refused, and what it points to is left alone.
        let target = dir.join("target");
        std::fs::write(&target, "keep").unwrap();
        set_mode(&target, 0o644);
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = create(&link, b"secret", "token file").unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(mode(&target), 0o644);
        // A file others may read is not replaced either.
        let e = create(&target, b"secret", "token file").unwrap_err();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        assert!(
            create(&dir, b"x", "token file")
                .unwrap_err()
                .contains("regular file")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn directories_others_may_write_to_are_refused_unless_sticky() {
        let dir = temp_dir();
        let shared = dir.join("shared");
        std::fs::create_dir(&shared).unwrap();
        for (mode, says) in [
            (0o777, "writable by everyone"),
            (0o770, "writable by its group"),
        ] {
            set_mode(&shared, mode);
            let e = create(&shared.join("token"), b"x", "token file").unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!shared.join("token").exists());
        }
        set_mode(&shared, 0o1777);
        create(&shared.join("token"), b"x", "token file").unwrap();
        // Another user's directory, private or not (only root can make one here).
        if euid() == 0 {
            let theirs = dir.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            for mode in [0o700, 0o1777] {
                set_mode(&theirs, mode);
                let e = create(&theirs.join("token"), b"x", "token file").unwrap_err();
                assert!(e.contains("belongs to another user (uid 65534)"), "{e}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
