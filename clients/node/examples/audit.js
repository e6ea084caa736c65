#!/usr/bin/env node
// An audit middleware: one JSON line per reply event on stdout, and a count before reply_end.
import { main, toValue } from '../lib/sdk.js';

const audit = {
  key: 'audit',
  hooks: { onReply: { subscriptions: ['reply_end'], readOnly: ['*'] } },
  async onReply(inv, args, next) {
    let count = 0;
    await next({}, (event) => {
      const { reply_id: reply, user_id: user } = inv.invocation;
      console.log(JSON.stringify({ event: event.event, reply, user }));
      if (event.event === 'reply_end') {
        inv.emit({ custom: { name: 'audit', value: toValue(count) } });
      }
      count += 1;
      return false; // keep it
    });
  },
};

await main(audit, 'examples/audit.js');
