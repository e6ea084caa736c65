// The node-token-counter middleware as a hookmesh.v1.MiddlewareService implementation.
import * as grpc from '@grpc/grpc-js';

import { fromStruct, toStruct } from './struct.js';

/** Key of the middleware's state slice (middle_context[key][reply_id]). */
export const MIDDLEWARE_KEY = 'node-token-counter';
/** Appended to the system prompt by TransformSystemPrompt. */
export const PROMPT_SUFFIX = ' [node sidecar]';
/** Name of the custom event carrying one model call's token count. */
export const TOKENS_EVENT = 'node.tokens';
/** The only protocol version this sidecar speaks. */
export const PROTOCOL_VERSION = 1;

const SOURCE = `middleware:${MIDDLEWARE_KEY}`;

/** What Describe answers: one intercepted onion hook and one unary hook, no tools. */
export const DESCRIPTION = Object.freeze({
  protocol_version: PROTOCOL_VERSION,
  middleware_key: MIDDLEWARE_KEY,
  hooks: [
    { hook: 'HOOK_ON_MODEL_CALL', mode: 'HOOK_MODE_INTERCEPT', subscriptions: ['chunk'] },
    { hook: 'HOOK_ON_SYSTEM_PROMPT', mode: 'HOOK_MODE_INTERCEPT', subscriptions: [] },
  ],
  needs_context: false,
  tools: [],
  failure_mode: 'FAILURE_MODE_CLOSED',
});

/**
 * Number of whitespace-separated words in `text`.
 *
 * @param {unknown} text Any text; non-strings count as empty.
 * @returns {number} The word count.
 */
export function countWords(text) {
  const trimmed = typeof text === 'string' ? text.trim() : '';
  return trimmed ? trimmed.split(/\s+/u).length : 0;
}

/**
 * The answer text of a Message (flat: content and text parts; agentic: text blocks).
 *
 * @param {object | null | undefined} message A hookmesh.v1.Message as proto-loader decoded it.
 * @returns {string} The text, newline-joined; '' for a missing message.
 */
export function assistantText(message) {
  if (message?.kind === 'flat') {
    const flat = message.flat ?? {};
    const texts = flat.content ? [flat.content] : [];
    for (const part of flat.parts ?? []) if (part?.block === 'text') texts.push(part.text?.text ?? '');
    return texts.join('\n');
  }
  if (message?.kind === 'agentic') {
    const blocks = message.agentic?.blocks ?? [];
    return blocks.filter((b) => b?.block === 'text').map((b) => b.text?.text ?? '').join('\n');
  }
  return '';
}

/** A Usage's output_tokens (an int64 decoded as a string), or null when usage is unset. */
function outputTokens(usage) {
  if (usage === null || usage === undefined) return null;
  const n = Number(usage.output_tokens);
  return Number.isFinite(n) && n >= 0 ? n : 0;
}

