//! Moving data larger than one `sh -c` string into the sandbox over several commands.
//!
//! The kernel caps one argv string at 128 KiB (`MAX_ARG_STRLEN`), and `sh -c TEXT` makes the
//! whole command one argv string, so a large request body is appended to a 0600 file piece by
//! piece with the `printf` builtin, and the request then reads the file. Binary data (the gateway
//! binary) travels as base64, decoded by `base64 -d` in the sandbox.

use base64::Engine as _;

use crate::error::Error;
use crate::quote::quote;

/// Where `text[offset..]`'s next piece ends so that its quoted form takes at most `budget`
/// bytes; always on a character boundary and past `offset` when any text is left.
pub(crate) fn next_text_piece(text: &str, offset: usize, budget: usize) -> usize {
    let mut cost = 2; // the enclosing quotes
    let mut end = offset;
    for (i, c) in text[offset..].char_indices() {
        let add = if c == '\'' { 4 } else { c.len_utf8() };
        if cost + add > budget && end > offset {
            return offset + i;
        }
        cost += add;
        end = offset + i + c.len_utf8();
    }
    end
}

/// The command that writes `piece` to `path`: the first one creates the file (mode 0600,
/// refusing to follow or reuse an existing name), later ones append.
pub(crate) fn stage_text_command(path: &str, piece: &str, first: bool) -> Result<String, Error> {
    Ok(if first {
        format!(
            "set -C; umask 077; printf '%s' {} > {}",
            quote(piece)?,
            quote(path)?
        )
    } else {
        format!("printf '%s' {} >> {}", quote(piece)?, quote(path)?)
    })
}

/// The size of the command text of [`stage_text_command`] other than the piece itself.
pub(crate) fn stage_text_overhead(path: &str) -> usize {
    "set -C; umask 077; printf '%s'  > ".len() + crate::quote::quoted_len(path)
}

/// How many raw bytes go into one base64 upload command of at most `max_command` bytes whose
/// other text takes `overhead` bytes; a multiple of 3 so no piece needs padding.
pub(crate) fn binary_piece_len(max_command: usize, overhead: usize) -> usize {
    let room = max_command.saturating_sub(overhead + 2);
    (room / 4 * 3).max(3)
}

/// The command that appends the base64-encoded `piece` to `path` (`first` truncates it first);
/// on failure it removes the partial file.
pub(crate) fn stage_binary_command(path: &str, piece: &[u8], first: bool) -> Result<String, Error> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(piece);
    let path_q = quote(path)?;
    Ok(format!(
        "printf '%s' '{b64}' | base64 -d {redir} {path_q} || {{ rm -f {path_q}; exit 3; }}",
        redir = if first { ">" } else { ">>" },
    ))
}

/// The size of [`stage_binary_command`]'s text other than the base64 piece.
pub(crate) fn stage_binary_overhead(path: &str) -> usize {
    let q = crate::quote::quoted_len(path);
    "printf '%s' '' | base64 -d >>  || { rm -f ; exit 3; }".len() + 2 * q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_fit_the_budget_and_cover_the_text() {
        let text = "ab'c\u{e9}'''d\u{1F600}e".repeat(50);
        for budget in [8, 9, 10, 17, 64, 1000] {
            let mut offset = 0;
            let mut joined = String::new();
            while offset < text.len() {
                let end = next_text_piece(&text, offset, budget);
                assert!(end > offset);
                let piece = &text[offset..end];
                assert!(
                    quote(piece).unwrap().len() <= budget.max(6),
                    "{budget} {piece:?}"
                );
                joined.push_str(piece);
                offset = end;
            }
            assert_eq!(joined, text);
        }
    }

    #[test]
    fn overheads_match_the_commands() {
        let path = "/tmp/it's";
        let c = stage_text_command(path, "", true).unwrap();
        assert_eq!(c.len() - 2, stage_text_overhead(path));
        let b = stage_binary_command(path, b"", false).unwrap();
        assert_eq!(b.len(), stage_binary_overhead(path));
        assert_eq!(binary_piece_len(1000, 100) % 3, 0);
    }
}
