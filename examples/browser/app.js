// The browser side of the example: ably-js + @ably/ai-transport (both from npm, bundled by esbuild).
//
// It opens a client session on the channel, sends the user's question, asks the local server to wake
// the Python agent with the run's invocation, renders the conversation as it streams, and shows
// Approve / Deny buttons for tool calls that wait for a human. An answer is published on the channel
// (a tool-approval-response folded into the suspended run) and the agent is woken again to resume.
import * as Ably from 'ably';
import { createClientSession } from '@ably/ai-transport';
import { ResponsesCodec } from '@ably/ai-transport/openai';

const $ = (sel) => document.querySelector(sel);

function setStatus(text) {
  $('#status').textContent = text;
}

async function wake(invocation) {
  // The SDK never does HTTP: waking an agent is the application's job.
  const res = await fetch('/invoke', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(invocation),
  });
  if (!res.ok) throw new Error(`agent wake-up failed: HTTP ${res.status} ${await res.text()}`);
}

function textOf(parts, types, field = 'text') {
  if (!Array.isArray(parts)) return '';
  return parts
    .filter((p) => p && types.includes(p.type) && typeof p[field] === 'string')
    .map((p) => p[field])
    .join('');
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function callState(states, outputs, callId) {
  const s = states[callId] || {};
  if (s.approval === 'denied') return s.reason ? `denied (${s.reason})` : 'denied';
  if (s.result === 'failed') return 'failed';
  if (outputs.has(callId)) return 'done';
  if (s.approval === 'pending') return 'awaiting approval';
  if (s.approval === 'approved') return 'approved, running';
  return 'called';
}

async function main() {
  const config = await (await fetch('/config.json')).json();
  const client = new Ably.Realtime({ ...config.ably, clientId: config.clientId });
  client.connection.on('failed', (change) => setStatus(`connection failed: ${change.reason?.message}`));

  const codec = ResponsesCodec;
  const session = createClientSession({ client, channelName: config.channel, codec });
  session.on('error', (err) => setStatus(`session error: ${err.message}`));
  await session.connect();
  const view = session.view;
  const answered = new Set();

  function render() {
    const messages = view.getMessages();
    const outputs = new Map();
    for (const { message } of messages)
      for (const item of message.items)
        if (item.type === 'function_call_output') outputs.set(item.call_id, item.output);

    const root = $('#transcript');
    root.replaceChildren();
    for (const { codecMessageId, message } of messages) {
      const states = message.toolCallStates || {};
      const box = el('div', `message ${message.role}`);
      box.dataset.codecMessageId = codecMessageId;
      for (const item of message.items) {
        if (item.type === 'message' && message.role === 'user') {
          box.append(el('div', 'user-text', textOf(item.content, ['input_text'])));
        } else if (item.type === 'message') {
          box.append(el('div', 'assistant-text', textOf(item.content, ['output_text'])));
          const refusal = textOf(item.content, ['refusal'], 'refusal');
          if (refusal) box.append(el('div', 'refusal', refusal));
        } else if (item.type === 'reasoning') {
          const t = textOf(item.summary, ['summary_text']) || textOf(item.content, ['reasoning_text']);
          if (t) box.append(el('div', 'reasoning', t));
        } else if (item.type === 'function_call') {
          const state = callState(states, outputs, item.call_id);
          const call = el('div', 'call');
          call.dataset.callId = item.call_id;
          call.dataset.state = state;
          call.append(el('code', 'call-desc', `${item.name}(${item.arguments})`), el('span', 'call-state', state));
          if (state === 'awaiting approval' && !answered.has(item.call_id)) {
            const approve = el('button', 'approve', 'Approve');
            const deny = el('button', 'deny', 'Deny');
            approve.onclick = () => answer(codecMessageId, item.call_id, true);
            deny.onclick = () => answer(codecMessageId, item.call_id, false, 'Denied in the browser');
            call.append(approve, deny);
          }
          box.append(call);
        } else if (item.type === 'function_call_output') {
          if ((states[item.call_id] || {}).approval === 'denied') continue;
          const out = typeof item.output === 'string' ? item.output : JSON.stringify(item.output);
          box.append(el('div', 'result', `result: ${out}`));
        }
      }
      root.append(box);
    }
    // How much text the page showed after each render (lets a test see that the run streamed in).
    const shown = [...root.querySelectorAll('.assistant-text, .reasoning')].reduce((n, e) => n + e.textContent.length, 0);
    (window.shownTextLengths ??= []).push(shown);

    const runs = view.runs();
    const last = runs[runs.length - 1];
    $('#runs').textContent = runs.map((r) => `${r.runId.slice(0, 8)}: ${r.status}`).join(' | ');
    document.body.dataset.runStatus = last ? last.status : 'none';
    if (last) {
      const label = { active: 'agent running', suspended: 'waiting for your approval' }[last.status];
      setStatus(label ?? `run ${last.status}`);
    }
  }

  async function answer(codecMessageId, callId, approved, reason) {
    answered.add(callId);
    render();
    const run = view.runOf(codecMessageId);
    const payload = approved ? { call_id: callId, approved: true } : { call_id: callId, approved: false, reason };
    setStatus(approved ? 'approved; waking the agent…' : 'denied; waking the agent…');
    const sent = await view.send([codec.createToolApprovalResponse(codecMessageId, payload)], { runId: run?.runId });
    await wake(sent.toInvocation().toJSON());
  }

  view.on('update', render);
  view.on('run', render);

  $('#ask').onsubmit = async (ev) => {
    ev.preventDefault();
    const text = $('#question').value.trim();
    if (!text) return;
    setStatus('sending…');
    const run = await view.send([
      codec.createUserMessage({
        role: 'user',
        items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }],
      }),
    ]);
    setStatus('waking the agent…');
    await wake(run.toInvocation().toJSON());
    setStatus('agent running');
  };

  render();
  setStatus('connected');
  document.body.dataset.ready = 'true';
}

main().catch((err) => {
  setStatus(`error: ${err.message}`);
  console.error(err);
});
