"""Sandbox backends: how commands and the session channel reach the sandbox.

The library knows each backend (its argv for a command and for a channel, how to tell the
sandbox being gone from a command's own failure, how a host-side cancel ends the command in the
sandbox); these functions only name one and its settings:

- :func:`local` -- ``sh -c`` on this machine (optionally in `cwd`): tests, development.
- :func:`docker`, :func:`podman` -- ``docker exec`` / ``podman exec`` into a running container.
- :func:`kubectl` -- ``kubectl exec`` into a running pod.
- :func:`argv` -- any argv prefix that runs its remaining arguments in the sandbox
  (``["nsenter", "-t", PID, "-m", "-n", "-p"]``, ``["ssh", "box"]`` with `joins_arguments`).
- :func:`exec` -- your own exec function and channel opener (an E2B or Daytona SDK).

An exec function runs one POSIX ``sh -c`` command in the sandbox::

    async def run(command: str, timeout: float, stdin: bytes | None) -> ExecResult

(or the same without ``async``: it then runs in a worker thread). It returns any object with
``exit_code``, ``stdout`` and ``stderr`` (bytes or str), e.g. :class:`ExecResult` or E2B's
``CommandResult``; an exception that carries those (E2B's ``CommandExitException``) is taken as
the result; any other exception means the command could not run (``ExecFailedError``). A
channel opener starts a long-lived command with its standard streams piped::

    async def open(command: str) -> Channel

returning an :class:`asyncio.subprocess.Process` or anything shaped like one (:class:`Channel`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import invalid


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What a command did: its exit status and everything it wrote."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""


class ExecResultLike(Protocol):
    """Anything with the fields of :class:`ExecResult` (str output is taken as UTF-8)."""

    @property
    def exit_code(self) -> int: ...
    @property
    def stdout(self) -> bytes | str: ...
    @property
    def stderr(self) -> bytes | str: ...


class ChannelInput(Protocol):
    """The writing end of a channel's standard input."""

    def write(self, data: bytes) -> object: ...
    def close(self) -> object: ...


class ChannelOutput(Protocol):
    """A channel's standard output or error."""

    async def read(self, n: int = -1) -> bytes: ...


class Channel(Protocol):
    """A long-lived process in the sandbox, as :class:`asyncio.subprocess.Process` is."""

    @property
    def stdin(self) -> ChannelInput | None: ...
    @property
    def stdout(self) -> ChannelOutput | None: ...
    @property
    def stderr(self) -> ChannelOutput | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...


#: An exec function: async or not (see the module's documentation).
RunFn = Callable[[str, float, bytes | None], Awaitable[ExecResultLike] | ExecResultLike]
#: A channel opener.
OpenFn = Callable[[str], Awaitable[Channel]]


@dataclass(frozen=True)
class Backend:
    """A sandbox backend: its settings as the library's host configuration names them, and for
    :func:`exec` the functions that run commands and open channels."""

    config: dict[str, Any]
    run: RunFn | None = field(default=None, repr=False)
    open: OpenFn | None = field(default=None, repr=False)


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{what} must be a str, not {type(value).__name__}")
    return value


def _optional(value: object, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _words(value: object, what: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise invalid(f"{what} must be a list of str, not {type(value).__name__}")
    return [_text(v, f"an entry of {what}") for v in value]


def local(cwd: str | None = None) -> Backend:
    """``sh -c`` on this machine, in `cwd` (the host process's directory by default)."""
    return Backend({"kind": "local", "cwd": _optional(cwd, "cwd")})


def _container(
    kind: str, container: str, exec_options: Sequence[str], options: Sequence[str], program: str | None
) -> Backend:
    return Backend(
        {
            "kind": kind,
            "container": _text(container, "the container"),
            "exec_options": _words(exec_options, "exec_options"),
            "options": _words(options, "options"),
            "program": _optional(program, "program"),
        }
    )


def docker(
    container: str, exec_options: Sequence[str] = (), options: Sequence[str] = (), program: str | None = None
) -> Backend:
    """``docker exec`` into `container` (name or id). `exec_options` go between ``exec`` and the
    container (``["--user", "agent"]``), `options` before ``exec`` (``["--host",
    "ssh://box"]``); `program` is the CLI (``docker``)."""
    return _container("docker", container, exec_options, options, program)


def podman(
    container: str, exec_options: Sequence[str] = (), options: Sequence[str] = (), program: str | None = None
) -> Backend:
    """``podman exec`` into `container`; the same settings as :func:`docker` (`options` such as
    ``["--storage-driver", "vfs"]``)."""
    return _container("podman", container, exec_options, options, program)


def kubectl(
    pod: str,
    namespace: str | None = None,
    container: str | None = None,
    options: Sequence[str] = (),
    program: str | None = None,
) -> Backend:
    """``kubectl exec`` into `pod` (``name`` or ``pod/name``), in `namespace`, into `container`
    of the pod; `options` go before ``exec`` (``["--context", "prod"]``)."""
    return Backend(
        {
            "kind": "kubectl",
            "pod": _text(pod, "the pod"),
            "namespace": _optional(namespace, "namespace"),
            "container": _optional(container, "container"),
            "options": _words(options, "options"),
            "program": _optional(program, "program"),
        }
    )


def argv(prefix: Sequence[str], joins_arguments: bool = False) -> Backend:
    """Any argv prefix that runs the rest of its arguments in the sandbox. With
    `joins_arguments` the program joins them into one line for a remote shell (as ``ssh``
    does), so they are quoted once more."""
    return Backend({"kind": "argv", "prefix": _words(prefix, "the prefix"), "joins_arguments": bool(joins_arguments)})


def exec(run: RunFn, open: OpenFn | None = None, passes_stdin: bool = False) -> Backend:
    """Your own exec function `run` and, for sessions, channel opener `open` (see the module's
    documentation). `passes_stdin` says that `run` passes a command's stdin: the gateway binary
    and large bodies then travel in one command instead of staged pieces."""
    if not callable(run):
        raise invalid("run must be a function (command, timeout, stdin) -> result")
    if open is not None and not callable(open):
        raise invalid("open must be an async function (command) -> process")
    return Backend({"kind": "exec", "passes_stdin": bool(passes_stdin)}, run=run, open=open)


__all__ = [
    "Backend",
    "Channel",
    "ExecResult",
    "ExecResultLike",
    "OpenFn",
    "RunFn",
    "argv",
    "docker",
    "exec",
    "kubectl",
    "local",
    "podman",
]
