import { ABI_VERSION, gatewayBinary, gatewayCandidates, libraryCandidates } from './src/native.js';
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
export type LibraryInfo = {
    /**
     * its path
     */
    path: string;
    /**
     * its version, e.g. `0.3.0`
     */
    version: string;
    /**
     * its ABI version; equal to {@link ABI_VERSION}
     */
    abiVersion: number;
};
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
export declare function library(): LibraryInfo;
export { ABI_VERSION, gatewayBinary, gatewayCandidates, libraryCandidates };
