//! `serve --ready-file PATH`: the ready line (`DaemonReady`) kept in a file while the gateway
//! runs, so that `attach --state-dir` finds the gateway of a sandbox without being told its port.
//!
//! Written atomically (a 0600 temporary file renamed over the path), so a reader sees the old
//! line or the new one, never half of one; removed at exit unless another gateway replaced it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use mcpgw::wire::DaemonReady;

/// Writes `ready` to `path` as one JSON line.
pub fn write(path: &Path, ready: &DaemonReady) -> Result<(), String> {
    let line = serde_json::to_string(ready).expect("serializable") + "\n";
    let temp = sibling(path, &format!(".tmp.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .and_then(|()| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("cannot write the ready file {}: {e}", path.display())
    })
}

/// Reads the ready line at `path`; `Ok(None)` when there is no file.
pub fn read(path: &Path) -> Result<Option<DaemonReady>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("the ready file {} is not a ready line: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "cannot read the ready file {}: {e}",
            path.display()
        )),
    }
}

/// Removes the ready file at exit, unless it now names another process (a gateway launched
/// after this one took it over).
pub fn remove_if_ours(path: &Path) {
    if let Ok(Some(ready)) = read(path)
        && ready.pid == std::process::id()
    {
        let _ = std::fs::remove_file(path);
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_read_and_removed_only_by_its_owner() {
        let dir = std::env::temp_dir().join(format!("mcpgw-ready-{}", mcpgw::random::uuid4_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gateway.json");
        assert_eq!(read(&path).unwrap(), None);
        let mut ready = DaemonReady {
            port: 41000,
            pid: std::process::id(),
            token_file: Some("/t".into()),
            instance_nonce: Some("n".into()),
        };
        write(&path, &ready).unwrap();
        assert_eq!(read(&path).unwrap().as_ref(), Some(&ready));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        ready.pid = 1;
        write(&path, &ready).unwrap();
        remove_if_ours(&path);
        assert!(path.exists(), "another gateway's file was removed");
        ready.pid = std::process::id();
        write(&path, &ready).unwrap();
        remove_if_ours(&path);
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "a temp file is left"
        );
        std::fs::write(&path, "junk").unwrap();
        assert!(read(&path).unwrap_err().contains("not a ready line"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
