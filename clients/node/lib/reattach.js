// Where a reply's stream stands, to re-attach with WatchReply after it broke (docs/durability.md).
import * as grpc from '@grpc/grpc-js';

/**
 * The UNAVAILABLE failures after which a stream re-attaches to its reply: no reason (the
 * connection or the replica went away), `STREAM_RESET` (a proxy reset the stream) and
 * `REPLY_HANDED_OVER` (the replica drains). A store outage is reported instead: re-attaching
 * could only wait for the store. The same set as the Python client's.
 */
export const REATTACH_REASONS = new Set(['', 'STREAM_RESET', 'REPLY_HANDED_OVER']);

/** Milliseconds between re-attach attempts; the last one repeats until the deadline. */
export const BACKOFF_MS = [50, 100, 200, 500, 1000];

/**
 * The reply a stream follows and the last sequence number it delivered: `take` drops a
 * re-sent number, `canRetry` says whether a failure is one to re-attach after, `request` is
 * the WatchReplyRequest that continues where the stream stopped.
 */
export class Reattach {
  /** @param {string} sessionId The session, when the caller named it ('' until reply_start). */
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.replyId = '';
    this.seq = 0;
  }

  /**
   * The response's event (normalised by `normalise`), or null when its number was seen.
   *
   * @param {{event: object, seq?: string | number}} response A Reply, Resume or WatchReply
   *   response (proto-loader gives uint64 as a string).
   * @param {(event: object) => object} normalise Turns the AgentEvent into the client's shape.
   * @returns {object | null} The event, or null for a duplicate.
   */
  take(response, normalise) {
    const seq = Number(response.seq ?? 0);
    if (seq && seq <= this.seq) return null;
    if (seq) this.seq = seq;
    const event = normalise(response.event);
    const own = !event.source_path?.length;
    if (!this.replyId && own && event.reply_id) {
      this.replyId = event.reply_id;
      if (event.type === 'reply_start' && event.session_id) this.sessionId = event.session_id;
    }
    return event;
  }

  /**
   * Whether to re-attach after `error`: the reply is known and the failure is UNAVAILABLE
   * with a reason of `REATTACH_REASONS`.
   *
   * @param {{code: number | null, reason: string}} error An AgentClientError.
   * @returns {boolean} Re-attach.
   */
  canRetry(error) {
    return (
      Boolean(this.replyId && this.sessionId) &&
      error.code === grpc.status.UNAVAILABLE &&
      REATTACH_REASONS.has(error.reason)
    );
  }

  /** @returns {object} The WatchReplyRequest that continues after the last event taken. */
  request() {
    return { session_id: this.sessionId, reply_id: this.replyId, after_seq: String(this.seq) };
  }
}

/**
 * Resolves after `ms` milliseconds, or at once when `signal` aborts.
 *
 * @param {number} ms How long.
 * @param {AbortSignal} [signal] Cuts the wait short.
 * @returns {Promise<void>} Resolves when the time is up or the signal aborts.
 */
export function pause(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
