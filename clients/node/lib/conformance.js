// The conformance middleware (docs/remote-protocol.md) as a MiddlewareService, on the raw protocol.
import * as grpc from '@grpc/grpc-js';

import { fromStruct, toStruct } from './struct.js';
import { assistantText } from './token-counter.js';

const KEY = 'conformance';
const PROMPT_SUFFIX = ' [conformance]';
const MARKER = 'conformance:';
const HOOK_NAMES = {
  HOOK_ON_REPLY: 'on_reply',
  HOOK_ON_REASONING: 'on_reasoning',
  HOOK_ON_MODEL_CALL: 'on_model_call',
  HOOK_ON_ACTING: 'on_acting',
  HOOK_ON_CHECK_PERMISSION: 'on_check_permission',
  HOOK_ON_COMPRESS_CONTEXT: 'on_compress_context',
};
const PRE_ONLY = new Set(['HOOK_ON_COMPRESS_CONTEXT']);
const READ_ONLY = new Set(['HOOK_ON_REPLY']);
const OVERRIDES = {
  HOOK_ON_REASONING: { reasoning: { tool_choice: 'none' } },
  HOOK_ON_MODEL_CALL: { model_call: { tool_choice: 'none' } },
  HOOK_ON_ACTING: { acting: { arguments: JSON.stringify({ text: 'overridden' }) } },
};

/** What Describe answers: every hook, the modes and subscriptions the spec fixes, one tool. */
export const DESCRIPTION = Object.freeze({
  protocol_version: 1,
  middleware_key: KEY,
  needs_context: true,
  failure_mode: 'FAILURE_MODE_CLOSED',
  hooks: [
    { hook: 'HOOK_ON_REPLY', mode: 'HOOK_MODE_INTERCEPT', read_only_subscriptions: ['*'] },
    { hook: 'HOOK_ON_REASONING', mode: 'HOOK_MODE_INTERCEPT', subscriptions: ['*'] },
    { hook: 'HOOK_ON_MODEL_CALL', mode: 'HOOK_MODE_INTERCEPT', subscriptions: ['chunk'] },
    { hook: 'HOOK_ON_ACTING', mode: 'HOOK_MODE_INTERCEPT', subscriptions: ['*'] },
    { hook: 'HOOK_ON_CHECK_PERMISSION', mode: 'HOOK_MODE_INTERCEPT' },
    { hook: 'HOOK_ON_COMPRESS_CONTEXT', mode: 'HOOK_MODE_PRE_ONLY' },
    { hook: 'HOOK_ON_SYSTEM_PROMPT', mode: 'HOOK_MODE_INTERCEPT' },
    { hook: 'HOOK_AFTER_AGENT', mode: 'HOOK_MODE_INTERCEPT' },
  ],
  tools: [
    {
      name: 'conformance_echo',
      description: 'Stream the text back; the text "fail" makes the tool fail.',
      parameters: toStruct({
        type: 'object',
        properties: { text: { type: 'string' } },
        required: ['text'],
      }),
      read_only: true,
    },
  ],
});

/** The marker word of an invocation: the last context message's text after "conformance:". */
function markerOf(context) {
  const last = context?.length ? assistantText(context[context.length - 1]) : '';
  return last.startsWith(MARKER) ? last.slice(MARKER.length) : '';
}

function custom(replyId, name) {
  return { emit: { reply_id: replyId, custom: { name } } };
}

function failure(hook) {
  const name = HOOK_NAMES[hook] ?? hook;
  return { done: { error: { reason: 'CONFORMANCE_ERROR', message: 'conformance error', metadata: { hook: name } } } };
}

function shortCircuit(hook, kind) {
  if (hook === 'HOOK_ON_MODEL_CALL') {
    const text = 'short-circuited';
    const message =
      kind === 'MESSAGE_KIND_AGENTIC'
        ? { agentic: { role: 'ROLE_ASSISTANT', blocks: [{ text: { text } }] } }
        : { flat: { role: 'ROLE_ASSISTANT', content: text } };
    return { done: { model_response: { message } } };
  }
  if (hook === 'HOOK_ON_CHECK_PERMISSION') {
    return { done: { permission: { behavior: 'PERMISSION_BEHAVIOR_DENY', reason: 'short-circuited' } } };
  }
  return { done: {} };
}

/** One Intercept stream: invocations keyed by id, each answered as the spec says. */
class ConformanceSession {
  constructor(call, log) {
    this.call = call;
    this.log = log;
    this.open = new Map();
    call.on('data', (request) => this.receive(request));
    call.on('end', () => {
      this.open.clear();
      if (!call.writableEnded) call.end();
    });
    call.on('cancelled', () => this.open.clear());
    call.on('error', () => this.open.clear());
  }

