// A virtual MCP connection over the session channel: raw JSON-RPC to and from one registered
// MCP, the gateway being its MCP server. The library frames it; this only hands messages over.

import { errorNamed, invalid } from './errors.js';
import { later } from './loop.js';

/** @import { HostLoop } from './loop.js' */

/**
 * Options of `client.connect`.
 *
 * @typedef {object} ConnectOptions
 * @property {string} [agentId] the agent part of the MCP's scope. Default `""`.
 * @property {string} [sessionId] the session part of the MCP's scope. Default `""`.
 * @property {(message: any) => void} [onMessage] receives each message as it comes; without
 *   it, messages wait for the connection's async iterator
 */

/**
 * How a connection ended: `reason` is why (null when the host closed it), `status` the HTTP
 * status of a refused open (404: no such MCP), else 0, and `code` the name of the end's kind
 * as the library judged it (`NOT_FOUND`, `UPSTREAM_ERROR` when the gateway ended it,
 * `SESSION_LOST`, ...; null when the host closed it).
 *
 * @typedef {{reason: string | null, status: number, code: string | null}} ConnectionEnd
 */

/**
 * A virtual MCP connection: `send` JSON-RPC messages, receive them with `onMessage` or
 * `for await (const message of connection)`, `close()` it. `opened` resolves true once the
 * gateway accepted it (false when it ended first); `closed` resolves with how it ended.
 */
export class Connection {
  /** @type {HostLoop} */
  #loop;
  #id;
  /** @type {any[]} */
  #queue = [];
  #wake = () => {};
  /** @type {ConnectionEnd | null} */
  #end = null;
  /** @type {((message: any) => void) | undefined} */
  #onMessage;

  /**
   * Use `client.connect(mcp, options)`.
   *
   * @param {HostLoop} loop
   * @param {string} mcp
   * @param {ConnectOptions} options
   */
  constructor(loop, mcp, { agentId = '', sessionId = '', onMessage } = {}) {
    if (onMessage !== undefined && typeof onMessage !== 'function') {
      throw invalid('onMessage must be a function (message) => void');
    }
    for (const [what, value] of [
      ['the MCP name', mcp],
      ['agentId', agentId],
      ['sessionId', sessionId],
    ]) {
      if (typeof value !== 'string') throw invalid(`${what} must be a string, not ${typeof value}`);
      if (value.includes('\0')) throw invalid(`${what} must not contain a NUL character`);
    }
    this.#loop = loop;
    this.#onMessage = onMessage;
    /** @type {(opened: boolean) => void} */
    let settleOpened = () => {};
    /** @type {(end: ConnectionEnd) => void} */
    let settleClosed = () => {};
    /** Resolves true once the gateway accepted the connection, false when it ended first. */
    this.opened = new Promise((resolve) => (settleOpened = resolve));
    /** Resolves with how the connection ended. @type {Promise<ConnectionEnd>} */
    this.closed = new Promise((resolve) => (settleClosed = resolve));
    this.#id = loop.openConnection(mcp, agentId, sessionId, {
      opened: () => settleOpened(true),
      message: (text) => {
        const message = JSON.parse(text);
        if (this.#onMessage) later(this.#onMessage, message);
        else this.#queue.push(message);
        this.#wake();
      },
      closed: (reason, status, code) => {
        this.#end = { reason, status, code };
        settleOpened(false);
        settleClosed(this.#end);
        this.#wake();
      },
    });
  }

  /**
   * Sends one JSON-RPC message: an object, or its JSON text.
   *
   * @param {object | string} message
   */
  send(message) {
    if (this.#end) throw errorNamed('INVALID_STATE', 'the connection is closed');
    let text = message;
    if (typeof message !== 'string') {
      try {
        text = JSON.stringify(message);
      } catch (e) {
        throw invalid(`the message cannot be sent as JSON: ${/** @type {Error} */ (e).message}`);
      }
    }
    if (typeof text !== 'string') throw invalid('a message is a JSON-RPC object or its text');
    this.#loop.send(this.#id, text);
  }

  /** Closes the connection; `closed` then resolves. */
  close() {
    if (!this.#end) this.#loop.closeConnection(this.#id);
  }

  /**
   * The messages as they come, until the connection ends.
   *
   * @returns {AsyncGenerator<any, void, undefined>}
   */
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.#queue.length) {
        yield this.#queue.shift();
        continue;
      }
      if (this.#end) return;
      await new Promise((resolve) => (this.#wake = () => resolve(undefined)));
    }
  }
}
