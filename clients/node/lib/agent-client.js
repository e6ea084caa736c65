// AgentClient: an AgentService client over @grpc/grpc-js, with deadlines, cancel and rich errors.
import * as grpc from '@grpc/grpc-js';

import { loadHookmesh } from './proto.js';
import { BACKOFF_MS, pause, Reattach } from './reattach.js';
import { statusDetails } from './rpc-status.js';
import { fromValue, toStruct } from './struct.js';

/** Deadline of every call unless the constructor or the call sets another: 300 s. */
export const DEFAULT_TIMEOUT_MS = 300_000;

let hookmesh;

/** Largest message accepted: GetSession returns a session's whole context (as in Python). */
const MAX_RECEIVE_BYTES = 256 * 1024 * 1024;

/** The generated AgentService client constructor; the protos are loaded once per process. */
function agentServiceClient() {
  hookmesh ??= loadHookmesh();
  return hookmesh.AgentService;
}

/** `grpc.status` maps both ways (a TypeScript enum): 3 -> 'INVALID_ARGUMENT'. */
function statusName(code) {
  const name = grpc.status[code];
  return typeof name === 'string' ? name : 'UNKNOWN';
}

/**
 * A failed call, or a reply that ended with FINISH_REASON_ERROR (from `text()` only).
 *
 * Branch on `reason`, never on `details`: it is the stable UPPER_SNAKE reason of the
 * google.rpc.ErrorInfo the service attaches (for example `INVALID_SCHEMA`,
 * `SESSION_NOT_FOUND`, `SESSION_BUSY`), or of the reply's ReplyError. It is empty when the
 * failure carried none, as for UNAVAILABLE or DEADLINE_EXCEEDED raised by gRPC itself.
 */
export class AgentClientError extends Error {
  /**
   * @param {object} fields The error's fields, stored as properties of the same names.
   * @param {number | null} fields.code gRPC status number; null for a failed reply.
   * @param {string | null} fields.codeName gRPC status name (`INVALID_ARGUMENT`); null for
   *   a failed reply.
   * @param {string} fields.details The status message, or the ReplyError message.
   * @param {string} [fields.reason] ErrorInfo.reason or ReplyError.reason.
   * @param {string} [fields.domain] ErrorInfo.domain (`hookmesh.dev` for hookmesh errors).
   * @param {Record<string, string>} [fields.metadata] ErrorInfo.metadata or
   *   ReplyError.metadata: the variable parts of `details`, lowerCamel keys.
   * @param {{field: string, description: string}[]} [fields.violations]
   *   BadRequest.field_violations: one per bad request field.
   * @param {string} [fields.source] For a failed reply, what failed: `model`,
   *   `tool:<name>`, `middleware:<key>` or `agent`.
   * @param {unknown} [fields.cause] The underlying grpc-js error or abort reason.
   */
  constructor({
    code,
    codeName,
    details,
    reason = '',
    domain = '',
    metadata = {},
    violations = [],
    source = '',
    cause,
  }) {
    const what = [codeName ?? 'reply failed', reason].filter(Boolean).join(' ');
    super(`${what}: ${details}`, cause === undefined ? undefined : { cause });
    this.name = 'AgentClientError';
    Object.assign(this, { code, codeName, details, reason, domain, metadata, violations, source });
  }

  /**
   * The error for a grpc-js ServiceError, its rich details decoded from the trailers.
   *
   * A stream reset by a proxy (Envoy resets a call whose replica died after the response
   * began: HTTP/2 RST_STREAM, which grpc-js reports as INTERNAL with no status of the
   * service's own) becomes UNAVAILABLE with reason `STREAM_RESET`, as the Python client
   * reports it: hookmesh services never answer INTERNAL without an ErrorInfo.
   */
  static fromServiceError(err) {
    const details = statusDetails(err.metadata);
    const message = err.details ?? err.message;
    if (err.code === grpc.status.INTERNAL && !details.reason && /RST_STREAM/.test(message)) {
      return new AgentClientError({
        code: grpc.status.UNAVAILABLE,
        codeName: 'UNAVAILABLE',
        details:
          'the connection to the service broke during the call (a proxy reset the stream); ' +
          'the call may not have finished',
        reason: 'STREAM_RESET',
        cause: err,
      });
    }
    return new AgentClientError({
      code: err.code,
      codeName: statusName(err.code),
      details: message,
      ...details,
      cause: err,
    });
  }

