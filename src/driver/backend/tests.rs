use super::*;

fn docker(name: &str) -> Backend {
    Backend::Docker(Container {
        container: name.into(),
        exec_options: vec!["--user".into(), "agent".into()],
        options: vec![],
        program: None,
    })
}

fn kubectl(pod: &str) -> Backend {
    Backend::Kubectl(Pod {
        pod: pod.into(),
        namespace: Some("agents".into()),
        container: Some("work".into()),
        options: vec!["--context".into(), "prod".into()],
        program: None,
    })
}

#[test]
fn bad_names_are_refused_with_the_reason() {
    for (backend, says) in [
        (docker(""), "must not be empty"),
        (docker("-rm"), "starts with '-'"),
        (docker("box;rm -rf"), "holds ';'"),
        (kubectl("pod$(x)"), "holds '$'"),
        (kubectl("pod name"), "holds ' '"),
        (
            Backend::Argv(Prefix {
                prefix: vec![],
                joins_arguments: false,
                ..Default::default()
            }),
            "must name a program",
        ),
    ] {
        let e = backend.validate().unwrap_err();
        assert!(e.message().contains(says), "{backend:?}: {e}");
    }
    docker("box_1.a-b").validate().unwrap();
    kubectl("pod/web-0").validate().unwrap();
}

#[test]
fn argv_per_backend() {
    let (p, stdin) = docker("box").command("echo hi", None);
    let Program::Argv(argv) = p else { panic!() };
    assert_eq!(
        &argv[..6],
        ["docker", "exec", "-i", "--user", "agent", "box"]
    );
    assert_eq!(&argv[6..8], ["sh", "-c"]);
    assert_eq!(argv[8], WATCHED);
    assert_eq!(&argv[9..], ["sh", "echo hi"]);
    assert_eq!(stdin, Stdin::Hold);

    let (p, stdin) = kubectl("web-0").command("true", Some(b"x".to_vec().into()));
    assert_eq!(
        p,
        Program::Argv(
            [
                "kubectl",
                "--context",
                "prod",
                "exec",
                "-i",
                "--namespace",
                "agents",
                "--container",
                "work",
                "web-0",
                "--",
                "sh",
                "-c",
                "true"
            ]
            .map(String::from)
            .to_vec()
        )
    );
    assert!(matches!(stdin, Stdin::Bytes(_)));

    let local = Backend::Local { cwd: None };
    assert_eq!(
        local.command("true", None),
        (
            Program::Argv(vec!["sh".into(), "-c".into(), "true".into()]),
            Stdin::Null
        )
    );
    let ssh = Backend::Argv(Prefix {
        prefix: vec!["ssh".into(), "box".into()],
        joins_arguments: true,
        ..Default::default()
    });
    assert_eq!(
        ssh.channel("echo 'a b'"),
        Program::Argv(vec![
            "ssh".into(),
            "box".into(),
            r"'sh' '-c' 'echo '\''a b'\'''".into()
        ])
    );
    let exec = Backend::Exec {
        passes_stdin: false,
    };
    assert_eq!(exec.command("true", None).0, Program::Shell("true".into()));
}

/// The command's pid, once it wrote it to `file`.
fn pid_in(file: &std::path::Path) -> i32 {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the command never wrote its pid to {}", file.display());
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_watched_command_ends_when_the_host_kills_its_process_group_and_its_stdin_closes() {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("mcpgw-watched-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pid");
    let text = format!("echo $$ > {}; exec sleep 30", file.display());
    // As a binding runs it: its own process group, stdin a pipe held open.
    let mut child = Command::new("sh")
        .args(["-c", WATCHED, "sh", &text])
        .stdin(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = pid_in(&file);
    assert!(alive(pid));
    // Both the command and the watcher are in sessions of their own (a KILL in the few
    // microseconds before the watcher's setsid would take the watcher along: the window
    // the wrapper cannot close without a handshake).
    let group = i32::try_from(child.id()).unwrap();
    let own_sessions = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let fields: Vec<&str> = stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                fields.get(1) == Some(&group.to_string().as_str())
                    && fields.get(3) == Some(&p.to_string().as_str())
            })
            .count()
    };
    for _ in 0..500 {
        if own_sessions() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // What a binding does for KILL: the group, then the held stdin once the process exited.
    Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status()
        .unwrap();
    child.wait().unwrap();
    drop(child.stdin.take());
    let mut gone = false;
    for _ in 0..500 {
        if !alive(pid) {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(gone, "the command (pid {pid}) outlived the cancel");
}

#[test]
fn docker_failures_are_told_from_the_commands_own() {
    let d = docker("box");
    let gone = d.judge(
        1,
        b"",
        b"Error response from daemon: No such container: box",
        false,
    );
    let Verdict::Failed(f) = gone else {
        panic!("{gone:?}")
    };
    assert_eq!(f.state, FailureState::Gone);
    let stopped = d.judge(
        1,
        b"",
        b"Error response from daemon: container abc is not running",
        false,
    );
    assert!(matches!(
        stopped,
        Verdict::Failed(BackendFailure {
            state: FailureState::NotRunning,
            ..
        })
    ));
    assert!(matches!(
        d.judge(
            1,
            b"",
            b"Cannot connect to the Docker daemon at unix:///var/run/docker.sock",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::Unreachable,
            ..
        })
    ));
    assert!(matches!(
        d.judge(
            126,
            b"OCI runtime exec failed: exec: \"sh\": not found",
            b"",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::CannotRun,
            ..
        })
    ));
    // The command's own failures.
    assert_eq!(
        d.judge(1, b"", b"curl: (7) refused", false),
        Verdict::Command
    );
    assert_eq!(d.judge(7, b"", b"", false), Verdict::Command);
    assert_eq!(d.judge(137, b"partial", b"", false), Verdict::Command);
    // A silent 137 needs the question; on a channel, any 137 does.
    let Verdict::Ask(q) = d.judge(137, b"", b"", false) else {
        panic!()
    };
    assert_eq!(
        q,
        ["docker", "inspect", "--format", "{{.State.Running}}", "box"]
    );
    assert!(matches!(
        d.judge(137, b"", b"INFO relaying", true),
        Verdict::Ask(_)
    ));
    assert_eq!(d.judge_answer(137, 0, b"true\n"), None);
    assert!(d.judge_answer(137, 0, b"false\n").is_some());
    assert!(d.judge_answer(137, 1, b"").is_some());
    // On a channel attach's log lines come first: the backend's own is the last line.
    assert!(matches!(
        d.judge(1, b"", b"2026-12-01T00:00:00Z INFO relaying\nError response from daemon: No such container: box", true),
        Verdict::Failed(_)
    ));
}

