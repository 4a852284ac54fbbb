//! Lines read from an upstream's pipe with a bound on how much of one line is ever held: a line
//! longer than the bound is discarded as it streams past, keeping only its first and last bytes
//! (enough to name a JSON-RPC reply's id), so an upstream writing a never-ending line costs the
//! gateway a fixed amount of memory. A reader of JSON lines also discards, from its first byte,
//! a line that cannot be JSON-RPC (it does not start with `{` or `[`), whatever its length.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How much of an oversized line's start and end is kept.
const KEPT: usize = 4096;

/// A buffer that held a line this large is released rather than kept for the next line: one
/// large message must not pin its memory for the session's life.
const RELEASE_ABOVE: usize = 1 << 20;

/// What [`LineReader::next`] found.
#[derive(Debug)]
pub enum Next {
    /// A whole line is in [`LineReader::line`].
    Line,
    /// A line longer than the bound went past.
    Oversized(Oversized),
    /// A line that cannot be a JSON message went past (only when reading JSON lines).
    Junk(Oversized),
    /// The pipe ended.
    Eof,
}

/// What is kept of a line longer than the bound.
#[derive(Debug, Default)]
pub struct Oversized {
    /// Its first bytes.
    pub head: Vec<u8>,
    /// Its last bytes.
    pub tail: Vec<u8>,
    /// Its full length.
    pub len: usize,
}