  /** The error for the ReplyError of a reply_end with FINISH_REASON_ERROR. */
  static fromReplyError(error) {
    return new AgentClientError({
      code: null,
      codeName: null,
      details: error?.message || 'the reply failed',
      reason: error?.reason ?? '',
      metadata: error?.metadata ?? {},
      source: error?.source ?? '',
    });
  }

  /** The error for a call the caller's AbortSignal cancelled: CANCELLED, no reason. */
  static aborted(signal) {
    return new AgentClientError({
      code: grpc.status.CANCELLED,
      codeName: 'CANCELLED',
      details: 'cancelled by the caller',
      cause: signal.reason,
    });
  }
}

function wrapError(err, signal) {
  if (err instanceof AgentClientError) return err;
  if (signal?.aborted) return AgentClientError.aborted(signal);
  if (typeof err?.code === 'number') return AgentClientError.fromServiceError(err);
  return err;
}

/**
 * An AgentEvent as proto-loader decodes it, flattened: `{type, ...event fields, ...arm fields}`
 * (the event's own fields are `reply_id` and `source_path`).
 *
 * `type` is the name of the `event` oneof arm (`reply_start`, `text_block_delta`, ...).
 * Field names, enum names (`FINISH_REASON_COMPLETED`), 64-bit integers (strings) and bytes
 * (Buffers) are as proto-loader gives them, but a custom event's `value` and a reply_end's
 * `output.value` are plain JSON.
 *
 * @param {object | null | undefined} event The AgentEvent.
 * @returns {{type: string, reply_id: string} & Record<string, unknown>} The event.
 */
export function normaliseEvent(event) {
  const { event: type = 'unspecified', ...fields } = event ?? {};
  const arm = fields[type] ?? {};
  delete fields[type];
  const out = { type, reply_id: '', ...fields, ...arm };
  if (type === 'custom') out.value = fromValue(out.value);
  if (type === 'reply_end' && out.output) {
    out.output = { ...out.output, value: fromValue(out.output.value) };
  }
  return out;
}

/** A user's text as the one flat user message of a Reply. */
export function userMessage(text) {
  return { flat: { role: 'ROLE_USER', content: text } };
}

function toMessages(input) {
  if (typeof input === 'string') return [userMessage(input)];
  if (Array.isArray(input)) return input;
  if (input !== null && typeof input === 'object') return [input];
  throw new TypeError('messagesOrText must be a string, a Message object or an array of them');
}

/** `step`, `event` or `exit` as the Durability enum name; '' for the service's default. */
const DURABILITY = {
  '': 'DURABILITY_UNSPECIFIED',
  step: 'DURABILITY_STEP',
  event: 'DURABILITY_EVENT',
  exit: 'DURABILITY_EXIT',
};

function durabilityName(durability) {
  const name = DURABILITY[durability ?? ''];
  if (name === undefined) {
    throw new TypeError(`durability must be step, event, exit or '', not ${durability}`);
  }
  return name;
}

function checkTimeout(timeoutMs) {
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(`timeoutMs must be a finite number of milliseconds > 0, not ${timeoutMs}`);
  }
  return timeoutMs;
}

function toExternalResult(result) {
  const output =
    typeof result.output === 'string' ? [{ text: { text: result.output } }] : result.output ?? [];
  return {
    call_id: result.call_id ?? result.callId,
    output,
    state: result.state ?? 'TOOL_RESULT_STATE_UNSPECIFIED',
  };
}

function toConfirmation(confirmation) {
  const out = {
    call_id: confirmation.call_id ?? confirmation.callId,
    confirmed: Boolean(confirmation.confirmed),
    reason: confirmation.reason ?? '',
  };
  const { arguments: edited } = confirmation;
  if (edited !== undefined && edited !== null) {
    out.arguments = typeof edited === 'string' ? edited : JSON.stringify(edited);
  }
  return out;
}

/**
 * A client of hookmesh.v1.AgentService: one channel, a deadline on every call.
 *
 * Requests and responses are plain objects in the proto's shape (proto-loader,
 * `keepCase`, enums as names); the stream methods yield events flattened by
 * `normaliseEvent`. Every failure is an `AgentClientError`.
 *
 * @example
 *   const client = new AgentClient('127.0.0.1:7000');
 *   for await (const event of client.reply('hello')) {
 *     if (event.type === 'text_block_delta') process.stdout.write(event.delta);
 *   }
 *   client.close();
 */
