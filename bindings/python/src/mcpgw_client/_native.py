"""The ctypes declarations of libmcpgw, the search for the shared library and for the bundled
executables (the gateway, the ``mcpgw`` command), and the package's version.

The declarations are the C prototypes of ``include/mcpgw.h`` as text, turned into ctypes types
here by one small table of C types; the tests compare each one with the header, declaration by
declaration, so they cannot drift. Loaded once, at import: the library's ABI version and
version are checked then, so a mismatch is an ImportError that says what to do, not a crash
later. Only the host driver's half of the C ABI is declared: no Python callback crosses into C.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import re
import tomllib
from collections.abc import Mapping
from ctypes import POINTER, c_bool, c_char_p, c_int32, c_int64, c_size_t, c_uint16, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any

#: The ABI version this package was written against (`MCPGW_ABI_VERSION` in mcpgw.h).
ABI_VERSION = 3
#: The distribution's name on PyPI (the import package is ``mcpgw_client``).
DISTRIBUTION = "mcpgw-client"

LIBRARY_NAME = "libmcpgw.so"
GATEWAY_NAME = "mcpgw-gateway"
#: The host endpoint's command (crate cli/).
HOST_NAME = "mcpgw"
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

#: Every function this package calls, exactly as include/mcpgw.h declares it.
DECLARATIONS = """
const char *mcpgw_result_message(uint32_t result);
const char *mcpgw_result_name(uint32_t result);
void mcpgw_result_codes(const uint32_t **codes_out, size_t *len_out);
const char *mcpgw_version(void);
uint32_t mcpgw_abi_version(void);
void mcpgw_string_free(char *s);
mcpgw_result mcpgw_error_code(const mcpgw_error *error);
const char *mcpgw_error_message(const mcpgw_error *error);
uint16_t mcpgw_error_http_status(const mcpgw_error *error);
const char *mcpgw_error_detail(const mcpgw_error *error);
void mcpgw_error_free(mcpgw_error *error);
mcpgw_result mcpgw_host_new(const char *config_json, mcpgw_host **host_out, mcpgw_error **error_out);
void mcpgw_host_free(mcpgw_host *host);
mcpgw_result mcpgw_host_submit(mcpgw_host *host, const char *op_json, uint64_t *id_out, mcpgw_error **error_out);
bool mcpgw_host_cancel(mcpgw_host *host, uint64_t id);
mcpgw_result mcpgw_host_open_connection(mcpgw_host *host, const char *mcp, const char *agent_id,
                                        const char *session_id, uint64_t *id_out, mcpgw_error **error_out);
mcpgw_result mcpgw_host_send(mcpgw_host *host, uint64_t conn, const uint8_t *msg, size_t len,
                             mcpgw_error **error_out);
bool mcpgw_host_close_connection(mcpgw_host *host, uint64_t conn);
void mcpgw_host_on_exit(mcpgw_host *host, uint64_t proc, int32_t exit_code, const uint8_t *out, size_t out_len,
                        const uint8_t *err, size_t err_len);
