//! The command line: token sources, refusals, the daemon launch, config preloading and the
//! built-in `request` client, against the real binary.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use mcpgw_testkit::*;
use serde_json::{Value, json};

fn gateway(args: &[&str]) -> Command {
    let mut cmd = Command::new(gateway_bin());
    cmd.args(args)
        .env_remove("MCPGW_TOKEN")
        .stdin(Stdio::null());
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `mcpgw-gateway request` against `port` with `token_file`.
fn request(port: u16, token_file: &str, args: &[&str]) -> Output {
    let port = port.to_string();
    let mut all = vec!["request"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--port", &port, "--token-file", token_file]);
    run(&mut gateway(&all))
}

/// Splits the framing: body, then `mcpgw-http-status:NNN`.
fn framed(o: &Output) -> (u16, String) {
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    let rest = out.strip_suffix('\n').expect("ends with a newline");
    let (body, trailer) = rest.rsplit_once('\n').expect("has a trailer line");
    let status = trailer
        .strip_prefix("mcpgw-http-status:")
        .expect("trailer")
        .parse()
        .unwrap();
    (status, body.to_string())
}

fn kill(pid: u32) {
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
    assert!(
        wait_gone(pid, Duration::from_secs(10)),
        "gateway {pid} did not stop"
    );
}

#[test]
fn refuses_to_start_without_a_token_or_on_a_public_address() {
    let o = run(&mut gateway(&["--port", "0"]));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--token-file"), "{}", stderr(&o));
    let o = run(&mut gateway(&[
        "--port",
        "0",
        "--no-auth",
        "--host",
        "0.0.0.0",
    ]));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--allow-remote"), "{}", stderr(&o));
    let o = run(&mut gateway(&[
        "--port",
        "0",
        "--no-auth",
        "--auth-token",
        "t",
    ]));
    assert!(stderr(&o).contains("--no-auth"), "{}", stderr(&o));
    let o = run(&mut gateway(&["--bogus"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--bogus") && stderr(&o).contains("usage"));
}

#[test]
fn daemon_returns_once_listening_with_a_minted_private_token() {
    let dir = TempDir::new("daemon");
    let token_file = dir.path("state/token");
    let tf = token_file.to_str().unwrap();
    // The log may go to a directory that does not exist yet.
    let log = dir.path("logs/gw.log");
    let o = run(&mut gateway(&[
        "--daemon",
        "--port",
        "0",
        "--token-file",
        tf,
        "--instance-nonce",
        "abc",
        "--log-file",
        log.to_str().unwrap(),
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (port, pid) = (
        ready["port"].as_u64().unwrap() as u16,
        ready["pid"].as_u64().unwrap() as u32,
    );
    assert_eq!(ready["token_file"], tf);
    assert_eq!(ready["instance_nonce"], "abc");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&token_file), 0o600);
    assert_eq!(mode(token_file.parent().unwrap()), 0o700);
    // Listening already: no polling needed.
    let (status, body) = framed(&request(port, tf, &["GET", "/health"]));
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"status":"ok","instance_nonce":"abc"}"#)
    );

    // A second launch on the same port fails with the reason.
    let o = run(&mut gateway(&[
        "--daemon",
        "--port",
        &port.to_string(),
        "--token-file",
        tf,
    ]));
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot listen"), "{}", stderr(&o));
    kill(pid);
}

#[test]
fn agentscope_launch_line_and_token_sources() {
    let port = free_port();
    let mut child = gateway(&[
        &format!("--port={port}"),
        "--auth-token=-dash-token",
        "--instance-nonce",
        "-n",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    wait_port(port);
    let dir = TempDir::new("tok");
    let tf = dir.path("t");
    std::fs::write(&tf, "-dash-token\n").unwrap();
    let (status, _) = framed(&request(port, tf.to_str().unwrap(), &["GET", "/mcps"]));
    assert_eq!(status, 200);
    std::fs::write(&tf, "wrong").unwrap();
    let (status, body) = framed(&request(port, tf.to_str().unwrap(), &["GET", "/mcps"]));
    assert_eq!((status, body.as_str()), (401, "invalid gateway token"));
    child.kill().unwrap();
    child.wait().unwrap();

    // MCPGW_TOKEN is the second source.
    let port = free_port();
    let mut child = gateway(&["--port", &port.to_string()])
        .env("MCPGW_TOKEN", "from-env")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port);
    std::fs::write(&tf, "from-env").unwrap();
    assert_eq!(
        framed(&request(port, tf.to_str().unwrap(), &["GET", "/mcps"])).0,
        200
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn config_preloads_mcps_into_the_default_scope() {
    let dir = TempDir::new("config");
    let cfg = dir.path("mcp.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {
            "ts": {"command": testserver_bin(), "args": ["stdio"]},
            "off": {"command": "/nonexistent", "disabled": true}
        }}))
        .unwrap(),
    )
    .unwrap();
    let tf = dir.path("token");
    let o = run(&mut gateway(&[
        "--daemon",
        "--port",
        "0",
        "--token-file",
        tf.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
    ]));
    assert!(o.status.success(), "{}", stderr(&o));
    let ready: Value = serde_json::from_slice(&o.stdout).unwrap();
    let port = ready["port"].as_u64().unwrap() as u16;
    let (status, body) = framed(&request(port, tf.to_str().unwrap(), &["GET", "/mcps"]));
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["name"], "ts");
    let (status, body) = framed(&request(
        port,
        tf.to_str().unwrap(),
        &[
            "POST",
            "/mcps/ts/tools/echo",
            "--data",
            r#"{"arguments":{"text":"preloaded"}}"#,
        ],
    ));
    assert_eq!(status, 200);
    assert!(body.contains("preloaded"));
    kill(ready["pid"].as_u64().unwrap() as u32);
}

#[test]
fn request_client_framing_bodies_and_exit_codes() {
    let port = free_port();
    let dir = TempDir::new("req");
    let tf = dir.path("token");
    std::fs::write(&tf, "tok").unwrap();
    let tf = tf.to_str().unwrap();
    // Nothing listens: curl's "couldn't connect" code.
    let o = request(port, tf, &["GET", "/health"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot connect"));

    let gw = start_gateway(&[]);
    let tf = gw.dir.path("state/token");
    let tf = tf.to_str().unwrap();
    let spec = serde_json::to_string(&testserver_stdio("ts")).unwrap();
    let body_file = dir.path("spec.json");
    std::fs::write(&body_file, &spec).unwrap();
    let (status, body) = framed(&request(
        gw.port,
        tf,
        &["POST", "/mcps", "--body-file", body_file.to_str().unwrap()],
    ));
    assert_eq!((status, body.as_str()), (200, r#"{"ok":true}"#));
    // The body from stdin, arbitrary bytes intact.
    let mut child = gateway(&[
        "request",
        "POST",
        "/mcps/ts/tools/echo",
        "--body-file",
        "-",
        "--port",
        &gw.port.to_string(),
        "--token-file",
        tf,
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let text = "ünï \"quoted\" $(no) `no` \\ \n\t end";
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            serde_json::to_vec(&json!({"arguments": {"text": text}}))
                .unwrap()
                .as_slice(),
        )
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let (status, body) = framed(&o);
    assert_eq!(status, 200);
    let chunk: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(chunk["chunk"]["content"][0]["text"], text);
    // Streaming comes through chunked encoding line by line.
    let o = request(
        gw.port,
        tf,
        &[
            "POST",
            "/mcps/ts/tools/slow",
            "--header",
            "Accept: application/x-ndjson",
            "--data",
            r#"{"arguments":{"seconds":0.2,"steps":2}}"#,
        ],
    );
    let (status, body) = framed(&o);
    assert_eq!(status, 200);
    assert_eq!(body.lines().count(), 3, "{body}");
    // Errors pass through with their status.
    let (status, body) = framed(&request(gw.port, tf, &["DELETE", "/mcps/ghost"]));
    assert_eq!(status, 404);
    assert!(body.contains("not found"));
    // A timeout gives curl's code 28.
    let o = request(
        gw.port,
        tf,
        &[
            "POST",
            "/mcps/ts/tools/slow",
            "--max-time",
            "0.3",
            "--data",
            r#"{"arguments":{"seconds":5}}"#,
        ],
    );
    assert_eq!(o.status.code(), Some(28), "{}", stderr(&o));
    // Usage errors are code 2.
    assert_eq!(
        run(&mut gateway(&["request", "GET"])).status.code(),
        Some(2)
    );
}

#[test]
fn a_start_that_fails_leaves_nothing_it_created() {
    // The host library's launch: `mkdir -p DIR && exec mcpgw-gateway --daemon ... --token-file
    // DIR/token --log-file DIR/gateway.log`, on a port that is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let parent = TempDir::new("leftovers");
    let dir = parent.path("mcpgw-0123456789abcdef");
    for daemon in [true, false] {
        std::fs::create_dir(&dir).unwrap();
        let (token, log) = (dir.join("token"), dir.join("gateway.log"));
        let mut args = vec![
            "--port",
            &port,
            "--token-file",
            token.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ];
        if daemon {
            args.push("--daemon");
        }
        let o = run(&mut gateway(&args));
        assert!(!o.status.success());
        assert!(stderr(&o).contains("cannot listen"), "{}", stderr(&o));
        assert!(!dir.exists(), "daemon={daemon}: {dir:?} was left behind");
    }
    // A directory holding something else stays, with that thing.
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("mine"), "x").unwrap();
    let token = dir.join("token");
    let o = run(&mut gateway(&[
        "--port",
        &port,
        "--token-file",
        token.to_str().unwrap(),
    ]));
    assert!(!o.status.success());
    assert!(dir.join("mine").exists() && !token.exists());
}

#[test]
fn token_files_others_could_read_or_replace_are_refused_in_the_log() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new("tokenfile");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let log = dir.path("gw.log");
    std::fs::write(&log, "").unwrap();
    let start = |token: &std::path::Path| {
        run(&mut gateway(&[
            "--port",
            "0",
            "--token-file",
            token.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ]))
    };
    // A dangling symbolic link used to overflow the stack.
    let dangling = dir.path("dangling");
    symlink(dir.path("nowhere"), &dangling).unwrap();
    let o = start(&dangling);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    // World-readable, and a link to such a file.
    let open = dir.path("open");
    std::fs::write(&open, "t0ken").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = start(&open);
    assert!(stderr(&o).contains("chmod 600"), "{}", stderr(&o));
    let link = dir.path("link");
    symlink(&open, &link).unwrap();
    assert!(stderr(&start(&link)).contains("symbolic link"));
    // In a directory anyone may write to.
    let shared = dir.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = start(&shared.join("token"));
    assert!(
        stderr(&o).contains("writable by everyone"),
        "{}",
        stderr(&o)
    );
    // Each refusal is in the configured log too.
    let logged = std::fs::read_to_string(&log).unwrap();
    for needle in ["symbolic link", "chmod 600", "writable by everyone"] {
        assert!(
            logged.contains(needle),
            "{needle} not in the log:\n{logged}"
        );
    }
}
