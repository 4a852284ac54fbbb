//! What an upstream writes to the gateway's log (its `notifications/message` and its stderr
//! lines), with a rate limit per upstream: a token bucket refilled at the configured lines per
//! second, holding a second and a half's worth. What exceeds it is counted, not kept, and
//! summarised in one line when logging resumes, so a flooding upstream costs a counter.

use std::sync::Mutex;
use std::time::Instant;

/// The longest text of one logged line; the rest is cut (and its length said).
pub const MAX_LINE_CHARS: usize = 2000;

/// One upstream's log lines.
#[derive(Debug)]
pub struct UpstreamLog {
    name: String,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    per_sec: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

/// Whether a line may be logged now.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Log it; `suppressed` lines were dropped since the last one logged.
    Log {
        /// Lines dropped before this one.
        suppressed: u64,
    },
    /// Drop it (it is counted).
    Drop,
}

impl Bucket {
    fn new(per_sec: u32, now: Instant) -> Bucket {
        let per_sec = f64::from(per_sec);
        let capacity = per_sec * 1.5;
        Bucket {
            per_sec,
            capacity,
            tokens: capacity,
            last: now,
            suppressed: 0,
        }
    }

    fn admit(&mut self, now: Instant) -> Admit {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Admit::Log {
                suppressed: std::mem::take(&mut self.suppressed),
            }
        } else {
            self.suppressed += 1;
            Admit::Drop
        }
    }
}

impl UpstreamLog {
    /// The log of upstream `name`, at most `per_sec` lines a second (0: none).
    pub fn new(name: &str, per_sec: u32) -> UpstreamLog {
        UpstreamLog {
            name: name.to_string(),
            bucket: Mutex::new(Bucket::new(per_sec, Instant::now())),
        }
    }

    fn admit(&self) -> Option<u64> {
        match self.bucket.lock().unwrap().admit(Instant::now()) {
            Admit::Log { suppressed } => Some(suppressed),
            Admit::Drop => None,
        }
    }

    fn summary(&self, suppressed: u64) {
        if suppressed > 0 {
            tracing::warn!(mcp = %self.name, "suppressed {suppressed} log lines of this upstream (more than the --log-rate limit)");
        }
    }

    /// Logs one `notifications/message` of the upstream.
    pub fn message(&self, level: &str, data: &serde_json::Value) {
        if let Some(suppressed) = self.admit() {
            self.summary(suppressed);
            let text = data.to_string();
            tracing::info!(mcp = %self.name, level = %level, "upstream log: {}", cut(&text));
        }
    }

    /// Logs one stderr line of the upstream (process `pid`).
    pub fn stderr(&self, pid: u32, line: &[u8]) {
        if let Some(suppressed) = self.admit() {
            self.summary(suppressed);
            let text = String::from_utf8_lossy(line);
            tracing::info!(mcp = %self.name, pid, "stderr: {}", cut(&text));
        }
    }

    /// Says how many lines were dropped since the last one logged (when the session ends).
    pub fn flush(&self) {
        let suppressed = std::mem::take(&mut self.bucket.lock().unwrap().suppressed);
        self.summary(suppressed);
    }
}

/// At most [`MAX_LINE_CHARS`] of `text`, saying how much was cut.
fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{}... ({} bytes in all)", &text[..at], text.len()).into(),
        None => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_passes_then_the_rate_holds_and_drops_are_counted() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10, t0);
        let logged = (0..100)
            .filter(|_| matches!(b.admit(t0), Admit::Log { .. }))
            .count();
        assert_eq!(logged, 15, "a second and a half's worth at once");
        assert_eq!(b.suppressed, 85);
        // A tenth of a second later, one more line, which reports the drops.
        assert_eq!(
            b.admit(t0 + Duration::from_millis(100)),
            Admit::Log { suppressed: 85 }
        );
        assert_eq!(b.admit(t0 + Duration::from_millis(100)), Admit::Drop);
        // After a quiet spell the burst is back, never more.
        let later = t0 + Duration::from_secs(60);
        let logged = (0..100)
            .filter(|_| matches!(b.admit(later), Admit::Log { .. }))
            .count();
        assert_eq!(logged, 15);
    }

    #[test]
    fn zero_means_silence() {
        let t0 = Instant::now();
        let mut b = Bucket::new(0, t0);
        assert_eq!(b.admit(t0), Admit::Drop);
        assert_eq!(b.admit(t0 + Duration::from_secs(10)), Admit::Drop);
        assert_eq!(b.suppressed, 2);
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let text = cut(&long);
        assert!(text.ends_with(&format!("... ({} bytes in all)", long.len())));
        assert_eq!(cut("short"), "short");
    }
}
