// The command-line shell every Node sidecar here shares: flags, bind, "listening on", signals.
import process from 'node:process';
import { parseArgs } from 'node:util';

import { createServer, stopServer } from './server.js';

/**
 * Parses --listen/--token-env/--grace, serves `makeService(log)` and prints
 * `listening on ADDRESS` once bound; stops gracefully on SIGTERM/SIGINT.
 *
 * @param {string} script The script's file name, for messages.
 * @param {string} usage The usage text.
 * @param {(log: (message: string) => void, flags: object) => object} makeService Builds the RPC
 *   handlers, given the parsed flags.
 * @param {object} [flags] The script's own boolean flags' names (parsed with the others).
 */
export async function runSidecar(script, usage, makeService, flags = []) {
  const fail = (message) => {
    process.stderr.write(`${script}: ${message}\n${usage}\n`);
    process.exit(2);
  };
  const log = (message) => process.stderr.write(`${script}: ${message}\n`);
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        listen: { type: 'string', default: '127.0.0.1:7001' },
        'token-env': { type: 'string' },
        grace: { type: 'string', default: '5' },
        help: { type: 'boolean', short: 'h', default: false },
        ...Object.fromEntries(flags.map((name) => [name, { type: 'boolean', default: false }])),
      },
    }));
  } catch (err) {
    fail(err.message);
  }
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const address = values.listen;
  const unix = address.startsWith('unix:');
  const host = address.slice(0, address.lastIndexOf(':'));
  if (!unix && (!host || !/^\d+$/.test(address.slice(host.length + 1)))) {
    fail(`--listen must look like HOST:PORT or unix:///PATH, not "${address}"`);
  }
  let token;
  if (values['token-env'] !== undefined) {
    token = process.env[values['token-env']];
    if (!token) fail(`--token-env: environment variable ${values['token-env']} is empty or unset`);
  }
  const grace = Number(values.grace);
  if (!Number.isFinite(grace) || grace < 0) fail('--grace must be a number of seconds >= 0');

  let bound;
  const service = makeService(log, values);
  try {
    bound = await createServer(address, { token, log, service });
  } catch (err) {
    log(`cannot listen on ${address}: ${err.message}`);
    process.exit(1);
  }
  process.stdout.write(`listening on ${unix ? address : `${host}:${bound.port}`}\n`);
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) {
      bound.server.forceShutdown(); // a second signal: do not wait any more
      return;
    }
    stopping = true;
    log(`${signal}: shutting down (grace ${grace} s)`);
    if (service.drain) {
      // The agent never half-closes: each stream ends once idle (or at the grace's end).
      await service.drain(grace * 1000);
      await stopServer(bound.server, 1000);
    } else await stopServer(bound.server, grace * 1000);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
