"""A swapped ``DockerWorkspace``'s image: AgentScope's own, without the gateway's part. The image
is a Docker workspace's bootstrap."""

from __future__ import annotations

import io
import logging
import tarfile
from typing import Any

log = logging.getLogger("mcpgw_client.agentscope")


def gateway_free_image(workspace: Any) -> tuple[str, dict[str, bytes]]:
    """The image a swapped ``DockerWorkspace`` runs, as ``(tag, build context files)``:
    AgentScope's own Dockerfile template rendered as AgentScope renders it (``uv`` and ``uvx``,
    ``ripgrep``, the ``.venv`` on PATH, the Glob tool's helper, the workspace's base image, Node
    and ``extra_pip``) without the gateway's part: its ``requirements.txt`` holds only
    ``extra_pip`` (not fastapi, uvicorn, mcp, ...) and agentscope is not installed. Tagged by
    content like AgentScope's images, under ``agentscope-workspace-mcpgw``."""
    from agentscope.workspace._docker._make_dockerfile import (
        CONTAINER_WORKDIR,
        GATEWAY_HOME,
        IMAGE_REPO,
        compute_image_tag,
        render_dockerfile,
    )
    from agentscope.workspace._utils import _read_gateway_script_bytes, _read_glob_helper_bytes

    dockerfile = render_dockerfile(
        base_image=workspace.base_image,
        gateway_home=GATEWAY_HOME,
        container_workdir=CONTAINER_WORKDIR,
        node_version=workspace.node_version,
        install_agentscope_block="",
    )
    # The template copies these three in; the gateway script is never run.
    files = {
        "requirements.txt": "".join(f"{p}\n" for p in workspace.extra_pip).encode() or b"\n",
        "_mcp_gateway_app.py": _read_gateway_script_bytes(),
        "_glob_helper.py": _read_glob_helper_bytes(),
    }
    digest = compute_image_tag(dockerfile, files).rpartition(":")[2]
    return f"{IMAGE_REPO}-mcpgw:{digest}", {"Dockerfile": dockerfile.encode(), **files}


async def build_or_reuse_image(workspace: Any) -> None:
    """``DockerWorkspace._build_or_reuse_image`` for :func:`gateway_free_image`: reuses the
    tag when the daemon has it, else builds it through the workspace's aiodocker client as
    AgentScope builds its own."""
    from aiodocker.exceptions import DockerError

    tag, files = gateway_free_image(workspace)
    workspace._image_tag = tag
    docker = workspace._client
    try:
        await docker.images.inspect(tag)
        return
    except DockerError as e:
        if e.status != 404:
            raise
    log.info("mcpgw: building %s for %s %r", tag, type(workspace).__name__, workspace.workspace_id)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    context.seek(0)
    said: list[str] = []
    async for chunk in docker.images.build(fileobj=context, encoding="identity", tag=tag, stream=True, rm=True):
        if not isinstance(chunk, dict):
            continue
        if chunk.get("stream"):
            said = [*said[-199:], str(chunk["stream"]).rstrip()]
        if "error" in chunk:
            raise RuntimeError(f"docker build of {tag} failed: {chunk['error']}\n" + "\n".join(said))
