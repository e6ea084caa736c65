#!/usr/bin/env node
// The reference conformance middleware in Node.js: `hookmesh conformance --sidecar ADDR` checks it.
import { runSidecar } from './lib/main.js';
import { conformanceService } from './lib/conformance.js';

const USAGE = `usage: node conformance.js [--listen ADDRESS] [--token-env NAME] [--grace SECONDS] [--observe]

Serves hookmesh.v1.MiddlewareService as the conformance middleware of docs/remote-protocol.md.
  --listen ADDRESS    HOST:PORT (port 0 picks a free one) or unix:///PATH (default 127.0.0.1:7001)
  --token-env NAME    require "authorization: Bearer <token>", the token read from env var NAME
  --grace SECONDS     on SIGTERM/SIGINT, wait this long for open calls (default 5)
  --observe           describe every onion hook in HOOK_MODE_OBSERVE (the kit's observe rules)
Prints "listening on ADDRESS" once bound; stops on SIGTERM/SIGINT.`;

await runSidecar('conformance.js', USAGE, (log, flags) => conformanceService(flags), ['observe']);
