//! The release gateway is one static binary: it runs in a root that holds nothing but busybox
//! and itself (no dynamic loader, no libc, no NSS, no curl, no python), in its own network, PID
//! and mount namespaces, and serves an MCP server written in busybox sh.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use mcpgw_testkit::*;

/// Whether an ELF file asks for a dynamic loader (has a PT_INTERP program header).
fn has_interpreter(bytes: &[u8]) -> bool {
    assert_eq!(&bytes[..4], b"\x7fELF");
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(bytes[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) == 3
    })
}

fn namespaces_available() -> bool {
    Command::new("unshare")
        .args(["--net", "--pid", "--mount", "--fork", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

fn busybox() -> Option<PathBuf> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn copy_executable(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_static_gateway_serves_mcp_from_a_busybox_only_root() {
    let gateway = static_gateway_bin();
    let bytes = std::fs::read(&gateway).unwrap();
    assert!(
        !has_interpreter(&bytes),
        "{} needs a dynamic loader",
        gateway.display()
    );
    eprintln!("static gateway: {} bytes", bytes.len());
    if !namespaces_available() {
        eprintln!(
            "SKIPPED: Linux namespaces are unavailable here (unshare --net --pid --mount failed)"
        );
        return;
    }
    let Some(busybox) = busybox() else {
        panic!("busybox is missing: install Debian's busybox-static (.ci/run does)");
    };

    let root = TempDir::new("root");
    for dir in ["bin", "tmp", "proc", "dev", "srv"] {
        std::fs::create_dir_all(root.0.join(dir)).unwrap();
    }
    std::fs::set_permissions(root.0.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    copy_executable(&busybox, &root.0.join("bin/busybox"));
    for applet in ["sh", "sed", "cat", "ls", "kill", "sleep", "printf", "ps"] {
        std::os::unix::fs::symlink("busybox", root.0.join("bin").join(applet)).unwrap();
    }
    copy_executable(&gateway, &root.0.join("bin/mcpgw-gateway"));
    std::fs::copy(
        repo().join("tests/servers/echo-mcp.sh"),
        root.0.join("srv/echo-mcp.sh"),
    )
    .unwrap();
    std::fs::write(root.0.join("dev/null"), b"").unwrap();

    let inside = r#"
set -e
busybox ip link set lo up
ready=$(mcpgw-gateway --daemon --port 0 --token-file /tmp/gw/token --instance-nonce n0 --log-file /tmp/gw/log)
echo "ready $ready"
port=$(echo "$ready" | sed 's/.*"port":\([0-9]*\).*/\1/')
pid=$(echo "$ready" | sed 's/.*"pid":\([0-9]*\).*/\1/')
req() { mcpgw-gateway request "$@" --port "$port" --token-file /tmp/gw/token; }
req GET /health
req POST /mcps --data '{"name":"sh","mcp_config":{"type":"stdio_mcp","command":"/bin/sh","args":["/srv/echo-mcp.sh"]}}'
req GET /mcps/sh/tools
req POST /mcps/sh/tools/echo --data '{"arguments":{"text":"hello from a busybox root"}}'
echo "files: $(ls /bin | sed -n '1h;1!H;${x;s/\n/ /g;p}')"
kill "$pid"
i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
echo "processes left: $(ps -o args | sed 1d | sed -n '1h;1!H;${x;s/\n/ /g;p}')"
"#;
    std::fs::write(root.0.join("srv/run.sh"), inside).unwrap();
    let r = root.0.display();
    let outer = format!(
        "mount -t proc proc {r}/proc && mount --bind /dev/null {r}/dev/null && exec chroot {r} /bin/sh /srv/run.sh"
    );
    let out = Command::new("unshare")
        .args([
            "--net",
            "--pid",
            "--mount",
            "--fork",
            "--kill-child",
            "sh",
            "-c",
            &outer,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(r#""instance_nonce":"n0""#), "{stdout}");
    assert!(
        stdout.contains("{\"status\":\"ok\",\"instance_nonce\":\"n0\"}\nmcpgw-http-status:200"),
        "{stdout}"
    );
    assert!(
        stdout.contains("{\"ok\":true}\nmcpgw-http-status:200"),
        "{stdout}"
    );
    assert!(stdout.contains(r#""name":"echo""#), "{stdout}");
    assert!(
        stdout.contains(r#""text":"hello from a busybox root""#),
        "{stdout}"
    );
    assert!(
        stdout.contains("files: busybox cat kill ls mcpgw-gateway printf ps sed sh sleep"),
        "{stdout}"
    );
    // After SIGTERM only the shell and ps remain: the gateway and its upstream are gone.
    let left = stdout
        .lines()
        .find(|l| l.starts_with("processes left:"))
        .unwrap();
    assert!(
        !left.contains("mcpgw") && !left.contains("echo-mcp"),
        "{left}"
    );
}
