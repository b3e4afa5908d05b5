// Durable-run interop (issue 12): a JS agent that retries a failed step, for the Python client to read.
import * as Ably from 'ably';
import { createAgentSession, Invocation } from '@ably/ai-transport';
import { ResponsesCodec } from '@ably/ai-transport/openai';

const plain = (value) => JSON.parse(JSON.stringify(value));

async function connectedClient(options) {
  const client = new Ably.Realtime({ ...options, logLevel: 0 });
  if (client.connection.state !== 'connected') await client.connection.once('connected');
  return client;
}

async function* failing(events) {
  for (const event of events) {
    await new Promise((r) => setTimeout(r, 0));
    yield event;
  }
  throw new Error('model stream reset');
}

async function* stream(events) {
  for (const event of events) yield event;
}

// One invocation: the first attempt of a step fails mid-stream, the next createStep() (no stepId)
// re-attempts the same step id, then the run ends complete.
export async function agentRetry({ options, channel, invocation, failEvents, finalEvents, stepId }) {
  const client = await connectedClient(options);
  const session = createAgentSession({ client, channelName: channel, codec: ResponsesCodec });
  await session.connect();
  try {
    const run = session.createRun(Invocation.fromJSON(invocation));
    while (run.view.hasOlder()) await run.view.loadOlder(100);
    await run.start();
    const first = run.createStep(stepId === undefined ? undefined : { stepId });
    await first.start();
    const failed = await first.pipe(failing(failEvents));
    await first.end();
    const retry = run.createStep();
    await retry.start();
    const ok = await retry.pipe(stream(finalEvents));
    await retry.end();
    await run.end({ reason: 'complete' });
    await new Promise((r) => setTimeout(r, 200));
    return {
      runId: run.runId,
      stepIds: [first.stepId, retry.stepId],
      reasons: [failed.reason, ok.reason],
      messages: plain(run.view.getMessages()),
    };
  } finally {
    await session.detach();
    client.close();
  }
}
