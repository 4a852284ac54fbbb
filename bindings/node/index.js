// mcpgw for Node: a Promise API over libmcpgw, the host-side client of mcpgw-gateway.
// Types and documentation of every export: index.d.ts.

import { ABI_VERSION, libraryCandidates, native } from './src/native.js';

export { Client, nativeStats } from './src/client.js';
export { localExec, dockerExec, dockerArgv, kubectlExec, kubectlArgv } from './src/exec.js';
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
  InternalError,
  AbortError,
} from './src/errors.js';

/**
 * The loaded library: its path, version and ABI version. Loads it on first use (so does
 * `new Client`); throws an Error naming every path tried when it cannot be found.
 *
 * @returns {{path: string, version: string, abiVersion: number}}
 */
export function library() {
  const n = native();
  return { path: n.path, version: n.mcpgw_version(), abiVersion: n.mcpgw_abi_version() };
}

export { ABI_VERSION, libraryCandidates };
