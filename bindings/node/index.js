// mcpgw for Node: MCP servers inside sandboxes, reached from the host through libmcpgw's host
// driver. The types of every export are generated from the JSDoc of these sources into types/
// (`npm run types`).

import {
  ABI_VERSION,
  gatewayBinary,
  gatewayCandidates,
  libraryCandidates,
  native,
} from './src/native.js';

export { Client, CONFIG_OPTIONS } from './src/client.js';
export { Connection } from './src/connection.js';
export { local, docker, podman, kubectl, argv, exec } from './src/backends.js';
export { e2b } from './src/providers/e2b.js';
export { opensandbox } from './src/providers/opensandbox.js';
export { daytona } from './src/providers/daytona.js';
export { McpgwError } from './src/mcpgw-error.js';
export * from './src/codes.js';
export { BackendError } from './src/errors.js';
export { nativeStats, resultCodes } from './src/native.js';
export * from './src/wire.js';
export * from './src/types.js';

/**
 * The loaded library.
 *
 * @typedef {object} LibraryInfo
 * @property {string} path its path
 * @property {string} version its version, e.g. `0.3.0`
 * @property {number} abiVersion its ABI version; equal to {@link ABI_VERSION}
 */

/**
 * The loaded library: its path, version and ABI version. Loads it on first use (so does
 * `new Client`); throws an Error naming every path tried when it cannot be found, or when its ABI
 * version is not this binding's.
 *
 * @returns {LibraryInfo}
 */
export function library() {
  const n = native();
  return { path: n.path, version: n.mcpgw_version(), abiVersion: n.mcpgw_abi_version() };
}

export { ABI_VERSION, gatewayBinary, gatewayCandidates, libraryCandidates };
