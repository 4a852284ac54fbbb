"""The shapes of what the gateway answers, as typed dicts: exactly its JSON.

Results are the gateway's JSON parsed with :func:`json.loads`, nothing renamed or rebuilt, so
``json.dumps(chunk)`` gives the wire JSON back, unknown fields survive, and AgentScope's own
``ToolChunk.model_validate(chunk)`` takes a chunk as it is. The TypedDicts below only tell a
type checker what is there. Data blocks keep their bytes base64-encoded as on the wire:
:func:`block_bytes` decodes one.
"""

from __future__ import annotations

import base64
from typing import Any, Literal, NotRequired, TypedDict

ToolState = Literal["running", "success", "error", "interrupted", "denied"]


class TextBlock(TypedDict):
    """A text block of a ToolChunk."""

    type: Literal["text"]
    text: str
    id: str
    created_at: str
    finished_at: str | None


class Base64Source(TypedDict):
    """Inline bytes of a data block (image, audio, an embedded blob resource)."""

    type: Literal["base64"]
    data: str
    media_type: str


class UrlSource(TypedDict):
    """A data block that links to its bytes (an MCP resource link)."""

    type: Literal["url"]
    url: str
    media_type: str


class DataBlock(TypedDict):
    """A data block of a ToolChunk."""

    type: Literal["data"]
    id: str
    name: str | None
    created_at: str
    finished_at: str | None
    source: Base64Source | UrlSource


Block = TextBlock | DataBlock


class Progress(TypedDict):
    """``metadata.mcp_progress`` of a progress chunk: the upstream's progress notification."""

    progress: float
    total: NotRequired[float | None]
    message: NotRequired[str | None]


class ToolChunk(TypedDict):
    """AgentScope's ToolChunk, as the gateway writes it (snake_case).

    ``metadata`` may hold ``structured_content`` (the MCP result's structured content),
    ``mcp_progress`` (a :class:`Progress`, on progress chunks) and ``error`` (``{"status",
    "detail"}``, on the last chunk of a streamed call that failed).
    """

    content: list[Block]
    state: ToolState
    is_last: bool
    metadata: dict[str, Any]
    id: str


class GatewayInfo(TypedDict):
    """What ``start_gateway`` learned: where the gateway listens and how to reach it again."""

    port: int
    pid: int
    token_file: str
    instance_nonce: str
    state_dir: str


class Health(TypedDict):
    """The gateway's ``/health`` answer."""

    status: str
    instance_nonce: NotRequired[str]


class BinaryInfo(TypedDict):
    """What ``ensure_gateway_binary`` did."""

    uploaded: bool
    sha256: str
    path: str


class McpStatus(TypedDict):
    """The ``status`` the gateway adds to each entry of ``list_mcps``."""

    state: str
    pid: NotRequired[int | None]
    restarts: int
    last_error: NotRequired[str | None]
    calls: int
    errors: int


#: An MCP spec: AgentScope's ``MCPClient`` dump (``name``, ``mcp_config``, ...); entries of
#: ``list_mcps`` also carry a ``status`` (:class:`McpStatus`).
McpSpec = dict[str, Any]
#: An MCP ``Tool`` object as the upstream sent it (camelCase: ``inputSchema``, ...).
Tool = dict[str, Any]


def progress_of(chunk: ToolChunk) -> Progress | None:
    """The progress a chunk reports (``metadata.mcp_progress``), or ``None``."""
    value = chunk.get("metadata", {}).get("mcp_progress")
    return value if isinstance(value, dict) else None  # type: ignore[return-value]


def block_bytes(block: Block) -> bytes:
    """The decoded bytes of an inline data block. ValueError for other blocks."""
    if block["type"] != "data" or block["source"]["type"] != "base64":
        raise ValueError("only a data block with a base64 source holds bytes")
    return base64.b64decode(block["source"]["data"])


def text_of(chunk: ToolChunk) -> str:
    """The text blocks of a chunk, joined by newlines."""
    return "\n".join(b["text"] for b in chunk["content"] if b["type"] == "text")
