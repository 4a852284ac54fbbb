"""Typed exceptions, one class per libmcpgw result code, built at import from the library's own
list (`mcpgw_result_codes`, `mcpgw_result_name`, `mcpgw_result_message`): a code the library
adds gets its class without a change here.

The class of a code is its name in CamelCase, ending in ``Error``: ``NOT_FOUND`` ->
``NotFoundError``, ``DEADLINE`` -> ``DeadlineError``, ``UPSTREAM_ERROR`` -> ``UpstreamError``,
``PROTOCOL_ERROR`` -> ``ProtocolError``, ``SESSION_LOST`` -> ``SessionLostError``. Every one
derives from :class:`McpgwError`; ``DeadlineError`` is also a :class:`TimeoutError` and
``InvalidArgumentError`` a :class:`ValueError`, so generic handlers catch them too. Reach a
class as an attribute of this module or of the package (``mcpgw.NotFoundError``), or with
:func:`error_class`. A failure of the sandbox backend (the container is gone, not running, the
daemon unreachable) is a :class:`BackendError`, an ``ExecFailedError`` that says which.

``CancelledError`` here is the library's ``CANCELLED``; cancelling an asyncio task that awaits
a call raises asyncio's own :class:`asyncio.CancelledError`, as asyncio requires.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_size_t, c_uint32
from typing import Any

from . import _native
from ._native import lib


class McpgwError(Exception):
    """The base class of every error this package raises.

    Attributes:
        code: the result code's name (``NOT_FOUND``, ``DEADLINE``, ...).
        result: its numeric value (7000 and up).
        status: the gateway's HTTP status when it answered, else ``None``.
        detail: the gateway's ``detail`` text when it gave one, else ``None``.
    """

    code: str = "ERROR"
    result: int = 0

    def __init__(self, message: str, *, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.detail = detail


#: Extra built-in bases for a few codes, so that generic handlers catch them.
_EXTRA_BASES: dict[str, tuple[type[Exception], ...]] = {
    "DEADLINE": (TimeoutError,),
    "INVALID_ARGUMENT": (ValueError,),
}

OK = 7000


def class_name(code_name: str) -> str:
    """The class name of a result code name: ``NOT_FOUND`` -> ``NotFoundError``,
    ``UPSTREAM_ERROR`` -> ``UpstreamError``."""
    words = code_name.split("_")
    if words[-1] == "ERROR":
        words.pop()
    return "".join(part.capitalize() for part in words) + "Error"


def _build() -> tuple[dict[int, type[McpgwError]], dict[str, type[McpgwError]], dict[str, int]]:
    codes_ptr = POINTER(c_uint32)()
    count = c_size_t()
    lib.mcpgw_result_codes(ctypes.byref(codes_ptr), ctypes.byref(count))
    by_code: dict[int, type[McpgwError]] = {}
    by_class: dict[str, type[McpgwError]] = {}
    values: dict[str, int] = {}
    for i in range(count.value):
        code = int(codes_ptr[i])
        name = _native.text(lib.mcpgw_result_name(code)) or f"UNKNOWN_{code}"
        values[name] = code
        if code == OK:
            continue
        doc = _native.text(lib.mcpgw_result_message(code)) or name
        cls = type(
            class_name(name),
            (McpgwError, *_EXTRA_BASES.get(name, ())),
            {
                "__doc__": f"{doc[:1].upper()}{doc[1:]} (``MCPGW_RESULT_{name}``, {code}).",
                "__module__": __name__,
                "code": name,
                "result": code,
            },
        )
        by_code[code] = cls
        by_class[cls.__name__] = cls
    return by_code, by_class, values


_BY_CODE, _BY_CLASS, RESULT = _build()
#: Every result code by name (``RESULT["NOT_FOUND"] == 7105``), from the library.
RESULT_NAMES: dict[int, str] = {v: k for k, v in RESULT.items()}


_EXEC_FAILED: type[McpgwError] = _BY_CODE[RESULT["EXEC_FAILED"]]


class BackendError(_EXEC_FAILED):  # type: ignore[misc,valid-type]
    """The sandbox backend failed, not the command: an ``ExecFailedError`` saying how.

    Attributes:
        backend: ``docker``, ``podman``, ``kubectl``, or the argv prefix's program.
        target: the container or pod.
        exit_code: the backend client's exit status.
        state: ``gone`` (does not exist, or killed or removed during the command),
            ``not_running`` (stopped, paused), ``unreachable`` (the daemon or API server),
            ``cannot_run`` (the backend could not start the command).
        reason: what the backend said, or what was found out.
    """

    def __init__(self, message: str, failure: dict[str, Any]) -> None:
        super().__init__(message)
        self.backend = str(failure.get("backend", ""))
        self.target = str(failure.get("target", ""))
        self.exit_code = int(failure.get("exit_code", 0))
        self.state = str(failure.get("state", ""))
        self.reason = str(failure.get("reason", ""))


_BY_CLASS["BackendError"] = BackendError


def error_class(code: int | str) -> type[McpgwError]:
    """The exception class of a result code, given as its value or its name."""
    if isinstance(code, str):
        code = RESULT.get(code, -1)
    return _BY_CODE.get(code, McpgwError)


def error_for(code: int, message: str, *, status: int | None = None, detail: str | None = None) -> McpgwError:
    """A typed exception for result `code`."""
    cls = error_class(code)
    err = cls(message, status=status, detail=detail)
    if cls is McpgwError:
        err.code = RESULT_NAMES.get(code, f"UNKNOWN_{code}")
        err.result = code
    return err


def invalid(message: str) -> McpgwError:
    """An ``InvalidArgumentError``."""
    return error_for(RESULT["INVALID_ARGUMENT"], message)


def invalid_state(message: str) -> McpgwError:
    """An ``InvalidStateError``."""
    return error_for(RESULT["INVALID_STATE"], message)


def result_message(code: int) -> str:
    """The library's static text for a result code."""
    return _native.text(lib.mcpgw_result_message(code)) or f"result {code}"


def from_json(error: dict[str, Any]) -> McpgwError:
    """The typed exception of an error as the host driver gives it: ``{"code", "name",
    "message", "http_status", "detail", "backend"}``."""
    code = int(error.get("code", 0))
    message = str(error.get("message") or result_message(code))
    failure = error.get("backend")
    if isinstance(failure, dict) and code == RESULT["EXEC_FAILED"]:
        return BackendError(message, failure)
    return error_for(code, message, status=error.get("http_status"), detail=error.get("detail"))


def take_error(err: int | None, fallback_code: int) -> McpgwError:
    """The typed exception of an owned `mcpgw_error *`, which is freed."""
    if not err:
        return error_for(fallback_code, result_message(fallback_code))
    try:
        code = int(lib.mcpgw_error_code(err))
        message = _native.text(lib.mcpgw_error_message(err)) or result_message(code)
        status = int(lib.mcpgw_error_http_status(err)) or None
        return error_for(code, message, status=status, detail=_native.text(lib.mcpgw_error_detail(err)))
    finally:
        lib.mcpgw_error_free(err)


def __getattr__(name: str) -> type[McpgwError]:
    try:
        return _BY_CLASS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *_BY_CLASS])


#: The class names built from the library's codes, e.g. ``["NullParameterError", ...]``, and
#: ``BackendError``.
ERROR_CLASSES: list[str] = sorted(_BY_CLASS)
