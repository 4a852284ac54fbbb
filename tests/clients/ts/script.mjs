// The script every client of tests/clients runs (everything.json), and their command line.
import { readFileSync } from 'node:fs';

/** The script. */
export const SCRIPT = JSON.parse(readFileSync(new URL('../everything.json', import.meta.url), 'utf8'));

/**
 * `stdio COMMAND ARG...` or `http URL [TOKEN_FILE]`: [mode, command or URL, args or token file].
 */
export function transportArgs(argv) {
  const [mode, target, ...rest] = argv;
  if (mode === 'stdio' && target) return [mode, target, rest];
  if (mode === 'http' && target && rest.length <= 1) return [mode, target, rest[0]];
  process.stderr.write('usage: stdio COMMAND [ARG...] | http URL [TOKEN_FILE]\n');
  process.exit(2);
}
