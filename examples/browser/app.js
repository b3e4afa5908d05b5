// The browser side of the example: ably-js + @ably/ai-transport (both from npm, bundled by esbuild).
//
// One conversation is one Ably channel, `<namespace>:<id>`. The page keeps the id in the URL
// (`?c=<id>`) and in localStorage, so a reload comes back to the same conversation: it connects a
// client session, then pages the conversation in from channel history (`view.loadOlder`, which reads
// history `untilAttach`, so a run still streaming when the page loaded continues live from where
// history left off). It sends the user's question, asks the local server to wake the Python agent
// with the run's invocation, renders the conversation as it streams, and shows Approve / Deny for a
// tool call that waits for a human. The answer is published on the channel and the agent is woken
// again to resume.
//
// What the header says and what each call card says are derived from the same state (the run's
// lifecycle status and the message's `toolCallStates`), so they cannot disagree.
//
// The page never lets ably-js hammer a dead emulator: it asks the example server whether the emulator
// answers (`/health`), says on screen when it does not, and connects (or reconnects, re-reading the
// conversation from history) once it does. On every (re)connect the live messages that arrive while
// the history loads are held and applied after it (live_hold.js: the 0.8.0 tree must see a resumed
// run's history before its live wires, or it hides the run).
import * as Ably from 'ably';
import { createClientSession } from '@ably/ai-transport';
import { ResponsesCodec } from '@ably/ai-transport/openai';
import { holdLiveMessages } from './live_hold.js';

const codec = ResponsesCodec;
const HISTORY_PAGE = 50;
const SUGGESTIONS = [
  "What's the weather in Paris right now? Should I take an umbrella?",
  "Is it raining in London? Do I need an umbrella?",
];

const $ = (sel) => document.querySelector(sel);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---------------------------------------------------------------------------------------------
// The conversation's id: ?c= in the URL, else the last one (localStorage), else a fresh one.
// ---------------------------------------------------------------------------------------------

const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const STORE_KEY = 'ai-transport-example:conversation';

