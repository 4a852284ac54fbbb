// Writes src/ffi.js and src/codes.js from include/mcpgw.h, the one source of the C ABI: the
// koffi prototypes of the functions this binding calls, the enums it reads, the ABI version, and
// one error class per result code (named after the code, documented with the header's text).
//
//   node scripts/generate.mjs [--check]
//
// With --check nothing is written: it exits 1 naming each file that is not what it would write.
// The tests run the check, so a header change the binding has not taken up fails them.

import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), '..');
const HEADER = join(PACKAGE, '..', '..', 'include', 'mcpgw.h');

/** The functions the binding calls: the host driver, its actions, results, errors, chunks. */
const WANTED =
  /^mcpgw_(host_\w+|action_\w+|result_\w+|version|abi_version|string_free|error_(code|message|http_status|detail|free)|tool_chunk_(from_json|to_json|free))$/;

/** The header's comment text, one paragraph a line joined. */
function docText(comment) {
  return comment
    .replace(/^\/\*|\*\/$/g, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' ');
}

/**
 * What the header declares: its ABI and version defines, the members (with their comments) of
 * each `enum NAME`, its opaque structs, and every prototype by function name.
 */
export function parseHeader(text) {
  const define = (name) => {
    const m = text.match(new RegExp(`^#define ${name} (\\d+)$`, 'm'));
    if (!m) throw new Error(`mcpgw.h has no #define ${name}`);
    return Number(m[1]);
  };
  /** @type {Map<string, {name: string, value: number, doc: string}[]>} */
  const enums = new Map();
  for (const m of text.matchAll(/^enum (\w+)\n[\s\S]*?\{\n([\s\S]*?)\n\};/gm)) {
    const members = [...m[2].matchAll(/(\/\*[\s\S]*?\*\/)\s*(\w+) = (\d+),/g)].map((e) => ({
      name: e[2],
      value: Number(e[3]),
      doc: docText(e[1]),
    }));
    enums.set(m[1], members);
  }
  const opaque = new Set([...text.matchAll(/^typedef struct (\w+) \1;$/gm)].map((m) => m[1]));
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '');
  /** @type {Map<string, {ret: string, params: {type: string, name: string}[]}>} */
  const functions = new Map();
  for (const m of code.matchAll(/^([A-Za-z_][\w ]*?[\w*])\s*\b(mcpgw_\w+)\(([^)]*)\);/gm)) {
    const params = m[3]
      .split(',')
      .map((p) => p.replace(/\s+/g, ' ').trim())
      .filter((p) => p && p !== 'void')
      .map((p) => {
        const at = p.search(/\w+$/);
        return { type: p.slice(0, at).trim(), name: p.slice(at) };
      });
    functions.set(m[2], { ret: m[1].replace(/\s+/g, ' ').trim(), params });
  }
  return {
    abi: define('MCPGW_ABI_VERSION'),
    version: ['MAJOR', 'MINOR', 'PATCH'].map((p) => define(`MCPGW_VERSION_${p}`)).join('.'),
    enums,
    opaque,
    functions,
  };
}

/**
 * The koffi prototype of a header declaration: an out-parameter (`*_out`) is marked `_Out_`; a
 * non-const `char *` is memory the library allocated (returned, written to an out-parameter, or
 * given back to `mcpgw_string_free`), so it crosses as a pointer (`void *`), never as a decoded
 * string that could not be freed. Nothing else differs from the header.
 */
export function koffiPrototype(name, { ret, params }) {
  const owned = (type) => type.replace(/^char \*/, 'void *');
  /** `TYPE NAME`, written as C is: `char *s`, `int n`. */
  const join = (type, n) => `${type}${type.endsWith('*') ? '' : ' '}${n}`;
  const list = params.map(({ type, name: p }) =>
    join(`${p.endsWith('_out') ? '_Out_ ' : ''}${owned(type)}`, p),
  );
  return `${join(owned(ret), name)}(${list.join(', ') || 'void'})`;
}

/** The members of enum `name` as `{SHORT: value}`, prefix `MCPGW_<NAME>_` removed. */
function members(enums, name) {
  const list = enums.get(name);
  if (!list) throw new Error(`mcpgw.h has no enum ${name}`);
  const prefix = `${name.toUpperCase()}_`;
  return Object.fromEntries(list.map((m) => [m.name.slice(prefix.length), m.value]));
}

