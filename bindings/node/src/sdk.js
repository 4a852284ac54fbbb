// A transport of the official TypeScript MCP SDK (`@modelcontextprotocol/sdk`) over a virtual
// MCP connection: the SDK's `Client` talks to an MCP server inside the sandbox as if it were
// local. Only the SDK's `Transport` interface is implemented; nothing of the SDK is imported at
// run time, so the core binding never loads it.

import { errorNamed, invalid } from './errors.js';

/** @import { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js' */
/** @import { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js' */
/** @import { Client } from './client.js' */
/** @import { Connection, ConnectionEnd } from './connection.js' */
/** @import { McpgwError } from './mcpgw-error.js' */

/**
 * Options of a {@link McpgwTransport}: the MCP's scope.
 *
 * @typedef {object} McpgwTransportOptions
 * @property {string} [agentId] the agent part of the MCP's scope. Default `""`.
 * @property {string} [sessionId] the session part of the MCP's scope. Default `""`.
 */

/**
 * The binding's error for how connection `mcp` ended when this side did not close it, of the
 * kind the library gave the end (a refused open's by its HTTP status, UpstreamError when the
 * gateway ended it, SessionLostError when the channel was lost).
 *
 * @param {string} mcp
 * @param {ConnectionEnd} end
 * @param {boolean} opened
 * @returns {McpgwError}
 */
function endError(mcp, { reason, status, code }, opened) {
  const what = opened ? 'ended' : 'was refused';
  return errorNamed(
    code ?? 'UPSTREAM_ERROR',
    `the connection to MCP ${JSON.stringify(mcp)} ${what}: ${reason}`,
    { status: status || undefined },
  );
}

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
export class McpgwTransport {
  /** @type {Client} */
  #client;
  #mcp;
  /** @type {McpgwTransportOptions} */
  #options;
  /** @type {Connection | null} */
  #connection = null;
  /** Whether the gateway accepted the connection. */
  #opened = false;
  /** Whether this side asked for the end. */
  #closing = false;
  /** @type {ConnectionEnd | null} */
  #end = null;
  #closed = () => {};
  /** Resolves once `onclose` ran. */
  #done = new Promise((resolve) => (this.#closed = () => resolve(undefined)));

  /** Called once when the connection ends, for any reason. @type {Transport['onclose']} */
  onclose = undefined;
  /** Called with what went wrong out of band. @type {Transport['onerror']} */
  onerror = undefined;
  /** Called with each message from the server. @type {Transport['onmessage']} */
  onmessage = undefined;

  /**
   * Throws InvalidArgumentError for a client that is not a `Client` or a name or option that is
   * not a string; the connection opens in `start()`.
   *
   * @param {Client} client a client of this package; its session carries the connection
   * @param {string} mcp the registered MCP's name
   * @param {McpgwTransportOptions} [options]
   */
  constructor(client, mcp, options = {}) {
    if (!client || typeof (/** @type {any} */ (client).connect) !== 'function') {
      throw invalid('new McpgwTransport(client, mcp) needs a Client of mcpgw');
    }
    if (typeof mcp !== 'string') throw invalid(`the MCP name must be a string, not ${typeof mcp}`);
    if (options === null || typeof options !== 'object') {
      throw invalid(`the transport options must be an object, not ${typeof options}`);
    }
    const unknown = Object.keys(options).filter((k) => k !== 'agentId' && k !== 'sessionId');
    if (unknown.length) {
      throw invalid(
        `new McpgwTransport: unknown option ${unknown.join(', ')} (known: agentId, sessionId)`,
      );
    }
    this.#client = client;
    this.#mcp = mcp;
    this.#options = { ...options };
  }

  /**
   * Opens the connection; resolves once the gateway accepted it.
   *
   * @returns {Promise<void>}
   */
  async start() {
    if (this.#connection) {
      throw errorNamed(
        'INVALID_STATE',
        `McpgwTransport to MCP ${JSON.stringify(this.#mcp)}: already started (the SDK's connect() starts it)`,
      );
    }
    // One message a macrotask, as a stream's reads come: what the SDK's handlers start for one
    // message (its notification handlers run a microtask later) runs before the next message,
    // so a progress notification is handled before the answer that follows it. The end comes
    // in the same order, after the last message.
    const connection = this.#client.connect(this.#mcp, {
      ...this.#options,
      onMessage: (message) => setImmediate(() => this.#deliver(message)),
    });
    this.#connection = connection;
    connection.closed.then((end) => {
      this.#end = end;
      setImmediate(() => this.#ended(end));
    });
    this.#opened = await connection.opened;
    if (!this.#opened) throw endError(this.#mcp, await connection.closed, false);
  }

  /**
   * Sends one JSON-RPC message to the server.
   *
   * @param {JSONRPCMessage} message
   * @param {TransportSendOptions} [_options] unused: the connection is one ordered stream
   * @returns {Promise<void>}
   */
  async send(message, _options) {
    if (!this.#connection) {
      throw errorNamed(
        'INVALID_STATE',
        `McpgwTransport to MCP ${JSON.stringify(this.#mcp)}: not started (the SDK's connect() starts it)`,
      );
    }
    if (this.#end || this.#closing) {
      throw errorNamed(
        'INVALID_STATE',
        `McpgwTransport to MCP ${JSON.stringify(this.#mcp)}: the connection is closed` +
          (this.#end?.reason ? ` (${this.#end.reason})` : ''),
      );
    }
    this.#connection.send(message);
  }

  /**
   * Closes the connection (not the session); resolves once it ended and `onclose` ran.
   *
   * @returns {Promise<void>}
   */
  async close() {
    const connection = this.#connection;
    if (!connection) return;
    this.#closing = true;
    connection.close();
    await this.#done;
  }

  /** @param {any} message */
  #deliver(message) {
    try {
      this.onmessage?.(message);
    } catch (e) {
      this.onerror?.(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** @param {ConnectionEnd} end */
  #ended(end) {
    // A refused open is start()'s rejection; the host's own close is no error.
    if (this.#opened && end.reason !== null && !this.#closing) {
      this.onerror?.(endError(this.#mcp, end, true));
    }
    this.onclose?.();
    this.#closed();
  }
}
