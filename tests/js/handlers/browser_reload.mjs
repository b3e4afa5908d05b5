// The browser example's reload, with the reference implementation (@ably/ai-transport@0.8.0 + ably-js)
// in node: a page's client session (re)loads the conversation while a run resumed after an approval
// streams its answer, and a live wire of that run reaches the session BEFORE the history answer does
// (forced: the history answer is handed over only once that wire has been delivered), which is what a
// loaded machine does now and then. With `hold`, the session's channel is wrapped by the page's own
// `holdLiveMessages` (examples/browser/live_hold.js), as examples/browser/app.js does.
//
// reloadWhileResumedRunStreams runs the agent's second invocation (the approved call, then the scripted
// `turn`) as a JS agent, pausing its stream twice: once the answer has started (then the "page" loads),
// and once its next wire is out (then the page's history read returns). It answers what the reloaded
// page's view showed right after its history load and once the run had ended.
import * as Ably from 'ably';
import { createAgentSession, createClientSession, Invocation } from '@ably/ai-transport';
import { ResponsesCodec, approvedUnexecutedCalls } from '@ably/ai-transport/openai';

import { holdLiveMessages } from '../../../examples/browser/live_hold.js';

const plain = (value) => JSON.parse(JSON.stringify(value));

function realtime(options) {
  return new Ably.Realtime({ ...options, logLevel: 0 });
}

function latch() {
  let open;
  const opened = new Promise((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

/** Resolve once `predicate()` holds, re-checked on every `update` / `run` of `view`. */
function until(view, predicate) {
  return new Promise((resolve) => {
    const check = () => {
      if (!predicate()) return;
      offs.forEach((off) => off());
      resolve();
    };
    const offs = [view.on('update', check), view.on('run', check)];
    check();
  });
}

/** What a view shows: each message's role and text, and the runs. */
function shown(view) {
  const text = (message) =>
    message.items
      .filter((it) => it.type === 'message')
      .flatMap((it) => it.content ?? [])
      .map((p) => p.text ?? '')
      .join('');
  return {
    messages: view.getMessages().map(({ message }) => ({
      role: message.role,
      text: text(message),
      items: message.items.map((it) => it.type),
    })),
    runs: plain(view.runs().map(({ runId, status }) => ({ runId, status }))),
  };
}

const runIdOf = (message) => message.extras?.ai?.transport?.['run-id'];

export async function reloadWhileResumedRunStreams({ clientOptions, agentOptions, channel, invocation, turn, toolOutputs, hold }) {
  // The agent's stream, paused where the test needs it.
  const answering = latch(); // the page may load: the answer has started
  const nextWire = latch(); // the page's history read is out: send one more piece
  const rest = latch(); // the page has loaded: finish
  const firstDelta = turn.findIndex((e) => e.type === 'response.output_text.delta');
  async function* paused() {
    for (const [i, event] of turn.entries()) {
      if (i === firstDelta + 1) {
        answering.open();
        await nextWire.opened;
      } else if (i === firstDelta + 2) {
        await rest.opened;
      }
      yield event;
    }
  }

  const agentClient = realtime(agentOptions);
  const agent = createAgentSession({ client: agentClient, channelName: channel, codec: ResponsesCodec });
  const pageClient = realtime(clientOptions);
  let page;
  try {
    await agent.connect();
    const run = agent.createRun(Invocation.fromJSON(invocation));
    while (run.view.hasOlder()) await run.view.loadOlder(100);
    await run.start();
    const messages = () => run.view.getMessages().map((m) => m.message);
    for (const call of approvedUnexecutedCalls(messages())) {
      const step = run.createStep();
      await step.start();
      await step.send({
        type: 'function_call_output',
        item: { type: 'function_call_output', call_id: call.call_id, output: toolOutputs[call.name] },
      });
      await step.end();
    }
    const piped = run.pipe(paused());
    await answering.opened;
    const answerStarted = () => {
      const last = run.view.getMessages().at(-1)?.message;
      return last?.items.some((it) => it.type === 'message' && (it.content ?? []).some((p) => p.text)) ?? false;
    };
    await until(run.view, answerStarted); // the agent's own echo: the answer is on the channel

    // The reload. `seen` records what the channel delivers (subscribed before any hold, so never held).
    const pageChannel = pageClient.channels.get(channel);
    const seen = [];
    const delivered = [];
    pageChannel.subscribe((message) => {
      seen.push(message);
      for (const waiter of delivered.splice(0)) waiter();
    });
    const release = hold ? holdLiveMessages(pageChannel) : () => {};
    const history = pageChannel.history.bind(pageChannel);
    pageChannel.history = async (params) => {
      const answer = await history(params);
      // One more wire of the run goes out and reaches this channel before the history answer does.
      const before = seen.length;
      nextWire.open();
      while (!seen.slice(before).some((m) => runIdOf(m) === run.runId)) {
        await new Promise((resolve) => delivered.push(resolve));
      }
      pageChannel.history = history;
      return answer;
    };
    page = createClientSession({ client: pageClient, channelName: channel, codec: ResponsesCodec });
    await page.connect();
    await page.view.loadOlder(50);
    release();
    const afterLoad = shown(page.view);

    rest.open();
    const result = await piped;
    await run.end({ reason: result.reason === 'complete' ? 'complete' : result.reason });
    // The run's end reaches the page's channel; the session (subscribed after `seen`'s listener) has
    // it once this tick's listeners ran.
    while (!seen.some((m) => m.name === 'ai-run-end' && runIdOf(m) === run.runId)) {
      await new Promise((resolve) => delivered.push(resolve));
    }
    await new Promise((resolve) => setImmediate(resolve));
    return { runId: run.runId, afterLoad, final: shown(page.view) };
  } finally {
    await page?.close().catch(() => {});
    pageClient.close();
    await agent.end().catch(() => {});
    agentClient.close();
  }
}
