// Unit tests of inv.passRest() (node --test): the SDK's Intercept handler driven through a
// stand-in for the gRPC call, each answer recorded.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';

import { middlewareService } from '../lib/sdk.js';

/** A duplex call: `send` delivers an agent message; `written` holds the sidecar's answers. */
function fakeCall() {
  const call = new EventEmitter();
  Object.assign(call, { written: [], destroyed: false, writableEnded: false });
  call.write = (message) => call.written.push(message);
  call.end = () => (call.writableEnded = true);
  call.send = (message) => call.emit('data', message);
  return call;
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** The arms answered so far, a final verdict shown as such. */
function arms(call) {
  return call.written.map((m) => {
    const arm = ['call_next', 'verdict', 'done', 'emit', 'mutate'].find((a) => m[a]);
    if (arm !== 'verdict' || !m.verdict.final) return arm;
    return m.verdict.drop ? 'final dropping verdict' : 'final verdict';
  });
}

const delta = () => ({ message: 'item', invocation_id: '1', item: { item: 'event', event: { event: 'text_block_delta', text_block_delta: { delta: 'x' } } } });
const invocation = { message: 'invocation', invocation_id: '1', invocation: { hook: 'HOOK_ON_REASONING', reasoning: {} } };
const outcome = { message: 'outcome', invocation_id: '1', outcome: { result: 'stream_end', stream_end: {} } };

/** Serves an on_reasoning hook whose onEvent is `onEvent` (after it, `then` runs). */
async function serve(onEvent, mode = 'HOOK_MODE_INTERCEPT', then = () => {}) {
  const returned = [];
  const mw = {
    key: 'pass-rest',
    hooks: { onReasoning: { mode, subscriptions: ['*'] } },
    async onReasoning(inv, args, next) {
      returned.push(await next({}, (event) => onEvent(inv, event)));
      then(inv);
    },
  };
  const call = fakeCall();
  middlewareService(mw).Intercept(call);
  call.send(invocation);
  await settle();
  return { call, returned };
}

test('passRest in onEvent answers that item with a final verdict and nothing more', async () => {
  let seen = 0;
  const { call, returned } = await serve(
    (inv) => {
      seen += 1;
      inv.passRest();
      return false;
    },
    'HOOK_MODE_INTERCEPT',
    (inv) => inv.emit({ custom: { name: 'too late' } }),
  );
  call.send(delta());
  call.send(delta());
  call.send(outcome);
  await settle();
  await settle();
  assert.deepEqual(arms(call), ['call_next', 'final verdict']);
  assert.equal(seen, 1);
  assert.deepEqual(returned, [undefined]);
});

test('passRest keeps the drop onEvent asked for', async () => {
  const { call } = await serve((inv) => {
    inv.passRest();
    return true;
  });
  call.send(delta());
  await settle();
  assert.deepEqual(arms(call), ['call_next', 'final dropping verdict']);
});

test('without passRest verdicts are plain and the outcome gets done', async () => {
  const { call } = await serve(() => false);
  call.send(delta());
  call.send(outcome);
  await settle();
  await settle();
  assert.deepEqual(arms(call), ['call_next', 'verdict', 'done']);
});

test('observed, passRest sends nothing', async () => {
  const { call } = await serve((inv) => {
    inv.passRest();
    return false;
  }, 'HOOK_MODE_OBSERVE');
  call.send(delta());
  call.send(outcome);
  await settle();
  await settle();
  assert.deepEqual(arms(call), []);
});
