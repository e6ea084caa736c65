#!/usr/bin/env node
// A sidecar on the SDK for the tests: watches replies and model calls in observe mode and
// tries to answer anyway (state, emits, an early end): the SDK must send none of it.
import { main } from '../lib/sdk.js';

await main(
  {
    key: 'observer',
    hooks: {
      onReply: { mode: 'HOOK_MODE_OBSERVE', subscriptions: ['*'] },
      onModelCall: { mode: 'HOOK_MODE_OBSERVE', subscriptions: ['chunk'] },
    },
    async onReply(inv, args, next) {
      inv.setState({ seen: 0 });
      await next({}, (event) => {
        inv.emit({ custom: { name: `saw ${event.event}` } });
        return true; // a drop an observer cannot make
      });
    },
    async onModelCall(inv, args, next) {
      inv.emit({ custom: { name: 'model call' } });
      await next(undefined, () => inv.end({ error: { reason: 'OBSERVER', message: 'cannot stop' } }));
      return { message: { flat: { role: 'ROLE_ASSISTANT', content: 'replaced' } } };
    },
  },
  'test/observer.js',
);
