// One decoding path, one shape: what the binding returns is the gateway's JSON. Each case captures
// the JSON a real gateway sent (the stdout of the very command the call ran, through an exec
// function of the test's own, or the gateway's NDJSON stream read directly), decodes it the
// binding's way, re-serializes it and compares deep-equal.

import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Client,
  InvalidArgumentError,
  parseToolChunk,
  progressOf,
  ProtocolError,
} from '../index.js';
import { execSandbox, runningGateway } from './helpers.js';

const TRAILER = '\nmcpgw-http-status:';

/** The status and JSON body of a request command's stdout (the output contract's trailer). */
function response(stdout) {
  const text = stdout.toString('utf8');
  const at = text.lastIndexOf(TRAILER);
  assert.ok(at >= 0, `no status trailer in ${text.slice(0, 200)}`);
  return {
    status: Number(text.slice(at + TRAILER.length).trim()),
    body: JSON.parse(text.slice(0, at)),
  };
}

/** Decoded, re-serialized and parsed again: what a consumer storing the value would get back. */
function reserialized(value) {
  return JSON.parse(JSON.stringify(value));
}

describe('results are the wire JSON of a real gateway', () => {
  const sb = execSandbox();
  const gw = runningGateway(sb);
  /** @type {Client} */
  let client;
  before(() => (client = gw.client));

  /** Runs `call`, returning its result and the gateway's answer to its (one) request command. */
  async function captured(call) {
    const from = sb.outputs.length;
    const result = await call();
    const answers = sb.outputs.slice(from).map(response);
    assert.equal(answers.length, 1, 'one command');
    assert.equal(answers[0].status, 200);
    return { result, wire: answers[0].body };
  }

  for (const [tool, args] of [
    ['media', {}],
    ['add', { a: 2, b: 3 }],
    ['fail', { message: 'it broke' }],
    ['echo', { text: 'héllo\u0000 wörld ✓ \u{1f600}' }],
  ]) {
    test(`call_tool ${tool}: the ToolChunk as the gateway sent it`, async () => {
      const { result, wire } = await captured(() => client.callTool('ts', tool, args));
      assert.deepEqual(result, wire.chunk);
      assert.deepEqual(reserialized(result), wire.chunk);
      assert.deepEqual(parseToolChunk(JSON.stringify(wire.chunk)), wire.chunk);
    });
  }

  test('list_tools: the MCP Tool objects as the gateway sent them', async () => {
    const { result, wire } = await captured(() => client.listTools('ts'));
    assert.ok(wire.length > 5);
    assert.deepEqual(result, wire);
    assert.deepEqual(reserialized(result), wire);
  });

  test('list_mcps: the specs with their status as the gateway sent them', async () => {
    const { result, wire } = await captured(() => client.listMcps());
    assert.ok(wire[0].status, 'the gateway reports a status');
    assert.deepEqual(result, wire);
    assert.deepEqual(reserialized(result), wire);
  });

  test('a progress chunk of the NDJSON stream, and its final chunk', async () => {
    // The gateway's streamed answer, read straight from its port (a local sandbox shares the
    // host's network): one ToolChunk per line.
    const info = await client.health();
    assert.ok(info.instance_nonce);
    const token = readFileSync(join(sb.dir, 'st', 'token'), 'utf8').trim();
    const res = await fetch(`http://127.0.0.1:${client.port}/mcps/ts/tools/slow`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/x-ndjson',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ arguments: { seconds: 0.3, steps: 3 } }),
    });
    assert.equal(res.status, 200);
    const lines = (await res.text()).split('\n').filter(Boolean);
    assert.ok(lines.length >= 2, `${lines.length} lines`);
    const chunks = lines.map((line) => parseToolChunk(line));
    chunks.forEach((c, i) => assert.deepEqual(c, JSON.parse(lines[i])));
    const progress = chunks.filter((c) => !c.is_last);
    assert.ok(progress.length >= 1);
    for (const c of progress) assert.equal(typeof progressOf(c)?.progress, 'number');
    assert.equal(chunks.at(-1)?.is_last, true);
    assert.equal(progressOf(/** @type {any} */ (chunks.at(-1))), null);
  });

  test('text that is not a ToolChunk is refused, and so is invalid base64', () => {
    assert.throws(() => parseToolChunk('{"content": 3}'), InvalidArgumentError);
    assert.throws(() => parseToolChunk('not json'), InvalidArgumentError);
    const chunk = {
      content: [
        {
          type: 'data',
          id: 'b',
          source: { type: 'base64', data: 'not base64!', media_type: 'image/png' },
          name: null,
          created_at: 't',
          finished_at: null,
        },
      ],
      state: 'running',
      is_last: true,
      metadata: {},
      id: 'c',
    };
    assert.throws(() => parseToolChunk(JSON.stringify(chunk)), ProtocolError);
  });
});
