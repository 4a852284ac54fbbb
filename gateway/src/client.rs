//! `mcpgw-gateway request`: the in-sandbox HTTP client for images without curl.
//!
//! Plain blocking std I/O: one request, no runtime to start, so a call through it costs about
//! as much as a process spawn. Its stdout framing is the curl recipe's: the body, then the line
//! `mcpgw-http-status:NNN`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::cli::RequestArgs;

use mcpgw::wire::output::{self, exit};

/// curl's exit codes (the wire contract), so a host decodes both clients alike.
const EXIT_CONNECT: u8 = exit::CONNECT as u8;
const EXIT_TIMEOUT: u8 = exit::TIMEOUT as u8;
const EXIT_OTHER: u8 = exit::OTHER as u8;

struct Failure {
    code: u8,
    message: String,
}

fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure {
        code,
        message: message.into(),
    }
}

/// Runs one request and returns the process exit status.
pub fn run(args: RequestArgs) -> ExitCode {
    match request(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("mcpgw-gateway request: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn io_failure(what: &str, e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            fail(EXIT_TIMEOUT, format!("timed out {what}"))
        }
        _ => fail(EXIT_OTHER, format!("{what}: {e}")),
    }
}

fn request(args: &RequestArgs) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let status = exchange(args, &mut out)?;
    out.write_all(output::trailer(status).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| fail(EXIT_OTHER, format!("cannot write to stdout: {e}")))
}

/// Asks a freshly launched gateway for `/health` and checks it answers with `nonce`: what
/// `--daemon` confirms before it reports the gateway ready.
pub fn confirm_health(
    addr: std::net::SocketAddr,
    nonce: Option<&str>,
    limit: Duration,
) -> Result<(), String> {
    let args = RequestArgs {
        method: "GET".into(),
        path: mcpgw::wire::rest::route::HEALTH.into(),
        port: addr.port(),
        host: addr.ip().to_string(),
        max_time: Some(limit),
        ..RequestArgs::default()
    };
    let mut body = Vec::new();
    let status = exchange(&args, &mut body).map_err(|f| f.message)?;
    let body = String::from_utf8_lossy(&body);
    let answered = match nonce {
        Some(n) => mcpgw::wire::Health::parse(body.as_bytes())
            .is_some_and(|h| h.instance_nonce.as_deref() == Some(n)),
        None => body == mcpgw::wire::rest::HEALTH_OK,
    };
    if status == 200 && answered {
        Ok(())
    } else {
        Err(format!("its /health answered {status} {body:?}"))
    }
}

/// Sends the request and copies the response body to `out` as it arrives; returns the status.
fn exchange(args: &RequestArgs, out: &mut dyn Write) -> Result<u16, Failure> {
    let deadline = Deadline {
        started: Instant::now(),
        max: args.max_time,
    };
    let body = request_body(args)?;
    let token = token(args)?;
    let (mut stream, addr) = connect(args, &deadline)?;
    let head = request_head(args, addr, token.as_deref(), body.as_deref())?;
    stream
        .set_write_timeout(deadline.remaining()?)
        .map_err(|e| io_failure("setting a timeout", e))?;
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_deref().unwrap_or_default()))
        .map_err(|e| io_failure("sending the request", e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let (status, length, chunked) = read_head(&mut reader, &deadline)?;
    if chunked {
        loop {
            let mut size_line = String::new();
            reader
                .read_line(&mut size_line)
                .map_err(|e| io_failure("reading a chunk size", e))?;
            let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| fail(EXIT_OTHER, format!("bad chunk size {size_line:?}")))?;
            if size == 0 {
                break;
            }
            copy(&mut reader, out, Some(size), &deadline)?;
            // Streamed answers (NDJSON progress) reach the caller as they come.
            let _ = out.flush();
            let mut crlf = [0u8; 2];
            reader
                .read_exact(&mut crlf)
                .map_err(|e| io_failure("reading a chunk end", e))?;
        }
    } else {
        copy(&mut reader, out, length, &deadline)?;
    }
    Ok(status)
}

/// `--max-time` counted from the start of the exchange.
struct Deadline {
    started: Instant,
    max: Option<Duration>,
}

impl Deadline {
    /// The time left (`None`: no limit); an error once it has run out.
    fn remaining(&self) -> Result<Option<Duration>, Failure> {
        match self.max {
            None => Ok(None),
            Some(max) => match max.checked_sub(self.started.elapsed()) {
                Some(left) if !left.is_zero() => Ok(Some(left)),
                _ => Err(fail(EXIT_TIMEOUT, format!("timed out after {max:?}"))),
            },
        }
    }
}

