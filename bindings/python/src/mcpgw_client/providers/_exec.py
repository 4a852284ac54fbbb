"""``python -m mcpgw_client exec --PROVIDER SANDBOX_ID [--channel] -- sh -c TEXT``: runs one
command in a provider's sandbox through that provider's SDK, as an argv backend's program (what
``python -m mcpgw_client mcp --PROVIDER SANDBOX_ID`` gives ``mcpgw mcp``, whose driver runs it).

- A one-shot command (without ``--channel``) reads this process's stdin to its end first (the
  driver gives it /dev/null or the bytes), runs through the adapter's ``run`` (the SDK's command
  API, stdin through its file API) and writes the command's stdout and stderr here, exiting
  with its status.
- ``--channel`` opens the adapter's channel (the SDK's streaming process API) and relays this
  process's stdin to it and its output here as they come; the end of this stdin closes its
  input.
- The sandbox is the provider's own by its id, reached as that SDK reaches it from its usual
  environment: E2B ``AsyncSandbox.connect`` (``E2B_API_KEY``; ``E2B_DEBUG`` and
  ``E2B_SANDBOX_URL`` for an envd of one's own, whose access token ``E2B_ENVD_ACCESS_TOKEN``
  gives), OpenSandbox ``Sandbox.connect`` (``OPEN_SANDBOX_DOMAIN``, ``OPEN_SANDBOX_API_KEY``; its
  execd's token ``OPEN_SANDBOX_EXECD_ACCESS_TOKEN``), Daytona ``AsyncDaytona().get``
  (``DAYTONA_API_KEY``, ``DAYTONA_API_URL``, ``DAYTONA_TARGET``).
- When the SDK cannot run the command, this exits with the library's ``EXEC_FAILED_STATUS``
  (255) and a last stderr line ``mcpgw-exec: Class: message``, which the library reads by that
  provider's words, as it reads a binding's adapter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..backends import Backend
from ._channel import describe

#: How this program says the SDK could not run the command (the library's EXEC_FAILED_STATUS).
EXEC_FAILED_STATUS = 255
#: How its last stderr line then starts (the library's EXEC_FAILED_PREFIX).
EXEC_FAILED_PREFIX = "mcpgw-exec: "
#: A one-shot command's time limit here: the driver kills this program at its own.
ONE_SHOT_LIMIT = 24 * 3600.0
PROVIDERS = ("e2b", "opensandbox", "daytona")


@asynccontextmanager
async def sandbox_backend(provider: str, sandbox_id: str) -> AsyncIterator[Backend]:
    """The adapter of `provider`'s sandbox `sandbox_id`, connected from the SDK's environment."""
    if provider == "e2b":
        from e2b import AsyncSandbox

        from .e2b import e2b

        token = os.environ.get("E2B_ENVD_ACCESS_TOKEN")
        if token and os.environ.get("E2B_DEBUG", "").lower() == "true":
            # An envd of one's own with an access token: what connect() asks E2B's API for.
            from e2b import ConnectionConfig
            from packaging.version import Version

            box: Any = AsyncSandbox(
                sandbox_id=sandbox_id,
                sandbox_domain=None,
                envd_version=Version(os.environ.get("E2B_ENVD_VERSION", "0.6.13")),
                envd_access_token=token,
                traffic_access_token=None,
                connection_config=ConnectionConfig(debug=True, extra_sandbox_headers={"X-Access-Token": token}),
            )
        else:
            box = await AsyncSandbox.connect(sandbox_id)
        yield e2b(box)
    elif provider == "opensandbox":
        from opensandbox import Sandbox
        from opensandbox.config import ConnectionConfig as OpenSandboxConfig

        from .opensandbox import opensandbox

        token = os.environ.get("OPEN_SANDBOX_EXECD_ACCESS_TOKEN")
        headers = {"X-EXECD-ACCESS-TOKEN": token} if token else {}
        box = await Sandbox.connect(sandbox_id, connection_config=OpenSandboxConfig(headers=headers))
        try:
            yield opensandbox(box)
        finally:
            await box.close()
    elif provider == "daytona":
        from daytona import AsyncDaytona

        from .daytona import daytona

        async with AsyncDaytona() as client:
            yield daytona(await client.get(sandbox_id))
    else:
        raise ValueError(f"unknown provider {provider!r}: one of {', '.join(PROVIDERS)}")


def _command(argv: list[str]) -> str:
    """The ``sh -c`` text of the argv the driver gives (``sh -c TEXT``), or the argv quoted."""
    if len(argv) == 3 and argv[:2] == ["sh", "-c"]:
        return argv[2]
    return shlex.join(argv)


async def _one_shot(backend: Backend, command: str) -> int:
    stdin = await asyncio.to_thread(sys.stdin.buffer.read)
    assert backend.run is not None
    result: Any = await backend.run(command, ONE_SHOT_LIMIT, stdin or None)  # type: ignore[misc]
    sys.stdout.buffer.write(bytes(result.stdout or b""))
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(bytes(result.stderr or b""))
    sys.stderr.buffer.flush()
    return int(result.exit_code)


async def _channel(backend: Backend, command: str) -> int:
    assert backend.open is not None
    channel: Any = await backend.open(command)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def relay_input() -> None:
        while data := await reader.read(64 * 1024):
            channel.stdin.write(data)
        channel.stdin.close()

    async def relay(stream: Any, out: Any) -> None:
        while data := await stream.read(64 * 1024):
            out.write(data)
            out.flush()

    feeding = asyncio.ensure_future(relay_input())
    try:
        await asyncio.gather(relay(channel.stdout, sys.stdout.buffer), relay(channel.stderr, sys.stderr.buffer))
        return int(await channel.wait())
    finally:
        feeding.cancel()


async def run(provider: str, sandbox_id: str, channel: bool, argv: list[str]) -> int:
    try:
        async with sandbox_backend(provider, sandbox_id) as backend:
            command = _command(argv)
            return await (_channel if channel else _one_shot)(backend, command)
    except Exception as e:  # noqa: BLE001 - said in the library's one line
        print(f"{EXEC_FAILED_PREFIX}{describe(e)}", file=sys.stderr, flush=True)
        return EXEC_FAILED_STATUS


USAGE = "usage: python -m mcpgw_client exec --e2b|--opensandbox|--daytona SANDBOX_ID [--channel] -- COMMAND..."


def main(args: list[str]) -> int:
    """``exec``'s command line (without ``exec``)."""
    provider = sandbox_id = None
    channel = False
    rest = list(args)
    # The options, then the command (after `--`, or at the first word that is not an option:
    # an argv backend's driver puts `sh -c TEXT` right after the prefix).
    while rest and rest[0] != "--" and rest[0].startswith("--"):
        flag = rest.pop(0)
        if flag in (f"--{p}" for p in PROVIDERS) and rest:
            provider, sandbox_id = flag[2:], rest.pop(0)
        elif flag == "--channel":
            channel = True
        else:
            print(f"mcpgw_client exec: unexpected {flag!r}\n{USAGE}", file=sys.stderr)
            return 2
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if provider is None or sandbox_id is None or not rest:
        print(USAGE, file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(run(provider, sandbox_id, channel, rest))
    return 130


def mcp_arguments(args: list[str], python: str) -> list[str]:
    """``mcpgw mcp``'s arguments for ``mcp`` ones that name a provider's sandbox
    (``--e2b SANDBOX_ID``, ...): the sandbox becomes an argv backend whose program is this one,
    run by `python`; other arguments stay as they are."""
    out: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            out += [arg, *rest]
            break
        name, _, inline = arg.partition("=")
        if name in (f"--{p}" for p in PROVIDERS):
            sandbox_id = inline or (rest.pop(0) if rest else "")
            if not sandbox_id:
                raise SystemExit(f"{name} needs the sandbox's id")
            import json

            backend = {
                "kind": "argv",
                "prefix": [python, "-m", "mcpgw_client", "exec", name, sandbox_id],
                "channel_args": ["--channel"],
                "provider": name[2:],
            }
            out += ["--backend", json.dumps(backend)]
        else:
            out.append(arg)
    return out