/** A state counter; anything that is not a finite number counts as 0. */
function counter(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

function replyError(reason, message, metadata = {}) {
  return { reason, message, source: SOURCE, metadata };
}

/**
 * One Intercept stream: every on_model_call invocation of one agent, keyed by invocation id.
 *
 * Per invocation it keeps only what it needs to answer the protocol (reply id, the newest
 * state slice the agent sent, the streamed text and usage); the state itself lives in the
 * agent and arrives with every invocation, item and outcome.
 */
export class InterceptSession {
  /**
   * @param {grpc.ServerDuplexStream<object, object>} call The Intercept call.
   * @param {(message: string) => void} log Where to report protocol anomalies.
   */
  constructor(call, log) {
    this.call = call;
    this.log = log;
    /** @type {Map<string, {replyId: string, state: object, streaming: boolean, text: string, usage: number | null}>} */
    this.invocations = new Map();
    this.closed = false;
    call.on('data', (request) => this.receive(request));
    // A clean close of the request stream ends every open invocation as cancelled, and
    // this side of the stream with it.
    call.on('end', () => this.close(true));
    call.on('cancelled', () => this.close(false));
    call.on('error', (err) => {
      this.log(`Intercept stream failed: ${err?.message ?? err}`);
      this.close(false);
    });
  }

  /** Drops every invocation; ends the response stream when `end` and it is still open. */
  close(end) {
    this.invocations.clear();
    if (this.closed) return;
    this.closed = true;
    if (end && !this.call.destroyed && !this.call.writableEnded) this.call.end();
  }

  send(invocationId, message) {
    if (this.closed || this.call.destroyed || this.call.writableEnded) return;
    this.call.write({ invocation_id: invocationId, ...message });
  }

  /** Handles one InterceptRequest; never throws. */
  receive(request) {
    const id = typeof request?.invocation_id === 'string' ? request.invocation_id : '';
    try {
      if (!id) {
        this.log('ignored an Intercept request without invocation_id');
        return;
      }
      switch (request.message) {
        case 'invocation':
          this.start(id, request.invocation);
          break;
        case 'item':
          this.item(id, request.item);
          break;
        case 'outcome':
          this.outcome(id, request.outcome);
          break;
        case 'cancel':
          // The agent abandoned it: stop and send nothing more for it.
          this.invocations.delete(id);
          break;
        default:
          this.log(`ignored an Intercept request for ${id} with no message set`);
      }
    } catch (err) {
      this.log(`invocation ${id} failed: ${err?.stack ?? err}`);
      if (this.invocations.delete(id)) {
        this.send(id, {
          done: { error: replyError('MIDDLEWARE_FAILED', 'the node sidecar failed on this invocation') },
        });
      }
    }
  }

  start(id, invocation) {
    if (this.invocations.has(id)) this.log(`invocation ${id} restarted before it finished`);
    this.invocations.delete(id);
    const hook = invocation?.hook ?? 'HOOK_UNSPECIFIED';
    if (hook !== 'HOOK_ON_MODEL_CALL') {
      this.send(id, {
        done: {
          error: replyError('HOOK_NOT_SERVED', `${MIDDLEWARE_KEY} does not serve ${hook}`, { hook }),
        },
      });
      return;
    }
    this.invocations.set(id, {
      replyId: String(invocation.reply_id ?? ''),
      state: fromStruct(invocation.state),
      streaming: false,
      text: '',
      usage: null,
    });
    this.send(id, { call_next: {} });
  }

  item(id, item) {
    const entry = this.invocations.get(id);
    if (entry === undefined) return; // cancelled, finished or never started: nothing to answer
    // NOTE(node): chunk items may carry no state (the Python agent sends none); an unset
    // Struct decodes as null here, which must not wipe the slice from the invocation.
    if (item?.state) entry.state = fromStruct(item.state);
    if (item?.item === 'chunk') {
      if (!entry.streaming) this.log(`invocation ${id}: a chunk before stream_start`);
      entry.text += typeof item.chunk?.text === 'string' ? item.chunk.text : '';
      const usage = outputTokens(item.chunk?.usage);
      if (usage !== null) entry.usage = usage;
    } else if (item?.item === 'event') {
      // Never subscribed to; keep it rather than stall the agent waiting for a verdict.
      this.send(id, { verdict: { drop: false } });
    }
  }

  outcome(id, outcome) {
    const entry = this.invocations.get(id);
    if (entry === undefined) return;
    if (outcome?.state) entry.state = fromStruct(outcome.state);
    switch (outcome?.result) {
      case 'stream_start':
        // The agent does not wait here: chunks follow as items, then stream_end.
        entry.streaming = true;
        return;
      case 'model_response': {
        const response = outcome.model_response;
        const usage = outputTokens(response?.usage);
        this.finish(id, entry, usage ?? countWords(assistantText(response?.message)));
        return;
      }
      case 'stream_end':
        // Words are counted on the joined text: a chunk may end in the middle of a word.
        this.finish(id, entry, entry.usage ?? countWords(entry.text));
        return;
      default:
        // An error (which the agent raises after `done`) or an outcome of no model call.
        this.invocations.delete(id);
        this.send(id, { done: {} });
    }
  }

  finish(id, entry, tokens) {
    this.invocations.delete(id);
    const state = {
      ...entry.state,
      tokens: counter(entry.state.tokens) + tokens,
      calls: counter(entry.state.calls) + 1,
    };
    this.send(id, { mutate: { state: toStruct(state) } });
    this.send(id, {
      emit: { reply_id: entry.replyId, custom: { name: TOKENS_EVENT, value: { numberValue: tokens } } },
    });
    this.send(id, { done: {} });
  }
}

/**
 * The MiddlewareService implementation, to pass to `Server.addService`.
 *
 * @param {(message: string) => void} log Where to report protocol anomalies (stderr).
 * @returns {object} Handlers named after the service's RPCs.
 */
export function tokenCounterService(log) {
  return {
    Describe(unusedCall, callback) {
      callback(null, DESCRIPTION);
    },
    Intercept(call) {
      new InterceptSession(call, log);
    },
    TransformSystemPrompt(call, callback) {
      const prompt = typeof call.request?.prompt === 'string' ? call.request.prompt : '';
      callback(null, { prompt: `${prompt}${PROMPT_SUFFIX}` });
    },
    AfterAgent(unusedCall, callback) {
      callback({ code: grpc.status.UNIMPLEMENTED, details: `${MIDDLEWARE_KEY} has no after_agent hook` });
    },
    CallTool(call) {
      const name = String(call.request?.name ?? '');
      call.emit('error', { code: grpc.status.NOT_FOUND, details: `this sidecar has no tool "${name}"` });
    },
  };
}