/// The body to send: `--data`, or `--body-file` (`-` for stdin).
fn request_body(args: &RequestArgs) -> Result<Option<Vec<u8>>, Failure> {
    Ok(match (&args.data, &args.body_file) {
        (Some(data), _) => Some(data.clone().into_bytes()),
        (None, Some(file)) if file == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| fail(EXIT_OTHER, format!("cannot read the body from stdin: {e}")))?;
            Some(buf)
        }
        (None, Some(file)) => Some(
            std::fs::read(file)
                .map_err(|e| fail(EXIT_OTHER, format!("cannot read the body file {file}: {e}")))?,
        ),
        (None, None) => None,
    })
}

/// The token: from `--token-file`, else the environment.
fn token(args: &RequestArgs) -> Result<Option<String>, Failure> {
    match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                fail(
                    EXIT_OTHER,
                    format!("cannot read the token file {}: {e}", path.display()),
                )
            })?;
            Ok(Some(text.trim().to_string()))
        }
        None => Ok(std::env::var(crate::auth::TOKEN_ENV).ok()),
    }
}

/// A connection to the gateway, within the time left.
fn connect(args: &RequestArgs, deadline: &Deadline) -> Result<(TcpStream, SocketAddr), Failure> {
    let addr = (args.host.as_str(), args.port)
        .to_socket_addrs()
        .map_err(|e| fail(EXIT_CONNECT, format!("cannot resolve {}: {e}", args.host)))?
        .next()
        .ok_or_else(|| fail(EXIT_CONNECT, format!("{} has no address", args.host)))?;
    let connect = match deadline.remaining()? {
        Some(limit) => TcpStream::connect_timeout(&addr, limit),
        None => TcpStream::connect(addr),
    };
    let stream = connect.map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut => {
            fail(EXIT_TIMEOUT, format!("timed out connecting to {addr}"))
        }
        _ => fail(
            EXIT_CONNECT,
            format!("cannot connect to the gateway at {addr}: {e} (is it running?)"),
        ),
    })?;
    let _ = stream.set_nodelay(true);
    Ok((stream, addr))
}

/// The request line and headers.
fn request_head(
    args: &RequestArgs,
    addr: SocketAddr,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> Result<String, Failure> {
    let host_header = if addr.is_ipv6() {
        format!("[{}]:{}", addr.ip(), addr.port())
    } else {
        format!("{}:{}", addr.ip(), addr.port())
    };
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\nUser-Agent: mcpgw-gateway/{}\r\n",
        args.method,
        args.path,
        env!("CARGO_PKG_VERSION")
    );
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    for h in &args.headers {
        if h.contains(['\r', '\n']) || !h.contains(':') {
            return Err(fail(2, format!("--header {h:?} is not `Name: value`")));
        }
        head.push_str(h);
        head.push_str("\r\n");
    }
    if let Some(body) = body {
        if !args
            .headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("content-type:"))
        {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    Ok(head)
}

/// One line of the response's head, within the time left.
fn read_line(
    reader: &mut BufReader<TcpStream>,
    deadline: &Deadline,
    what: &str,
) -> Result<String, Failure> {
    reader
        .get_ref()
        .set_read_timeout(deadline.remaining()?)
        .map_err(|e| io_failure("setting a timeout", e))?;
    let mut line = Vec::new();
    reader
        .take(64 * 1024)
        .read_until(b'\n', &mut line)
        .map_err(|e| io_failure(what, e))?;
    if !line.ends_with(b"\n") {
        return Err(fail(
            EXIT_OTHER,
            format!("the gateway closed the connection while sending {what}"),
        ));
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

/// The response's status, its `Content-Length` and whether it is chunked.
fn read_head(
    reader: &mut BufReader<TcpStream>,
    deadline: &Deadline,
) -> Result<(u16, Option<usize>, bool), Failure> {
    let status_line = read_line(reader, deadline, "the status line")?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| fail(EXIT_OTHER, format!("not an HTTP response: {status_line:?}")))?;
    let mut length: Option<usize> = None;
    let mut chunked = false;
    loop {
        let line = read_line(reader, deadline, "the headers")?;
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            }
        }
    }
    Ok((status, length, chunked))
}

/// Copies `left` bytes of the body (all of it until the end when `None`) to `out`.
fn copy(
    reader: &mut BufReader<TcpStream>,
    out: &mut dyn Write,
    mut left: Option<usize>,
    deadline: &Deadline,
) -> Result<(), Failure> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if left == Some(0) {
            return Ok(());
        }
        reader
            .get_ref()
            .set_read_timeout(deadline.remaining()?)
            .map_err(|e| io_failure("setting a timeout", e))?;
        let want = left.map_or(buf.len(), |l| l.min(buf.len()));
        let n = reader
            .read(&mut buf[..want])
            .map_err(|e| io_failure("reading the body", e))?;
        if n == 0 {
            return match left {
                None => Ok(()),
                Some(_) => Err(fail(
                    EXIT_OTHER,
                    "the gateway closed the connection mid-body",
                )),
            };
        }
        out.write_all(&buf[..n])
            .map_err(|e| fail(EXIT_OTHER, format!("cannot write to stdout: {e}")))?;
        left = left.map(|l| l - n);
    }
}
