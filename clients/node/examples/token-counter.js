#!/usr/bin/env node
// A token counter: each model call's output tokens (its usage, else the answer's words) are
// reported inside the call and summed in the state slice; the system prompt gets a tag.
import { main, toValue } from '../lib/sdk.js';
import { assistantText, countWords } from '../lib/token-counter.js';

const outputTokens = (usage) => (usage ? Number(usage.output_tokens) || 0 : null);

const tokenCounter = {
  key: 'node-token-counter',
  hooks: { onModelCall: { subscriptions: ['chunk'] } }, // chunks are read-only: no round trip
  transformSystemPrompt: (request) => `${request.prompt ?? ''} [node sidecar]`,
  async onModelCall(inv, args, next) {
    let text = '';
    let usage = null;
    const response = await next(undefined, (chunk) => {
      text += chunk.text ?? ''; // words are counted on the whole text: a chunk may split one
      usage = outputTokens(chunk.usage) ?? usage;
    });
    const n = response
      ? (outputTokens(response.usage) ?? countWords(assistantText(response.message)))
      : (usage ?? countWords(text));
    const { tokens = 0, calls = 0 } = inv.state;
    inv.setState({ ...inv.state, tokens: tokens + n, calls: calls + 1 });
    inv.emit({ custom: { name: 'node.tokens', value: toValue(n) } });
    return null; // the response unchanged
  },
};

await main(tokenCounter, 'examples/token-counter.js');
