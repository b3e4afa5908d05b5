// The four readers of the reference, over messages in the JS JSON shape.
// Items are tagged with their position so Python can check identity-based results by index.
import {
  toResponsesInput,
  resolvedCallIds,
  unansweredCalls,
  approvedUnexecutedCalls,
} from '@ably/ai-transport/openai';

function positions(messages, found) {
  const where = new Map();
  messages.forEach((m, i) => m.items.forEach((it, j) => where.set(it, [i, j])));
  return found.map((it) => where.get(it));
}

export async function readers({ messages }) {
  return {
    toResponsesInput: positions(messages, toResponsesInput(messages)),
    resolvedCallIds: [...resolvedCallIds(messages)],
    unansweredCalls: positions(messages, unansweredCalls(messages)),
    approvedUnexecutedCalls: positions(messages, approvedUnexecutedCalls(messages)),
  };
}

export async function readersBatch({ cases }) {
  const out = [];
  for (const c of cases) out.push(await readers({ messages: c }));
  return out;
}
