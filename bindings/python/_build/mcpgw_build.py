"""The PEP 517 build backend of the mcpgw Python package (in-tree, standard library only).

The wheel is the pure-Python package plus a prebuilt ``libmcpgw.so`` in ``mcpgw/_lib/``, so
``pip install mcpgw-*.whl`` needs no compiler, no build step and no environment variable. Which
library: the config setting ``lib`` (``pip wheel --config-settings lib=PATH``), else
``MCPGW_WHEEL_LIB``, else the repository's ``target/release/libmcpgw.so``, else
``target/debug/libmcpgw.so`` (``cargo build [--release] -p mcpgw-ffi``). Its ABI version and
version are checked against the package's before it is bundled, and its debug symbols are
stripped from the copy when ``strip`` is available.

The platform tag is computed from the library itself: ``manylinux_2_<N>_x86_64`` where 2.N is
the newest glibc symbol version it references (PEP 600), so pip installs it exactly where the
library can load. (``linux_x86_64`` would say nothing about glibc, and PyPI refuses it.) The
package loads the library with ctypes, so the wheel is for any Python 3: ``py3-none``.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "mcpgw_client"
REPO = ROOT.parent.parent
LIB_NAME = "libmcpgw.so"


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _package_constants() -> tuple[str, int]:
    text = (SRC / "_native.py").read_text()
    version = re.search(r'^VERSION = "([^"]+)"', text, re.M)
    abi = re.search(r"^ABI_VERSION = (\d+)", text, re.M)
    assert version and abi, "mcpgw_client/_native.py defines VERSION and ABI_VERSION"
    return version.group(1), int(abi.group(1))


def _find_library(config_settings: dict[str, Any] | None) -> Path:
    explicit = (config_settings or {}).get("lib") or os.environ.get("MCPGW_WHEEL_LIB")
    if explicit:
        path = Path(explicit).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"the library to bundle, {path}, does not exist")
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for candidate in (target / "release" / LIB_NAME, target / "debug" / LIB_NAME):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"no {LIB_NAME} to bundle: build it with `cargo build --release -p mcpgw-ffi`, or name it "
        "with --config-settings lib=PATH or MCPGW_WHEEL_LIB"
    )


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


def _metadata(project: dict[str, Any]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
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
    version, abi = _package_constants()
    if project["version"] != version:
        raise ValueError(f"pyproject.toml says {project['version']}, mcpgw/_native.py says {version}")
    lib_path = _find_library(config_settings)
    _check_library(lib_path, version, abi)
    lib_bytes = _stripped(lib_path)
    tag = f"py3-none-{_platform_tag(lib_bytes)}"
    name = f"mcpgw-{version}-{tag}.whl"
    dist_info = f"mcpgw-{version}.dist-info"

    files: list[tuple[str, bytes, int]] = []
    for path in _sources():
        files.append((f"mcpgw_client/{path.relative_to(SRC).as_posix()}", path.read_bytes(), 0o644))
    files.append((f"mcpgw_client/_lib/{LIB_NAME}", lib_bytes, 0o755))
    files.append((f"{dist_info}/METADATA", _metadata(project).encode(), 0o644))
    wheel_meta = f"Wheel-Version: 1.0\nGenerator: mcpgw_build\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{dist_info}/WHEEL", wheel_meta.encode(), 0o644))
    files.append((f"{dist_info}/top_level.txt", b"mcpgw_client\n", 0o644))
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d, _ in files) + f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    out = Path(wheel_directory) / name
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for arcname, data, mode in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
    return name


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """The package's sources (without the library: a wheel built from it needs ``lib``)."""
    version, _ = _package_constants()
    base = f"mcpgw-{version}"
    name = f"{base}.tar.gz"
    with tarfile.open(Path(sdist_directory) / name, "w:gz") as tar:
        for path in [ROOT / "pyproject.toml", ROOT / "README.md", Path(__file__), *_sources()]:
            tar.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata(_project()).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return name
