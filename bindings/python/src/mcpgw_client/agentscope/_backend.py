"""How the adapter reaches an AgentScope workspace's sandbox: the binding's backend for the
workspace's (:func:`sandbox_backend`), which carries the library's one knowledge of each
sandbox's commands and failure rules, and :class:`BackendExec`, the exec function over
AgentScope's own ``exec_shell`` where the workspace offers nothing else."""

from __future__ import annotations

import asyncio
import secrets
import shlex
import shutil
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from agentscope.tool._builtin._backend import LocalBackend

from .. import backends
from ..backends import Channel, ExecResult, OpenFn

#: Where request bodies travel through the sandbox when a command needs its stdin.
SANDBOX_TMP_DIR = "/tmp"


class Backend(Protocol):
    """What the adapter uses of an AgentScope ``BackendBase``."""

    async def exec_shell(self, command: list[str], *, cwd: str | None = None, timeout: float | None = None) -> Any: ...
    async def write_file(self, path: str, data: bytes) -> None: ...


class BackendExec:
    """An exec function over an AgentScope backend: ``backend.exec_shell(["sh", "-c", cmd])``.

    AgentScope's backends pass no stdin to ``exec_shell``; a command that wants some (a large
    body, the gateway binary) gets it from a file written first with the backend's own
    ``write_file`` (Docker's archive API, E2B's files API, a ``cat`` in bubblewrap), in a 0700
    directory, removed by the command itself: two round trips instead of one per 120 KiB.
    AgentScope's exit status -1 ("timed out" or a transport failure) means the command could
    not run.
    """

    passes_stdin = True

    def __init__(self, backend: Backend, *, tmp_dir: str = SANDBOX_TMP_DIR) -> None:
        self.backend = backend
        self.tmp_dir = tmp_dir
        self._stdin_dir: str | None = None
        #: Runs the next command instead of ``exec_shell`` (the launch in a kept process).
        self.run_next: Callable[[str, float], Awaitable[ExecResult]] | None = None

    async def _stdin_file(self, data: bytes) -> str:
        if self._stdin_dir is None:
            d = f"{self.tmp_dir}/mcpgw-stdin-{secrets.token_hex(8)}"
            await self.checked(f"umask 077 && mkdir -p {shlex.quote(d)}", f"cannot make {d} in the sandbox")
            self._stdin_dir = d
        path = f"{self._stdin_dir}/{secrets.token_hex(8)}"
        await self.backend.write_file(path, data)
        return path

    async def checked(self, command: str, failure: str) -> Any:
        """Runs `command` (30 s at most); raises RuntimeError starting with `failure` and
        ending with its stderr when it exits non-zero."""
        r = await self._run(command, 30.0)
        if r.exit_code != 0:
            raise RuntimeError(f"{failure}: {bytes(r.stderr or b'').decode(errors='replace')}")
        return r

    async def __call__(self, command: str, timeout: float, stdin: bytes | None = None) -> Any:
        run_next, self.run_next = self.run_next, None
        if run_next is not None:
            return await run_next(command, timeout)
        if stdin is not None:
            path = shlex.quote(await self._stdin_file(stdin))
            command = f"{{ {command}\n}} <{path}; s=$?; rm -f {path}; exit $s"
        return await self._run(command, timeout)

    async def _run(self, command: str, timeout: float) -> Any:
        result = await self.backend.exec_shell(["sh", "-c", command], timeout=timeout)
        if getattr(result, "exit_code", None) == -1:
            said = bytes(getattr(result, "stderr", b"") or b"").decode(errors="replace").strip()
            if said == "timed out":
                raise TimeoutError(f"the backend's exec_shell timed out after {timeout:g} s")
            raise RuntimeError(f"the backend's exec_shell failed: {said or 'exit status -1'}")
        return result


def keeps_processes(backend: Any) -> bool:
    """Whether `backend` starts processes that stay (``start_process``: bubblewrap, whose every
    command is a sandbox of its own that ends with it)."""
    return callable(getattr(backend, "start_process", None))


def _process_opener(backend: Any) -> OpenFn:
    """Opens a channel as a process of `backend` kept running (``start_process``)."""
    start = cast(Callable[..., Awaitable[asyncio.subprocess.Process]], backend.start_process)

    async def open_channel(command: str) -> Channel:
        pipe = asyncio.subprocess.PIPE
        return await start(["sh", "-c", command], stdin=pipe, stdout=pipe, stderr=pipe)

    return open_channel


def sandbox_backend(backend: Any, run: BackendExec, open_channel: OpenFn | None = None) -> backends.Backend:
    """The binding's backend for AgentScope's `backend`, through which every request and the
    session channel then go. Given `open_channel` (an async function starting a command in the
    sandbox with its standard streams piped), the generic :func:`mcpgw_client.backends.exec`
    over `run` (the backend's ``exec_shell``) with that channel opener, whatever the backend;
    else, for

    - a backend whose processes can stay (bubblewrap, see :func:`keeps_processes`): the same,
      with channels opened by its ``start_process``;
    - AgentScope's ``LocalBackend``: :func:`mcpgw_client.backends.local`;
    - a Docker workspace's backend, where the ``docker`` CLI is installed:
      :func:`mcpgw_client.backends.docker` on its container;
    - a Kubernetes workspace's backend, where ``kubectl`` is installed:
      :func:`mcpgw_client.backends.kubectl` on its pod, namespace and container;
    - any other (E2B, Daytona, OpenSandbox, ...): the generic exec over `run`, without a
      session channel.
    """
    if open_channel is None and keeps_processes(backend):
        open_channel = _process_opener(backend)
    if open_channel is None:
        if type(backend) is LocalBackend:
            return backends.local()
        container = getattr(getattr(backend, "_container", None), "id", None)
        if isinstance(container, str) and shutil.which("docker"):
            return backends.docker(container)
        pod = getattr(backend, "_pod_name", None)
        if isinstance(pod, str) and shutil.which("kubectl"):
            return backends.kubectl(
                pod, getattr(backend, "_namespace", None), getattr(backend, "_container_name", None)
            )
    return backends.exec(run, open_channel, passes_stdin=run.passes_stdin)


def has_channel(sandbox: backends.Backend) -> bool:
    """Whether the binding's backend `sandbox` can open a session channel: every backend the
    library runs itself can; an exec function only with its opener."""
    return sandbox.config["kind"] != "exec" or sandbox.open is not None