  send(id, message) {
    if (!this.call.destroyed && !this.call.writableEnded) this.call.write({ invocation_id: id, ...message });
  }

  receive(request) {
    const id = String(request?.invocation_id ?? '');
    try {
      if (request.message === 'invocation') this.start(id, request.invocation);
      else if (request.message === 'item') this.item(id, request.item);
      else if (request.message === 'outcome') this.outcome(id, request.outcome);
      else if (request.message === 'cancel') this.open.delete(id);
    } catch (err) {
      this.log(`invocation ${id} failed: ${err?.stack ?? err}`);
      this.open.delete(id);
    }
  }

  start(id, inv) {
    const hook = inv.hook;
    const marker = markerOf(inv.context);
    const replyId = String(inv.reply_id ?? '');
    const entry = { hook, marker, replyId };
    if (marker === 'sleep') {
      this.open.set(id, entry); // answers nothing until cancelled
      return;
    }
    if (marker === 'error') return this.send(id, failure(hook));
    if (marker === 'state') {
      const state = fromStruct(inv.state);
      const count = typeof state.count === 'number' ? state.count : 0;
      this.send(id, { mutate: { state: toStruct({ ...state, count: count + 1 }) } });
    }
    if (marker === 'forget' && inv.context?.length) {
      this.send(id, { mutate: { remove_message_ids: [inv.context[0].id] } });
    }
    if (marker === 'emit') this.send(id, custom(replyId, 'conformance.pre'));
    if (marker === 'short-circuit') {
      this.send(id, custom(replyId, 'conformance.short_circuit'));
      return this.send(id, shortCircuit(hook, inv.kind));
    }
    if (marker === 'final' && (hook === 'HOOK_ON_REASONING' || hook === 'HOOK_ON_ACTING')) {
      return this.send(id, { call_next: { final: true } });
    }
    let callNext = {};
    if (marker === 'override') callNext = OVERRIDES[hook] ?? {};
    if (marker === 'model' && hook === 'HOOK_ON_MODEL_CALL') callNext = { model_call: { model: 'fast' } };
    this.send(id, { call_next: callNext });
    if (!PRE_ONLY.has(hook)) this.open.set(id, entry);
  }

  item(id, item) {
    const entry = this.open.get(id);
    if (entry === undefined || item?.item !== 'event' || READ_ONLY.has(entry.hook)) return;
    this.send(id, { verdict: { drop: entry.marker === 'drop' } });
  }

  outcome(id, outcome) {
    const entry = this.open.get(id);
    if (entry === undefined || outcome?.result === 'stream_start') return;
    this.open.delete(id);
    if (entry.marker === 'error-after') return this.send(id, failure(entry.hook));
    if (entry.marker === 'emit') this.send(id, custom(entry.replyId, 'conformance.post'));
    this.send(id, { done: {} });
  }
}

/**
 * The conformance MiddlewareService handlers, to pass to `createServer`.
 *
 * @param {(message: string) => void} log Where to report anomalies (stderr).
 * @returns {object} Handlers named after the service's RPCs.
 */
export function conformanceService(log) {
  return {
    Describe(unusedCall, callback) {
      callback(null, DESCRIPTION);
    },
    Intercept(call) {
      new ConformanceSession(call, log);
    },
    TransformSystemPrompt(call, callback) {
      callback(null, { prompt: `${call.request?.prompt ?? ''}${PROMPT_SUFFIX}` });
    },
    AfterAgent(call, callback) {
      if (!call.request?.final_message?.kind) {
        callback({ code: grpc.status.INVALID_ARGUMENT, details: 'final_message: a message needs its kind set' });
        return;
      }
      const state = { ...fromStruct(call.request.state), after: true };
      callback(null, { mutation: { state: toStruct(state) } });
    },
    CallTool(call) {
      const name = String(call.request?.name ?? '');
      if (name !== 'conformance_echo') {
        call.emit('error', { code: grpc.status.NOT_FOUND, details: `this sidecar has no tool "${name}"` });
        return;
      }
      let text;
      try {
        text = JSON.parse(call.request.arguments || '{}').text;
      } catch {
        call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'arguments are not JSON' });
        return;
      }
      if (typeof text !== 'string') {
        call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'arguments.text: a string is required' });
        return;
      }
      if (text === 'fail') {
        call.write({ text: 'Error: asked to fail' });
        call.write({ end: 'TOOL_RESULT_STATE_ERROR' });
      } else {
        call.write({ text: String(text ?? '') });
        call.write({ end: 'TOOL_RESULT_STATE_SUCCESS' });
      }
      call.end();
    },
  };
}
