"""The ctypes declarations of libmcpgw (include/mcpgw.h), the search for the shared library and
for the bundled gateway binary, and the package's version.

Loaded once, at import: the library's ABI version and version are checked then, so a mismatch
is an ImportError that says what to do, not a crash later. Nothing here holds state besides the
loaded library; ownership of what the library returns is handled by the callers.

Only the sans-IO half of the C ABI is declared: no Python callback ever crosses into C.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import tomllib
from collections.abc import Mapping
from ctypes import (
    POINTER,
    c_bool,
    c_char_p,
    c_size_t,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any

#: The ABI version this package was written against (`MCPGW_ABI_VERSION` in mcpgw.h).
ABI_VERSION = 2
#: The distribution's name on PyPI (the import package is ``mcpgw_client``).
DISTRIBUTION = "mcpgw-client"

LIBRARY_NAME = "libmcpgw.so"
GATEWAY_NAME = "mcpgw-gateway"
_PACKAGE_DIR = Path(__file__).resolve().parent


def _checkout() -> Path | None:
    """The repository root when this package runs from a checkout of it
    (bindings/python/src/mcpgw_client), else None."""
    parents = _PACKAGE_DIR.parents
    repo = parents[3] if len(parents) > 3 else None
    if repo is not None and (repo / "Cargo.toml").is_file() and (repo / "include" / "mcpgw.h").is_file():
        return repo
    return None


def _target_dir(repo: Path, env: Mapping[str, str]) -> Path:
    return Path(env.get("CARGO_TARGET_DIR") or repo / "target")


def _version() -> str:
    # One version for the whole release, the workspace's: read from Cargo.toml in a checkout,
    # from the installed distribution's metadata (which the build wrote from it) otherwise.
    repo = _checkout()
    if repo is not None:
        with open(repo / "Cargo.toml", "rb") as f:
            return str(tomllib.load(f)["workspace"]["package"]["version"])
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as e:
        raise ImportError(
            f"mcpgw_client at {_PACKAGE_DIR} is neither installed (pip install {DISTRIBUTION}) nor in a checkout"
        ) from e


#: The package's version; the library must have the same major and minor version.
VERSION = _version()


def library_candidates(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where the shared library is looked for, in order: `MCPGW_LIB` alone when it is set (an
    explicit choice is never silently replaced), else the copy bundled in the wheel, else the
    cargo build outputs of the repository this package sits in (debug, then release)."""
    environ = os.environ if env is None else env
    explicit = environ.get("MCPGW_LIB")
    if explicit:
        return [Path(explicit).resolve()]
    candidates = [_PACKAGE_DIR / "_lib" / LIBRARY_NAME]
    repo = _checkout()
    if repo is not None:
        target = _target_dir(repo, environ)
        candidates += [target / "debug" / LIBRARY_NAME, target / "release" / LIBRARY_NAME]
    return candidates


