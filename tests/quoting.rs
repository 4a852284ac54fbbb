//! Property tests of quoting through real shells: generated names, scopes and arguments full of
//! quotes, `$()`, backticks, newlines, control characters and non-ASCII text go through the
//! library's commands, a real `sh` (dash, busybox ash, bash), and curl or the gateway's built-in
//! client, to a server that captures the request; it must arrive byte for byte.
//!
//! The seed is printed; `MCPGW_QUOTING_SEED=N` replays a run.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use mcpgw::quote::quote;
use mcpgw::wire::Block;
use mcpgw::{CallOptions, Client, Config, Exec, Transport};
use serde_json::json;

use mcpgw::LocalShell;

/// xorshift64*: small, seedable, good enough to pick characters.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("MCPGW_QUOTING_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("MCPGW_QUOTING_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A string made to break naive quoting: shell syntax, control characters (no NUL),
    /// "binary-looking" bytes, non-ASCII; sometimes long.
    fn nasty(&mut self, max_len: usize) -> String {
        const PIECES: &[&str] = &[
            "'",
            "''",
            "\"",
            "\\",
            "\\'",
            "$",
            "$(id)",
            "${HOME}",
            "`id`",
            "\n",
            "\r\n",
            "\t",
            ";",
            "&&",
            "|",
            "*",
            "?",
            "~",
            "#",
            "!",
            "{",
            "}",
            "[",
            "]",
            "%",
            "%00",
            "%27",
            " ",
            "-",
            "--",
            "-n",
            "é",
            "中文",
            "🦀",
            "\u{7f}",
            "\u{1b}[31m",
            "\u{fffd}",
            "\u{feff}",
            "\x01",
            "\x08",
            "\u{a0}",
            "a",
            "Z",
            "0",
            "/",
            ".",
            ",",
            "=",
            "&",
            "+",
            "@",
            "<",
            ">",
        ];
        let len = self.below(max_len + 1);
        let mut s = String::new();
        while s.len() < len {
            if self.below(4) == 0 {
                s.push(char::from_u32(0x20 + self.below(0x5f) as u32).unwrap());
            } else {
                s.push_str(PIECES[self.below(PIECES.len())]);
            }
        }
        s
    }

    fn whitespace(&mut self) -> &'static str {
        ["", " ", "\n", "\t", "\r\n", "  \n\t"][self.below(6)]
    }
}

/// The shells to try: every one of these that exists here.
fn shells() -> Vec<&'static [&'static str]> {
    let mut v: Vec<&'static [&'static str]> = vec![&["sh", "-c"]];
    if Path::new("/bin/bash").exists() {
        v.push(&["bash", "-c"]);
    }
    if Path::new("/bin/busybox").exists() || Path::new("/usr/bin/busybox").exists() {
        v.push(&["busybox", "sh", "-c"]);
    }
    v
}

