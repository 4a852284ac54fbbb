// The Vercel AI SDK's MCP client (@ai-sdk/mcp) on a server through `mcpgw mcp`: its tools
// become AI SDK tools, and one is executed as a model's tool call would be (no model needed).
//
//   node ai_sdk.mjs COMMAND [ARG...]      e.g. mcpgw mcp --docker box -- npx -y @modelcontextprotocol/server-everything
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport as StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';

const [command, ...args] = process.argv.slice(2);
const client = await createMCPClient({
  transport: new StdioMCPTransport({ command, args, env: process.env, stderr: 'inherit' }),
});
try {
  const tools = await client.tools();
  const echoed = await tools.echo.execute(
    { message: 'from the AI SDK' },
    { toolCallId: 'call-1', messages: [] },
  );
  process.stdout.write(JSON.stringify({ tools: Object.keys(tools).sort(), echo: echoed }) + '\n');
} finally {
  await client.close();
}