void mcpgw_host_on_exec_failed(mcpgw_host *host, uint64_t proc, const char *reason);
void mcpgw_host_on_data(mcpgw_host *host, uint64_t proc, const uint8_t *data, size_t len);
void mcpgw_host_on_stderr(mcpgw_host *host, uint64_t proc, const uint8_t *data, size_t len);
void mcpgw_host_on_eof(mcpgw_host *host, uint64_t proc);
void mcpgw_host_on_timeout(mcpgw_host *host);
int64_t mcpgw_host_timeout_ms(const mcpgw_host *host);
mcpgw_action *mcpgw_host_next_action(mcpgw_host *host);
char *mcpgw_host_state_json(const mcpgw_host *host);
void mcpgw_action_free(mcpgw_action *action);
mcpgw_action_kind mcpgw_action_get_kind(const mcpgw_action *action);
uint64_t mcpgw_action_proc(const mcpgw_action *action);
uint64_t mcpgw_action_id(const mcpgw_action *action);
size_t mcpgw_action_argc(const mcpgw_action *action);
const char *mcpgw_action_argv(const mcpgw_action *action, size_t i);
const char *mcpgw_action_shell(const mcpgw_action *action);
const char *mcpgw_action_cwd(const mcpgw_action *action);
mcpgw_stdin_kind mcpgw_action_stdin_kind(const mcpgw_action *action);
const uint8_t *mcpgw_action_bytes(const mcpgw_action *action, size_t *len_out);
uint32_t mcpgw_action_timeout_ms(const mcpgw_action *action);
mcpgw_result mcpgw_action_result(const mcpgw_action *action);
const char *mcpgw_action_text(const mcpgw_action *action);
uint16_t mcpgw_action_status(const mcpgw_action *action);
"""

#: The enum values of the header this package uses (checked against it by the tests).
ACTION_KINDS = {
    "RUN": 1,
    "OPEN": 2,
    "WRITE": 3,
    "CLOSE_INPUT": 4,
    "KILL": 5,
    "PROGRESS": 6,
    "DONE": 7,
    "CONNECTION_OPENED": 8,
    "CONNECTION_MESSAGE": 9,
    "CONNECTION_CLOSED": 10,
    "NOTICE": 11,
    "AUDIT": 12,
}
STDIN_KINDS = {"NULL": 0, "BYTES": 1, "HOLD": 2}

_SCALARS: dict[str, Any] = {
    "void": None,
    "bool": c_bool,
    "int32_t": c_int32,
    "int64_t": c_int64,
    "uint16_t": c_uint16,
    "uint32_t": c_uint32,
    "uint64_t": c_uint64,
    "size_t": c_size_t,
    "mcpgw_result": c_uint32,
    "mcpgw_action_kind": c_uint32,
    "mcpgw_stdin_kind": c_uint32,
    # Borrowed text: ctypes copies it into bytes at once.
    "const char *": c_char_p,
    # Owned text (freed with mcpgw_string_free) and borrowed bytes: read back by address.
    "char *": c_void_p,
    "const uint32_t **": POINTER(POINTER(c_uint32)),
    "uint64_t *": POINTER(c_uint64),
    "size_t *": POINTER(c_size_t),
}
_DECLARATION = re.compile(r"(?P<ret>[\w ]+?\**)\s*\b(?P<name>mcpgw_\w+)\((?P<args>[^()]*)\)")


def normal_type(text: str) -> str:
    """A C type with its spacing made canonical: ``const char *``, ``mcpgw_host **``."""
    return " ".join(text.replace("*", " * ").split()).replace("* *", "**").replace("* *", "**")


def c_type(text: str, *, argument: bool) -> Any:
    """The ctypes type of a C type of the header (`argument`: as a parameter)."""
    text = normal_type(text)
    if text in _SCALARS:
        return _SCALARS[text]
    if text == "const uint8_t *":
        # Bytes handed in are passed as they are; bytes handed out are read by address.
        return c_char_p if argument else c_void_p
    if re.fullmatch(r"(const )?mcpgw_\w+ \*", text):
        return c_void_p
    if re.fullmatch(r"mcpgw_\w+ \*\*", text):
        return POINTER(c_void_p)
    raise ValueError(f"no ctypes type for the C type {text!r}")


def parse_declarations(text: str) -> dict[str, tuple[str, list[str]]]:
    """The function prototypes among the statements of `text` (C without comments or
    preprocessor lines), by name: (return type, parameter types), each made canonical."""
    out: dict[str, tuple[str, list[str]]] = {}
    for statement in " ".join(text.split()).split(";"):
        # What follows the last brace: a prototype after an enum's or extern block's brace.
        m = _DECLARATION.fullmatch(re.split(r"[{}]", statement)[-1].strip())
        if m is None:
            continue
        params = [] if m["args"].strip() == "void" else [p.strip() for p in m["args"].split(",")]
        # The parameter's name goes; its type stays.
        types = [re.sub(r"\b\w+$", "", p) for p in params]
        out[m["name"]] = (normal_type(m["ret"]), [normal_type(t) for t in types])
    return out


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


def bundled_candidates(name: str, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where the bundled static executable `name` (``mcpgw-gateway``, ``mcpgw``) is looked for,
    in order: the wheel's ``_bin/``, else, in a checkout, the repository's static build
    (``make static``)."""
    candidates = [_PACKAGE_DIR / "_bin" / name]
    repo = _checkout()
    if repo is not None:
        target = _target_dir(repo, os.environ if env is None else env)
        candidates.append(target / "x86_64-unknown-linux-gnu" / "release" / name)
    return candidates


def _bundled(name: str) -> str:
    candidates = bundled_candidates(name)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise FileNotFoundError(
            f"no bundled {name}: tried {', '.join(str(p) for p in candidates)}; the wheel "
            f"carries one (pip install {DISTRIBUTION}), a checkout builds it with `make static`"
        )
    return str(path)


def gateway_binary() -> str:
    """The host path of the static ``mcpgw-gateway`` (Linux x86_64, no libc needed) of this
    package's release: the one the wheel bundles. ``ensure_gateway_binary()`` installs it into
    a sandbox when given no path. Raises FileNotFoundError naming every path tried."""
    return _bundled(GATEWAY_NAME)


def host_binary() -> str:
    """The host path of the static ``mcpgw`` command of this package's release (``mcpgw mcp``:
    an MCP server on this machine for a server inside a sandbox), which the wheel bundles next
    to the gateway it installs; ``python -m mcpgw_client`` runs it. Raises FileNotFoundError
    naming every path tried."""
    return _bundled(HOST_NAME)


class Library:
    """The loaded library: every declared function as an attribute, plus where it came from."""

    def __init__(self, path: Path, cdll: ctypes.CDLL) -> None:
        self.path = path
        for name, (ret, params) in parse_declarations(DECLARATIONS).items():
            fn = getattr(cdll, name)
            fn.restype = c_type(ret, argument=False)
            fn.argtypes = [c_type(p, argument=True) for p in params]
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
