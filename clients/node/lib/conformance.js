// The conformance middleware (docs/remote-protocol.md § Conformance) on the sidecar SDK.
import { DownstreamError, MiddlewareError, invalidArguments, middlewareService, toStruct, fromStruct } from './sdk.js';
import { assistantText } from './token-counter.js';

const MARKER = 'conformance:';

/** The marker word of an invocation: the last context message's text after "conformance:". */
function markerOf(context) {
  const last = context?.length ? assistantText(context[context.length - 1]) : '';
  return last.startsWith(MARKER) ? last.slice(MARKER.length) : '';
}

const failure = (hook) => new MiddlewareError('CONFORMANCE_ERROR', 'conformance error', { hook });
const custom = (inv, name) => inv.emit({ custom: { name } });

/** What every marker does before the downstream; resolves to the word. */
async function pre(inv, hook) {
  const word = markerOf(inv.invocation.context);
  if (word === 'sleep') await new Promise((resolve) => inv.signal.addEventListener('abort', resolve));
  if (word === 'error') throw failure(hook);
  if (word === 'state') {
    const count = typeof inv.state.count === 'number' ? inv.state.count : 0;
    inv.setState({ ...inv.state, count: count + 1 });
  }
  if (word === 'forget') inv.mutate({ remove_message_ids: [inv.invocation.context[0].id] });
  if (word === 'emit') custom(inv, 'conformance.pre');
  return word;
}

async function events(inv, hook, override, next) {
  const word = await pre(inv, hook);
  if (word === 'short-circuit') return custom(inv, 'conformance.short_circuit');
  if (word === 'stop') {
    // Ends at the first item: next rejects with InvocationEnded, the downstream is dropped.
    return next({}, () => {
      custom(inv, 'conformance.stopped');
      inv.end();
      return false;
    });
  }
  if (word === 'final-verdict') {
    // The first verdict item is answered verdict {final: true}; the rest passes unseen.
    return next({}, () => {
      inv.passRest();
      return false;
    });
  }
  if (word === 'retry') {
    try {
      return await next({});
    } catch (err) {
      if (!(err instanceof DownstreamError)) throw err;
      return await next({}); // the downstream failed once: run it again
    }
  }
  let callNext = {};
  if (word === 'override') callNext = override;
  if (word === 'final' && hook !== 'on_reply') callNext = { final: true };
  await next(callNext, () => word === 'drop');
  if (word === 'error-after') throw failure(hook);
  if (word === 'emit') custom(inv, 'conformance.post');
}

function assistant(kind, text) {
  return kind === 'MESSAGE_KIND_AGENTIC'
    ? { agentic: { role: 'ROLE_ASSISTANT', blocks: [{ text: { text } }] } }
    : { flat: { role: 'ROLE_ASSISTANT', content: text } };
}

export const conformance = {
  key: 'conformance',
  needsContext: true,
  hooks: {
    onReply: { readOnly: ['*'] },
    onReasoning: { subscriptions: ['*'] },
    onModelCall: { subscriptions: ['chunk'] },
    onActing: { subscriptions: ['*'] },
    onCompressContext: { mode: 'HOOK_MODE_PRE_ONLY' },
  },
  onReply: (inv, args, next) => events(inv, 'on_reply', {}, next),
  onReasoning: (inv, args, next) => events(inv, 'on_reasoning', { reasoning: { tool_choice: 'none' } }, next),
  onActing: (inv, args, next) =>
    events(inv, 'on_acting', { acting: { arguments: JSON.stringify({ text: 'overridden' }) } }, next),
  async onModelCall(inv, args, next) {
    const word = await pre(inv, 'on_model_call');
    if (word === 'short-circuit') {
      custom(inv, 'conformance.short_circuit');
      return { message: assistant(inv.invocation.kind, 'short-circuited') };
    }
    if (word === 'stop') return next(undefined, () => inv.end()); // a plain done: the stream ends
    const overrides = { override: { tool_choice: 'none' }, model: { model: 'fast' } }[word];
    const response = await next(overrides);
    if (word === 'error-after') throw failure('on_model_call');
    if (word === 'emit') custom(inv, 'conformance.post');
    return response;
  },
  async onCheckPermission(inv, args, next) {
    const word = await pre(inv, 'on_check_permission');
    if (word === 'short-circuit') {
      custom(inv, 'conformance.short_circuit');
      return { behavior: 'PERMISSION_BEHAVIOR_DENY', reason: 'short-circuited' };
    }
    const decision = await next();
    if (word === 'error-after') throw failure('on_check_permission');
    if (word === 'emit') custom(inv, 'conformance.post');
    return decision;
  },
  async onCompressContext(inv, args, next) {
    if ((await pre(inv, 'on_compress_context')) !== 'short-circuit') await next();
  },
  transformSystemPrompt: (request) => `${request.prompt ?? ''} [conformance]`,
  afterAgent(request) {
    if (!request.final_message?.kind) throw new MiddlewareError('INVALID_ARGUMENT', 'final_message: a message needs its kind set');
    return { state: toStruct({ ...fromStruct(request.state), after: true }) };
  },
  tools: [
    {
      spec: {
        name: 'conformance_echo',
        description: 'Stream the text back; the text "fail" makes the tool fail.',
        parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        read_only: true,
      },
      run(request, out) {
        let text;
        try {
          text = JSON.parse(request.arguments || '{}').text;
        } catch {
          throw invalidArguments('arguments are not JSON');
        }
        if (typeof text !== 'string') throw invalidArguments('arguments.text: a string is required');
        if (text === 'fail') throw new Error('asked to fail');
        out.text(text);
      },
    },
  ],
};

/**
 * The conformance MiddlewareService handlers, to pass to `createServer` or `runSidecar`;
 * with `observe`, every onion hook observes (docs/remote-protocol.md § Conformance, Observing).
 */
export function conformanceService({ observe = false } = {}) {
  if (!observe) return middlewareService(conformance);
  const hooks = Object.fromEntries(
    Object.entries(conformance.hooks).map(([hook, spec]) => [hook, { ...spec, mode: 'HOOK_MODE_OBSERVE' }]),
  );
  const observing = { ...conformance, hooks: { ...hooks, onCheckPermission: { mode: 'HOOK_MODE_OBSERVE' } } };
  return middlewareService(observing);
}
