// The Node binding's way in: the SDK client over the binding's transport (`mcpgw/sdk`), through
// a session into a Docker container, where the gateway (launched by the session, from the
// container's PATH) runs the server.
import { Client, docker } from '../../../bindings/node/index.js';
import { McpgwTransport } from '../../../bindings/node/src/sdk.js';

/**
 * Opens a session into `container`, registers `command` there as MCP `ev`, and gives the
 * transport to it, with the tear-down that stops the gateway (and so the server) and closes
 * the session.
 */
export async function dockerTransport(container, [command, ...args]) {
  const client = new Client(docker(container));
  const teardown = async () => {
    await client.stopGateway();
    await client.close();
  };
  try {
    await client.openSession();
    await client.addMcp({ name: 'ev', mcp_config: { type: 'stdio_mcp', command, args } });
  } catch (e) {
    await teardown().catch(() => {});
    throw e;
  }
  return { transport: new McpgwTransport(client, 'ev'), teardown };
}
