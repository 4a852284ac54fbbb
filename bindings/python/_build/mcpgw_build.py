"""The PEP 517 build backend of the mcpgw-client Python package (in-tree, standard library only).

The wheel is the pure-Python package ``mcpgw_client`` plus three prebuilt files of the same
release, so ``pip install mcpgw-client`` needs no compiler, no build step and no environment
variable:

- ``mcpgw_client/_lib/libmcpgw.so``, the host library, loaded with ctypes;
- ``mcpgw_client/_bin/mcpgw-gateway``, the static gateway for Linux x86_64 sandboxes, which
  ``ensure_gateway_binary()`` installs into a sandbox by default;
- ``mcpgw_client/_bin/mcpgw``, the static host endpoint (``python -m mcpgw_client mcp ...``),
  which finds the gateway next to it.

Where they come from, for each: a config setting (``pip wheel --config-settings lib=PATH
--config-settings gateway=PATH --config-settings host=PATH``), else the environment
(``MCPGW_WHEEL_LIB``, ``MCPGW_WHEEL_GATEWAY``, ``MCPGW_WHEEL_HOST``), else, in a checkout of the
mcpgw repository, its cargo outputs (``target/release/libmcpgw.so`` or
``target/debug/libmcpgw.so``; the static binaries of ``make static``). An sdist holds none of
them: building from it needs all three named, and says so. Before anything is bundled, the
library's ABI version and version and each binary's version are checked against the package's,
and the binaries must be static (the gateway runs in images without a libc); the library's
debug symbols are stripped from the copy when ``strip`` is available.

The version is the workspace's (``Cargo.toml``) in a checkout, and the one the sdist's
``PKG-INFO`` records in an sdist: it is written nowhere else.

The platform tag is computed from the library itself: ``manylinux_2_<N>_x86_64`` where 2.N is
the newest glibc symbol version it references (PEP 600), so pip installs it exactly where the
library can load. (``linux_x86_64`` would say nothing about glibc, and PyPI refuses it.) The
package loads the library with ctypes, so the wheel is for any Python 3: ``py3-none``.
"""

from __future__ import annotations

import base64
import calendar
import ctypes
import email.parser
import gzip
import hashlib
import io
import os
import re
import shutil
import struct
import subprocess
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "mcpgw_client"
SRC = ROOT / "src" / PACKAGE
REPO = ROOT.parent.parent
LIB_NAME = "libmcpgw.so"
GATEWAY_NAME = "mcpgw-gateway"
HOST_NAME = "mcpgw"
STATIC_TARGET = "x86_64-unknown-linux-gnu"
# Members of every archive carry this time, so a rebuild gives the same bytes.
EPOCH = (2026, 1, 1, 0, 0, 0)


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _in_checkout() -> bool:
    return (REPO / "Cargo.toml").is_file() and (REPO / "include" / "mcpgw.h").is_file()


def _version() -> str:
    """The release's version: Cargo.toml's in a checkout, else the sdist's PKG-INFO."""
    if _in_checkout():
        with open(REPO / "Cargo.toml", "rb") as f:
            return str(tomllib.load(f)["workspace"]["package"]["version"])
    pkg_info = ROOT / "PKG-INFO"
    if pkg_info.is_file():
        return str(email.parser.Parser().parsestr(pkg_info.read_text())["Version"])
    raise RuntimeError(f"{ROOT} is neither in a checkout of the mcpgw repository nor an sdist with a PKG-INFO")


def _abi_version() -> int:
    abi = re.search(r"^ABI_VERSION = (\d+)", (SRC / "_native.py").read_text(), re.M)
    assert abi, f"{PACKAGE}/_native.py defines ABI_VERSION"
    return int(abi.group(1))