export class AgentClient {
  #stub;
  #timeoutMs;
  #token;

  /**
   * @param {string} target `host:port` or any gRPC target (`dns:///...`, `unix:...`).
   * @param {object} [options] Options.
   * @param {number} [options.timeoutMs] Default deadline of each call (a whole stream for
   *   `reply` and `resume`), milliseconds; 300 000 when unset.
   * @param {string} [options.token] Bearer token sent as `authorization: Bearer <token>` on
   *   every call. A secret: never logged.
   * @param {grpc.ChannelCredentials} [options.credentials] TLS credentials; plaintext when
   *   unset.
   * @param {object} [options.channelOptions] grpc-js channel options
   *   (`grpc.max_receive_message_length`, ...).
   */
  constructor(target, { timeoutMs = DEFAULT_TIMEOUT_MS, token, credentials, channelOptions } = {}) {
    this.#timeoutMs = checkTimeout(timeoutMs);
    this.#token = token;
    const Client = agentServiceClient();
    const channelCredentials = credentials ?? grpc.credentials.createInsecure();
    this.#stub = new Client(target, channelCredentials, {
      'grpc.max_receive_message_length': MAX_RECEIVE_BYTES,
      ...channelOptions,
    });
  }

  #metadata() {
    const metadata = new grpc.Metadata();
    if (this.#token) metadata.set('authorization', `Bearer ${this.#token}`);
    return metadata;
  }

  #callOptions(timeoutMs) {
    return { deadline: Date.now() + checkTimeout(timeoutMs ?? this.#timeoutMs) };
  }

  #unary(method, request, { timeoutMs, signal } = {}) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(AgentClientError.aborted(signal));
        return;
      }
      let call;
      const onAbort = () => call?.cancel();
      call = this.#stub[method](
        request,
        this.#metadata(),
        this.#callOptions(timeoutMs),
        (err, response) => {
          signal?.removeEventListener('abort', onAbort);
          if (err) reject(wrapError(err, signal));
          else resolve(response);
        },
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * A reply's events from `method` (Reply, Resume or WatchReply), re-attached with
   * WatchReply after a failure `Reattach.canRetry` allows, with a backoff, until the
   * deadline; an event whose number was delivered is dropped.
   */
  async *#followed(method, request, sessionId, { timeoutMs, signal } = {}) {
    const deadline = Date.now() + checkTimeout(timeoutMs ?? this.#timeoutMs);
    const where = new Reattach(sessionId);
    let attempt = 0;
    for (;;) {
      try {
        for await (const response of this.#responses(method, request, deadline, signal)) {
          const event = where.take(response, normaliseEvent);
          if (event !== null) {
            attempt = 0;
            yield event;
          }
        }
        return;
      } catch (err) {
        const error = wrapError(err, signal);
        const left = deadline - Date.now();
        if (!where.canRetry(error) || left <= 0 || signal?.aborted) throw error;
        await pause(Math.min(BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)], left), signal);
        if (signal?.aborted) throw AgentClientError.aborted(signal);
        attempt += 1;
        method = 'WatchReply';
        request = where.request();
      }
    }
  }

  /** The raw responses of one server-streaming call, cancelled when the reader stops. */
  async *#responses(method, request, deadline, signal) {
    if (signal?.aborted) throw AgentClientError.aborted(signal);
    const call = this.#stub[method](request, this.#metadata(), { deadline });
    // NOTE(node): grpc-js reports a non-OK status as an 'error' event, also after the
    // reader has gone (we cancel in `finally`); with no listener left that event would be
    // an uncaught exception. The iterator below still sees every error.
    call.on('error', () => {});
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const response of call) {
        // NOTE(node): events already buffered are still delivered after cancel(); an
        // aborted stream must stop at once, so check before each one.
        if (signal?.aborted) throw AgentClientError.aborted(signal);
        yield response;
      }
    } catch (err) {
      throw wrapError(err, signal);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Ending early (break, abort, an error) cancels the call; a durable reply goes on.
      call.cancel();
    }
  }

  /**
   * Runs one reply on a session and streams its events.
   *
   * @param {string | object | object[]} messagesOrText The input: a string (one flat user
   *   message) or hookmesh.v1.Message objects, such as `{flat: {role: 'ROLE_USER',
   *   content: 'hi'}}`.
   * @param {object} [options] Options.
   * @param {string} [options.sessionId] The session; a new one when empty or unknown (its
   *   id arrives in reply_start).
   * @param {number} [options.maxIters] Most reasoning steps; 0 for the agent's setting.
   * @param {string} [options.toolChoice] `auto`, `none`, `required` or a tool name.
   * @param {string} [options.model] A configured model name, if the server allows it.
   * @param {string} [options.durability] `step`, `event` or `exit` (docs/durability.md);
   *   the service's default when empty.
   * @param {{name?: string, schema: object, description?: string}} [options.outputSchema]
   *   Ask for a structured answer: a JSON Schema and its name (`output` by default); the
   *   reply_end then carries `output: {value, schema_name}`, the value plain JSON.
   * @param {number} [options.timeoutMs] Deadline of the whole stream (re-attaching
   *   included), milliseconds.
   * @param {AbortSignal} [options.signal] Aborting cancels the call and the iteration
   *   throws CANCELLED; the reply goes on on the server unless its durability is `exit`
   *   (call `interrupt` to stop it).
   * @returns {AsyncGenerator<object>} The events, reply_start first and reply_end last,
   *   each once: a stream that breaks (the connection, the replica running it, a proxy's
   *   reset) is re-attached by itself with WatchReply until the deadline. Breaking out of
   *   the loop cancels the call too.
   * @throws {AgentClientError} From the iteration: the call failed (INVALID_ARGUMENT with
   *   `violations`, FAILED_PRECONDITION `SESSION_BUSY`/`REPLY_PAUSED`, ...).
   */
  reply(
    messagesOrText,
    {
      sessionId = '',
      maxIters = 0,
      toolChoice = '',
      model = '',
      durability = '',
      outputSchema,
      timeoutMs,
      signal,
    } = {},
  ) {
    const request = {
      session_id: sessionId,
      messages: toMessages(messagesOrText),
      options: {
        max_iters: maxIters,
        tool_choice: toolChoice,
        model,
        durability: durabilityName(durability),
      },
    };
    if (outputSchema) {
      request.output_schema = {
        name: outputSchema.name ?? '',
        schema: toStruct(outputSchema.schema),
        description: outputSchema.description ?? '',
      };
    }
    return this.#followed('Reply', request, sessionId, { timeoutMs, signal });
  }

  /**
   * Follows a reply that is running (or ended within the journal's retention), on
   * whichever replica runs it: its saved events after `afterSeq`, then the live ones, until
   * reply_end; re-attached as `reply` is.
   *
   * @param {string} sessionId The session.
   * @param {object} [options] Options.
   * @param {string} [options.replyId] The reply; the session's latest when empty.
   * @param {number} [options.afterSeq] The last sequence number already seen (0: all).
   * @param {number} [options.timeoutMs] Deadline of the whole stream, milliseconds.
   * @param {AbortSignal} [options.signal] Aborting cancels the call.
   * @returns {AsyncGenerator<object>} The events.
   * @throws {AgentClientError} From the iteration: NOT_FOUND `REPLY_NOT_FOUND`, ...
   */
  watch(sessionId, { replyId = '', afterSeq = 0, timeoutMs, signal } = {}) {
    const request = { session_id: sessionId, reply_id: replyId, after_seq: String(afterSeq) };
    return this.#followed('WatchReply', request, sessionId, { timeoutMs, signal });
  }

  /**
   * Runs one reply and returns its text: every text_block_delta joined.
   *
   * Takes the same arguments as `reply`. A paused reply returns the text so far (see
   * `getSession(...).pending_calls`).
   *
   * @returns {Promise<string>} The text.
   * @throws {AgentClientError} The call failed, or the reply ended with
   *   FINISH_REASON_ERROR (then `code` is null and `reason`/`source` come from the
   *   ReplyError).
   */
  async text(messagesOrText, options = {}) {
    let text = '';
    for await (const event of this.reply(messagesOrText, options)) {
      if (event.type === 'text_block_delta') text += event.delta;
      if (event.type === 'reply_end' && event.finish_reason === 'FINISH_REASON_ERROR') {
        throw AgentClientError.fromReplyError(event.error);
      }
    }
    return text;
  }

  /**
   * Continues a paused reply and streams its events, like `reply`.
   *
   * @param {string} sessionId The session whose reply is paused.
   * @param {object} [options] Options.
   * @param {{callId: string, confirmed: boolean, reason?: string, arguments?: object|string}[]}
   *   [options.confirmations] One answer per call awaiting confirmation (`call_id` works
   *   too): approve (`confirmed: true`), edit (`confirmed: true` with `arguments`, an object
   *   or JSON text valid for the tool) or reject (`confirmed: false` with a `reason` the
   *   model reads). An invalid edit fails with INVALID_ARGUMENT `INVALID_SCHEMA` and leaves
   *   the reply paused.
   * @param {{callId: string, output: string | object[], state?: string}[]}
   *   [options.externalResults] One result per call awaiting external execution: `output`
   *   is a text or ContentBlock objects; `state` a ToolResultState name (success if unset).
   * @param {number} [options.timeoutMs] Deadline of the whole stream, milliseconds.
   * @param {AbortSignal} [options.signal] Aborting cancels the call.
   * @returns {AsyncGenerator<object>} The events.
   * @throws {AgentClientError} From the iteration: NOT_FOUND `SESSION_NOT_FOUND`,
   *   FAILED_PRECONDITION `NO_PAUSED_REPLY`, INVALID_ARGUMENT, ...
   */
  resume(sessionId, { confirmations = [], externalResults = [], timeoutMs, signal } = {}) {
    const request = {
      session_id: sessionId,
      confirmations: confirmations.map(toConfirmation),
      external_results: externalResults.map(toExternalResult),
    };
    return this.#followed('Resume', request, sessionId, { timeoutMs, signal });
  }

  /**
   * Stops the session's running reply (it then ends with FINISH_REASON_INTERRUPTED).
   *
   * @param {string} sessionId The session.
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [options] Deadline and cancel.
   * @returns {Promise<boolean>} Whether a running reply was told to stop.
   * @throws {AgentClientError} NOT_FOUND `SESSION_NOT_FOUND`, ...
   */
  async interrupt(sessionId, options = {}) {
    const response = await this.#unary('Interrupt', { session_id: sessionId }, options);
    return response.interrupted;
  }

  /**
   * Reads a session: status, context (hookmesh.v1.Message objects) and pending calls.
   *
   * @param {string} sessionId The session.
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [options] Deadline and cancel.
   * @returns {Promise<object>} The hookmesh.v1.Session object (`status` is a
   *   SessionStatus name; times are `{seconds, nanos}` with `seconds` a string).
   * @throws {AgentClientError} NOT_FOUND `SESSION_NOT_FOUND`, ...
   */
  async getSession(sessionId, options = {}) {
    const response = await this.#unary('GetSession', { session_id: sessionId }, options);
    return response.session;
  }

  /**
   * Lists sessions, most recently updated first, without their context.
   *
   * @param {object} [options] Options.
   * @param {number} [options.pageSize] Most sessions to return; 0 means 50, at most 1000.
   * @param {string} [options.pageToken] `next_page_token` of the previous page.
   * @param {number} [options.timeoutMs] Deadline, milliseconds.
   * @param {AbortSignal} [options.signal] Aborting cancels the call.
   * @returns {Promise<{sessions: object[], next_page_token: string}>} One page; the token
   *   is empty on the last one.
   * @throws {AgentClientError} INVALID_ARGUMENT for a bad page size or token, ...
   */
  listSessions({ pageSize = 0, pageToken = '', timeoutMs, signal } = {}) {
    const request = { page_size: pageSize, page_token: pageToken };
    return this.#unary('ListSessions', request, { timeoutMs, signal });
  }

  /**
   * Deletes a session that is not replying.
   *
   * @param {string} sessionId The session.
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [options] Deadline and cancel.
   * @returns {Promise<void>} Resolves once it is deleted.
   * @throws {AgentClientError} NOT_FOUND `SESSION_NOT_FOUND`, FAILED_PRECONDITION
   *   `SESSION_BUSY`, ...
   */
  async deleteSession(sessionId, options = {}) {
    await this.#unary('DeleteSession', { session_id: sessionId }, options);
  }

  /** Closes the channel: new calls fail UNAVAILABLE; calls already running may finish. */
  close() {
    this.#stub.close();
  }
}
