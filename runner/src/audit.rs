//! `--audit-log FILE`: the host driver's audit records, one JSON object a line, appended to a
//! file only its owner may read (created 0600; an existing file must be a regular file of
//! this user's, not reached through a symbolic link).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use mcpgw::{Error, ErrorKind};
use mcpgw_sys::fs;

use crate::AuditSink;

/// Opens `path` for appending records; the error names the path and what is wrong.
pub fn open_log(path: &Path) -> Result<AuditSink, Error> {
    let fail = |why: String| {
        Error::new(
            ErrorKind::HostIo,
            format!("--audit-log {}: {why}", path.display()),
        )
    };
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(fs::O_NOFOLLOW | fs::O_CLOEXEC | fs::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    let me = fs::euid();
    if !meta.is_file() {
        return Err(fail("not a regular file".into()));
    }
    if meta.uid() != me {
        return Err(fail(format!("owned by user {}, not this one", meta.uid())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(fail(format!(
            "others may read or write it (mode {:o}): give a file only its owner may use",
            meta.mode() & 0o777
        )));
    }
    Ok(Box::new(move |record: &str| {
        // One write per record: appends of whole lines, whoever else appends.
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend_from_slice(record.as_bytes());
        line.push(b'\n');
        let _ = file.write_all(&line);
    }))
}
