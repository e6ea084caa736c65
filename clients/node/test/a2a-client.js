#!/usr/bin/env node
// Drives `hookmesh serve a2a` with @a2a-js/sdk's client (A2A 1.0) and prints what each
// scenario saw as one JSON object: tests/integration/test_a2a_node.py checks it.
// Usage: node test/a2a-client.js http://127.0.0.1:PORT
import { Role, TaskState } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";

const url = process.argv[2];
const client = await new ClientFactory().createFromUrl(url);

const text = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" });
const message = (value, ids = {}) => ({
  messageId: crypto.randomUUID(),
  contextId: ids.contextId ?? "",
  taskId: ids.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [text(value)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const request = (msg) => ({ tenant: "", message: msg, configuration: undefined, metadata: undefined });
const partValue = (part) => part.content?.value;

// One streamed task step: what arrived, the last state, its artifact and status message.
async function stream(msg) {
  const seen = { kinds: [], states: [], task: null, artifact: [], status: [], hookmesh: [] };
  for await (const event of client.sendMessageStream(request(msg))) {
    const { $case, value } = event.payload ?? {};
    seen.kinds.push($case);
    if ($case === "task") seen.task = { id: value.id, contextId: value.contextId };
    if ($case === "statusUpdate") {
      seen.states.push(TaskState[value.status.state]);
      const carried = value.metadata?.hookmeshEvent;
      if (carried) seen.hookmesh.push(carried.type);
      if (value.status.message) seen.status = value.status.message.parts.map(partValue);
    }
    if ($case === "artifactUpdate") seen.artifact = value.artifact.parts.map(partValue);
  }
  return seen;
}

const report = {};
report.card = await client.getAgentCard().then((card) => ({ name: card.name, skills: card.skills.map((s) => s.id) }));

// 1. A streamed task that completes (the agent calls its weather tool).
report.streamed = await stream(message("what is the weather in Oslo"));
const got = await client.getTask({ tenant: "", id: report.streamed.task.id, historyLength: undefined });
report.streamed.got = { state: TaskState[got.status.state], artifact: got.artifacts[0]?.parts.map(partValue) };

// 2. A task that pauses for input (a tool needing confirmation), answered "yes".
const asked = await stream(message("delete my notes"));
const answered = await stream(message("yes", { taskId: asked.task.id, contextId: asked.task.contextId }));
report.paused = { asked, answered };

console.log(JSON.stringify(report));
