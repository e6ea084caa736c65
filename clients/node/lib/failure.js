// A failed call as the one `error: …` line chat.js prints and its exit status: the same words
// as `hookmesh` (src/hookmesh/cli/_errors.py), each with a way out.
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';

/** Exit status of a usage error: a flag's value the command or the server refused. */
export const EXIT_USAGE = 2;
/** Exit status of work that failed. */
export const EXIT_FAILURE = 1;

/**
 * What to do next, by the error's stable reason: the Python CLI's table, for the reasons an
 * agent service gives (tests/unit/test_error_lines.py keeps the two in step).
 */
const WAYS_OUT = {
  SESSION_NOT_FOUND: "see 'hookmesh sessions list', or start one with --new-session",
  SESSION_EXISTS: 'drop --new-session to continue it',
  REPLY_NOT_FOUND: "see 'hookmesh sessions list'",
  SESSION_BUSY: "wait for its reply, or follow it with 'hookmesh chat --attach SESSION'",
  REPLY_PAUSED: "answer it first: 'hookmesh chat --attach SESSION' asks again",
  CREDENTIALS_REQUIRED: 'pass a token with --token-env NAME',
  INVALID_TOKEN: 'pass a token the service accepts with --token-env NAME',
  STORE_UNAVAILABLE: "the service's database is down; try again once it is back",
};

const OWN_SERVICES = ['grpc.health.', 'grpc.reflection.'];
const REFLECTION_TIMEOUT_MS = 3000;
const REFLECTION_METHOD = '/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo';

// NOTE(node): the two fields of grpc.reflection.v1alpha the lookup needs, copied from the
// public reflection.proto (same names and numbers), so no download is needed.
const REFLECTION_PROTO = `
syntax = "proto3";
package grpc.reflection.v1alpha;
message ServerReflectionRequest { string host = 1; string list_services = 7; }
message ServiceResponse { string name = 1; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ServerReflectionResponse { ListServiceResponse list_services_response = 6; }
`;

let reflection;

function reflectionTypes() {
  if (reflection === undefined) {
    const root = protobuf.parse(REFLECTION_PROTO, { keepCase: true }).root;
    reflection = {
      Request: root.lookupType('grpc.reflection.v1alpha.ServerReflectionRequest'),
      Response: root.lookupType('grpc.reflection.v1alpha.ServerReflectionResponse'),
    };
  }
  return reflection;
}

/**
 * The services the server at `address` says it has (its reflection), short names; empty when
 * it does not say.
 */
function servicesAt(address, credentials) {
  const { Request, Response } = reflectionTypes();
  const client = new grpc.Client(address, credentials ?? grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    const finish = (names) => {
      client.close();
      resolve(names);
    };
    const call = client.makeBidiStreamRequest(
      REFLECTION_METHOD,
      (message) => Buffer.from(Request.encode(Request.create(message)).finish()),
      (bytes) => Response.toObject(Response.decode(bytes), { arrays: true }),
      new grpc.Metadata(),
      { deadline: Date.now() + REFLECTION_TIMEOUT_MS },
    );
    call.on('data', (response) => {
      const names = (response.list_services_response?.service ?? []).map((s) => s.name);
      call.cancel();
      const theirs = names.filter((n) => !OWN_SERVICES.some((p) => n.startsWith(p)));
      finish(theirs.map((n) => n.split('.').pop()));
    });
    call.on('error', () => finish([]));
    call.write({ list_services: '' });
    call.end();
  });
}

/** The message with each field violation it does not already say (once, one line). */
function withViolations(message, violations) {
  const extra = violations
    .map((v) => `${v.field}: ${v.description}`)
    .filter((line) => !message.includes(line));
  return [message, ...extra].join('; ');
}

async function words(err, callee) {
  const { address } = callee;
  const details = err.details ?? '';
  if (err.code === grpc.status.UNAVAILABLE && !err.reason) {
    const said = details.toLowerCase();
    if (said.includes('connection refused') || said.includes('econnrefused')) {
      return `nothing listens on ${address}: start it with 'hookmesh up' or pass --target`;
    }
    if (said.includes('socket closed') || said.includes('ssl') || said.includes('handshake')) {
      return (
        `${address} closed the connection: is it a hookmesh ${callee.service} service, and ` +
        `does it want TLS (--tls-ca)? 'hookmesh status --target ${address}' checks`
      );
    }
    if (said.includes('dns') || said.includes('resolve')) {
      return `cannot resolve the host of ${address}: check --target`;
    }
    return `${address} is unavailable (${details}): 'hookmesh status' checks`;
  }
  if (err.code === grpc.status.UNIMPLEMENTED && !err.reason) {
    const answers = await servicesAt(address, callee.credentials);
    const what = answers.length
      ? `it answers ${answers.join(', ')}`
      : 'it does not know the call';
    return `${address} is not an ${callee.service} service (${what})`;
  }
  if (err.code === grpc.status.DEADLINE_EXCEEDED && !err.reason) {
    const within = callee.timeoutS ? ` within ${callee.timeoutS} s` : ' in time';
    return `no answer from ${address}${within}: raise --timeout, or see 'hookmesh status'`;
  }
  let line = withViolations(details, err.violations ?? []);
  const wayOut = WAYS_OUT[err.reason];
  if (wayOut) line = `${line}: ${wayOut}`;
  return err.reason ? `${line} [${err.reason}]` : `${err.codeName}: ${line}`;
}

/**
 * The `error: …` line for a failed call and the exit status (2 when the server refused a
 * value the command was given, else 1), worded as the Python CLI words it.
 *
 * @param {import('./agent-client.js').AgentClientError} err The failure.
 * @param {{address: string, service: string, timeoutS?: number,
 *   credentials?: grpc.ChannelCredentials}} callee What the command talks to (`service` is
 *   `agent`: chat.js talks to nothing else).
 * @returns {Promise<{line: string, code: number}>} The line and the status.
 */
export async function failureLine(err, callee) {
  const code = err.code === grpc.status.INVALID_ARGUMENT ? EXIT_USAGE : EXIT_FAILURE;
  return { line: `error: ${await words(err, callee)}`, code };
}