/// The wrapper through a real `sh`: the command's exit status is passed on, and the end of
/// stdin kills the command (the host gave up on it).
#[test]
fn watched_commands_end_with_their_stdin() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = std::env::temp_dir().join(format!("mcpgw-watched-stdin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ran-to-the-end");
    let run = |command: &str, stdin: Stdio| {
        Command::new("sh")
            .args(["-c", WATCHED, "sh", command])
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Its stdin held open to its end, as the host does.
    let mut child = run("echo hi; exit 7", Stdio::piped());
    let held = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(held);
    assert_eq!(
        (out.status.code(), &out.stdout[..]),
        (Some(7), &b"hi\n"[..])
    );

    let command = format!("echo started; sleep 5; touch '{}'", marker.display());
    let mut child = run(&command, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let mut started = [0u8; 8];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut started).unwrap();
    stdin.flush().unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(137),
        "the watched command was not killed"
    );
    assert!(!marker.exists(), "the command ran to its end");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn podman_and_kubectl_failures() {
    let p = Backend::Podman(Container {
        container: "box".into(),
        exec_options: vec![],
        options: vec!["--storage-driver".into(), "vfs".into()],
        program: None,
    });
    assert!(matches!(
        p.judge(
            125,
            b"",
            b"Error: no container with name or ID \"box\" found: no such container",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::Gone,
            ..
        })
    ));
    assert!(matches!(
        p.judge(
            255,
            b"",
            b"Error: can only create exec sessions on running containers: container state improper",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::NotRunning,
            ..
        })
    ));
    // What podman 4.3.1 says for a stopped container and a working directory missing.
    let stopped =
        b"Error: can only create exec sessions on running containers: container state improper";
    let no_cwd = b"Error: runc: exec failed: unable to start container process: chdir to cwd \
        (\"/nonexistent\") set in config.json failed: no such file or directory: OCI runtime \
        attempted to invoke a command that was not found";
    for (code, said, state) in [
        (255, &stopped[..], FailureState::NotRunning),
        (127, &no_cwd[..], FailureState::CannotRun),
    ] {
        let Verdict::Failed(f) = p.judge(code, b"", said, false) else {
            panic!("{code}: not the backend's failure")
        };
        assert_eq!(f.state, state);
    }
    // The command's own 255 and 127 stay its own.
    assert_eq!(
        p.judge(255, b"", b"ssh: connect refused", false),
        Verdict::Command
    );
    assert_eq!(
        p.judge(127, b"", b"sh: mcpgw-gateway: not found", false),
        Verdict::Command
    );
    let Verdict::Ask(q) = p.judge(137, b"", b"", false) else {
        panic!()
    };
    assert_eq!(&q[..4], ["podman", "--storage-driver", "vfs", "inspect"]);
    let k = kubectl("web-0");
    assert!(matches!(
        k.judge(
            1,
            b"",
            b"Error from server (NotFound): pods \"web-0\" not found",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::Gone,
            ..
        })
    ));
    assert!(matches!(
        k.judge(
            1,
            b"",
            b"The connection to the server localhost:8080 was refused",
            false
        ),
        Verdict::Failed(BackendFailure {
            state: FailureState::Unreachable,
            ..
        })
    ));
    assert_eq!(
        k.judge(1, b"", b"error: something of the command", false),
        Verdict::Command
    );
    // kubectl logs its retries (klog lines) before it says what failed.
    let refused = b"E1201 21:19:28.393334    1682 memcache.go:265] \"Unhandled Error\" err=\"couldn't get current server API group list\"\nE1201 21:19:28.398334    1682 memcache.go:265] again\nThe connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?";
    assert!(matches!(
        k.judge(1, b"", refused, false),
        Verdict::Failed(BackendFailure {
            state: FailureState::Unreachable,
            ..
        })
    ));
    let Verdict::Ask(q) = k.judge(137, b"", b"", false) else {
        panic!()
    };
    assert!(q.contains(&"jsonpath={.status.phase}".to_string()), "{q:?}");
    assert_eq!(k.judge_answer(137, 0, b"Running"), None);
}
