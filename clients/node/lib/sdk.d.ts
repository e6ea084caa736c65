// Type declarations of the Node sidecar SDK (lib/sdk.js). Messages are the proto-loader
// objects of protos/hookmesh/v1 (snake_case fields, enums as strings, oneof arm names set).

export type Message = Record<string, unknown>;
export type AgentEvent = Message & { event?: string; reply_id?: string };

export type HookMode = 'HOOK_MODE_INTERCEPT' | 'HOOK_MODE_PRE_ONLY' | 'HOOK_MODE_OBSERVE';

export interface HookOptions {
  mode?: HookMode;
  /** Items to wait on with a verdict: AgentEvent arm names, "chunk", or "*". */
  subscriptions?: string[];
  /** Items sent as they pass and never answered. */
  readOnly?: string[];
}

/** One invocation: what the agent sent, and the ways to answer it. */
export interface Invocation {
  readonly id: string;
  /** The HookInvocation as sent (reply_id, user_id, kind, context, kwargs...). */
  readonly invocation: Message;
  /** The state slice as the agent last sent it. */
  state: Record<string, unknown>;
  /** Aborted when the agent cancels the invocation or the stream ends. */
  readonly signal: AbortSignal;
  /** When the agent gives up waiting for the answer it expects now (ms since the epoch). */
  readonly deadline: number;
  emit(event: AgentEvent): void;
  mutate(mutation: Message): void;
  /** Replaces the whole state slice. */
  setState(state: Record<string, unknown>): void;
  /**
   * Sends `done` now (default `{}`), unasked while the downstream runs (a deadline of your
   * own): the agent stops the downstream. A pending `next` rejects with InvocationEnded.
   * on_model_call: `{model_response}` or `{error}`; once a stream started `{error}` or `{}`.
   */
  end(done?: Message): void;
  /**
   * In an event hook's `onEvent`: nothing more is needed from the downstream. This event's
   * verdict goes as `verdict {final: true}`, `next` resolves and the agent passes the rest
   * without a round trip; nothing more is sent for the invocation (no done, no emit).
   */
  passRest(): void;
}

/** Runs an event hook's downstream: `onEvent` sees each subscribed event; true drops it. */
export type EventNext = (
  callNext?: Message,
  onEvent?: (event: AgentEvent) => boolean | Promise<boolean>,
) => Promise<void>;
export type ModelNext = (
  overrides?: Message,
  onChunk?: (chunk: Message) => void | Promise<void>,
) => Promise<Message | null>;

export interface Tool {
  /** A ToolSpec; `parameters` a plain JSON schema object. */
  spec: { name: string; description?: string; parameters?: Record<string, unknown> } & Message;
  run(
    request: Message & { name: string; arguments: string },
    out: { text(text: string): void; emit(event: AgentEvent): void; mutate(mutation: Message): void },
  ): void | Promise<void>;
}

/** A middleware: implement only the hooks you need. */
export interface Middleware {
  key: string;
  needsContext?: boolean;
  failOpen?: boolean;
  hooks?: Partial<Record<'onReply' | 'onReasoning' | 'onModelCall' | 'onActing' | 'onCheckPermission' | 'onCompressContext', HookOptions>>;
  tools?: Tool[];
  onReply?(inv: Invocation, args: Message, next: EventNext): Promise<void>;
  onReasoning?(inv: Invocation, args: Message, next: EventNext): Promise<void>;
  onActing?(inv: Invocation, args: Message, next: EventNext): Promise<void>;
  /** Resolving to null (or the downstream's response) keeps the downstream's. */
  onModelCall?(inv: Invocation, args: Message, next: ModelNext): Promise<Message | null>;
  onCheckPermission?(inv: Invocation, args: Message, next: () => Promise<Message | null>): Promise<Message | null>;
  onCompressContext?(inv: Invocation, args: Message, next: () => Promise<void>): Promise<void>;
  transformSystemPrompt?(request: Message): string | Message | Promise<string | Message>;
  afterAgent?(request: Message): Message | void | Promise<Message | void>;
}

/** A middleware's own failure: the client sees its reason and metadata. */
export class MiddlewareError extends Error {
  constructor(reason: string, message: string, metadata?: Record<string, string>);
  reason: string;
  metadata: Record<string, string>;
}

/** The downstream failed; throwing it on ends the hook with a plain done (retry: call next again). */
export class DownstreamError extends Error {
  error: Message;
}

/** What `next` rejects with after `inv.end()`: let it propagate (the done was sent). */
export class InvocationEnded extends Error {}

export function describe(mw: Middleware): Message;
export function middlewareService(mw: Middleware): Record<string, unknown> & {
  drain(graceMs: number): Promise<void>;
};
export function invalidArguments(message: string): MiddlewareError;
export function main(mw: Middleware, script?: string): Promise<void>;
export function toStruct(object: Record<string, unknown>): Message;
export function toValue(value: unknown): Message;
export function fromStruct(struct: Message | null | undefined): Record<string, unknown>;
