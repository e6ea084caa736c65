#!/usr/bin/env node
// hookmesh sidecar in Node.js: serves the node-token-counter middleware over gRPC.
import process from 'node:process';
import { parseArgs } from 'node:util';

import { createServer, stopServer } from './lib/server.js';

const USAGE = `usage: node sidecar.js [--listen HOST:PORT] [--token-env NAME] [--grace SECONDS]

Serves hookmesh.v1.MiddlewareService (middleware "node-token-counter").
  --listen HOST:PORT  address to listen on; port 0 picks a free one (default 127.0.0.1:7001)
  --token-env NAME    require "authorization: Bearer <token>", the token read from env var NAME
  --grace SECONDS     on SIGTERM/SIGINT, wait this long for open calls (default 5)
Prints "listening on HOST:PORT" once bound; stops on SIGTERM/SIGINT.`;

function fail(message) {
  process.stderr.write(`sidecar.js: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function log(message) {
  process.stderr.write(`node-sidecar: ${message}\n`);
}

function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        listen: { type: 'string', default: '127.0.0.1:7001' },
        'token-env': { type: 'string' },
        grace: { type: 'string', default: '5' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (err) {
    fail(err.message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const host = values.listen.slice(0, values.listen.lastIndexOf(':'));
  if (!host || !/^\d+$/.test(values.listen.slice(host.length + 1))) {
    fail(`--listen must look like HOST:PORT, not "${values.listen}"`);
  }
  let token;
  if (values['token-env'] !== undefined) {
    token = process.env[values['token-env']];
    if (!token) fail(`--token-env: environment variable ${values['token-env']} is empty or unset`);
  }
  const grace = Number(values.grace);
  if (!Number.isFinite(grace) || grace < 0) fail(`--grace must be a number of seconds >= 0`);
  return { address: values.listen, host, token, graceMs: grace * 1000 };
}

async function main() {
  const { address, host, token, graceMs } = options();
  let bound;
  try {
    bound = await createServer(address, { token, log });
  } catch (err) {
    log(`cannot listen on ${address}: ${err.message}`);
    process.exit(1);
  }
  process.stdout.write(`listening on ${host}:${bound.port}\n`);
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) {
      bound.server.forceShutdown(); // a second signal: do not wait any more
      return;
    }
    stopping = true;
    log(`${signal}: shutting down (grace ${graceMs / 1000} s)`);
    await stopServer(bound.server, graceMs);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

await main();
