// The public types of the package, in one list: index.js re-exports them, and the generated
// declarations (types/) carry them. Each is defined, with its documentation, where it is used.

/** @typedef {import('./backends.js').Backend} Backend */
/** @typedef {import('./backends.js').ContainerOptions} ContainerOptions */
/** @typedef {import('./backends.js').PodOptions} PodOptions */
/** @typedef {import('./backends.js').RunFn} RunFn */
/** @typedef {import('./backends.js').OpenFn} OpenFn */
/** @typedef {import('./backends.js').ExecOptions} ExecOptions */
/** @typedef {import('./backends.js').ExecResult} ExecResult */
/** @typedef {import('./backends.js').Channel} Channel */
/** @typedef {import('./client.js').ClientOptions} ClientOptions */
/** @typedef {import('./client.js').CallOptions} CallOptions */
/** @typedef {import('./client.js').CallToolOptions} CallToolOptions */
/** @typedef {import('./connection.js').ConnectOptions} ConnectOptions */
/** @typedef {import('./connection.js').ConnectionEnd} ConnectionEnd */
/** @typedef {import('./errors.js').BackendState} BackendState */
/** @typedef {import('./mcpgw-error.js').McpgwErrorInfo} McpgwErrorInfo */
/** @typedef {import('./native.js').NativeStats} NativeStats */

export {};
