#!/usr/bin/env node
// hookmesh sidecar in Node.js: serves the node-token-counter middleware over gRPC.
import { runSidecar } from './lib/main.js';
import { tokenCounterService } from './lib/token-counter.js';

const USAGE = `usage: node sidecar.js [--listen HOST:PORT] [--token-env NAME] [--grace SECONDS]

Serves hookmesh.v1.MiddlewareService (middleware "node-token-counter").
  --listen ADDRESS    HOST:PORT (port 0 picks a free one) or unix:///PATH (default 127.0.0.1:7001)
  --token-env NAME    require "authorization: Bearer <token>", the token read from env var NAME
  --grace SECONDS     on SIGTERM/SIGINT, wait this long for open calls (default 5)
Prints "listening on ADDRESS" once bound; stops on SIGTERM/SIGINT.`;

await runSidecar('sidecar.js', USAGE, tokenCounterService);
