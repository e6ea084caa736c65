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
  const definition = protoLoader.loadSync(PATHS, LOADER_OPTIONS);
  return grpc.loadPackageDefinition(definition).hookmesh.v1;
}
