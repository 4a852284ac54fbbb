//! The bearer token: where it comes from, how it is minted and stored, how it is checked.

use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use mcpgw_net::private;

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

pub use mcpgw::random::constant_time_eq;

/// Where the token came from.
#[derive(Debug)]
pub struct Resolved {
    /// The token, `None` with `--no-auth`.
    pub token: Option<Token>,
    /// The token file this launch created (minted into), if it did: a start that fails removes
    /// it again.
    pub minted: Option<PathBuf>,
}

/// Picks the token: `--token-file` (minted when missing), then `MCPGW_TOKEN`, then
/// `--auth-token`; none is an error unless `--no-auth`.
pub fn resolve(args: &ServeArgs) -> Result<Resolved, String> {
    let env = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let mut minted = None;
    let token = if let Some(path) = &args.token_file {
        let (token, made) = load_or_mint(path)?;
        minted = made.then(|| path.clone());
        Some(token)
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
        (token, _) => Ok(Resolved { token, minted }),
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
/// made) and a 0600 file created exclusively, so two launches racing agree on one token. The
/// flag says whether this call created the file. A file others could read or replace is
/// refused ([`private::check`]).
pub fn load_or_mint(path: &Path) -> Result<(Token, bool), String> {
    const WHAT: &str = "token file";
    let shown = path.display();
    // Two rounds at most: the second reads the file a racing launch created.
    for _ in 0..2 {
        if private::check(path, WHAT)?.is_some() {
            let mut f =
                private::open(path).map_err(|e| format!("cannot open token file {shown}: {e}"))?;
            let mut text = String::new();
            f.read_to_string(&mut text)
                .map_err(|e| format!("cannot read token file {shown}: {e}"))?;
            let token = checked(text.trim().to_string(), &format!("token file {shown}"))?;
            return Ok((token, false));
        }
        private::make_directory(path)?;
        let token = mcpgw::random::mint_token();
        match private::open_new(path) {
            Ok(mut f) => {
                f.write_all(token.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| format!("cannot write token file {shown}: {e}"))?;
                return Ok((Token::new(token), true));
            }
            // Another launch minted it first: read theirs.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create token file {shown}: {e}")),
        }
    }
    Err(format!("token file {shown} keeps changing; refusing it"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
        let (a, minted) = load_or_mint(&file).unwrap();
        assert!(minted);
        assert_eq!(a.expose().len(), 64);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(file.parent().unwrap()), 0o700);
        let (b, minted) = load_or_mint(&file).unwrap();
        assert!(!minted);
        assert_eq!(a.expose(), b.expose());
        std::fs::write(&file, " \n").unwrap();
        assert!(load_or_mint(&file).unwrap_err().contains("non-empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_token_files_others_could_read_or_replace() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("mcpgw-auth-{}", mcpgw::random::uuid4_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let set_mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        set_mode(&dir, 0o700);
        // A dangling link: refused at once (it used to recurse until the stack overflowed).
        let dangling = dir.join("dangling");
        symlink(dir.join("nowhere"), &dangling).unwrap();
        let e = load_or_mint(&dangling).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // A link to a world-readable file, and the file itself.
        let open = dir.join("open");
        std::fs::write(&open, "tok").unwrap();
        set_mode(&open, 0o644);
        let link = dir.join("link");
        symlink(&open, &link).unwrap();
        assert!(load_or_mint(&link).unwrap_err().contains("symbolic link"));
        let e = load_or_mint(&open).unwrap_err();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        set_mode(&open, 0o600);
        assert_eq!(load_or_mint(&open).unwrap().0.expose(), "tok");
        // A directory anyone may write to without the sticky bit; with it (like /tmp) is fine.
        let shared = dir.join("shared");
        std::fs::create_dir(&shared).unwrap();
        set_mode(&shared, 0o777);
        let e = load_or_mint(&shared.join("token")).unwrap_err();
        assert!(e.contains("writable by everyone"), "{e}");
        assert!(!shared.join("token").exists());
        set_mode(&shared, 0o1777);
        assert!(load_or_mint(&shared.join("token")).unwrap().1);
        // Not a file.
        assert!(load_or_mint(&dir).unwrap_err().contains("regular file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_never_shows_the_token() {
        let t = Token::new("s3cret".into());
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
