// Turns a native mcpgw_tool_chunk into a plain JS object. Everything is copied out, so the
// caller frees the chunk right after and no native memory outlives the call.

import { RESULT, copyBytes, decodeText } from './native.js';
import { InternalError, ProtocolError, codeName } from './errors.js';

const STATES = ['running', 'success', 'error', 'interrupted', 'denied'];
const BLOCK_TEXT = 0;
const BLOCK_DATA = 1;
const BLOCK_URL = 2;

/**
 * Reads every field of the chunk at `chunk` (borrowed: the caller frees it).
 * @param {ReturnType<typeof import('./native.js').native>} n
 * @param {bigint} chunk
 * @returns {import('../index.js').ToolChunk}
 */
export function readToolChunk(n, chunk) {
  const count = Number(n.mcpgw_tool_chunk_block_count(chunk));
  const content = [];
  for (let i = 0; i < count; i++) {
    const out = [null];
    check(n.mcpgw_tool_chunk_block(chunk, i, out), `block ${i}`);
    content.push(readBlock(n, out[0]));
  }
  const metadataJson = n.mcpgw_tool_chunk_metadata_json(chunk);
  return {
    id: n.mcpgw_tool_chunk_id(chunk),
    state: STATES[n.mcpgw_tool_chunk_state(chunk)] ?? 'error',
    isLast: n.mcpgw_tool_chunk_is_last(chunk),
    metadata: metadataJson ? JSON.parse(metadataJson) : {},
    content,
  };
}

function readBlock(n, block) {
  const id = n.mcpgw_block_id(block);
  const ptr = [null];
  const len = [0];
  switch (n.mcpgw_block_get_type(block)) {
    case BLOCK_TEXT:
      check(n.mcpgw_block_text(block, ptr, len), 'a text block');
      return { type: 'text', id, text: decodeText(ptr[0], Number(len[0])) };
    case BLOCK_DATA:
      check(n.mcpgw_block_data(block, ptr, len), 'a data block');
      return {
        type: 'data',
        id,
        name: n.mcpgw_block_name(block),
        mediaType: n.mcpgw_block_media_type(block),
        data: copyBytes(ptr[0], Number(len[0])),
      };
    case BLOCK_URL:
      return {
        type: 'url',
        id,
        name: n.mcpgw_block_name(block),
        mediaType: n.mcpgw_block_media_type(block),
        url: n.mcpgw_block_url(block),
      };
    default:
      throw new ProtocolError(`the library reported an unknown block type for block ${id}`);
  }
}

/** A failed accessor on a chunk the library itself produced is a bug, not a bad answer. */
function check(rc, what) {
  if (rc !== RESULT.OK) {
    throw new InternalError(`reading ${what} of a ToolChunk failed (result ${rc})`, {
      code: codeName(rc),
      result: rc,
    });
  }
}