#[test]
fn quoted_words_expand_to_themselves_in_every_shell() {
    let mut rng = Rng::seeded();
    for shell in shells() {
        let exec = LocalShell::with_shell(shell);
        for _ in 0..150 {
            let s = rng.nasty(300);
            let out = exec
                .exec(&mcpgw::Command::new(
                    format!("printf '%s' {}", quote(&s).unwrap()),
                    Duration::from_secs(10),
                ))
                .unwrap();
            assert_eq!(
                out.exit_code,
                0,
                "{shell:?} {s:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.stdout == s.as_bytes(),
                "{shell:?} changed {s:?} into {:?}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}

/// One request as the server saw it.
struct Captured {
    request_line: String,
    authorization: Option<String>,
    body: Vec<u8>,
}

/// A server that records each request and answers with a ToolChunk whose text is `reply`.
fn capture_server(reply: mpsc::Receiver<String>) -> (u16, mpsc::Receiver<Captured>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let (mut len, mut authorization) = (0, None);
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                let (name, value) = line.split_once(':').unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => len = value.trim().parse().unwrap(),
                    "authorization" => authorization = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let text = reply.recv().unwrap_or_default();
            let chunk = json!({"chunk": {"content": [{"type": "text", "text": text, "id": "b",
                "created_at": "t", "finished_at": null}], "state": "running", "is_last": true,
                "metadata": {}, "id": "c"}})
            .to_string();
            let mut conn = reader.into_inner();
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{chunk}",
                chunk.len()
            );
            tx.send(Captured {
                request_line: request_line.trim_end().to_owned(),
                authorization,
                body,
            })
            .unwrap();
        }
    });
    (port, rx)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap(), 16).unwrap(),
            );
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn requests_arrive_byte_for_byte_through_sh_curl_and_the_built_in_client() {
    let (gateway, _) = common::binaries();
    let mut rng = Rng::seeded();
    let (reply_tx, reply_rx) = mpsc::channel();
    let (port, captured) = capture_server(reply_rx);
    let dir = std::env::temp_dir().join(format!("mcpgw-quoting-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = mcpgw::random::mint_token();
    let token_file = dir.join("it's a token file");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();

    let mut cases = 0;
    for shell in shells() {
        for transport in [Transport::Curl, Transport::BuiltIn] {
            for round in 0..25 {
                // Small command limits force staging of bodies in many pieces.
                let max_command_bytes = if round % 3 == 0 { 4096 } else { 120 * 1024 };
                let client = Client::new(Config {
                    gateway_path: gateway.to_str().unwrap().into(),
                    port,
                    token_file: Some(token_file.to_str().unwrap().into()),
                    transport: Some(transport),
                    staging_dir: Some(dir.to_str().unwrap().into()),
                    max_command_bytes,
                    ..Config::default()
                })
                .unwrap();
                let long = if round % 5 == 4 { 200_000 } else { 400 };
                let value = rng.nasty(long);
                let tool = rng.nasty(40) + "t";
                let opts = CallOptions {
                    agent_id: rng.nasty(60),
                    session_id: rng.nasty(60),
                    timeout: Some(Duration::from_secs(20)),
                };
                let args = format!(
                    "{{{}\"v\"{}:{}{}{}}}",
                    rng.whitespace(),
                    rng.whitespace(),
                    rng.whitespace(),
                    serde_json::to_string(&value).unwrap(),
                    rng.whitespace()
                );
                let reply = rng.nasty(long);
                reply_tx.send(reply.clone()).unwrap();

                let recorder = Recorder(LocalShell::with_shell(shell), Default::default());
                let chunk = client
                    .call_tool(&recorder, &opts, "mcp_1", &tool, &args)
                    .unwrap_or_else(|e| panic!("{shell:?} {transport:?}: {e}"));
                let got = captured.recv_timeout(Duration::from_secs(10)).unwrap();
                let what = format!("{shell:?} {transport:?} round {round}");

                assert_eq!(
                    got.body,
                    format!("{{\"arguments\":{}}}", args.trim()).as_bytes(),
                    "{what}: body"
                );
                assert_eq!(
                    got.authorization.as_deref(),
                    Some(format!("Bearer {token}").as_str()),
                    "{what}"
                );
                let target = got.request_line.split(' ').nth(1).unwrap();
                let (path, query) = target.split_once('?').unwrap();
                assert_eq!(
                    path,
                    format!(
                        "/mcps/mcp_1/tools/{}",
                        mcpgw::wire::rest::percent_encode(&tool)
                    )
                );
                assert_eq!(
                    percent_decode(path.rsplit('/').next().unwrap()),
                    tool,
                    "{what}: tool"
                );
                let params: Vec<(String, String)> = query
                    .split('&')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        (k.to_owned(), percent_decode(v))
                    })
                    .collect();
                assert_eq!(
                    params[0],
                    ("agent_id".into(), opts.agent_id.clone()),
                    "{what}"
                );
                assert_eq!(
                    params[1],
                    ("session_id".into(), opts.session_id.clone()),
                    "{what}"
                );
                assert_eq!(params[2], ("timeout".into(), "20".into()), "{what}");
                let Block::Text(t) = &chunk.content[0] else {
                    panic!("{what}: not text")
                };
                assert!(t.text == reply, "{what}: the answer came back changed");
                let commands = recorder.1.lock().unwrap();
                assert!(
                    commands.iter().all(|c| !c.contains(&token)),
                    "{what}: token in a command"
                );
                assert!(
                    commands.iter().all(|c| c.len() <= max_command_bytes),
                    "{what}: command too long"
                );
                cases += 1;
            }
        }
    }
    // Staged bodies are removed once sent.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("mcpgw-body-"))
        .collect();
    assert!(left.is_empty(), "staged bodies left behind: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!("{cases} requests arrived intact");
}

/// Runs commands through an inner backend and keeps their text.
struct Recorder(LocalShell, std::sync::Mutex<Vec<String>>);

impl Exec for Recorder {
    fn exec(&self, command: &mcpgw::Command) -> Result<mcpgw::ExecOutput, String> {
        self.1.lock().unwrap().push(command.text.clone());
        self.0.exec(command)
    }
}
