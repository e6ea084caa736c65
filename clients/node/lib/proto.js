// Loads hookmesh.v1 from the repository's .proto files at run time (no generated code).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The repository's protos/ directory: the import root of every hookmesh/v1 file. */
export const PROTO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'protos');

const FILES = ['agent.proto', 'content.proto', 'event.proto', 'message.proto', 'middleware.proto'];
const PATHS = FILES.map((name) => `hookmesh/v1/${name}`);

// NOTE(node): google/protobuf/{struct,timestamp}.proto need no include directory:
// protobufjs (under proto-loader) bundles the well-known types and resolves any import
// ending in "google/protobuf/<name>.proto" to them before it consults includeDirs.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

/**
 * The hookmesh.v1 package as grpc-js service and message constructors.
 *
 * @returns {object} `hookmesh.v1` of grpc.loadPackageDefinition: `MiddlewareService` is the
 *   service definition (`.service`) to pass to `Server.addService`; `AgentService` is the
 *   client constructor (`new AgentService(target, credentials)`).
 */
export function loadHookmesh() {
  return grpc.loadPackageDefinition(definition()).hookmesh.v1;
}

let loaded;

/** The package definition (loaded once): message descriptors by full name. */
function definition() {
  loaded ??= protoLoader.loadSync(PATHS, LOADER_OPTIONS);
  return loaded;
}

/**
 * A decoded message without proto-loader's virtual oneof fields (`{block: 'text', text: …}`
 * becomes `{text: …}`), nested messages included, as the proto3 JSON mapping has it.
 *
 * @param {unknown} value A message object decoded by proto-loader.
 * @param {string} typeName Its type name, e.g. `hookmesh.v1.ToolResultDeltaEvent`.
 * @returns {unknown} The same value without the virtual fields.
 */
export function withoutOneofNames(value, typeName) {
  const type = messageType(typeName);
  if (!type || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) {
    return value;
  }
  const oneofs = new Set((type.oneofDecl ?? []).map((decl) => decl.name));
  const out = {};
  for (const [key, item] of Object.entries(value)) {
    if (oneofs.has(key) && typeof item === 'string') continue;
    const child = type.field.find((f) => f.name === key)?.typeName;
    out[key] = Array.isArray(item)
      ? item.map((x) => withoutOneofNames(x, child))
      : withoutOneofNames(item, child);
  }
  return out;
}

/**
 * The type name of an AgentEvent arm, e.g. `text_block_delta` → `TextBlockDeltaEvent`.
 *
 * @param {string} arm The oneof arm's field name.
 * @returns {string | undefined} The type name, when the arm exists.
 */
export function eventArmType(arm) {
  return messageType('hookmesh.v1.AgentEvent').field.find((f) => f.name === arm)?.typeName;
}

/** A message descriptor by type name, full (`hookmesh.v1.X`) or as fields name it (`X`). */
function messageType(typeName) {
  if (!typeName) return undefined;
  const name = typeName.replace(/^\./, '');
  const found = definition()[name] ?? definition()[`hookmesh.v1.${name}`];
  return found?.type;
}
