// The Node sidecar SDK: a middleware object with only the hooks it needs; this module runs
// the remote protocol of docs/remote-protocol.md (multiplexed stream, ids per stream,
// deadlines, cancel, drain, the token via runSidecar, errors as the protocol wants them).
import * as grpc from '@grpc/grpc-js';

import { fromStruct, toStruct } from './struct.js';

export { fromStruct, toStruct, toValue } from './struct.js';

const HOOKS = {
  onReply: ['HOOK_ON_REPLY', 'reply'],
  onReasoning: ['HOOK_ON_REASONING', 'reasoning'],
  onModelCall: ['HOOK_ON_MODEL_CALL', 'model_call'],
  onActing: ['HOOK_ON_ACTING', 'acting'],
  onCheckPermission: ['HOOK_ON_CHECK_PERMISSION', 'check_permission'],
  onCompressContext: ['HOOK_ON_COMPRESS_CONTEXT', 'compress_context'],
  transformSystemPrompt: ['HOOK_ON_SYSTEM_PROMPT', null],
  afterAgent: ['HOOK_AFTER_AGENT', null],
};
const EVENT_HOOKS = new Set(['HOOK_ON_REPLY', 'HOOK_ON_REASONING', 'HOOK_ON_ACTING']);

/** A middleware's own failure: the client sees its reason and metadata. */
export class MiddlewareError extends Error {
  constructor(reason, message, metadata = {}) {
    super(message);
    this.reason = reason;
    this.metadata = metadata;
  }
}

/** The downstream failed; returning (or throwing) it ends the hook with a plain done. */
export class DownstreamError extends Error {
  constructor(error) {
    super(error?.message ?? 'the downstream failed');
    this.error = error;
  }
}

class Cancelled extends Error {}

/** What `next` rejects with once `inv.end()` ended the invocation: let it propagate. */
export class InvocationEnded extends Error {
  constructor() {
    super('the hook ended the invocation with end()');
  }
}

function replyError(err) {
  if (err instanceof MiddlewareError) return { reason: err.reason, message: err.message, metadata: err.metadata };
  return { reason: 'MIDDLEWARE_FAILED', message: String(err?.message ?? err) };
}

/** The Describe answer for `mw`: its key, the hooks it implements, their options, its tools. */
export function describe(mw) {
  const hooks = [];
  for (const [method, [hook]] of Object.entries(HOOKS)) {
    if (typeof mw[method] !== 'function') continue;
    const o = mw.hooks?.[method] ?? {};
    hooks.push({
      hook,
      mode: o.mode ?? 'HOOK_MODE_INTERCEPT',
      subscriptions: o.subscriptions ?? [],
      read_only_subscriptions: o.readOnly ?? [],
    });
  }
  return {
    protocol_version: 1,
    middleware_key: mw.key,
    needs_context: Boolean(mw.needsContext),
    failure_mode: mw.failOpen ? 'FAILURE_MODE_OPEN' : 'FAILURE_MODE_CLOSED',
    hooks,
    tools: (mw.tools ?? []).map((t) => ({ ...t.spec, parameters: toStruct(t.spec.parameters ?? {}) })),
    max_message_bytes: String(4 * 1024 * 1024),
  };
}

/** One invocation: what the agent sent (`invocation`), and the ways to answer. */
class Invocation {
  constructor(session, id, invocation, spec) {
    Object.assign(this, { session, id, invocation, spec, queue: [], waiter: null, ended: false, finished: false, passing: false });
    this.state = fromStruct(invocation.state);
    this.controller = new AbortController();
    this.heard = Date.now();
  }

  /** Aborted when the agent cancels the invocation or the stream ends. */
  get signal() {
    return this.controller.signal;
  }

  /** When the agent gives up waiting for the answer it expects now (ms since the epoch). */
  get deadline() {
    const t = this.invocation.message_timeout;
    const ms = t ? Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6 : 5000;
    return this.heard + ms;
  }

  get observed() {
    return this.spec.mode === 'HOOK_MODE_OBSERVE';
  }

  answer(message) {
    if (this.ended || this.finished || this.observed) return;
    this.session.send(this.id, message);
  }

