"""What the AgentScope tests share: whether bubblewrap works here, the process tree of a sandbox,
AgentScope's own test files from its sdist on PyPI, and the offline Docker images AgentScope's
DockerWorkspace runs on (built from this host's files and PyPI packages; nothing is pulled)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import agentscope

from conftest import DOCKER_SH, REPO, STATIC_GATEWAY, TARGET

#: AgentScope's sdist on PyPI, fetched once and kept under the target directory.
SDIST_CACHE = TARGET / "agentscope-sdist"


def bwrap_reason() -> str | None:
    """Why no bubblewrap sandbox can be made here, or None."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian package bubblewrap; .ci/run installs it)"
    probe = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--share-net", "true"]
    r = subprocess.run(probe, capture_output=True, text=True)
    return None if r.returncode == 0 else f"bwrap cannot make a sandbox here: {r.stderr.strip()}"


def descendants(pid: int) -> list[int]:
    """Every process below `pid`."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out += [child, *descendants(child)]
    return out


def cmdline(pid: int) -> str:
    """The command line of `pid`, or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def agentscope_test_file(name: str) -> Path:
    """AgentScope's own `tests/NAME` from the sdist of the installed version on PyPI (the
    repository is not reachable from CI; PyPI is), downloaded once by pip into
    :data:`SDIST_CACHE`."""
    version = agentscope.__version__
    sdist = SDIST_CACHE / f"agentscope-{version}.tar.gz"
    if not sdist.is_file():
        SDIST_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"agentscope=={version}",
                "-d",
                str(SDIST_CACHE),
            ],
            check=True,
        )
    out = SDIST_CACHE / version / name
    if not out.is_file():
        with tarfile.open(sdist) as tar:
            member = tar.extractfile(f"agentscope-{version}/tests/{name}")
            if member is None:
                raise FileNotFoundError(f"{sdist} has no tests/{name}")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(member.read())
    return out


def run_swapped(test_file: Path, report: Path, env: dict[str, str] | None = None, only: str | None = None) -> None:
    """Runs one of AgentScope's own test files under pytest in a process of its own, every
    sandboxed workspace it initializes swapped (the ``mcpgw_swap`` plugin, with the static
    gateway; ``sandbox_test_support``'s stand-in on its path), and checks that every test in it
    (or the test named `only`) ran and passed: none failed, none errored, none was skipped."""
    path = [str(REPO / "tests" / "python" / "agentscope_suite"), str(REPO / "bindings" / "python" / "src")]
    # pytest-asyncio stays out of unittest's own async test cases.
    ini = ["-o", "asyncio_mode=strict", "-o", "asyncio_default_fixture_loop_scope=function"]
    plugins = ["-p", "no:cacheprovider", "-p", "mcpgw_swap"]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            *plugins,
            *ini,
            f"--junitxml={report}",
            str(test_file),
            *(["-k", only] if only else []),
        ],
        cwd=test_file.parent,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
            "MCPGW_LIB": str(Path(os.environ["MCPGW_LIB"]).resolve()),
            "MCPGW_AGENTSCOPE_SWAP": "1",
            "MCPGW_GATEWAY_BINARY": str(STATIC_GATEWAY),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    print(r.stdout[-6000:], r.stderr[-3000:], sep="\n")
    assert report.is_file(), r.stderr
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    written = re.findall(r"^\s*(?:async )?def (test_\w+)", test_file.read_text(), re.MULTILINE)
    if only:
        written = [w for w in written if w == only]
    ran = [c.get("name") for c in suite.iter("testcase")]
    assert written and sorted(ran) == sorted(written), (written, ran)
    assert [suite.get(k) for k in ("failures", "errors", "skipped")] == ["0", "0", "0"], ET.tostring(suite)[:6000]


# ── offline images for AgentScope's DockerWorkspace ────────────────

