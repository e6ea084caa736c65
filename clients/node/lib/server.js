// createServer: the gRPC server serving the middleware, with an optional bearer-token check.
import { timingSafeEqual } from 'node:crypto';

import * as grpc from '@grpc/grpc-js';

import { loadHookmesh } from './proto.js';
import { tokenCounterService } from './token-counter.js';

const UNAUTHENTICATED = {
  code: grpc.status.UNAUTHENTICATED,
  details: 'a valid bearer token is required',
};

/** Whether `metadata` carries `authorization: Bearer <token>` (compared in constant time). */
function authorized(metadata, expected) {
  for (const value of metadata.get('authorization')) {
    const given = Buffer.from(String(value));
    if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
  }
  return false;
}

/** Wraps every handler of `service` so calls without the bearer token fail UNAUTHENTICATED. */
function requireToken(definition, handlers, token) {
  const expected = Buffer.from(`Bearer ${token}`);
  const guarded = {};
  for (const [name, method] of Object.entries(definition)) {
    const handler = handlers[name];
    if (method.responseStream) {
      guarded[name] = (call) =>
        authorized(call.metadata, expected) ? handler(call) : call.emit('error', UNAUTHENTICATED);
    } else {
      guarded[name] = (call, callback) =>
        authorized(call.metadata, expected) ? handler(call, callback) : callback(UNAUTHENTICATED);
    }
  }
  return guarded;
}

/**
 * Starts serving hookmesh.v1.MiddlewareService (the node-token-counter middleware by default).
 *
 * @param {string} address `host:port`; port 0 lets the OS pick.
 * @param {{token?: string, log?: (message: string) => void, service?: object}} [options]
 *   `token`: the bearer token callers must send (a secret: never logged); `log`: where
 *   anomalies go; `service`: the handlers to serve (the token counter's by default).
 * @returns {Promise<{server: grpc.Server, port: number}>} The bound server and its port.
 */
export function createServer(address, { token, log = () => {}, service: implementation } = {}) {
  const service = loadHookmesh().MiddlewareService.service;
  let handlers = implementation ?? tokenCounterService(log);
  if (token) handlers = requireToken(service, handlers, token);
  const server = new grpc.Server();
  server.addService(service, handlers);
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => {
      if (err) reject(err);
      else resolve({ server, port });
    });
  });
}

/**
 * Stops `server`: refuses new calls, waits up to `graceMs` for open ones, then cancels them.
 *
 * @param {grpc.Server} server The server.
 * @param {number} graceMs Milliseconds to wait before cancelling open calls.
 * @returns {Promise<void>} Resolves once the server is stopped.
 */
export function stopServer(server, graceMs) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