  finish(message) {
    if (message) this.answer(message);
    this.finished = true;
  }

  /** Yields an event upstream (an empty reply_id is the invocation's). */
  emit(event) {
    this.answer({ emit: event });
  }

  /** A StateMutation, applied when it arrives. */
  mutate(mutation) {
    this.answer({ mutate: mutation });
  }

  /** Replaces the whole state slice (send every key you keep). */
  setState(state) {
    this.state = state;
    this.mutate({ state: toStruct(state) });
  }

  /**
   * Ends the invocation now with `done` (`{}`: a plain done), typically while the downstream
   * runs and a deadline of the hook's own passed: the agent stops the downstream and takes
   * this done as the hook's answer. `next` then rejects with InvocationEnded and whatever
   * the agent sent meanwhile is ignored. A no-op once the invocation ended.
   */
  end(done = {}) {
    this.finish({ done });
    this.waiter?.();
  }

  /**
   * Says the event hook needs nothing more from its downstream: call it in `onEvent`. The
   * event's verdict (or, called elsewhere, the next verdict) is sent as `verdict {final:
   * true}` (dropped if `onEvent` returns true), `next` resolves and the agent passes the
   * rest of the downstream without a round trip; nothing more is sent for the invocation
   * (no done, no emit). A no-op in observe mode and once the invocation ended.
   */
  passRest() {
    this.passing = true;
  }

  put(request) {
    this.queue.push(request);
    this.waiter?.();
  }

  cancel() {
    this.ended = true;
    this.controller.abort();
    this.waiter?.();
  }

  async recv() {
    while (this.queue.length === 0 || this.finished) {
      if (this.ended) throw new Cancelled();
      if (this.finished) throw new InvocationEnded(); // end() ran: the rest is ignored
      await new Promise((resolve) => (this.waiter = resolve));
      this.waiter = null;
    }
    const request = this.queue.shift();
    this.heard = Date.now();
    const state = request.item?.state ?? request.outcome?.state;
    if (state) this.state = fromStruct(state);
    return request;
  }

  /** Sends call_next; false when nothing more comes (pre_only, final). */
  start(callNext = {}) {
    if (this.observed) return true;
    if (this.spec.mode === 'HOOK_MODE_PRE_ONLY' || callNext.final) {
      this.finish({ call_next: callNext });
      return false;
    }
    this.answer({ call_next: callNext });
    return true;
  }

  /** Items until the outcome; `onItem` returns the verdict for the ones the hook waits on. */
  async downstream(onItem) {
    for (;;) {
      const request = await this.recv();
      if (request.message === 'item') {
        const verdict = await onItem(request.item);
        if (verdict && this.passing) {
          this.finish({ verdict: { ...verdict, final: true } });
          return null; // the agent sends nothing more for this invocation
        }
        if (verdict) this.answer({ verdict });
      } else if (request.message === 'outcome') {
        if (request.outcome.result === 'error') throw new DownstreamError(request.outcome.error);
        return request.outcome;
      }
    }
  }
}

function subscribed(names, name) {
  return names.includes('*') || names.includes(name);
}

async function runHook(mw, method, inv) {
  const hook = inv.invocation.hook;
  const args = inv.invocation[HOOKS[method][1]];
  if (EVENT_HOOKS.has(hook)) {
    const next = async (callNext, onEvent) => {
      if (!inv.start(callNext ?? {})) return;
      await inv.downstream(async (item) => {
        if (item.item !== 'event') return null;
        const drop = Boolean(await onEvent?.(item.event));
        for (const more of item.more_events ?? []) await onEvent?.(more);
        if (inv.observed || !subscribed(inv.spec.subscriptions, item.event.event)) return null;
        return { drop };
      });
    };
    await mw[method](inv, args, next);
    return { done: {} };
  }
  let downstream;
  const chunks = (onChunk) => async (item) => {
    if (item.item === 'chunk') await onChunk?.(item.chunk);
    return null;
  };
  if (hook === 'HOOK_ON_MODEL_CALL') {
    const next = async (overrides, onChunk) => {
      if (!inv.start(overrides ? { model_call: overrides } : {})) return null;
      const outcome = await inv.downstream(chunks(onChunk));
      if (outcome.result === 'stream_start') {
        await inv.downstream(chunks(onChunk));
        return null;
      }
      downstream = outcome.model_response;
      return downstream;
    };
    const response = await mw[method](inv, args, next);
    return { done: response && response !== downstream ? { model_response: response } : {} };
  }
  if (hook === 'HOOK_ON_CHECK_PERMISSION') {
    const next = async () => {
      if (!inv.start({})) return null;
      downstream = (await inv.downstream(chunks())).permission;
      return downstream;
    };
    const decision = await mw[method](inv, args, next);
    return { done: decision && decision !== downstream ? { permission: decision } : {} };
  }
  const next = async () => {
    if (inv.start({})) await inv.downstream(chunks());
  };
  await mw[method](inv, args, next);
  return { done: {} };
}