def _missing_native(version: str, what: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"building mcpgw-client {version} needs {what}. This source distribution holds no native "
        "code; it needs three files of the same mcpgw release: libmcpgw.so, the static "
        f"mcpgw-gateway and the static mcpgw. All are in the release tarball "
        f"mcpgw-{version}-x86_64-linux-gnu.tar.gz (lib/libmcpgw.so.{version}, bin/mcpgw-gateway, "
        "bin/mcpgw), or build them in the mcpgw repository (`make artifacts`, or `sh "
        "mk/build-lib.sh release` and `make static`). Then pass them: pip install --no-binary "
        "mcpgw-client --config-settings lib=PATH --config-settings gateway=PATH --config-settings "
        "host=PATH mcpgw-client (or set MCPGW_WHEEL_LIB, MCPGW_WHEEL_GATEWAY and MCPGW_WHEEL_HOST). "
        "On Linux x86_64 with glibc 2.34 or newer, the wheel needs none of this: pip install "
        "mcpgw-client"
    )


# The native files a wheel bundles: the config setting and environment variable that name one,
# where a checkout's build puts it (relative to the target directory, best first), and what
# builds it.
_NATIVE = {
    "lib": ("MCPGW_WHEEL_LIB", [f"release/{LIB_NAME}", f"debug/{LIB_NAME}"], "sh mk/build-lib.sh release"),
    "gateway": ("MCPGW_WHEEL_GATEWAY", [f"{STATIC_TARGET}/release/{GATEWAY_NAME}"], "make static"),
    "host": ("MCPGW_WHEEL_HOST", [f"{STATIC_TARGET}/release/{HOST_NAME}"], "make static"),
}


def _find_native(config_settings: dict[str, Any] | None, key: str, version: str) -> Path:
    """The file to bundle as `key` ("lib", "gateway" or "host"): as named, else a checkout's build."""
    env, built, builder = _NATIVE[key]
    value = (config_settings or {}).get(key) or os.environ.get(env)
    if value:
        path = Path(value).resolve()
        if not path.is_file():
            raise _missing_native(version, f"{key}={value}, which is not a file")
        return path
    if not _in_checkout():
        raise _missing_native(version, f"{key}=PATH")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    candidates = [target / c for c in built]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        tried = ", ".join(str(c) for c in candidates)
        raise FileNotFoundError(
            f"no {key} to bundle ({tried}): build it with `{builder}`, or name it with "
            f"--config-settings {key}=PATH or {env}"
        )
    return found


def _check_library(path: Path, version: str, abi: int) -> None:
    lib = ctypes.CDLL(str(path))
    lib.mcpgw_version.restype = ctypes.c_char_p
    lib.mcpgw_abi_version.restype = ctypes.c_uint32
    lib_version = lib.mcpgw_version().decode()
    lib_abi = int(lib.mcpgw_abi_version())
    if lib_abi != abi or lib_version != version:
        raise ValueError(
            f"{path} is libmcpgw {lib_version} (ABI {lib_abi}), the package is {version} (ABI {abi}): "
            "bundle the library of the same release"
        )


def _is_static_elf(data: bytes) -> bool:
    """Whether `data` is a 64-bit little-endian ELF executable without a program interpreter
    (PT_INTERP): one that loads with no libc or loader in the image."""
    if data[:6] != b"\x7fELF\x02\x01":
        return False
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    pt_interp = 3
    return all(struct.unpack_from("<I", data, phoff + i * phentsize)[0] != pt_interp for i in range(phnum))


def _check_static(path: Path, name: str, version: str) -> bytes:
    """The bytes of the static executable `name` at `path`, once it says it is of `version`."""
    data = path.read_bytes()
    if not _is_static_elf(data):
        raise ValueError(f"{path} is not a static x86_64 executable: bundle the {name} of `make static`")
    r = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False)
    if r.returncode != 0 or r.stdout.strip() != f"{name} {version}":
        said = (r.stdout + r.stderr).strip() or f"exit {r.returncode}"
        raise ValueError(
            f"{path} --version says {said!r}, the package is {version}: bundle the {name} of the same release"
        )
    return data


