// The script every client of tests/clients runs (everything.json), and their command line.
import { readFileSync } from 'node:fs';

/** The script. */
export const SCRIPT = JSON.parse(readFileSync(new URL('../everything.json', import.meta.url), 'utf8'));

/**
 * `stdio COMMAND ARG...`, `http URL [TOKEN_FILE]` or `binding docker CONTAINER COMMAND ARG...`:
 * [mode, command, args] / [mode, URL, token file] / [mode, container, command and args].
 */
export function transportArgs(argv) {
  const [mode, target, ...rest] = argv;
  if (mode === 'stdio' && target) return [mode, target, rest];
  if (mode === 'http' && target && rest.length <= 1) return [mode, target, rest[0]];
  if (mode === 'binding' && target === 'docker' && rest.length >= 2) {
    return [mode, rest[0], rest.slice(1)];
  }
  process.stderr.write(
    'usage: stdio COMMAND [ARG...] | http URL [TOKEN_FILE] | binding docker CONTAINER COMMAND [ARG...]\n',
  );
  process.exit(2);
}
