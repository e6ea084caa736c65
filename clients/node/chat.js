#!/usr/bin/env node
// hookmesh chat in Node.js: sends one message to an AgentService and streams the reply.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import process from 'node:process';
import readline from 'node:readline';
import { parseArgs } from 'node:util';

import * as grpc from '@grpc/grpc-js';

import { AgentClient, AgentClientError } from './lib/agent-client.js';
import { failureLine } from './lib/failure.js';
import { eventArmType, withoutOneofNames } from './lib/proto.js';

const USAGE = `usage: node chat.js [--target HOST:PORT] [--session ID] [--json] [options] MESSAGE...
       node chat.js --attach SESSION [--json] [options]

Sends MESSAGE (the words joined by spaces) as one user message to hookmesh.v1.AgentService
and streams the reply: text as it arrives, "→ tool args" for tool calls, "← tool state: text"
for their results, "[name] json" for custom events and "end: <finish reason>" last. A stream
that breaks (the connection, the replica, a proxy's reset) is re-attached by itself.
  --target HOST:PORT  the agent service (default 127.0.0.1:7000)
  --session ID        continue this session (an error when there is none; a new one when
                      unset, its id printed first)
  --new-session       start the session --session names (an error if it exists)
  --attach SESSION    follow the session's running (or last) reply from its start instead
                      of sending a message
  --durability MODE   step, event or exit: when the reply is saved (the agent's by default)
  --json              print each event as one JSON line instead (bytes as base64)
  --timeout SECONDS   deadline of the whole reply (default 300)
  --token-env NAME    send "authorization: Bearer <token>", the token read from env var NAME
  --tls-ca FILE       use TLS, trusting this CA (PEM); for mTLS also set HOOKMESH_CLIENT_CERT
                      and HOOKMESH_CLIENT_KEY to the client's certificate and key files
  --max-iters N       most reasoning steps (default: the agent's setting)
  --tool-choice C     auto, none, required or a tool name
  --model NAME        a configured model, if the server allows overrides
  --output-schema FILE  ask for a structured answer valid for this JSON Schema (named after
                      the file); it is printed as "[output NAME] json" before "end:"
When the reply pauses for confirmation, each call is asked about on stderr: "a" approves it,
"e" edits it (the next line is its arguments, a JSON object), "r" rejects it (the next line is
the reason the model reads); then the reply resumes. A refused edit is asked again. When it
pauses for external execution, each call's result is asked for on stderr: the next line is
its output, or, starting with "!", its error (a sub-agent's call passed up is asked as the
tool it stands for, "asked by AGENT/...: " first); then the reply resumes. Further pauses are
asked about in turn; at the end of standard input the reply stays paused.
Exit status: 0 when the reply ends (completed, paused, interrupted or out of steps),
1 when the call or the reply fails ("error: ..." on stderr), 2 on bad usage, 130 on Ctrl-C.`;

const EXIT_OK = 0;
const EXIT_ERROR = 1;
const EXIT_USAGE = 2;
const EXIT_SIGINT = 130;
const SHORT = 120;

function usageError(message) {
  process.stderr.write(`chat.js: ${message}\n${USAGE}\n`);
  process.exit(EXIT_USAGE);
}

