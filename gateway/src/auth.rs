//! The bearer token: where it comes from, how it is minted and stored, how it is checked.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::cli::ServeArgs;

/// The environment variable a token may come from.
pub const TOKEN_ENV: &str = "MCPGW_TOKEN";

/// A secret that never shows in `Debug` output or logs.
#[derive(Clone)]
pub struct Token {
    /// `Bearer <token>`, built once: every request is compared against it.
    header: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    fn new(raw: String) -> Self {
        Token {
            header: format!("Bearer {raw}"),
        }
    }

    /// The expected `Authorization` header value.
    pub fn header_value(&self) -> &str {
        &self.header
    }

    /// The raw token.
    #[cfg(test)]
    pub fn expose(&self) -> &str {
        &self.header["Bearer ".len()..]
    }
}

/// Compares in time that depends only on the lengths, so a caller learns nothing from timing
/// about how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// Picks the token: `--token-file` (minted when missing), then `MCPGW_TOKEN`, then
/// `--auth-token`; none is an error unless `--no-auth`.
pub fn resolve(args: &ServeArgs) -> Result<Option<Token>, String> {
    let env = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let token = if let Some(path) = &args.token_file {
        Some(load_or_mint(path)?)
    } else if let Some(t) = env {
        Some(checked(t.trim().to_string(), TOKEN_ENV)?)
    } else if let Some(t) = &args.auth_token {
        Some(checked(t.clone(), "--auth-token")?)
    } else {
        None
    };
    match (token, args.no_auth) {
        (Some(_), true) => Err("--no-auth conflicts with the token that was given".into()),
        (None, false) => Err(format!(
            "no token: give --token-file PATH (minted when missing), set {TOKEN_ENV}, or pass --no-auth"
        )),
        (token, _) => Ok(token),
    }
}

fn checked(token: String, source: &str) -> Result<Token, String> {
    // The token travels in an HTTP header and in shell words: visible ASCII only.
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the token from {source} must be non-empty visible ASCII without spaces"
        ));
    }
    Ok(Token::new(token))
}

/// Reads the token file, or mints a fresh token into it: a 0700 directory (when it has to be
/// made) and a 0600 file created exclusively, so two launches racing agree on one token.
pub fn load_or_mint(path: &Path) -> Result<Token, String> {
    let shown = path.display();
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let mode = f.metadata().map(|m| m.permissions().mode()).unwrap_or(0);
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "token file {shown} is readable by others (mode {:o}); it should be 0600",
                    mode & 0o777
                );
            }
            let mut text = String::new();
            f.read_to_string(&mut text)
                .map_err(|e| format!("cannot read token file {shown}: {e}"))?;
            checked(text.trim().to_string(), &format!("token file {shown}"))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
            }
            let token = mcpgw::random::mint_token();
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Ok(mut f) => {
                    f.write_all(token.as_bytes())
                        .and_then(|()| f.sync_all())
                        .map_err(|e| format!("cannot write token file {shown}: {e}"))?;
                    Ok(Token::new(token))
                }
                // Another launch minted it first: use theirs.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => load_or_mint(path),
                Err(e) => Err(format!("cannot create token file {shown}: {e}")),
            }
        }
        Err(e) => Err(format!("cannot open token file {shown}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn mints_once_with_private_modes_then_reads() {
        let dir = std::env::temp_dir().join(format!("mcpgw-auth-{}", mcpgw::random::uuid4_hex()));
        let file = dir.join("sub/token");
        let a = load_or_mint(&file).unwrap();
        assert_eq!(a.expose().len(), 64);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        let b = load_or_mint(&file).unwrap();
        assert_eq!(a.expose(), b.expose());
        std::fs::write(&file, " \n").unwrap();
        assert!(load_or_mint(&file).unwrap_err().contains("non-empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_never_shows_the_token() {
        let t = Token::new("s3cret".into());
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
