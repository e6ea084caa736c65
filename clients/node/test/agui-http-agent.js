#!/usr/bin/env node
// Drives a hookmesh AG-UI gateway with @ag-ui/client's HttpAgent and prints what each
// scenario saw as one JSON object: tests/integration/test_agui_node.py checks it.
// Usage: node test/agui-http-agent.js http://127.0.0.1:PORT/agui
import { HttpAgent } from "@ag-ui/client";

const url = process.argv[2];
const PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const LOCATE = {
  name: "get_location",
  description: "The user's location.",
  parameters: { type: "object", properties: { precision: { type: "string" } } },
};

// One run: the events it produced, how it finished, and any error.
async function run(agent, params = {}) {
  const seen = { types: [], finished: null, runError: null, error: null };
  const subscriber = {
    onEvent: ({ event }) => { seen.types.push(event.type); },
    onRunFinishedEvent: ({ event }) => { seen.finished = event; },
    onRunErrorEvent: ({ event }) => { seen.runError = { code: event.code, message: event.message }; },
  };
  try {
    await agent.runAgent(params, subscriber);
  } catch (error) {
    seen.error = { message: String(error.message || error), status: error.status ?? null };
  }
  return seen;
}

const lastAnswer = (agent) => agent.messages.filter((m) => m.role === "assistant" && m.content).at(-1)?.content;
const user = (content) => ({ id: crypto.randomUUID(), role: "user", content });

const report = {};

// 1. Text.
const text = new HttpAgent({ url, threadId: "node-text" });
text.addMessage(user("hello from node"));
report.text = { ...(await run(text)), answer: lastAnswer(text) };

// 2. A front-end tool round trip: the run ends with the call pending; the next run carries
// the tool message with its result.
const tool = new HttpAgent({ url, threadId: "node-tool" });
tool.addMessage(user("where am I?"));
const first = await run(tool, { tools: [LOCATE] });
const callId = first.finished?.outcome?.pendingToolCallIds?.[0];
const call = tool.messages.flatMap((m) => m.toolCalls || []).find((c) => c.id === callId);
tool.addMessage({ id: crypto.randomUUID(), role: "tool", toolCallId: callId, content: "Lisbon" });
const second = await run(tool, { tools: [LOCATE] });
report.tool = { first, call, second, answer: lastAnswer(tool) };

// 3. An image input.
const image = new HttpAgent({ url, threadId: "node-image" });
image.addMessage(user([
  { type: "text", text: "What is this?" },
  { type: "image", source: { type: "data", value: PNG, mimeType: "image/png" } },
]));
report.image = { ...(await run(image)), answer: lastAnswer(image) };

// 4. Errors: the model fails (RUN_ERROR), and a request the gateway refuses (HTTP 400).
const failing = new HttpAgent({ url, threadId: "node-error" });
failing.addMessage(user("fail please"));
report.error = await run(failing);
const refused = new HttpAgent({ url, threadId: "not a valid id" });
refused.addMessage(user("hi"));
report.refused = await run(refused);

// 5. A confirmation: the run ends with an interrupt; the next run resumes it.
const confirm = new HttpAgent({ url, threadId: "node-confirm" });
confirm.addMessage(user("please delete my notes"));
const asked = await run(confirm);
const interrupt = asked.finished?.outcome?.interrupts?.[0];
const approved = await run(confirm, {
  resume: [{ interruptId: interrupt?.id, status: "resolved", payload: { approved: true } }],
});
report.confirm = { asked, interrupt, approved, answer: lastAnswer(confirm) };

process.stdout.write(JSON.stringify(report));