function options() {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        target: { type: 'string', default: '127.0.0.1:7000' },
        session: { type: 'string', default: '' },
        'new-session': { type: 'boolean', default: false },
        attach: { type: 'string', default: '' },
        durability: { type: 'string', default: '' },
        json: { type: 'boolean', default: false },
        timeout: { type: 'string', default: '300' },
        'token-env': { type: 'string' },
        'tls-ca': { type: 'string' },
        'max-iters': { type: 'string', default: '0' },
        'tool-choice': { type: 'string', default: '' },
        model: { type: 'string', default: '' },
        'output-schema': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    usageError(err.message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(EXIT_OK);
  }
  const text = positionals.join(' ');
  const { attach } = values;
  if (attach && positionals.length) usageError('--attach follows a reply: give no message with it');
  if (attach && (values.session || values['new-session'])) {
    usageError('--attach names the session: give no --session or --new-session with it');
  }
  if (!attach && !text.trim()) usageError('give the message to send');
  if (!['', 'step', 'event', 'exit'].includes(values.durability)) {
    usageError('--durability must be step, event or exit');
  }
  if (!values.target) usageError('--target must not be empty');
  const timeout = Number(values.timeout);
  if (!Number.isFinite(timeout) || timeout <= 0) usageError('--timeout must be seconds > 0');
  const maxIters = Number(values['max-iters']);
  if (!Number.isInteger(maxIters) || maxIters < 0) {
    usageError('--max-iters must be an integer >= 0');
  }
  let token;
  if (values['token-env'] !== undefined) {
    token = process.env[values['token-env']];
    if (!token) usageError(`--token-env: environment variable ${values['token-env']} is unset`);
  }
  let credentials;
  if (values['tls-ca'] !== undefined) {
    const read = (what, path) => {
      try {
        return readFileSync(path);
      } catch {
        return usageError(`${what}: no such file ${path}`);
      }
    };
    const { HOOKMESH_CLIENT_CERT: cert, HOOKMESH_CLIENT_KEY: key } = process.env;
    if (Boolean(cert) !== Boolean(key)) {
      usageError('HOOKMESH_CLIENT_CERT and HOOKMESH_CLIENT_KEY go together');
    }
    credentials = grpc.credentials.createSsl(
      read('--tls-ca', values['tls-ca']),
      key ? read('HOOKMESH_CLIENT_KEY', key) : null,
      cert ? read('HOOKMESH_CLIENT_CERT', cert) : null,
    );
  }
  let outputSchema;
  if (values['output-schema'] !== undefined) {
    const path = values['output-schema'];
    let schema;
    try {
      schema = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      usageError(`--output-schema: cannot read a JSON Schema from ${path}: ${err.message}`);
    }
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
      usageError(`--output-schema: ${path} holds no JSON object`);
    }
    outputSchema = { name: schemaName(path), schema };
  }
  return {
    attach,
    credentials,
    target: values.target,
    json: values.json,
    newSession: values['new-session'],
    text,
    token,
    timeoutS: timeout,
    timeoutMs: timeout * 1000,
    reply: {
      sessionId: values.session,
      maxIters,
      toolChoice: values['tool-choice'],
      model: values.model,
      durability: values.durability,
      outputSchema,
    },
  };
}

/** `FINISH_REASON_COMPLETED` -> `completed`; `TOOL_RESULT_STATE_UNSPECIFIED` -> `success`. */
function shortEnum(name, prefix) {
  if (name === `${prefix}UNSPECIFIED` && prefix === 'TOOL_RESULT_STATE_') return 'success';
  return String(name).replace(prefix, '').toLowerCase();
}

/** One line of at most SHORT characters. */
function oneLine(text) {
  const flat = String(text).replace(/\s+/g, ' ').trim();
  return flat.length > SHORT ? `${flat.slice(0, SHORT - 1)}…` : flat;
}

/**
 * The event's JSON line, as `hookmesh chat --json` prints it: the proto3 JSON mapping with
 * proto field names (bytes as base64, enums by name), unset messages left out.
 */
/** The output schema's name for a schema file: its name without extension, as a name may be. */
function schemaName(path) {
  const stem = basename(path).replace(/\.[^.]*$/, '');
  return stem.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'output';
}

/** `value` as compact JSON with object keys sorted, as `hookmesh chat` prints it (a Struct
 * keeps no key order). */
function sortedJson(value) {
  return JSON.stringify(value, (key, item) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.keys(item).sort().map((k) => [k, item[k]]))
      : item,
  );
}

function jsonLine(event) {
  const { type, reply_id: replyId, source_path: sourcePath, ...arm } = event;
  const fields = withoutOneofNames(arm, eventArmType(type));
  const line = { type, reply_id: replyId, source_path: sourcePath, ...fields };
  return JSON.stringify(line, function canonical(key, value) {
    const raw = this[key];
    if (raw === null || raw === undefined) return undefined;
    return Buffer.isBuffer(raw) ? raw.toString('base64') : value;
  });
}

/** Prints events for a person: text as it streams, everything else on short lines. */
class HumanPrinter {
  #atLineStart = true;
  #calls = new Map();
  #results = new Map();
  #data = new Map();