def _platform_tag(lib_bytes: bytes) -> str:
    # The version names of the glibc symbols the library binds sit in its dynamic string table.
    versions = [
        tuple(int(p) for p in m.split(b".")) for m in re.findall(rb"GLIBC_(2\.[0-9]+(?:\.[0-9]+)?)\x00", lib_bytes)
    ]
    major, minor = max(versions, default=(2, 17))[:2]
    return f"manylinux_{major}_{max(minor, 17)}_x86_64"


def _stripped(path: Path) -> bytes:
    strip = shutil.which("strip")
    if strip is None:
        return path.read_bytes()
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / LIB_NAME
        shutil.copyfile(path, copy)
        if subprocess.run([strip, "--strip-debug", str(copy)], capture_output=True, check=False).returncode != 0:
            return path.read_bytes()
        return copy.read_bytes()


def _metadata(project: dict[str, Any], version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    lines += [f"Project-URL: {k}, {v}" for k, v in project.get("urls", {}).items()]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / project["readme"]).read_text()
    return "\n".join(lines) + "\n\n" + readme


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _sources() -> list[Path]:
    return sorted(
        p for p in SRC.rglob("*") if p.is_file() and p.suffix in (".py", ".typed") and "__pycache__" not in p.parts
    )


def _dist_name(project: dict[str, Any]) -> str:
    # The file names' form of the project name (PEP 427, PEP 625): mcpgw-client -> mcpgw_client.
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    project = _project()
    version, abi = _version(), _abi_version()
    lib_path = _find_native(config_settings, "lib", version)
    _check_library(lib_path, version, abi)
    binaries = {
        name: _check_static(_find_native(config_settings, key, version), name, version)
        for key, name in (("gateway", GATEWAY_NAME), ("host", HOST_NAME))
    }
    lib_bytes = _stripped(lib_path)
    tag = f"py3-none-{_platform_tag(lib_bytes)}"
    dist = _dist_name(project)
    name = f"{dist}-{version}-{tag}.whl"
    dist_info = f"{dist}-{version}.dist-info"

    files: list[tuple[str, bytes, int]] = []
    for path in _sources():
        files.append((f"{PACKAGE}/{path.relative_to(SRC).as_posix()}", path.read_bytes(), 0o644))
    files.append((f"{PACKAGE}/_lib/{LIB_NAME}", lib_bytes, 0o755))
    files += [(f"{PACKAGE}/_bin/{name}", data, 0o755) for name, data in binaries.items()]
    files.append((f"{dist_info}/METADATA", _metadata(project, version).encode(), 0o644))
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: mcpgw_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{dist_info}/WHEEL", wheel_meta.encode(), 0o644))
    files.append((f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode(), 0o644))
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d, _ in files) + f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    out = Path(wheel_directory) / name
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for arcname, data, mode in files:
            info = zipfile.ZipInfo(arcname, date_time=EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    return name


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """The package's sources, without the native files: a wheel built from it needs ``lib``,
    ``gateway`` and ``host`` (see the module's doc); its PKG-INFO records the version."""
    project = _project()
    version = _version()
    base = f"{_dist_name(project)}-{version}"
    name = f"{base}.tar.gz"
    members = [(path.read_bytes(), path.relative_to(ROOT).as_posix(), 0o644) for path in _sources()]
    members += [
        ((ROOT / "pyproject.toml").read_bytes(), "pyproject.toml", 0o644),
        ((ROOT / "README.md").read_bytes(), "README.md", 0o644),
        (Path(__file__).read_bytes(), Path(__file__).relative_to(ROOT).as_posix(), 0o644),
        (_metadata(project, version).encode(), "PKG-INFO", 0o644),
    ]
    mtime = calendar.timegm((*EPOCH, 0, 0, 0))
    # gzip without a file name or time in its header, so a rebuild gives the same bytes.
    with (
        open(Path(sdist_directory) / name, "wb") as out,
        gzip.GzipFile(fileobj=out, mode="wb", filename="", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for data, arcname, mode in sorted(members, key=lambda m: m[1]):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))
    return name