/** One Intercept stream: an invocation per id (ids belong to this stream). */
class Session {
  constructor(service, call) {
    Object.assign(this, { service, call, open: new Map() });
    call.on('data', (request) => this.receive(request));
    const over = () => {
      for (const inv of this.open.values()) inv.cancel();
      this.open.clear();
      this.service.sessions.delete(this);
      this.service.idle();
    };
    call.on('end', () => {
      over();
      if (!call.writableEnded) call.end();
    });
    call.on('cancelled', over);
    call.on('error', over);
    service.sessions.add(this);
  }

  send(id, message) {
    if (!this.call.destroyed && !this.call.writableEnded) this.call.write({ invocation_id: id, ...message });
  }

  /** Ends the stream with OK once no invocation is open on it (the drain). */
  endIfIdle() {
    if (this.service.draining && this.open.size === 0 && !this.call.writableEnded) {
      this.call.end();
      this.service.sessions.delete(this);
      this.service.idle();
    }
  }

  /** The grace period is over: its open invocations are cancelled and the stream ends OK. */
  cut() {
    for (const inv of this.open.values()) inv.cancel();
    this.open.clear();
    if (!this.call.writableEnded) this.call.end();
  }

  receive(request) {
    const id = String(request.invocation_id ?? '');
    if (request.message === 'invocation') return this.start(id, request.invocation);
    const inv = this.open.get(id);
    if (!inv) return; // no such invocation on this stream (or it ended): ignored
    if (request.message === 'cancel') {
      inv.cancel();
      this.open.delete(id);
      this.endIfIdle();
    } else inv.put(request);
  }

  start(id, invocation) {
    const method = Object.keys(HOOKS).find((m) => HOOKS[m][0] === invocation.hook);
    const spec = this.service.description.hooks.find((h) => h.hook === invocation.hook);
    if (!spec || this.open.size >= 4096) {
      const reason = spec ? 'TOO_MANY_INVOCATIONS' : 'HOOK_NOT_SERVED';
      return this.send(id, { done: { error: { reason, message: `${invocation.hook}: not served now` } } });
    }
    const inv = new Invocation(this, id, invocation, spec);
    this.open.set(id, inv);
    runHook(this.service.mw, method, inv)
      .catch((err) => {
        if (err instanceof Cancelled || err instanceof InvocationEnded) return null;
        if (err instanceof DownstreamError) return { done: {} };
        return { done: { error: replyError(err) } };
      })
      .then((done) => {
        if (done) inv.finish(done);
        if (this.open.get(id) === inv) this.open.delete(id);
        this.endIfIdle();
      });
  }
}

/** ABORTED with a google.rpc.Status carrying an ErrorInfo: the middleware's own failure. */
function aborted(err) {
  const e = replyError(err);
  const metadata = new grpc.Metadata();
  metadata.set('grpc-status-details-bin', encodeStatus(grpc.status.ABORTED, e));
  return { code: grpc.status.ABORTED, details: e.message, metadata };
}

