// The public types of the package, in one list: index.js re-exports them, and the generated
// declarations (types/) carry them. Each is defined, with its documentation, where it is used.

/** @typedef {import('./exec.js').ExecFn} ExecFn */
/** @typedef {import('./exec.js').ExecOptions} ExecOptions */
/** @typedef {import('./exec.js').ExecResult} ExecResult */
/** @typedef {import('./exec.js').LocalExecOptions} LocalExecOptions */
/** @typedef {import('./exec.js').DockerExecOptions} DockerExecOptions */
/** @typedef {import('./exec.js').KubectlExecOptions} KubectlExecOptions */
/** @typedef {import('./client.js').ClientOptions} ClientOptions */
/** @typedef {import('./client.js').CallOptions} CallOptions */
/** @typedef {import('./session.js').Channel} Channel */
/** @typedef {import('./session.js').ChannelStreams} ChannelStreams */
/** @typedef {import('./session.js').OpenChannel} OpenChannel */
/** @typedef {import('./session.js').AttachOptions} AttachOptions */
/** @typedef {import('./errors.js').McpgwErrorInfo} McpgwErrorInfo */
/** @typedef {import('./memory.js').NativeStats} NativeStats */

export {};