#: The MCP server the Docker workspaces here run: real, nobody here wrote it, installed into the
#: workspace's .venv (first on PATH) through its ``extra_pip``.
TIME_SERVER_PIP = "mcp-server-time==2026.10.19"
#: What AgentScope 2.0.11's own sandbox gateway lacks to call any tool: its bootstraps install
#: agentscope ``--no-deps`` beside its ``_GATEWAY_BASE_REQUIREMENTS``, and a call imports
#: ``agentscope.tool``, which needs these (without them every call answers HTTP 500 "No module
#: named ..."). An unswapped workspace gets them through ``extra_pip`` where it must call tools.
STOCK_GATEWAY_MISSING = [
    "docstring_parser==0.18.0",
    "jinja2==3.1.6",
    "aiofiles==25.1.0",
    "python-frontmatter==1.3.0",
    "tree-sitter==0.26.1",
    "tree-sitter-bash==0.25.1",
]

#: The interpreter the images carry (AgentScope's images must have a python3): this machine's
#: Debian python3 with its standard library and the shared libraries everything in the image needs.
IMAGE_PYTHON = Path("/usr/bin/python3.11")
GATEWAY_HOME = "/root/.agentscope"
#: What DockerWorkspace's image adds to PATH and the environment (its Dockerfile template).
IMAGE_ENV = {
    "PATH": f"{GATEWAY_HOME}/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "UV_PROJECT_ENVIRONMENT": f"{GATEWAY_HOME}/.venv",
    "UV_LINK_MODE": "copy",
}
#: The label naming the workspace tag an image was built for.
FOR_TAG = "mcpgw-test-agentscope-for"
#: Debian's programs the images carry besides busybox (see _build_image).
HOST_PROGRAMS = (Path("/usr/bin/nohup"), Path("/usr/bin/pkill"), Path("/usr/bin/realpath"))
#: Parts of the standard library no workspace command uses.
STDLIB_SKIPPED = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data"}
STDLIB_SKIPPED |= {"config-3.11-x86_64-linux-gnu"}  # static libpython and build files


def docker_image_reason() -> str | None:
    """Why the AgentScope Docker images cannot be built here, or None."""
    r = subprocess.run(["sh", str(DOCKER_SH), "check"], capture_output=True, text=True)
    if r.returncode != 0:
        return r.stdout.strip() or r.stderr.strip() or "tests/docker/sandbox.sh check failed"
    if not IMAGE_PYTHON.is_file() or not (Path("/usr/lib") / IMAGE_PYTHON.name / "os.py").is_file():
        return f"{IMAGE_PYTHON} with its standard library is not installed (Debian package python3.11)"
    if not STATIC_GATEWAY.is_file():
        return "the static mcpgw-gateway is missing: run `make static`"
    missing = [str(p) for p in HOST_PROGRAMS if not p.is_file()]
    if missing:
        return f"{', '.join(missing)} missing (Debian packages coreutils, procps)"
    return None


def _uv() -> str:
    import uv

    return uv.find_uv_bin()


def _tool(name: str) -> Path:
    path = Path(_uv()).parent / name if name in ("uv", "uvx") else Path(sys.executable).parent / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: `make deps` installs uv and ripgrep from PyPI")
    return path


def _shared_libraries(files: list[Path]) -> set[Path]:
    """The shared libraries (and the loader) the ELF `files` load, by the paths ldd resolves."""
    libs: set[Path] = set()
    for f in files:
        r = subprocess.run(["ldd", str(f)], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            parts = line.split()
            for p in parts:
                if p.startswith("/") and Path(p).exists():
                    libs.add(Path(p))
    return libs


def _copy(src: Path, root: Path, dest: str | None = None) -> None:
    target = root / (dest or str(src)).lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, target, follow_symlinks=True)