/// Reads `\n`-terminated lines of at most `max` bytes.
pub struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    over: Option<Oversized>,
    /// Lines must look like JSON (from their first non-blank byte).
    json: bool,
    /// The current line is junk.
    junk: bool,
    /// `line` holds the whole line the last call announced: the next call starts a new one.
    /// Until then, what `line` holds is a line still being read, which a call that was
    /// cancelled (its future dropped at its one await) leaves for the next.
    announced: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Lines of `inner`, each at most `max` bytes (newline included).
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            reader: BufReader::with_capacity(64 * 1024, inner),
            line: Vec::new(),
            max,
            over: None,
            json: false,
            junk: false,
            announced: false,
        }
    }

    /// Lines of JSON messages: a line that does not start like one is discarded at once.
    pub fn json(mut self) -> Self {
        self.json = true;
        self
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The line [`Next::Line`] announced, with its newline.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// Reads the next line. Cancel-safe: the one await is `fill_buf`, which consumes nothing,
    /// and every byte consumed is in `line` (or counted in `over`) at once, so a call dropped
    /// at any point leaves what it read of a line for the next call.
    pub async fn next(&mut self) -> io::Result<Next> {
        if std::mem::take(&mut self.announced) {
            self.recycle();
        }
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Next::Eof);
            }
            let newline = memchr(buf);
            let take = newline.map_or(buf.len(), |i| i + 1);
            let chunk = &buf[..take];
            let junk = self.json
                && self.over.is_none()
                && self.line.iter().all(u8::is_ascii_whitespace)
                && chunk
                    .iter()
                    .find(|b| !b.is_ascii_whitespace())
                    .is_some_and(|b| !matches!(b, b'{' | b'[' | 0xEF));
            match &mut self.over {
                None if junk || self.line.len() + take > self.max => {
                    self.junk = junk;
                    let len = self.line.len() + take;
                    let mut head = std::mem::take(&mut self.line);
                    head.truncate(KEPT);
                    head.extend_from_slice(&chunk[..chunk.len().min(KEPT - head.len())]);
                    head.shrink_to_fit();
                    let mut tail = Vec::new();
                    keep_tail(&mut tail, chunk);
                    self.over = Some(Oversized { head, tail, len });
                }
                None => self.line.extend_from_slice(chunk),
                Some(over) => {
                    over.len += take;
                    keep_tail(&mut over.tail, chunk);
                }
            }
            self.reader.consume(take);
            if newline.is_some() {
                return Ok(match self.over.take() {
                    Some(over) if std::mem::take(&mut self.junk) => Next::Junk(over),
                    Some(over) => Next::Oversized(over),
                    None => {
                        self.announced = true;
                        Next::Line
                    }
                });
            }
        }
    }

    /// Clears the last line, releasing its buffer when it was large.
    fn recycle(&mut self) {
        if self.line.capacity() > RELEASE_ABOVE {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

fn keep_tail(tail: &mut Vec<u8>, chunk: &[u8]) {
    if chunk.len() >= KEPT {
        tail.clear();
        tail.extend_from_slice(&chunk[chunk.len() - KEPT..]);
    } else {
        tail.extend_from_slice(chunk);
        let excess = tail.len().saturating_sub(KEPT);
        tail.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        read(LineReader::new(input, max)).await
    }

    async fn read(mut reader: LineReader<&[u8]>) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match reader.next().await.unwrap() {
                Next::Line => out.push(String::from_utf8_lossy(reader.line()).into_owned()),
                Next::Junk(o) => out.push(format!("junk {}", o.len)),
                Next::Oversized(o) => out.push(format!(
                    "oversized {} head {:?} tail {:?}",
                    o.len,
                    String::from_utf8_lossy(&o.head[..o.head.len().min(3)]),
                    String::from_utf8_lossy(&o.tail[o.tail.len().saturating_sub(3)..])
                )),
                Next::Eof => return out,
            }
        }
    }

    #[tokio::test]
    async fn long_lines_are_measured_not_held() {
        let mut input = b"short\n".to_vec();
        input.extend(b"abc");
        input.extend(vec![b'x'; 100_000]);
        input.extend(b"xyz\nafter\n");
        let got = lines(&input, 1000).await;
        assert_eq!(
            got,
            [
                "short\n",
                "oversized 100007 head \"abc\" tail \"yz\\n\"",
                "after\n"
            ]
        );
        // Exactly at the bound is fine.
        assert_eq!(lines(b"12345\n", 6).await, ["12345\n"]);
        assert_eq!(lines(b"123456\n", 6).await.len(), 1);
        assert!(lines(b"123456\n", 6).await[0].starts_with("oversized 7"));
    }

    #[tokio::test]
    async fn json_lines_drop_junk_from_its_first_byte() {
        let mut input = b"  {\"a\":1}\n[1]\n".to_vec();
        input.extend(vec![b'x'; 50_000]);
        input.extend(b"\n\n{}\n");
        let got = read(LineReader::new(&input[..], 1 << 20).json()).await;
        assert_eq!(got, ["  {\"a\":1}\n", "[1]\n", "junk 50001", "\n", "{}\n"]);
    }

    #[tokio::test]
    async fn a_large_lines_buffer_is_released() {
        let mut input = vec![b'y'; 3 << 20];
        input.push(b'\n');
        input.extend(b"small\n");
        let mut reader = LineReader::new(&input[..], 8 << 20);
        assert!(matches!(reader.next().await.unwrap(), Next::Line));
        assert!(reader.line.capacity() >= 3 << 20);
        assert!(matches!(reader.next().await.unwrap(), Next::Line));
        assert_eq!(reader.line(), b"small\n");
        assert!(reader.line.capacity() < RELEASE_ABOVE);
    }

    /// A small deterministic generator, so a failing case can be replayed from its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A pipe that hands out its bytes in pieces of random length and is often not ready.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        rng: Rng,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if self.rng.below(3) == 0 {
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            let left = self.data.len() - self.at;
            let n = (self.rng.below(300) as usize + 1)
                .min(left)
                .min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// What a reader gives for `input`, each line or event as text.
    fn describe(next: Next, line: &[u8]) -> String {
        match next {
            Next::Line => String::from_utf8_lossy(line).into_owned(),
            Next::Junk(o) => format!("junk {}", o.len),
            Next::Oversized(o) => {
                format!("oversized {} {:?}", o.len, &o.head[..o.head.len().min(8)])
            }
            Next::Eof => "eof".into(),
        }
    }

    /// Reads everything, dropping the `next()` future after a random number of polls each
    /// time (a `select!` whose other branch won), as the task that owns a reader may.
    fn read_with_cancellations(input: &[u8], max: usize, seed: u64) -> Vec<String> {
        use std::future::Future as _;
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut rng = Rng(seed | 1);
        let pipe = Trickle {
            data: input.to_vec(),
            at: 0,
            rng: Rng(seed.rotate_left(17) | 1),
        };
        let mut reader = LineReader::new(pipe, max).json();
        // A small buffer, so lines span many fills.
        reader.reader = BufReader::with_capacity(64, reader.reader.into_inner());
        let mut out = Vec::new();
        loop {
            let polls = rng.below(4) + 1;
            let mut outcome = None;
            {
                let mut fut = std::pin::pin!(reader.next());
                for _ in 0..polls {
                    if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                        outcome = Some(r.unwrap());
                        break;
                    }
                }
            }
            if let Some(next) = outcome {
                let eof = matches!(next, Next::Eof);
                out.push(describe(next, reader.line()));
                if eof {
                    return out;
                }
            }
        }
    }

    fn read_plainly(input: &[u8], max: usize) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut reader = LineReader::new(input, max).json();
            let mut out = Vec::new();
            loop {
                let next = reader.next().await.unwrap();
                let eof = matches!(next, Next::Eof);
                out.push(describe(next, reader.line()));
                if eof {
                    return out;
                }
            }
        })
    }

    #[test]
    fn lines_survive_any_split_and_any_cancellation() {
        for seed in 1..400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut input = Vec::new();
            for i in 0..rng.below(12) + 1 {
                match rng.below(6) {
                    0 => input.extend(format!("junk line {i}\n").as_bytes()),
                    1 => input.extend(vec![b'x'; rng.below(3000) as usize]),
                    2 => input.push(b'\n'),
                    _ => {
                        let text = "p".repeat(rng.below(2000) as usize);
                        input.extend(
                            format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\":\"{text}\"}}\n")
                                .as_bytes(),
                        );
                    }
                }
            }
            let max = 1500;
            assert_eq!(
                read_with_cancellations(&input, max, seed),
                read_plainly(&input, max),
                "seed {seed}"
            );
        }
    }
}
