// The binding from TypeScript: an exec backend adapting an async sandbox SDK, a call with a
// deadline and an AbortSignal, the ToolChunk's blocks narrowed by type, a streamed call over a
// session with its progress, errors by class, the official MCP SDK's client on the binding's
// transport. Checked with `npm run typecheck` (tsc --noEmit) against the declarations generated
// from the sources (types/); run the JS quickstart to see it work.

import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { McpgwTransport } from 'mcpgw/sdk';
import {
  BackendError,
  Client,
  DeadlineError,
  NotFoundError,
  SessionLostError,
  dataBytes,
  exec,
  local,
  progressOf,
  type Backend,
  type Block,
  type McpEntry,
  type McpSpec,
  type ToolChunk,
} from 'mcpgw';

/** The shape of a typical sandbox SDK: an async `run` that resolves with exit status and output. */
interface SandboxCommands {
  run(
    command: string,
    options: { timeoutMs: number; signal?: AbortSignal },
  ): Promise<{ exitCode: number; stdout: string; stderr: string }>;
}

/** A backend over such an SDK: every command is `sh -c` text, whatever the sandbox. */
export function sdkBackend(commands: SandboxCommands): Backend {
  return exec(async (command, { timeoutMs, signal }) => {
    const r = await commands.run(`sh -c ${shellQuote(command)}`, { timeoutMs, signal });
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  });
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** Text of the text blocks, and the sizes of the binary ones. */
export function describe(chunk: ToolChunk): string[] {
  return chunk.content.map((block: Block) => {
    switch (block.type) {
      case 'text':
        return block.text;
      case 'data':
        return block.source.type === 'url'
          ? `link ${block.name ?? ''} ${block.source.url}`
          : `${block.source.media_type}: ${dataBytes(block)?.byteLength} bytes`;
    }
  });
}

/** One line per registered MCP server: its name and how it stands. */
export function states(entries: McpEntry[]): string[] {
  return entries.map((e) => `${e.name}: ${e.status?.state ?? 'unknown'}`);
}

/** The tools of MCP `mcp`, listed by the official SDK's client over a session of `client`. */
export async function sdkToolNames(client: Client, mcp: string): Promise<string[]> {
  const sdk = new McpClient({ name: 'typed', version: '1.0.0' });
  await sdk.connect(new McpgwTransport(client, mcp, { agentId: 'typed' }));
  try {
    return (await sdk.listTools()).tools.map((t) => t.name);
  } finally {
    await sdk.close();
  }
}

export async function main(gatewayPath: string, serverPath: string): Promise<void> {
  const client = new Client(local({ cwd: '/tmp' }), { gatewayPath, timeoutMs: 30_000 });
  try {
    const info = await client.startGateway();
    console.log(`gateway pid ${info.pid} on port ${info.port}`);
    const spec: McpSpec = {
      name: 'ts',
      mcp_config: { type: 'stdio_mcp', command: serverPath, args: ['stdio'] },
    };
    await client.addMcp(spec);
    console.log(states(await client.listMcps()).join('\n'));
    const ac = new AbortController();
    const chunk = await client.callTool('ts', 'media', {}, { signal: ac.signal, timeoutMs: 5_000 });
    console.log(describe(chunk).join('\n'));
    try {
      await client.callTool('ts', 'slow', { seconds: 10 }, { timeoutMs: 500 });
    } catch (e) {
      if (e instanceof DeadlineError) console.log(`deadline: ${e.status} ${e.detail}`);
      else if (e instanceof NotFoundError) console.log(`no such tool: ${e.detail}`);
      else if (e instanceof BackendError) console.log(`the sandbox: ${e.state} (${e.reason})`);
      else throw e;
    }
    const hello = await client.openSession();
    console.log(`session to gateway ${hello.version}`);
    try {
      for await (const c of client.callToolStream('ts', 'slow', { seconds: 1, steps: 4 })) {
        const p = progressOf(c);
        console.log(p ? `progress ${p.progress}/${p.total ?? '?'}` : `done: ${c.state}`);
      }
    } catch (e) {
      if (e instanceof SessionLostError) console.log(`the channel died: ${e.message}`);
      else throw e;
    } finally {
      await client.closeSession();
    }
    await client.stopGateway();
  } finally {
    await client.close();
  }
}
