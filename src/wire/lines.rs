//! Input cut into `\n`-terminated lines with bounded memory, whatever pieces it arrives in: the
//! session channel's frames in `attach`, JSON-RPC messages on the host endpoint's stdin. A line
//! longer than the limit is refused as soon as it passes the limit and the rest of it skipped
//! as it arrives, never held: at most the limit's worth of a line is in memory, once; of the
//! refused line only its first bytes are kept, to name the id it carried.

/// Past this length a line's buffer grows to the limit in one step.
const EXACT_GROWTH_BYTES: usize = 1 << 20;

/// How much of an oversized line is kept to search for its id.
pub const HEAD_BYTES: usize = 4096;

/// What [`Splitter::split`] found.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line, without its `\n`.
    Whole(Vec<u8>),
    /// A line longer than the limit; the rest of it is skipped as it arrives.
    TooLong {
        /// Its first [`HEAD_BYTES`] bytes (fewer when the limit is smaller).
        head: Vec<u8>,
    },
}

/// Cuts input into lines of at most `max` bytes (without the `\n`).
#[derive(Debug)]
pub struct Splitter {
    max: usize,
    line: Vec<u8>,
    skipping: bool,
}

impl Splitter {
    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Splitter {
            max,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// The limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Whether the rest of a refused line is being skipped.
    pub fn is_skipping(&self) -> bool {
        self.skipping
    }

    /// Takes bytes from the front of `data`: how many it used, and the line they ended, if any.
    pub fn split(&mut self, data: &[u8]) -> (usize, Option<Line>) {
        let newline = data.iter().position(|&b| b == b'\n');
        if self.skipping {
            return match newline {
                Some(at) => {
                    self.skipping = false;
                    (at + 1, None)
                }
                None => (data.len(), None),
            };
        }
        let take = newline.unwrap_or(data.len());
        if self.line.len() + take > self.max {
            let mut head = std::mem::take(&mut self.line);
            head.truncate(HEAD_BYTES);
            let more = HEAD_BYTES.saturating_sub(head.len()).min(data.len());
            head.extend_from_slice(&data[..more]);
            let used = match newline {
                Some(at) => at + 1,
                None => {
                    self.skipping = true;
                    data.len()
                }
            };
            return (used, Some(Line::TooLong { head }));
        }
        let needed = self.line.len() + take;
        if needed > self.line.capacity() && needed > EXACT_GROWTH_BYTES {
            // A long line gets the limit's capacity at once: growing by doubling would copy it
            // over and over and hold up to twice the limit (the pages of a large allocation
            // cost memory only once written).
            self.line.reserve_exact(self.max - self.line.len());
        }
        self.line.extend_from_slice(&data[..take]);
        match newline {
            Some(at) => (at + 1, Some(Line::Whole(std::mem::take(&mut self.line)))),
            None => (data.len(), None),
        }
    }

    /// Every line `data` ends, in order; empty `data` is the end of input, which ends a last
    /// line that has no `\n`.
    pub fn lines(&mut self, mut data: &[u8]) -> Vec<Line> {
        let mut out = Vec::new();
        if data.is_empty() {
            if !self.skipping && !self.line.is_empty() {
                out.push(Line::Whole(std::mem::take(&mut self.line)));
            }
            self.skipping = false;
            return out;
        }
        while !data.is_empty() {
            let (used, line) = self.split(data);
            data = &data[used..];
            out.extend(line);
        }
        out
    }
}

/// The `"id"` member of the JSON object that `head` begins, as the JSON text it is written in
/// (a number, or a string with its quotes), when `head` holds all of it. Nested objects and
/// strings are skipped, so an `"id"` inside a body is never taken for the message's own.
pub fn top_level_id(head: &[u8]) -> Option<&str> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                i = skip_string(head, start)?;
                let key = &head[start..i];
                i += 1;
                if depth == 1 && key == b"id" {
                    let rest = &head[i..];
                    let rest = rest
                        .trim_ascii_start()
                        .strip_prefix(b":")?
                        .trim_ascii_start();
                    let len = match rest.first()? {
                        b'"' => skip_string(rest, 1)? + 1,
                        b'-' | b'0'..=b'9' => {
                            let n = 1 + rest[1..]
                                .iter()
                                .take_while(|b| b.is_ascii_digit() || b".eE+-".contains(b))
                                .count();
                            // Digits cut off by the end of the head are not the whole id.
                            if n == rest.len() {
                                return None;
                            }
                            n
                        }
                        _ => return None,
                    };
                    return std::str::from_utf8(&rest[..len]).ok();
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that ends the string whose contents begin at `start`.
fn skip_string(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while i < text.len() && text[i] != b'"' {
        i += if text[i] == b'\\' { 2 } else { 1 };
    }
    (i < text.len()).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` fed in pieces of `step` bytes, like a pipe delivers them.
    fn all(input: &[u8], step: usize, max: usize) -> Vec<Line> {
        let mut splitter = Splitter::new(max);
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            out.extend(splitter.lines(piece));
        }
        out.extend(splitter.lines(b""));
        out
    }

    #[test]
    fn lines_are_split_and_bounded_whatever_the_read_sizes() {
        let long = format!("{{\"t\":\"req\",\"id\":42,\"x\":\"{}\"}}", "a".repeat(300));
        let input = format!("ab\n\n{long}\ncd\n{}\nlast", "b".repeat(20));
        for step in [1, 3, 7, 64, 100_000] {
            let got = all(input.as_bytes(), step, 20);
            assert_eq!(got.len(), 6, "step {step}");
            assert_eq!(got[0], Line::Whole(b"ab".to_vec()));
            assert_eq!(got[1], Line::Whole(vec![]));
            let Line::TooLong { head } = &got[2] else {
                panic!("step {step}: {:?}", got[2])
            };
            assert_eq!(top_level_id(head), Some("42"), "step {step}");
            assert_eq!(got[3], Line::Whole(b"cd".to_vec()));
            assert_eq!(got[4], Line::Whole(vec![b'b'; 20]));
            assert_eq!(got[5], Line::Whole(b"last".to_vec()));
        }
        // Nothing past the limit is kept, however long the line.
        let mut splitter = Splitter::new(10);
        let piece = vec![b'x'; 64 * 1024];
        let (used, line) = splitter.split(&piece);
        assert_eq!(used, piece.len());
        assert!(matches!(line, Some(Line::TooLong { head }) if head.len() == HEAD_BYTES));
        for _ in 0..3 {
            assert_eq!(splitter.split(&piece), (piece.len(), None));
            assert!(splitter.line.capacity() <= 10);
        }
        assert_eq!(splitter.split(b"x\nok\n"), (2, None));
        assert_eq!(
            splitter.split(b"ok\n"),
            (3, Some(Line::Whole(b"ok".to_vec())))
        );
        // The end of input in the middle of a refused line ends nothing more.
        let mut splitter = Splitter::new(4);
        assert_eq!(splitter.lines(b"123456").len(), 1);
        assert!(splitter.lines(b"").is_empty());
    }

    #[test]
    fn the_id_of_an_oversized_line_is_the_messages_own() {
        assert_eq!(top_level_id(br#"{"t":"req","id":7,"body":{"#), Some("7"));
        assert_eq!(top_level_id(br#"{ "id" : 12 ,"#), Some("12"));
        assert_eq!(top_level_id(br#"{"body":{"id":5},"id":6,"#), Some("6"));
        assert_eq!(top_level_id(br#"{"path":"\"id\":5","id":9}"#), Some("9"));
        assert_eq!(top_level_id(br#"{"id":"a\"b","x"#), Some(r#""a\"b""#));
        assert_eq!(top_level_id(br#"{"id":-3,"#), Some("-3"));
        assert_eq!(
            top_level_id(br#"{"t":"req","id":12"#),
            None,
            "digits cut off"
        );
        assert_eq!(top_level_id(br#"{"id":"abc"#), None, "string cut off");
        assert_eq!(top_level_id(br#"{"body":{"id":5"#), None);
        assert_eq!(top_level_id(b"garbage"), None);
        assert_eq!(top_level_id(br#"{"id":true,"#), None);
        assert_eq!(top_level_id(br#"{"id":null,"#), None);
    }
}