// google.rpc.Status{code, message, details: [Any{ErrorInfo}]}, encoded by hand (three messages).
function encodeStatus(code, { reason, message, metadata = {} }) {
  const field = (n, bytes) => Buffer.concat([varint((n << 3) | 2), varint(bytes.length), bytes]);
  const str = (s) => Buffer.from(String(s));
  const entries = Object.entries(metadata).map(([k, v]) => field(3, Buffer.concat([field(1, str(k)), field(2, str(v))])));
  const info = Buffer.concat([field(1, str(reason)), field(2, str('hookmesh')), ...entries]);
  const any = Buffer.concat([field(1, str('type.googleapis.com/google.rpc.ErrorInfo')), field(2, info)]);
  return Buffer.concat([varint(1 << 3), varint(code), field(2, str(message)), field(3, any)]);
}

function varint(n) {
  const out = [];
  for (let v = n >>> 0; ; v >>>= 7) {
    if (v < 0x80) {
      out.push(v);
      return Buffer.from(out);
    }
    out.push((v & 0x7f) | 0x80);
  }
}

/**
 * The MiddlewareService handlers serving `mw`, for `createServer` (or `runSidecar`); their
 * `drain(graceMs)` ends each stream once idle, all of them at the end of the grace.
 */
export function middlewareService(mw) {
  const description = describe(mw);
  const tools = new Map((mw.tools ?? []).map((t) => [t.spec.name, t]));
  let drained = () => {};
  const service = {
    mw,
    description,
    sessions: new Set(),
    draining: false,
    idle() {
      if (this.draining && this.sessions.size === 0) drained();
    },
    Describe(unusedCall, callback) {
      callback(null, description);
    },
    Intercept(call) {
      new Session(service, call);
    },
    TransformSystemPrompt(call, callback) {
      if (!mw.transformSystemPrompt) return callback({ code: grpc.status.UNIMPLEMENTED, details: 'no on_system_prompt hook' });
      Promise.resolve()
        .then(() => mw.transformSystemPrompt(call.request))
        .then(
        (answer) => callback(null, typeof answer === 'string' ? { prompt: answer } : answer),
        (err) => callback(aborted(err)),
      );
    },
    AfterAgent(call, callback) {
      if (!mw.afterAgent) return callback({ code: grpc.status.UNIMPLEMENTED, details: 'no after_agent hook' });
      Promise.resolve()
        .then(() => mw.afterAgent(call.request))
        .then(
        (mutation) => callback(null, { mutation: mutation ?? {} }),
        (err) =>
          callback(err?.reason === 'INVALID_ARGUMENT' ? { code: grpc.status.INVALID_ARGUMENT, details: err.message } : aborted(err)),
      );
    },
    CallTool(call) {
      const tool = tools.get(String(call.request.name ?? ''));
      if (!tool) return call.emit('error', { code: grpc.status.NOT_FOUND, details: `this sidecar has no tool "${call.request.name}"` });
      const out = { text: (text) => call.write({ text }), emit: (event) => call.write({ event }), mutate: (m) => call.write({ mutate: m }) };
      Promise.resolve()
        .then(() => tool.run(call.request, out))
        .then(
          () => call.write({ end: 'TOOL_RESULT_STATE_SUCCESS' }),
          (err) => {
            if (err?.reason === 'INVALID_ARGUMENTS') throw err;
            call.write({ text: `Error: ${err?.message ?? err}` });
            call.write({ end: 'TOOL_RESULT_STATE_ERROR' });
          },
        )
        .then(
          () => call.end(),
          (err) => call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: err.message }),
        );
    },
    drain(graceMs) {
      service.draining = true;
      for (const session of [...service.sessions]) session.endIfIdle();
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          for (const session of service.sessions) session.cut();
          resolve();
        }, graceMs);
        drained = () => {
          clearTimeout(timer);
          resolve();
        };
        service.idle();
      });
    },
  };
  return service;
}

/** A tool's bad arguments: the call fails INVALID_ARGUMENT. */
export function invalidArguments(message) {
  return new MiddlewareError('INVALID_ARGUMENTS', message);
}

/**
 * Serves `mw` as a program: --listen, --token-env, --grace; prints "listening on ADDR";
 * drains on SIGTERM/SIGINT.
 */
export async function main(mw, script = 'sidecar') {
  const { runSidecar } = await import('./main.js');
  const usage = `usage: node ${script} [--listen ADDRESS] [--token-env NAME] [--grace SECONDS]`;
  await runSidecar(script, usage, () => middlewareService(mw));
}
