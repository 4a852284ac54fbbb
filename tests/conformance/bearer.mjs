// Loaded with `node --import` by run.py for the conformance suite's runs through `mcpgw mcp
// --http`: every HTTP request the suite makes carries the endpoint's bearer token, read from
// $MCPGW_CONFORMANCE_TOKEN_FILE, as any client of the endpoint sends it. The suite has no option
// for a header of its own, and it speaks HTTP two ways: its SDK client's fetch and its own undici
// requests (undici's global dispatcher), and `http.request` of node's own `http` module (the
// header scenarios, which set headers fetch would not).
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { getGlobalDispatcher, setGlobalDispatcher } from 'undici';

const token = readFileSync(process.env.MCPGW_CONFORMANCE_TOKEN_FILE, 'utf8').trim();
const authorization = `Bearer ${token}`;

const withToken = (dispatch) => (opts, handler) => {
  const headers = Array.isArray(opts.headers)
    ? [...opts.headers, 'authorization', authorization]
    : { ...(opts.headers ?? {}), authorization };
  return dispatch({ ...opts, headers }, handler);
};

setGlobalDispatcher(getGlobalDispatcher().compose(withToken));

// `http.request(options[, callback])`, the form the suite uses: options an object.
const request = http.request;
http.request = (options, ...rest) => {
  if (options === null || typeof options !== 'object' || options instanceof URL) {
    throw new Error('bearer.mjs: http.request is called here with an options object only');
  }
  return request.call(
    http,
    { ...options, headers: { ...(options.headers ?? {}), authorization } },
    ...rest,
  );
};