/** The error class name of a result code name: NOT_FOUND -> NotFoundError, UPSTREAM_ERROR -> UpstreamError. */
export function className(code) {
  const words = code.toLowerCase().split('_');
  if (words.at(-1) === 'error') words.pop();
  return `${words.map((w) => w[0].toUpperCase() + w.slice(1)).join('')}Error`;
}

const BANNER =
  '// Generated from include/mcpgw.h by scripts/generate.mjs (`npm run generate`): do not edit.';

function ffiModule(h) {
  const names = [...h.functions.keys()].filter((n) => WANTED.test(n)).sort();
  const prototypes = Object.fromEntries(
    names.map((n) => [n, koffiPrototype(n, h.functions.get(n))]),
  );
  const used = names.flatMap((n) => {
    const f = h.functions.get(n);
    return [f.ret, ...f.params.map((p) => p.type)];
  });
  const typeNames = new Set(used.flatMap((t) => t.match(/\bmcpgw_\w+/g) ?? []));
  const opaque = [...typeNames].filter((t) => h.opaque.has(t)).sort();
  const enumTypes = [...typeNames].filter((t) => h.enums.has(t)).sort();
  return `${BANNER}
// The C ABI as this binding declares it to koffi: every prototype is the header's, with
// out-parameters marked \`_Out_\` and the library's own strings (non-const \`char *\`) as \`void *\`.

/** The ABI version of the header (\`MCPGW_ABI_VERSION\`); the library must have the same. */
export const ABI_VERSION = ${h.abi};

/** The version of the header (\`MCPGW_VERSION_*\`). */
export const HEADER_VERSION = ${JSON.stringify(h.version)};

/** \`MCPGW_RESULT_OK\`: success. */
export const RESULT_OK = ${members(h.enums, 'mcpgw_result').OK};

/** \`mcpgw_action_kind\` values. */
export const ACTION_KIND = Object.freeze(${JSON.stringify(members(h.enums, 'mcpgw_action_kind'))});

/** \`mcpgw_stdin_kind\` values. */
export const STDIN_KIND = Object.freeze(${JSON.stringify(members(h.enums, 'mcpgw_stdin_kind'))});

/** Opaque struct types the prototypes use. */
export const OPAQUE_TYPES = ${JSON.stringify(opaque)};

/** Enum types the prototypes use (each a \`uint32_t\` in the ABI). */
export const ENUM_TYPES = ${JSON.stringify(enumTypes)};

/** The koffi prototype of each function, by name. */
export const PROTOTYPES = Object.freeze(${JSON.stringify(prototypes)});
`;
}

function codesModule(h) {
  const codes = h.enums.get('mcpgw_result')?.filter((c) => c.name !== 'MCPGW_RESULT_OK');
  if (!codes) throw new Error('mcpgw.h has no enum mcpgw_result');
  const classes = codes.map(({ name, value, doc }) => {
    const code = name.slice('MCPGW_RESULT_'.length);
    return `/** ${doc} Code \`${code}\` (${value}). */\nexport class ${className(code)} extends McpgwError {}`;
  });
  const table = codes.map(({ name, value }) => {
    const code = name.slice('MCPGW_RESULT_'.length);
    return `  [${JSON.stringify(code)}, { result: ${value}, Class: ${className(code)} }],`;
  });
  return `${BANNER}
// One error class per result code of the header, named after the code.

import { McpgwError } from './mcpgw-error.js';

${classes.join('\n\n')}

/**
 * Each failure code's number and class, by the code's name.
 *
 * @type {ReadonlyMap<string, {result: number, Class: typeof McpgwError}>}
 */
export const CODES = new Map([
${table.join('\n')}
]);
`;
}

/** The files this script writes, with their content, from the header's text. */
export async function generated(headerText = readFileSync(HEADER, 'utf8')) {
  const h = parseHeader(headerText);
  const options = { ...(await prettier.resolveConfig(join(PACKAGE, 'index.js'))), parser: 'babel' };
  return {
    'src/ffi.js': await prettier.format(ffiModule(h), options),
    'src/codes.js': await prettier.format(codesModule(h), options),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [file, text] of Object.entries(await generated())) {
    const path = join(PACKAGE, file);
    let old = '';
    try {
      old = readFileSync(path, 'utf8');
    } catch {
      // Not written yet.
    }
    if (old === text) continue;
    if (check) {
      console.error(`${file} is not what include/mcpgw.h generates: run \`npm run generate\``);
      stale++;
    } else {
      writeFileSync(path, text);
      console.log(`wrote ${file}`);
    }
  }
  process.exit(stale ? 1 : 0);
}
