//! Installing the gateway binary in the sandbox: a SHA-256 check, the upload (base64 pieces, or
//! the raw bytes on stdin when the exec backend passes it), the verification and the rename.

use crate::error::Error;
use crate::quote::quote;

/// What [`check`] prints when the file is missing.
pub const MISSING: &str = "mcpgw-missing";

/// Prints the SHA-256 of the file at `path` (`sha256sum`'s format), or [`MISSING`].
pub fn check(path: &str) -> Result<String, Error> {
    let p = quote(path)?;
    Ok(format!(
        "if [ -f {p} ]; then sha256sum < {p} || exit 3; else echo {MISSING}; fi"
    ))
}

/// The first characters of [`check`]'s answer: the file's SHA-256, when it exists.
pub fn parse_check(stdout: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(stdout).ok()?;
    let word = text.split_whitespace().next()?;
    (word != MISSING).then_some(word)
}

/// `mkdir -p` of the directory of `path`, with `&&` to chain, or nothing for a file in `/`.
fn make_parent(path: &str) -> Result<String, Error> {
    let dir = path.rsplit_once('/').map_or("/", |(d, _)| d);
    Ok(if dir.is_empty() {
        String::new()
    } else {
        format!("mkdir -p {} && ", quote(dir)?)
    })
}

/// Checks that `part` has SHA-256 `sha`, then makes it executable and renames it to `path`;
/// removes it and fails (exit 3) otherwise.
pub fn verify_and_install(part: &str, path: &str, sha: &str) -> Result<String, Error> {
    let part = quote(part)?;
    let path = quote(path)?;
    Ok(format!(
        "h=$(sha256sum < {part}) || exit 3; h=${{h%% *}}; \
         if [ \"$h\" = {sha} ]; then chmod 755 {part} && mv -f {part} {path}; \
         else rm -f {part}; \
         printf 'mcpgw: the uploaded gateway binary has SHA-256 %s, expected %s\\n' \"$h\" {sha} >&2; \
         exit 3; fi"
    ))
}

/// One command that takes the binary on stdin: writes it to `part`, then
/// [`verify_and_install`].
pub fn upload_stdin(part: &str, path: &str, sha: &str) -> Result<String, Error> {
    let p = quote(part)?;
    Ok(format!(
        "{mkdir}umask 077; cat > {p} || {{ rm -f {p}; exit 3; }}; {install}",
        mkdir = make_parent(path)?,
        install = verify_and_install(part, path, sha)?,
    ))
}

/// The prefix of the first base64 piece's command: makes the directory.
pub fn first_piece_prefix(path: &str) -> Result<String, Error> {
    make_parent(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_answers() {
        assert_eq!(
            check("/opt/gw").unwrap(),
            "if [ -f '/opt/gw' ]; then sha256sum < '/opt/gw' || exit 3; else echo mcpgw-missing; fi"
        );
        assert_eq!(parse_check(b"abc  -\n"), Some("abc"));
        assert_eq!(parse_check(b"mcpgw-missing\n"), None);
        assert_eq!(parse_check(b""), None);
    }

    #[test]
    fn stdin_upload_runs_through_a_real_shell() {
        let dir =
            std::env::temp_dir().join(format!("mcpgw-install-{}", crate::random::uuid4_hex()));
        let path = dir.join("sub/gw");
        let part = dir.join("sub/gw.part");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let sha = crate::random::hex(&sha2::Digest::finalize(sha2::Digest::chain_update(
            <sha2::Sha256 as sha2::Digest>::new(),
            &bytes,
        )));
        let run = |sha: &str| {
            use std::io::Write;
            let mut child = std::process::Command::new("sh")
                .arg("-c")
                .arg(upload_stdin(part.to_str().unwrap(), path.to_str().unwrap(), sha).unwrap())
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&bytes).unwrap();
            child.wait_with_output().unwrap()
        };
        let bad = run("0000");
        assert_eq!(bad.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&bad.stderr).contains("expected 0000"));
        assert!(!path.exists() && !part.exists());
        assert!(run(&sha).status.success());
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