def docker_image(stock: bool, extra_pip: list[str]) -> str:
    """The image AgentScope's ``DockerWorkspace(extra_pip=extra_pip)`` runs, built offline and
    tagged as the workspace expects, so its ``initialize`` finds it and builds nothing: with
    `stock`, AgentScope's own image (its Dockerfile template's tag; the ``.venv`` holds its
    gateway's requirements and agentscope itself, and its gateway script), else the image of a
    workspace swapped by ``use_mcpgw`` (``gateway_free_image``'s tag; the ``.venv`` holds only
    `extra_pip`). Both carry what the template installs besides: ``uv`` and ``uvx`` in
    /usr/local/bin, ``rg`` in /usr/bin, the ``.venv`` first on PATH, the Glob tool's helper, a
    python3, and a busybox userland where the template's base image has Debian's. Returns the tag."""
    from agentscope.workspace import DockerWorkspace
    from agentscope.workspace._docker._make_dockerfile import prepare_build_context
    from agentscope.workspace._utils import _GATEWAY_BASE_REQUIREMENTS

    from mcpgw_client.agentscope import gateway_free_image

    workspace = DockerWorkspace(extra_pip=extra_pip)
    if stock:
        ctx, tag, _ = prepare_build_context(base_image=workspace.base_image, extra_pip=extra_pip)
        shutil.rmtree(ctx, ignore_errors=True)
        requirements = [*_GATEWAY_BASE_REQUIREMENTS, *extra_pip]
    else:
        tag, _ = gateway_free_image(workspace)
        requirements = list(extra_pip)
    busybox = Path(_run("sh", str(REPO / "tests" / "busybox.sh")).strip())
    tools = {"/usr/local/bin/uv": _tool("uv"), "/usr/local/bin/uvx": _tool("uvx"), "/usr/bin/rg": _tool("rg")}
    inputs = hashlib.sha256()
    for part in (Path(__file__), busybox, IMAGE_PYTHON, *HOST_PROGRAMS, *tools.values()):
        inputs.update(hashlib.sha256(part.read_bytes()).digest())
    inputs.update(json.dumps([tag, requirements, agentscope.__version__]).encode())
    name = f"mcpgw-test-agentscope:{inputs.hexdigest()[:12]}"
    if subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode != 0:
        with tempfile.TemporaryDirectory(prefix="mcpgw-as-image-") as work:
            root = Path(work) / "root"
            _userland(root, busybox)
            _python(root, tools)
            _venv(root / GATEWAY_HOME.lstrip("/"), requirements, stock)
            _import(root, Path(work) / "rootfs.tar", name, tag)
    _run("docker", "tag", name, tag)
    return tag


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def _userland(root: Path, busybox: Path) -> None:
    """Busybox, the programs of :data:`HOST_PROGRAMS`, the directories and /etc files."""
    dirs = ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "etc", "root", "proc", "sys", "dev", "workspace")
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    for d in ("tmp", "var/tmp"):
        (root / d).mkdir(parents=True)
        (root / d).chmod(0o1777)
    # Programs of Debian's own the base image has and busybox-static lacks or does otherwise:
    # AgentScope's stock launch runs `pkill -f` and `nohup`; uv's relocatable scripts `realpath --`.
    for program in HOST_PROGRAMS:
        _copy(program, root)
    _copy(busybox, root, "/bin/busybox")
    for applet in _run(str(busybox), "--list-full").split():
        link = root / applet
        if "/" in applet and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to("/bin/busybox")
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    (root / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")


def _python(root: Path, tools: dict[str, Path]) -> None:
    """python3 with its standard library, and the template's uv, uvx and rg."""
    _copy(IMAGE_PYTHON, root)
    for link in ("python3", "python"):
        (root / "usr/bin" / link).symlink_to(IMAGE_PYTHON.name)
    stdlib = Path("/usr/lib") / IMAGE_PYTHON.name
    shutil.copytree(
        stdlib,
        root / str(stdlib).lstrip("/"),
        symlinks=True,
        ignore=lambda d, names: STDLIB_SKIPPED & set(names) if d == str(stdlib) else set(),
    )
    for dest, src in tools.items():
        _copy(src, root, dest)


def _venv(home: Path, requirements: list[str], stock: bool) -> None:
    """The template's gateway home: its ``.venv`` as the template makes it (``uv venv``, then
    the requirements, then agentscope ``--no-deps`` in the stock image), relocatable so its
    scripts run at its path in the image (its interpreter is the image's python3, at the same
    path as here), the Glob tool's helper and the gateway script."""
    from agentscope.workspace._utils import _read_gateway_script_bytes, _read_glob_helper_bytes

    uv, python = _uv(), str(home / ".venv" / "bin" / "python")
    _run(uv, "venv", "--quiet", "--relocatable", "--python", str(IMAGE_PYTHON), str(home / ".venv"))
    if requirements:
        _run(uv, "pip", "install", "--quiet", "--python", python, *requirements)
    if stock:
        _run(uv, "pip", "install", "--quiet", "--python", python, "--no-deps", f"agentscope=={agentscope.__version__}")
    (home / "_glob_helper.py").write_bytes(_read_glob_helper_bytes())
    (home / "_mcp_gateway_app.py").write_bytes(_read_gateway_script_bytes())


def _import(root: Path, rootfs: Path, name: str, tag: str) -> None:
    """Adds every shared library the image's executables and extension modules load (where ldd
    finds them here: the same paths in the image), then imports the tree as image `name`,
    labelled with the workspace's `tag`; earlier builds for that tag are removed (a storage
    driver such as vfs keeps every image whole)."""
    elves = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    for lib in _shared_libraries(elves):
        if not (root / str(lib).lstrip("/")).exists():
            _copy(lib, root)
    with tarfile.open(rootfs, "w") as tar:
        tar.add(root, arcname=".", filter=_owned_by_root)
    changes = [f"ENV {k}={v}" for k, v in IMAGE_ENV.items()]
    changes += ["WORKDIR /workspace", "LABEL mcpgw-test=1", f"LABEL {FOR_TAG}={tag}", 'CMD ["sleep", "infinity"]']
    earlier = _run("docker", "images", "-q", "--filter", f"label={FOR_TAG}={tag}").split()
    _run("docker", "import", *(a for c in changes for a in ("--change", c)), str(rootfs), name)
    for image in sorted(set(earlier)):
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


# ── offline images for AgentScope's E2BWorkspace, on E2B's own envd ──


def e2b_image(stock: bool, envd: Path) -> str:
    """An image E2B's envd serves as AgentScope's ``E2BWorkspace`` finds its sandbox: the
    userland and python3 of the Docker images, the gateway home at E2B's path (with `stock`,
    AgentScope's gateway's requirements, agentscope and its gateway script, as its bootstrap
    leaves them; else empty, for the swap's own bootstrap), the ``user`` account and home of
    E2B's template, bash (envd runs commands with ``bash -l -c``) and envd. Returns its name."""
    from agentscope.workspace._e2b._constants import GATEWAY_HOME as E2B_GATEWAY_HOME
    from agentscope.workspace._e2b._constants import SANDBOX_USER_HOME, SANDBOX_WORKDIR
    from agentscope.workspace._utils import _GATEWAY_BASE_REQUIREMENTS

    requirements = [*_GATEWAY_BASE_REQUIREMENTS, *STOCK_GATEWAY_MISSING] if stock else []
    busybox = Path(_run("sh", str(REPO / "tests" / "busybox.sh")).strip())
    bash = Path(shutil.which("bash") or "/bin/bash")
    tools = {"/usr/local/bin/uv": _tool("uv"), "/usr/local/bin/uvx": _tool("uvx"), "/usr/bin/rg": _tool("rg")}
    inputs = hashlib.sha256()
    for part in (Path(__file__), busybox, bash, envd, IMAGE_PYTHON, *HOST_PROGRAMS, *tools.values()):
        inputs.update(hashlib.sha256(part.read_bytes()).digest())
    inputs.update(json.dumps([stock, requirements, agentscope.__version__]).encode())
    name = f"mcpgw-test-agentscope-e2b:{inputs.hexdigest()[:12]}"
    if subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0:
        return name
    with tempfile.TemporaryDirectory(prefix="mcpgw-as-e2b-image-") as work:
        root = Path(work) / "root"
        _userland(root, busybox)
        _python(root, tools)
        (root / "bin" / "bash").unlink(missing_ok=True)
        _copy(bash, root, "/bin/bash")
        _copy(envd, root, "/usr/local/bin/envd")
        home = root / E2B_GATEWAY_HOME.lstrip("/")
        home.mkdir(parents=True)
        (root / SANDBOX_WORKDIR.lstrip("/")).mkdir(parents=True, exist_ok=True)
        _venv(home, requirements, stock)
        with (root / "etc/passwd").open("a") as f:
            f.write(f"user:x:1000:1000:user:{SANDBOX_USER_HOME}:/bin/bash\n")
        with (root / "etc/group").open("a") as f:
            f.write("user:x:1000:\n")
        _import(root, Path(work) / "rootfs.tar", name, f"e2b-{'stock' if stock else 'swapped'}")
    return name


if __name__ == "__main__":
    # `python agentscope_support.py stock|swapped [EXTRA_PIP...]` prints the image's tag (bench).
    sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
    print(docker_image(sys.argv[1] == "stock", sys.argv[2:]))