def gateway_candidates(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where :func:`gateway_binary` looks, in order: the static gateway bundled in the wheel,
    else, in a checkout, the repository's static build (``make static``)."""
    candidates = [_PACKAGE_DIR / "_bin" / GATEWAY_NAME]
    repo = _checkout()
    if repo is not None:
        target = _target_dir(repo, os.environ if env is None else env)
        candidates.append(target / "x86_64-unknown-linux-gnu" / "release" / GATEWAY_NAME)
    return candidates


def gateway_binary() -> str:
    """The host path of the static ``mcpgw-gateway`` (Linux x86_64, no libc needed) of this
    package's release: the one the wheel bundles. ``ensure_gateway_binary()`` installs it into
    a sandbox when given no path. Raises FileNotFoundError naming every path tried."""
    candidates = gateway_candidates()
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise FileNotFoundError(
            f"no bundled mcpgw-gateway: tried {', '.join(str(p) for p in candidates)}; the wheel "
            f"carries one (pip install {DISTRIBUTION}), a checkout builds it with `make static`"
        )
    return str(path)


# Argument and result types of every function used, by name: (restype, argtypes).
_P = c_void_p  # an opaque handle, or a pointer read back with ctypes.string_at
_PP = POINTER(c_void_p)
_R = c_uint32  # mcpgw_result
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mcpgw_version": (c_char_p, []),
    "mcpgw_abi_version": (c_uint32, []),
    "mcpgw_result_message": (c_char_p, [c_uint32]),
    "mcpgw_result_name": (c_char_p, [c_uint32]),
    "mcpgw_result_codes": (None, [POINTER(POINTER(c_uint32)), POINTER(c_size_t)]),
    "mcpgw_string_free": (None, [_P]),
    # configuration
    "mcpgw_client_config_new": (_R, [_PP]),
    "mcpgw_client_config_free": (None, [_P]),
    "mcpgw_client_config_set_gateway_path": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_host": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_port": (_R, [_P, c_uint16]),
    "mcpgw_client_config_set_token_file": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_state_dir": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_instance_nonce": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_staging_dir": (_R, [_P, c_char_p]),
    "mcpgw_client_config_set_transport": (_R, [_P, c_uint32]),
    "mcpgw_client_config_set_timeout_ms": (_R, [_P, c_uint32]),
    "mcpgw_client_config_set_max_command_bytes": (_R, [_P, c_size_t]),
    "mcpgw_client_config_set_exec_stdin": (_R, [_P, c_bool]),
    # client
    "mcpgw_client_new": (_R, [_P, _P, _P, _P, _PP, _PP]),
    "mcpgw_client_free": (None, [_P]),
    "mcpgw_client_port": (c_uint16, [_P]),
    "mcpgw_client_prepare_start_gateway": (_R, [_P, _P, _PP]),
    "mcpgw_client_prepare_stop_gateway": (_R, [_P, _P, _PP]),
    "mcpgw_client_prepare_ensure_gateway_binary": (_R, [_P, _P, c_char_p, _PP]),
    "mcpgw_client_prepare_health": (_R, [_P, _P, _PP]),
    "mcpgw_client_prepare_list_mcps": (_R, [_P, _P, _PP]),
    "mcpgw_client_prepare_add_mcp": (_R, [_P, _P, c_char_p, _PP]),
    "mcpgw_client_prepare_remove_mcp": (_R, [_P, _P, c_char_p, _PP]),
    "mcpgw_client_prepare_list_tools": (_R, [_P, _P, c_char_p, _PP]),
    "mcpgw_client_prepare_call_tool": (_R, [_P, _P, c_char_p, c_char_p, c_char_p, _PP]),
    "mcpgw_client_prepare_set_runtime_headers": (_R, [_P, _P, c_char_p, c_char_p, _PP]),
    # call options
    "mcpgw_call_options_new": (_R, [_PP]),
    "mcpgw_call_options_free": (None, [_P]),
    "mcpgw_call_options_set_agent_id": (_R, [_P, c_char_p]),
    "mcpgw_call_options_set_session_id": (_R, [_P, c_char_p]),
    "mcpgw_call_options_set_timeout_ms": (_R, [_P, c_uint32]),
    # operations, sans-IO
    "mcpgw_op_command": (_R, [_P, _PP, POINTER(c_uint32)]),
    "mcpgw_op_command_stdin": (_R, [_P, _PP, POINTER(c_size_t)]),
    "mcpgw_op_complete": (_R, [_P, ctypes.c_int32, c_char_p, c_size_t, c_char_p, c_size_t]),
    "mcpgw_op_fail_exec": (_R, [_P, c_char_p]),
    "mcpgw_op_is_finished": (c_bool, [_P]),
    "mcpgw_op_result": (_R, [_P]),
    "mcpgw_op_error": (_P, [_P]),
    "mcpgw_op_name": (c_char_p, [_P]),
    "mcpgw_op_result_json": (_R, [_P, _PP]),
    "mcpgw_op_free": (None, [_P]),
    # errors
    "mcpgw_error_code": (_R, [_P]),
    "mcpgw_error_message": (c_char_p, [_P]),
    "mcpgw_error_http_status": (c_uint16, [_P]),
    "mcpgw_error_detail": (c_char_p, [_P]),
    "mcpgw_error_free": (None, [_P]),
    # chunks (progress chunks of a session are read as JSON)
    "mcpgw_tool_chunk_to_json": (_R, [_P, _PP]),
    # sessions, sans-IO
    "mcpgw_session_open": (_R, [_P, _PP, _PP]),
    "mcpgw_session_command": (c_char_p, [_P]),
    "mcpgw_session_submit": (_R, [_P, _P, c_bool, POINTER(c_uint64)]),
    "mcpgw_session_cancel": (c_bool, [_P, c_uint64]),
    "mcpgw_session_output": (_R, [_P, _PP, POINTER(c_size_t)]),
    "mcpgw_session_consume": (None, [_P, c_size_t]),
    "mcpgw_session_feed": (_R, [_P, c_char_p, c_size_t]),
    "mcpgw_session_feed_eof": (None, [_P, c_char_p]),
    "mcpgw_session_close": (None, [_P]),
    "mcpgw_session_is_lost": (c_bool, [_P]),
    "mcpgw_session_next_event": (_R, [_P, _PP]),
    "mcpgw_session_free": (None, [_P]),
    "mcpgw_session_event_get_kind": (c_uint32, [_P]),
    "mcpgw_session_event_id": (c_uint64, [_P]),
    "mcpgw_session_event_chunk": (_P, [_P]),
    "mcpgw_session_event_text": (c_char_p, [_P]),
    "mcpgw_session_event_free": (None, [_P]),
}


