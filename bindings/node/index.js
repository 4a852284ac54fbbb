// mcpgw for Node: a Promise API over libmcpgw, the host-side client of mcpgw-gateway. The types
// of every export are generated from the JSDoc of these sources into types/ (`npm run types`).

import {
  ABI_VERSION,
  gatewayBinary,
  gatewayCandidates,
  libraryCandidates,
  native,
} from './src/native.js';

export { Client } from './src/client.js';
export { Session } from './src/session.js';
export { nativeStats } from './src/memory.js';
export { localSession, dockerSession, kubectlSession } from './src/channels.js';
export {
  localExec,
  dockerExec,
  dockerArgv,
  dockerFailure,
  kubectlExec,
  kubectlArgv,
  kubectlFailure,
} from './src/exec.js';
export {
  McpgwError,
  InvalidArgumentError,
  InvalidStateError,
  ExecError,
  CommandError,
  GatewayDownError,
  StartError,
  UnauthorizedError,
  NotFoundError,
  ConflictError,
  UpstreamError,
  TimeoutError,
  ProtocolError,
  HostIoError,
  SessionLostError,
  InternalError,
  AbortError,
  resultCodes,
} from './src/errors.js';
export * from './src/wire.js';
export * from './src/types.js';

/**
 * The loaded library.
 *
 * @typedef {object} LibraryInfo
 * @property {string} path its path
 * @property {string} version its version, e.g. `0.2.0`
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