  #text(text) {
    if (!text) return;
    process.stdout.write(text);
    this.#atLineStart = text.endsWith('\n');
  }

  #line(line) {
    if (!this.#atLineStart) process.stdout.write('\n');
    process.stdout.write(`${line}\n`);
    this.#atLineStart = true;
  }

  print(event) {
    switch (event.type) {
      case 'reply_start':
        if (event.session_id) this.#line(`session: ${event.session_id}`);
        break;
      case 'text_block_delta':
        this.#text(event.delta);
        break;
      case 'text_block_end':
        this.#text(this.#atLineStart ? '' : '\n');
        break;
      case 'tool_call_start':
        this.#calls.set(event.call_id, { name: event.name, args: '' });
        break;
      case 'tool_call_delta': {
        const call = this.#calls.get(event.call_id);
        if (call) call.args += event.delta;
        break;
      }
      case 'tool_call_end': {
        const call = this.#calls.get(event.call_id);
        this.#calls.delete(event.call_id);
        if (call) this.#line(`→ ${call.name}${call.args ? ` ${oneLine(call.args)}` : ''}`);
        break;
      }
      case 'tool_result_start':
        this.#results.set(event.call_id, { name: event.name, text: '', media: 0 });
        break;
      case 'tool_result_delta': {
        const result = this.#results.get(event.call_id);
        if (result && event.delta === 'text') result.text += event.text;
        else if (result && event.delta === 'media') result.media += 1;
        break;
      }
      case 'tool_result_end': {
        const result = this.#results.get(event.call_id) ?? { name: '?', text: '', media: 0 };
        this.#results.delete(event.call_id);
        const state = shortEnum(event.state, 'TOOL_RESULT_STATE_');
        const media = result.media ? ` [+${result.media} media]` : '';
        this.#line(`← ${result.name} ${state}: ${oneLine(result.text)}${media}`);
        break;
      }
      case 'data_block_start':
        this.#data.set(event.block_id, { type: event.media_type, name: event.name, bytes: 0 });
        break;
      case 'data_block_delta': {
        const block = this.#data.get(event.block_id);
        if (block) block.bytes += event.data?.length ?? 0;
        break;
      }
      case 'data_block_end': {
        const block = this.#data.get(event.block_id);
        this.#data.delete(event.block_id);
        const name = block?.name ? ` ${block.name}` : '';
        if (block) this.#line(`[data ${block.type}${name}] ${block.bytes} bytes`);
        break;
      }
      case 'hint_block':
        this.#line(`[hint ${event.hint?.source ?? ''}] ${oneLine(event.hint?.text ?? '')}`);
        break;
      case 'require_user_confirm': {
        const path = (event.source_path ?? []).map((s) => s.agent_name || s.tool_name);
        const who = path.length ? `[${path.join('/')}] asks: ` : '';
        for (const call of event.tool_calls) {
          this.#line(`? ${who}confirm ${call.name} ${oneLine(call.arguments)} (call ${call.id})`);
        }
        break;
      }
      case 'require_external_execution':
        for (const call of event.tool_calls) {
          this.#line(`? run ${call.name} ${oneLine(call.arguments)} (call ${call.id})`);
        }
        break;
      case 'custom':
        this.#line(`[${event.name}] ${JSON.stringify(event.value)}`);
        break;
      case 'reply_end':
        if (event.output) {
          this.#line(`[output ${event.output.schema_name}] ${sortedJson(event.output.value)}`);
        }
        this.#line(`end: ${shortEnum(event.finish_reason, 'FINISH_REASON_')}`);
        break;
      default:
        // model calls and reasoning: shown by --json only.
        break;
    }
  }
}

/** Standard input, one line at a time: `next()` resolves to the line, or null at its end. */
class Lines {
  #queue = [];
  #waiting = [];
  #closed = false;
  #reader;

