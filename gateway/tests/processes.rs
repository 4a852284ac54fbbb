//! Nothing an upstream starts outlives it: not its process group, and not a process that left
//! the group and lost its parent (setsid plus a double fork). The gateway is their subreaper
//! and reaps them, so no zombie is left either.

use std::time::{Duration, Instant};

use serde_json::json;

use mcpgw_testkit::*;

/// The parent of a process, from /proc.
fn ppid(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Zombie children of `parent`.
fn zombies_of(parent: u32) -> Vec<u32> {
    mcpgw_testkit::process::processes_where(|state, pp, _| state == "Z" && pp == parent)
}

/// Asks the rogue server to start an escaping sleeper; returns its pid.
async fn escaped_sleeper(gw: &Gateway, mcp: &str, dir: &TempDir) -> u32 {
    let pidfile = dir.path(&format!("{mcp}.pid"));
    gw.call(mcp, "spawn", json!({"pidfile": pidfile}))
        .await
        .expect(200);
    let pid: u32 = wait_for_file(&pidfile, Duration::from_secs(5))
        .expect("the sleeper wrote its pid")
        .trim()
        .parse()
        .unwrap();
    assert!(process_alive(pid));
    pid
}

async fn no_zombies(gw: &Gateway) {
    let started = Instant::now();
    while !zombies_of(gw.pid()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "zombies left: {:?}",
            zombies_of(gw.pid())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_process_that_escapes_its_upstream_ends_with_it() {
    let dir = TempDir::new("escape");
    let mut gw = start_gateway(&[]);
    gw.add(rogue_stdio("a"), "").await.expect(200);
    gw.add(rogue_stdio("b"), "").await.expect(200);
    let a = escaped_sleeper(&gw, "a", &dir).await;
    let b = escaped_sleeper(&gw, "b", &dir).await;
    // Orphaned, it was re-parented to the gateway, not to init.
    assert_eq!(ppid(a), gw.pid());
    // DELETE ends it, and the gateway reaps it.
    gw.delete("/mcps/a").await.expect(200);
    assert!(wait_gone(a, Duration::from_secs(3)), "{a} outlived DELETE");
    no_zombies(&gw).await;
    // The other upstream's is untouched until the gateway stops.
    assert!(process_alive(b));
    let status = gw.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        wait_gone(b, Duration::from_secs(3)),
        "{b} outlived the gateway"
    );
}

/// Whether this machine lets a test make a PID namespace (root, or user namespaces).
fn pid_namespaces() -> bool {
    std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn as_pid_1_without_an_init_the_gateway_reaps_what_it_kills() {
    if !pid_namespaces() {
        eprintln!("SKIPPED: this test needs PID namespaces (unshare --pid as root)");
        return;
    }
    let dir = TempDir::new("pid1");
    // The gateway as pid 1 of its own PID namespace, as in a container started without --init.
    let gw = start_gateway_with(&[], |cmd| {
        let program = cmd.get_program().to_owned();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        let mut wrapped = std::process::Command::new("unshare");
        wrapped
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(program)
            .args(args)
            .stdout(std::process::Stdio::piped());
        std::mem::swap(cmd, &mut wrapped);
    });
    let started = Instant::now();
    let gateway = loop {
        let children = mcpgw_testkit::process::processes_where(|_, pp, _| pp == gw.pid());
        if let Some(&pid) = children.first() {
            break pid;
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let status = std::fs::read_to_string(format!("/proc/{gateway}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(nspid.trim().ends_with("\t1"), "not pid 1: {nspid}");
    gw.add(rogue_stdio("a"), "").await.expect(200);
    let sleeper_file = dir.path("a.pid");
    gw.call("a", "spawn", json!({"pidfile": sleeper_file}))
        .await
        .expect(200);
    // The pid it wrote is the namespace's; find it on the host by its parent.
    wait_for_file(&sleeper_file, Duration::from_secs(5)).expect("the sleeper started");
    let orphans =
        mcpgw_testkit::process::processes_where(|state, pp, _| pp == gateway && state != "Z");
    assert!(
        !orphans.is_empty(),
        "the sleeper was not re-parented to the gateway"
    );
    gw.delete("/mcps/a").await.expect(200);
    let started = Instant::now();
    loop {
        let left = mcpgw_testkit::process::processes_where(|_, pp, _| pp == gateway);
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "left behind (zombies included): {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
