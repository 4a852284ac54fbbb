import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Client } from './client.js';
export type McpgwTransportOptions = {
    /**
     * the agent part of the MCP's scope. Default `""`.
     */
    agentId?: string;
    /**
     * the session part of the MCP's scope. Default `""`.
     */
    sessionId?: string;
};
/**
 * The SDK's `Transport` over `client.connect(mcp)`: hand it to the SDK's `Client.connect`,
 *
 * ```js
 * const mcp = new McpClient({ name: 'agent', version: '1.0.0' }, { capabilities: { roots: {} } });
 * await mcp.connect(new McpgwTransport(client, 'ev'));
 * ```
 *
 * and the SDK's client speaks JSON-RPC to MCP `ev` in the sandbox through the client's open
 * session: its requests, notifications and answers go over the connection as they are, and the
 * server's requests (sampling, elicitation, roots) reach the SDK's own handlers. Closing the
 * SDK's client closes the connection, not the session.
 *
 * `start()` (which the SDK's `connect` calls) rejects with the binding's error: NotFoundError
 * for an MCP the scope does not have, InvalidStateError when the client is closed or has no
 * session open or opening. A connection that ends on its own (the server exited or was removed,
 * the session was lost) is reported to `onerror` (SessionLostError when the session is no
 * longer open, else UpstreamError; the message says why), then `onclose`. `send` after the end
 * rejects with InvalidStateError.
 *
 * @implements {Transport}
 */
export declare class McpgwTransport implements Transport {
    #private;
    /** Called once when the connection ends, for any reason. @type {Transport['onclose']} */
    onclose: Transport['onclose'];
    /** Called with what went wrong out of band. @type {Transport['onerror']} */
    onerror: Transport['onerror'];
    /** Called with each message from the server. @type {Transport['onmessage']} */
    onmessage: Transport['onmessage'];
    /**
     * Throws InvalidArgumentError for a client that is not a `Client` or a name or option that is
     * not a string; the connection opens in `start()`.
     *
     * @param {Client} client a client of this package; its session carries the connection
     * @param {string} mcp the registered MCP's name
     * @param {McpgwTransportOptions} [options]
     */
    constructor(client: Client, mcp: string, options?: McpgwTransportOptions);
    /**
     * Opens the connection; resolves once the gateway accepted it.
     *
     * @returns {Promise<void>}
     */
    start(): Promise<void>;
    /**
     * Sends one JSON-RPC message to the server.
     *
     * @param {JSONRPCMessage} message
     * @param {TransportSendOptions} [_options] unused: the connection is one ordered stream
     * @returns {Promise<void>}
     */
    send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void>;
    /**
     * Closes the connection (not the session); resolves once it ended and `onclose` ran.
     *
     * @returns {Promise<void>}
     */
    close(): Promise<void>;
}