class Library:
    """The loaded library: every declared function as an attribute, plus where it came from."""

    def __init__(self, path: Path, cdll: ctypes.CDLL) -> None:
        self.path = path
        self._cdll = cdll
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(cdll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that were not declared: a bug in this package.
        raise AttributeError(f"libmcpgw function {name} is not declared in mcpgw_client._native")


def load() -> Library:
    """Finds, loads and checks the library. Raises ImportError naming every path tried, or the
    versions that do not match."""
    candidates = library_candidates()
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        tried = ", ".join(str(p) for p in candidates)
        raise ImportError(
            f"libmcpgw was not found; tried {tried}. Install the {DISTRIBUTION} wheel (it bundles "
            "the library), build it with `cargo build -p mcpgw-ffi` in the mcpgw repository, or "
            "set MCPGW_LIB to the path of libmcpgw.so."
        )
    try:
        cdll = ctypes.CDLL(str(path))
    except OSError as e:
        raise ImportError(f"libmcpgw at {path} could not be loaded: {e}") from e
    try:
        lib = Library(path, cdll)
    except AttributeError as e:
        raise ImportError(
            f"libmcpgw at {path} lacks a function this package needs ({e}); it is older than "
            f"the package (ABI {ABI_VERSION}, version {VERSION})"
        ) from e
    abi = lib.mcpgw_abi_version()
    if abi != ABI_VERSION:
        raise ImportError(
            f"libmcpgw at {path} has ABI version {abi}, but {DISTRIBUTION} {VERSION} needs ABI "
            f"{ABI_VERSION}; install the wheel of the same release, or point MCPGW_LIB at a "
            "matching library"
        )
    version = lib.mcpgw_version().decode()
    if version.split(".")[:2] != VERSION.split(".")[:2]:
        raise ImportError(
            f"libmcpgw at {path} is version {version}, but this package is {VERSION}: the "
            "major and minor versions must match; install the wheel of the same release"
        )
    return lib


lib = load()


def take_string(ptr: int | None) -> str:
    """Decodes an owned `char *` the library returned and frees it."""
    if not ptr:
        return ""
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.mcpgw_string_free(ptr)


def text(value: bytes | None) -> str | None:
    """A borrowed `const char *` result (already copied by ctypes) as str."""
    return None if value is None else value.decode("utf-8", errors="replace")