function freshId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return 'c' + [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function conversationId() {
  const fromUrl = new URLSearchParams(location.search).get('c');
  let stored = null;
  try {
    stored = localStorage.getItem(STORE_KEY);
  } catch {
    // storage disabled: the URL alone keeps the conversation
  }
  const id = [fromUrl, stored].find((v) => v && ID_PATTERN.test(v)) ?? freshId();
  remember(id);
  return id;
}

function remember(id) {
  try {
    localStorage.setItem(STORE_KEY, id);
  } catch {
    // storage disabled
  }
  const url = new URL(location.href);
  url.searchParams.set('c', id);
  history.replaceState(null, '', url);
}

// ---------------------------------------------------------------------------------------------
// Derived state: one function for the call cards and the status line.
// ---------------------------------------------------------------------------------------------

function textOf(parts, types, field = 'text') {
  if (!Array.isArray(parts)) return '';
  return parts
    .filter((p) => p && types.includes(p.type) && typeof p[field] === 'string')
    .map((p) => p[field])
    .join('');
}

/** A call's state from its toolCallStates entry, its output (if any), its run's status, and the
 * answer this page is still publishing (if any). */
function callState(entry, hasOutput, runStatus, answering) {
  const s = entry || {};
  if (s.approval === 'denied') return { key: 'denied', label: s.reason ? `denied (${s.reason})` : 'denied' };
  if (s.result === 'failed') return { key: 'failed', label: 'failed' };
  if (hasOutput) return { key: 'done', label: 'done' };
  if (s.approval === 'pending') {
    if (answering) return { key: 'answering', label: answering === 'approve' ? 'approving…' : 'denying…' };
    if (runStatus === 'suspended') return { key: 'awaiting-approval', label: 'awaiting approval' };
    return { key: 'requested', label: 'approval requested' }; // the run has not paused yet
  }
  if (s.approval === 'approved') {
    if (runStatus === 'active') return { key: 'running', label: 'approved, running' };
    if (runStatus === 'suspended') return { key: 'approved', label: 'approved, waiting for the agent' };
    return { key: 'approved', label: `approved (run ${runStatus})` };
  }
  return runStatus === 'active' ? { key: 'calling', label: 'calling…' } : { key: 'called', label: 'called' };
}

/** The conversation as the page shows it: messages (with their run's status and their calls'
 * states) and the one status line derived from the newest run and its calls. */
function derive(view, local) {
  const messages = view.getMessages();
  const runs = view.runs();
  const outputs = new Map();
  for (const { message } of messages)
    for (const item of message.items)
      if (item.type === 'function_call_output') outputs.set(item.call_id, item.output);

  const last = runs[runs.length - 1];
  const shown = messages.map(({ codecMessageId, message }) => {
    const run = view.runOf(codecMessageId);
    const runStatus = run?.status;
    const states = message.toolCallStates || {};
    const calls = new Map();
    for (const item of message.items) {
      if (item.type !== 'function_call') continue;
      // The page's own answer counts only until the channel has it (then toolCallStates says).
      if (states[item.call_id]?.approval !== 'pending') local.answering.delete(item.call_id);
      calls.set(item.call_id, callState(states[item.call_id], outputs.has(item.call_id), runStatus,
        local.answering.get(item.call_id)));
    }
    return { codecMessageId, message, run, calls };
  });

  const lastCalls = shown
    .filter((m) => m.message.role === 'assistant' && last && m.run?.runId === last.runId)
    .flatMap((m) => [...m.calls.values()]);
  const has = (key) => lastCalls.some((c) => c.key === key);
  const lastMessage = shown[shown.length - 1];

  let status;
  if (lastMessage?.message.role === 'user' && (!last || lastMessage.run?.runId !== last.runId)) {
    status = { key: 'waking', label: local.wakeError ? 'The agent could not be woken' : 'Waking the agent…' };
  } else if (!last) {
    status = { key: 'idle', label: 'Ask a question to start' };
  } else if (last.status === 'active') {
    status = has('running')
      ? { key: 'running-tool', label: 'Running the approved tool…' }
      : { key: 'streaming', label: 'The agent is answering…' };
  } else if (last.status === 'suspended') {
    if (has('awaiting-approval')) status = { key: 'awaiting-approval', label: 'Waiting for your approval' };
    else if (has('answering')) status = { key: 'answering', label: 'Sending your answer…' };
    else if (has('approved')) status = { key: 'resuming', label: 'Approved: waiting for the agent' };
    else if (has('denied')) status = { key: 'resuming', label: 'Denied: waiting for the agent' };
    else status = { key: 'suspended', label: 'Paused' };
  } else if (last.status === 'complete') {
    status = { key: 'complete', label: 'Answered' };
  } else if (last.status === 'cancelled') {
    status = { key: 'cancelled', label: 'Cancelled' };
  } else {
    status = { key: 'error', label: `The run failed: ${last.error?.message ?? 'unknown error'}` };
  }
  return { shown, runs, last, status };
}

// ---------------------------------------------------------------------------------------------
// The page.
// ---------------------------------------------------------------------------------------------

const ui = (window.ui = { statusLog: [], shownTextLengths: [], renders: 0 });

function setBanner(kind, text) {
  const banner = $('#banner');
  banner.hidden = !text;
  banner.className = `banner ${kind || ''}`;
  banner.textContent = text || '';
}

function setPill(key, label) {
  const pill = $('#status');
  pill.dataset.key = key;
  pill.textContent = label;
  document.body.dataset.status = key;
}

async function main() {
  const config = await (await fetch('/config.json')).json();
  const id = conversationId();
  const channelName = `${config.namespace}:${id}`;
  $('#conversation').textContent = id;
  $('#conversation').title = `channel ${channelName}`;

  const local = { answering: new Map(), wakeError: null };
  let session = null;
  let view = null;
  let generation = 0; // bumps on every (re)connect: late callbacks of an old client are ignored

  $('#new').onclick = () => {
    const fresh = freshId();
    remember(fresh);
    location.reload();
  };

  async function wake(invocation) {
    // The SDK never does HTTP: waking an agent is the application's job.
    let res;
    try {
      res = await fetch('/invoke', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(invocation),
      });
    } catch {
      throw new Error('the example server does not answer');
    }
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  }

  function render() {
    if (!view) return;
    ui.renders += 1;
    const { shown, runs, last, status } = derive(view, local);
    const root = $('#transcript');
    const nearBottom = root.scrollHeight - root.scrollTop - root.clientHeight < 80;
    root.replaceChildren();
    if (view.hasOlder()) {
      const older = el('button', 'older', 'Show earlier messages');
      older.onclick = async () => {
        older.disabled = true;
        await view.loadOlder(HISTORY_PAGE);
        render();
      };
      root.append(older);
    }
    if (shown.length === 0) root.append(emptyState());

    const outputs = new Map();
    for (const { message } of shown)
      for (const item of message.items) if (item.type === 'function_call_output') outputs.set(item.call_id, item.output);

    shown.forEach(({ codecMessageId, message, run, calls }, index) => {
      const row = el('div', `msg ${message.role}`);
      row.dataset.codecMessageId = codecMessageId;
      const bubble = el('div', 'bubble');
      const streaming = message.role === 'assistant' && run?.status === 'active' && index === shown.length - 1;
      if (streaming) row.classList.add('streaming');
      for (const item of message.items) {
        if (item.type === 'message' && message.role === 'user') {
          bubble.append(el('div', 'user-text', textOf(item.content, ['input_text'])));
        } else if (item.type === 'message') {
          const text = textOf(item.content, ['output_text']);
          if (text) bubble.append(el('div', 'assistant-text', text));
          const refusal = textOf(item.content, ['refusal'], 'refusal');
          if (refusal) bubble.append(el('div', 'refusal', refusal));
        } else if (item.type === 'reasoning') {
          const t = textOf(item.summary, ['summary_text']) || textOf(item.content, ['reasoning_text']);
          if (t) {
            const box = el('div', 'reasoning');
            box.append(el('div', 'reasoning-label', 'Thinking'), el('div', 'reasoning-text', t));
            bubble.append(box);
          }
        } else if (item.type === 'function_call') {
          bubble.append(callCard(codecMessageId, item, calls.get(item.call_id), outputs));
        }
      }
      if (streaming) bubble.append(el('span', 'typing', ''));
      if (bubble.childElementCount === 0) return; // nothing to show yet (e.g. an empty tool-output message)
      row.append(bubble);
      root.append(row);
    });
    if (status.key === 'waking') {
      const row = el('div', 'msg assistant pending');
      const bubble = el('div', 'bubble');
      bubble.append(el('span', 'typing', ''));
      row.append(bubble);
      root.append(row);
    }
    if (nearBottom) root.scrollTop = root.scrollHeight;

    setPill(status.key, status.label);
    const busy = ['waking', 'streaming', 'running-tool', 'awaiting-approval', 'answering', 'resuming'].includes(status.key);
    $('#question').disabled = busy;
    $('#send').disabled = busy;
    $('#question').placeholder = status.key === 'awaiting-approval' ? 'Answer the pending approval first' : 'Ask about the weather…';
    $('#runs').textContent = runs.map((r) => `${r.runId.slice(0, 8)}: ${r.status}`).join(' | ');
    document.body.dataset.runStatus = last ? last.status : 'none';

    // For tests and the curious: how much text each render showed, and every (status, calls) pair.
    const textLength = [...root.querySelectorAll('.assistant-text, .reasoning-text')].reduce((n, e) => n + e.textContent.length, 0);
    ui.shownTextLengths.push(textLength);
    ui.statusLog.push({ status: status.key, calls: shown.flatMap((m) => [...m.calls.values()].map((c) => c.key)) });
  }

  function emptyState() {
    const box = el('div', 'empty');
    box.append(el('h2', '', 'Ask the weather agent'),
      el('p', '', 'A Python agent answers over an Ably channel. It asks before it calls a tool, and the conversation survives a reload.'));
    const chips = el('div', 'suggestions');
    for (const text of SUGGESTIONS) {
      const chip = el('button', 'suggestion', text);
      chip.type = 'button';
      chip.onclick = () => {
        $('#question').value = text;
        $('#question').focus();
      };
      chips.append(chip);
    }
    box.append(chips);
    return box;
  }

  function callCard(codecMessageId, item, state, outputs) {
    const card = el('div', `call ${state.key}`);
    card.dataset.callId = item.call_id;
    card.dataset.state = state.key;
    const head = el('div', 'call-head');
    head.append(el('span', 'call-icon', '⚙'), el('code', 'call-desc', `${item.name}(${item.arguments})`),
      el('span', `call-state badge ${state.key}`, state.label));
    card.append(head);
    if (state.key === 'awaiting-approval') {
      const actions = el('div', 'call-actions');
      actions.append(el('span', 'call-question', `The agent wants to call ${item.name}.`));
      const approve = el('button', 'approve', 'Approve');
      const deny = el('button', 'deny', 'Deny');
      approve.onclick = () => answer(codecMessageId, item.call_id, true);
      deny.onclick = () => answer(codecMessageId, item.call_id, false, 'Denied in the browser');
      actions.append(approve, deny);
      card.append(actions);
    }
    if (state.key === 'done' && outputs.has(item.call_id)) {
      const out = outputs.get(item.call_id);
      card.append(el('pre', 'result', typeof out === 'string' ? out : JSON.stringify(out)));
    }
    return card;
  }

  async function answer(codecMessageId, callId, approved, reason) {
    local.answering.set(callId, approved ? 'approve' : 'deny');
    local.wakeError = null;
    render();
    try {
      const run = view.runOf(codecMessageId);
      const payload = approved ? { call_id: callId, approved: true } : { call_id: callId, approved: false, reason };
      const sent = await view.send([codec.createToolApprovalResponse(codecMessageId, payload)], { runId: run?.runId });
      await wake(sent.toInvocation().toJSON());
      setBanner();
      // Published: keep showing "approving…" until the answer's echo folds into toolCallStates.
    } catch (err) {
      local.answering.delete(callId);
      local.wakeError = err;
      setBanner('error', `Could not pass your answer to the agent: ${err.message}`);
    }
    render();
  }

  $('#ask').onsubmit = async (ev) => {
    ev.preventDefault();
    const text = $('#question').value.trim();
    if (!text || !view) return;
    $('#question').value = '';
    local.wakeError = null;
    try {
      const run = await view.send([
        codec.createUserMessage({
          role: 'user',
          items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text }] }],
        }),
      ]);
      await wake(run.toInvocation().toJSON());
      setBanner();
    } catch (err) {
      local.wakeError = err;
      setBanner('error', `Could not ask the agent: ${err.message}`);
    }
    render();
  };

  // -- connection: wait for the emulator, connect, hydrate; on a drop, start over --------------

  async function emulatorUp() {
    try {
      const res = await fetch('/health', { cache: 'no-store' });
      if (!res.ok) return { up: false, why: 'server' };
      const health = await res.json();
      return { up: health.emulator === 'up', why: 'emulator' };
    } catch {
      return { up: false, why: 'server' };
    }
  }

  async function teardown() {
    const old = session;
    session = null;
    if (old) {
      // The client first, synchronously: ably-js would otherwise open a retry socket that the close
      // then aborts (a browser warning). The session's own close has nothing left to detach.
      old.client.close();
      await old.session.close().catch(() => {});
    }
  }

  async function connect() {
    const mine = ++generation;
    document.body.dataset.conn = 'checking';
    for (let attempt = 0; ; attempt += 1) {
      const health = await emulatorUp();
      if (mine !== generation) return;
      if (health.up) break;
      document.body.dataset.conn = 'offline';
      setBanner('error', health.why === 'server'
        ? 'Cannot reach the example server (examples/browser/server.py). Is it still running? Retrying…'
        : `Cannot reach the Ably emulator at ${config.emulator}. Start it with \`ai-transport emulator\`; retrying…`);
      setPill('offline', 'Offline');
      // The conversation stays on screen, but nothing can be sent until the page is connected again.
      for (const control of document.querySelectorAll('#transcript button, #question, #send')) control.disabled = true;
      await sleep(Math.min(500 * 2 ** attempt, 4000));
      if (mine !== generation) return;
    }
    document.body.dataset.conn = 'connecting';
    setBanner('info', 'Connecting…');
    const client = new Ably.Realtime({ ...config.ably, clientId: config.clientId, authParams: { channel: channelName } });
    // The live messages wait until the history is in (live_hold.js says why): the session's
    // channel is the one client.channels.get gives for this name.
    const releaseLive = holdLiveMessages(client.channels.get(channelName));
    const s = createClientSession({ client, channelName, codec });
    session = { client, session: s };
    client.connection.on((change) => {
      if (mine !== generation) return;
      if (['disconnected', 'suspended', 'failed'].includes(change.current)) {
        // Stop ably-js from retrying a dead socket on its own (console noise): wait on /health
        // instead, then connect again and re-read the conversation from history.
        document.body.dataset.conn = 'offline';
        setBanner('error', `Lost the connection to the Ably emulator (${change.reason?.message ?? change.current}); reconnecting…`);
        // (a pause first: an emulator going away closes its sockets before its listener, so a
        // /health asked at once may still say "up", and the new client's token request then fail)
        void teardown().then(() => sleep(1000)).then(() => { if (mine === generation) void connect(); });
      }
    });
    s.on('error', (err) => {
      if (mine === generation) setBanner('error', `Session error: ${err.message}`);
    });
    try {
      await s.connect();
      const freshView = s.view;
      freshView.on('update', render);
      freshView.on('run', render);
      view = freshView;
      await freshView.loadOlder(HISTORY_PAGE); // the conversation so far, from channel history
      releaseLive(); // then what arrived live meanwhile, and from now on everything as it comes
    } catch (err) {
      if (mine !== generation) return;
      setBanner('error', `Could not open the conversation: ${err.message}; retrying…`);
      await teardown();
      await sleep(2000);
      if (mine === generation) void connect();
      return;
    }
    if (mine !== generation) return;
    document.body.dataset.conn = 'connected';
    setBanner();
    render();
    document.body.dataset.ready = 'true';
  }

  await connect();
}

main().catch((err) => {
  setBanner('error', `The page failed to start: ${err.message}`);
});
