// Loaded with `node --import` by run.py for the conformance suite's runs through `mcpgw mcp
// --http`: every HTTP request the suite makes (its SDK client's fetch and its own undici
// requests, which share undici's global dispatcher) carries the endpoint's bearer token, read
// from $MCPGW_CONFORMANCE_TOKEN_FILE, as any client of the endpoint sends it. The suite has no
// option for a header of its own.
import { readFileSync } from 'node:fs';
import { getGlobalDispatcher, setGlobalDispatcher } from 'undici';

const token = readFileSync(process.env.MCPGW_CONFORMANCE_TOKEN_FILE, 'utf8').trim();

const withToken = (dispatch) => (opts, handler) => {
  const authorization = `Bearer ${token}`;
  const headers = Array.isArray(opts.headers)
    ? [...opts.headers, 'authorization', authorization]
    : { ...(opts.headers ?? {}), authorization };
  return dispatch({ ...opts, headers }, handler);
};

setGlobalDispatcher(getGlobalDispatcher().compose(withToken));
