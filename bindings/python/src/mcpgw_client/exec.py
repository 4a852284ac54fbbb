"""Exec functions: how a command reaches the sandbox.

An exec function runs one POSIX ``sh -c`` command inside the sandbox and reports what it did::

    async def exec(command: str, timeout: float, stdin: bytes | None) -> ExecResult

(or the same without ``async``). ``timeout`` is how long the command may take, in seconds;
``stdin``, when not ``None``, must be passed to the command's standard input (only clients that
declare their exec passes stdin get such commands). It returns any object with ``exit_code``,
``stdout`` and ``stderr`` (bytes or str), e.g. :class:`ExecResult`, or E2B's ``CommandResult``;
it raises when the command could not be run at all (the sandbox is gone): the call then fails
with ``ExecFailedError``. A command that ran and failed is a result, whatever its exit status.

The ready-made ones run the command with an argv built here (never a host shell):
:class:`LocalExec` (``sh -c`` on this machine), :class:`DockerExec` (``docker exec -i``),
:class:`KubectlExec` (``kubectl exec -i``), and :class:`ArgvExec` for any other prefix (e.g.
``nsenter``). Each passes stdin, has a blocking form (:meth:`ArgvExec.run_sync`) for the
blocking :class:`mcpgw_client.Client`, spawns the long-lived channel of a session
(:meth:`ArgvExec.spawn`), and kills the command's whole process group when the call is
cancelled or times out (a curl left behind would keep the gateway's call running).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


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


#: An exec function: async or not (see the module's documentation).
ExecFn = Callable[
    [str, float, bytes | None],
    Awaitable[ExecResultLike] | ExecResultLike,
]
#: A blocking exec function, for :class:`mcpgw_client.Client`.
SyncExecFn = Callable[[str, float, bytes | None], ExecResultLike]


class ExecFailure(Exception):
    """Raised by an exec function when the command could not be run at all: the sandbox is
    gone, the backend refused. The call then fails with ``ExecFailedError``."""


class ExecTimeout(ExecFailure, TimeoutError):
    """Raised by a blocking ready-made exec when the command outlived its timeout (it was
    killed)."""


# Runs "$1" in a session of its own inside the sandbox while watching the exec's stdin: when
# stdin ends before the command does (the host killed `docker exec`, whose stdin the host keeps
# open while it waits), the command's whole session is killed, so a call cancelled on the host
# is cancelled in the sandbox too (its request connection closes, and the gateway cancels the
# call upstream). Without setsid it runs the command as is.
# (An asynchronous list reads /dev/null unless told otherwise: the watcher gets stdin as fd 3.)
WATCHED = (
    'command -v setsid >/dev/null 2>&1 || exec sh -c "$1" </dev/null; '
    "exec 3<&0; "
    'setsid sh -c "$1" </dev/null 3<&- & p=$!; '
    '{ cat <&3 >/dev/null; kill -KILL -- -"$p"; } >/dev/null 2>&1 & w=$!; '
    'exec 3<&-; wait "$p"; s=$?; kill "$w" 2>/dev/null; exit "$s"'
)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _exit_status(returncode: int) -> int:
    # A signal N is reported as 128 + N, as a shell reports it.
    return 128 - returncode if returncode < 0 else returncode


class ArgvExec:
    """Runs each command as ``[*prefix, "sh", "-c", command]`` on this machine, e.g. with prefix
    ``["nsenter", "-t", PID, "-n", "-p", "-m"]``. It passes stdin, so clients declare it
    (``exec_stdin``) by default."""

    #: Whether commands get their stdin (read by the clients to configure the library).
    passes_stdin: bool = True

    def __init__(
        self,
        prefix: Sequence[str] = (),
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        shell: str = "sh",
    ) -> None:
        self.prefix = list(prefix)
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.shell = shell

    #: Whether commands without stdin run under :data:`WATCHED`, so that cancelling them on the
    #: host also ends them in the sandbox (for execs whose sandbox process outlives the host's).
    watch_stdin: bool = False

    def argv(self, command: str) -> list[str]:
        """The argv that runs `command`."""
        return [*self.prefix, self.shell, "-c", command]

    def watched_argv(self, command: str) -> list[str]:
        """The argv that runs `command` under :data:`WATCHED`."""
        return [*self.prefix, self.shell, "-c", WATCHED, self.shell, command]

    def classify(self, result: ExecResult) -> ExecResult:
        """Raises :class:`ExecFailure` when `result` says the sandbox could not run the command
        (as opposed to a command that ran and failed); else returns it. Nothing by default."""
        return result

    def _describe(self) -> str:
        return self.prefix[0] if self.prefix else self.shell

    async def __call__(self, command: str, timeout: float, stdin: bytes | None = None) -> ExecResult:
        """Runs `command`; the whole process group is killed if the caller is cancelled (the
        clients bound each command's time that way)."""
        watch = self.watch_stdin and stdin is None
        try:
            proc = await asyncio.create_subprocess_exec(
                *(self.watched_argv(command) if watch else self.argv(command)),
                stdin=asyncio.subprocess.PIPE if stdin is not None or watch else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as e:
            raise ExecFailure(f"cannot run {self._describe()}: {e}") from e
        try:
            if watch:
                out, err = await self._collect_keeping_stdin(proc)
            else:
                out, err = await proc.communicate(stdin)
        except BaseException:
            # Cancelled (or timed out by the client): nothing of the command may live on.
            _kill_group(proc.pid)
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            raise
        return self.classify(ExecResult(_exit_status(proc.returncode or 0), out, err))

    @staticmethod
    async def _collect_keeping_stdin(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
        # stdin stays open (and empty) while the command runs: its end means "cancelled".
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        out, err, _ = await asyncio.gather(proc.stdout.read(), proc.stderr.read(), proc.wait())
        proc.stdin.close()
        return out, err

    def run_sync(self, command: str, timeout: float, stdin: bytes | None = None) -> ExecResult:
        """The blocking form: runs `command`, kills its process group after `timeout` seconds
        (raising :class:`ExecTimeout`)."""
        try:
            proc = subprocess.Popen(
                self.argv(command),
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as e:
            raise ExecFailure(f"cannot run {self._describe()}: {e}") from e
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.communicate()
            raise ExecTimeout(f"the command did not finish within {timeout:g} s") from None
        except BaseException:
            _kill_group(proc.pid)
            proc.wait()
            raise
        return self.classify(ExecResult(_exit_status(proc.returncode), out, err))

    async def spawn(self, command: str) -> asyncio.subprocess.Process:
        """Starts `command` with stdin, stdout and stderr piped and leaves it running: the
        long-lived channel of a session."""
        try:
            return await asyncio.create_subprocess_exec(
                *self.argv(command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                limit=1 << 20,
            )
        except OSError as e:
            raise ExecFailure(f"cannot run {self._describe()}: {e}") from e


class LocalExec(ArgvExec):
    """Runs each command with ``sh -c`` on this machine (optionally in `cwd`, with `env`): the
    local machine, or a directory of it, used as the sandbox."""

    def __init__(
        self,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        shell: str = "sh",
    ) -> None:
        super().__init__((), cwd=cwd, env=env, shell=shell)


def _stderr_text(result: ExecResult) -> str:
    return result.stderr.decode("utf-8", errors="replace").strip()


class DockerExec(ArgvExec):
    """Runs each command with ``docker exec -i CONTAINER sh -c COMMAND``.

    The Docker CLI says "the sandbox is gone" with exit status 1 and a stderr that starts with
    ``Error response from daemon:`` (no such container, not running, paused), ``Cannot connect
    to the Docker daemon`` or ``unable to upgrade to tcp`` (the container is being killed as the
    exec starts), and with 137 and no output when the container was killed during the
    exec; those raise :class:`ExecFailure`. Anything else is the command's own result.

    A process started by ``docker exec`` outlives the CLI, so a command without stdin runs
    under :data:`WATCHED`: cancelling it on the host ends it in the container too.
    """

    watch_stdin = True

    def __init__(
        self,
        container: str,
        *,
        docker: str = "docker",
        host: str | None = None,
        user: str | None = None,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not container:
            raise ValueError("DockerExec needs a container name or id")
        # `host`: the daemon to talk to (docker's --host), e.g. ssh://box or tcp://10.0.0.5:2376.
        prefix = [docker, *(["--host", host] if host else []), "exec", "-i"]
        if user:
            prefix += ["--user", user]
        if workdir:
            prefix += ["--workdir", workdir]
        for key, value in (env or {}).items():
            prefix += ["--env", f"{key}={value}"]
        prefix.append(container)
        super().__init__(prefix)
        self.container = container

    def classify(self, result: ExecResult) -> ExecResult:
        if result.exit_code == 1:
            err = _stderr_text(result)
            if err.startswith(
                ("Error response from daemon:", "Cannot connect to the Docker daemon", "unable to upgrade to tcp")
            ):
                raise ExecFailure(f"docker exec {self.container}: {err}")
        if result.exit_code == 137 and not result.stdout and not result.stderr:
            raise ExecFailure(f"docker exec {self.container}: killed (the container was stopped or removed)")
        return result


class KubectlExec(ArgvExec):
    """Runs each command with ``kubectl exec -i POD -- sh -c COMMAND`` (kubectl passes the
    command's exit status through). kubectl's own failures (exit status 1 with a stderr that
    starts with ``Error from server``, ``error:`` or ``Unable to connect to the server``) and a
    pod killed under the exec (137, no output) raise :class:`ExecFailure`."""

    def __init__(
        self,
        pod: str,
        *,
        kubectl: str = "kubectl",
        namespace: str | None = None,
        container: str | None = None,
        context: str | None = None,
        kubeconfig: str | None = None,
    ) -> None:
        if not pod:
            raise ValueError("KubectlExec needs a pod name")
        prefix = [kubectl]
        if kubeconfig:
            prefix += ["--kubeconfig", kubeconfig]
        if context:
            prefix += ["--context", context]
        prefix += ["exec", "-i"]
        if namespace:
            prefix += ["--namespace", namespace]
        if container:
            prefix += ["--container", container]
        prefix += [pod, "--"]
        super().__init__(prefix)
        self.pod = pod

    def classify(self, result: ExecResult) -> ExecResult:
        if result.exit_code == 1:
            err = _stderr_text(result)
            if err.startswith(("Error from server", "error:", "Unable to connect to the server")):
                raise ExecFailure(f"kubectl exec {self.pod}: {err}")
        if result.exit_code == 137 and not result.stdout and not result.stderr:
            raise ExecFailure(f"kubectl exec {self.pod}: killed (the pod was stopped or removed)")
        return result