  constructor(input) {
    this.#reader = readline.createInterface({ input, terminal: false });
    this.#reader.on('line', (line) => {
      const waiter = this.#waiting.shift();
      if (waiter) waiter(line);
      else this.#queue.push(line);
    });
    this.#reader.on('close', () => {
      this.#closed = true;
      for (const waiter of this.#waiting.splice(0)) waiter(null);
    });
  }

  next() {
    if (this.#queue.length) return Promise.resolve(this.#queue.shift());
    if (this.#closed) return Promise.resolve(null);
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  close() {
    this.#reader.close();
  }
}

/**
 * The agents from the sub-agent down to the one that asks, when the call stands for a nested
 * ask (a supervisor's `confirm_<worker>`, a remote agent's `<name>__confirm`, a sub-agent's
 * call of an external tool passed up as `external_<name>`: their arguments carry this `path`);
 * empty for the reply's own call. An `external_<name>` call is a nested ask only when its
 * arguments also name the `tool` to run and its `arguments` (JSON text), as
 * `hookmesh.schema.ask_path` reads it.
 */
function askedBy(call) {
  const external = call.name.startsWith('external_');
  if (!external && !call.name.startsWith('confirm_') && !call.name.endsWith('__confirm')) {
    return [];
  }
  let args;
  try {
    args = JSON.parse(call.arguments || '{}');
  } catch {
    return [];
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return [];
  if (external && (typeof args.tool !== 'string' || typeof args.arguments !== 'string')) {
    return [];
  }
  const { path } = args;
  return Array.isArray(path) && path.every((p) => typeof p === 'string') ? path : [];
}

/** `asked by a/b: ` when the call stands for a sub-agent's ask; empty for the reply's own. */
function asker(call) {
  const path = askedBy(call);
  return path.length ? `asked by ${path.join('/')}: ` : '';
}

/** One answer line from `lines`, trimmed, after `prompt` on stderr; null at end of input. */
async function ask(prompt, lines) {
  process.stderr.write(prompt);
  const line = await lines.next();
  return line === null ? null : line.trim();
}

/** Asks about each paused call; the confirmations, or null when input ends. */
async function review(calls, lines) {
  const confirmations = [];
  for (const call of calls) {
    const prompt = `${asker(call)}${call.name} ${oneLine(call.arguments)}`;
    let choice = await ask(`${prompt}: [a]pprove, [e]dit or [r]eject? `, lines);
    while (choice !== null && !['a', 'e', 'r'].includes(choice.toLowerCase())) {
      choice = await ask('type a, e or r: ', lines);
    }
    if (choice === null) return null;
    choice = choice.toLowerCase();
    if (choice === 'a') {
      confirmations.push({ callId: call.id, confirmed: true });
    } else if (choice === 'e') {
      const edited = await ask('arguments (a JSON object): ', lines);
      if (edited === null) return null;
      confirmations.push({ callId: call.id, confirmed: true, arguments: edited });
    } else {
      const reason = await ask('reason (the model reads it): ', lines);
      confirmations.push({ callId: call.id, confirmed: false, reason: reason ?? '' });
    }
  }
  return confirmations;
}

/**
 * Asks for the result of each call awaiting external execution (a sub-agent's, passed up as
 * `external_<name>`, is asked as the tool it stands for, with who asks): the line is its
 * output; a line starting with `!` is an error result. The results, or null when input ends.
 */
async function results(calls, lines) {
  const answers = [];
  for (const call of calls) {
    let tool = call.name;
    let args = call.arguments;
    if (askedBy(call).length) ({ tool, arguments: args } = JSON.parse(call.arguments));
    const line = await ask(
      `${asker(call)}${tool} ${args || '{}'}: its result ('!' first: an error)? `,
      lines,
    );
    if (line === null) return null;
    const failed = line.startsWith('!');
    answers.push({
      callId: call.id,
      output: failed ? line.slice(1).trim() : line,
      state: failed ? 'TOOL_RESULT_STATE_ERROR' : 'TOOL_RESULT_STATE_SUCCESS',
    });
  }
  return answers;
}

/**
 * Prints a reply's events; its reply_end, the calls it paused on for confirmation (`paused`)
 * and those it paused on for external execution (`external`). The session id of its
 * reply_start goes into `where.session` as soon as it arrives (Ctrl-C names it).
 */
async function show(events, printer, where) {
  let end;
  let paused = [];
  let external = [];
  for await (const event of events) {
    if (printer) printer.print(event);
    else process.stdout.write(`${jsonLine(event)}\n`);
    if (event.source_path?.length) continue; // a sub-agent's pause or end is not the reply's
    if (event.type === 'require_user_confirm') paused = event.tool_calls;
    if (event.type === 'require_external_execution') external = event.tool_calls;
    if (event.type === 'reply_start' && event.session_id) where.session = event.session_id;
    if (event.type === 'reply_end') end = event;
  }
  return { end, paused, external };
}

/**
 * What Ctrl-C leaves behind, as `hookmesh chat` says it: a durable reply goes on (follow
 * it), an `exit` one was interrupted with the call (continue the session).
 */
function interruptedHint(sessionId, durability) {
  if (!sessionId) return '';
  if (durability === 'exit') return `; continue with --session ${sessionId}`;
  return (
    `; the reply goes on: follow it with --attach ${sessionId}, or continue with ` +
    `--session ${sessionId}`
  );
}

/** The `error: …` line of a reply that ended with an error, as `hookmesh chat` prints it. */
function replyFailure(error) {
  return `error: ${error?.reason ?? ''}: ${error?.message || 'the reply failed'}`;
}

/**
 * Refuses a --session that does not exist (a typo would start a new conversation) unless
 * --new-session asks for it, and one that does with --new-session.
 */
async function checkSession(client, sessionId, isNew, signal) {
  try {
    await client.getSession(sessionId, { signal });
  } catch (err) {
    if (isNew && err instanceof AgentClientError && err.code === grpc.status.NOT_FOUND) return;
    throw err;
  }
  if (isNew) {
    throw new AgentClientError({
      code: grpc.status.ALREADY_EXISTS,
      codeName: 'ALREADY_EXISTS',
      details: `session ${sessionId} already exists`,
      reason: 'SESSION_EXISTS',
    });
  }
}

async function main() {
  const opts = options();
  // The reader went away (`node chat.js --json ... | head -3`): it has what it wanted.
  process.stdout.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(EXIT_OK);
    throw err;
  });
  const client = new AgentClient(opts.target, {
    timeoutMs: opts.timeoutMs,
    token: opts.token,
    credentials: opts.credentials,
  });
  const callee = {
    address: opts.target,
    service: 'agent',
    timeoutS: opts.timeoutS,
    credentials: opts.credentials,
  };
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort());
  const printer = opts.json ? null : new HumanPrinter();
  let end;
  const where = { session: opts.attach || opts.reply.sessionId };
  const lines = new Lines(process.stdin);
  try {
    if (opts.reply.sessionId) {
      await checkSession(client, opts.reply.sessionId, opts.newSession, abort.signal);
    }
    const events = opts.attach
      ? client.watch(opts.attach, { signal: abort.signal })
      : client.reply(opts.text, { ...opts.reply, signal: abort.signal });
    let paused;
    let external;
    ({ end, paused, external } = await show(events, printer, where));
    // Confirmations first, then external results, until the reply waits no more.
    while (paused.length || external.length) {
      const kind = paused.length ? 'confirmations' : 'externalResults';
      const given = paused.length ? await review(paused, lines) : await results(external, lines);
      if (given === null) break; // the end of input: the reply stays paused
      const answers = { [kind]: given };
      try {
        ({ end, paused, external } = await show(
          client.resume(where.session, { ...answers, signal: abort.signal }),
          printer,
          where,
        ));
      } catch (err) {
        if (!(err instanceof AgentClientError) || err.reason !== 'INVALID_SCHEMA') throw err;
        const { line } = await failureLine(err, callee);
        process.stderr.write(`refused: ${line.replace(/^error: /, '')}\n`);
      }
    }
  } catch (err) {
    if (abort.signal.aborted) {
      const hint = interruptedHint(where.session, opts.reply.durability);
      process.stderr.write(`interrupted${hint}\n`);
      return EXIT_SIGINT;
    }
    if (!(err instanceof AgentClientError)) throw err;
    const { line, code } = await failureLine(err, callee);
    process.stderr.write(`${line}\n`);
    return code;
  } finally {
    lines.close();
    client.close();
  }
  if (end === undefined) {
    process.stderr.write('error: the stream closed without reply_end\n');
    return EXIT_ERROR;
  }
  if (end.finish_reason === 'FINISH_REASON_ERROR') {
    process.stderr.write(`${replyFailure(end.error)}\n`);
    return EXIT_ERROR;
  }
  return EXIT_OK;
}

process.exitCode = await main();
