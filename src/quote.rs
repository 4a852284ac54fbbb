//! The one quoting function for POSIX `sh`: every byte of every value the library puts into a
//! command passes through [`quote`].

use crate::error::Error;

/// Quotes `word` as one POSIX `sh` word that expands to exactly `word`.
///
/// The word is wrapped in single quotes, inside which `sh` gives no byte a special meaning; a
/// single quote itself is written as `'\''` (close, escaped quote, reopen). This holds for every
/// byte but NUL, which no C string, argv entry or shell word can carry, so NUL is refused.
pub fn quote(word: &str) -> Result<String, Error> {
    if word.contains('\0') {
        return Err(Error::invalid_argument(
            "a value passed to the sandbox contains a NUL byte, which no shell command can carry",
        ));
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('\'');
    for c in word.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    Ok(out)
}

/// The length of `quote(word)` without building it.
pub(crate) fn quoted_len(word: &str) -> usize {
    2 + word.len() + 3 * word.bytes().filter(|&b| b == b'\'').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_escapes_single_quotes() {
        assert_eq!(quote("").unwrap(), "''");
        assert_eq!(quote("abc").unwrap(), "'abc'");
        assert_eq!(quote("it's").unwrap(), r"'it'\''s'");
        assert_eq!(
            quote("$(x) `y` \\ \"z\"\n").unwrap(),
            "'$(x) `y` \\ \"z\"\n'"
        );
        for w in ["", "a'b''c'", "ü'\n"] {
            assert_eq!(quoted_len(w), quote(w).unwrap().len());
        }
    }

    #[test]
    fn refuses_nul() {
        let e = quote("a\0b").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
    }
}
