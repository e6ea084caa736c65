#!/usr/bin/env node
// A sidecar on the SDK for the tests: on_reasoning gives each step STEP_MS milliseconds and
// then ends it with inv.end() (the unasked done) while the downstream still runs.
import { main } from '../lib/sdk.js';

const stepMs = Number(process.env.STEP_MS ?? 200);

await main(
  {
    key: 'step-timeout',
    async onReasoning(inv, args, next) {
      const timer = setTimeout(() => {
        inv.emit({ custom: { name: 'step-timeout' } });
        inv.end({ error: { reason: 'STEP_TIMEOUT', message: `the step took over ${stepMs} ms` } });
      }, stepMs);
      try {
        await next({}); // rejects with InvocationEnded once the timer ended the step
      } finally {
        clearTimeout(timer);
      }
    },
  },
  'test/step-timeout.js',
);
