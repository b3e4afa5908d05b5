// A React page with the AI SDK's `useChat`, talking to a Python agent over Ably.
//
// The only Ably-specific lines: an ably-js client (token from this page's server), a client session
// on the conversation's channel (`createClientSession` of @ably/ai-transport/vercel) and 0.8.0's
// `createChatTransport(session)` handed to `useChat` in place of its HTTP transport. useChat then
// works as usual: `sendMessage` publishes the user's message on the channel and POSTs the run's
// invocation to /api/chat (which wakes the agent); the agent's UI message chunks stream back over
// the channel; a tool call needing approval shows Approve / Deny (`addToolApprovalResponse`), and
// `sendAutomaticallyWhen` sends the answer, which wakes a worker to resume the run.
//
// The conversation lives on the channel: its id is in the URL (?c=<id>), and a reload reads it back
// from channel history.
import { useChat } from '@ai-sdk/react';
import * as Ably from 'ably';
import { createChatTransport, createClientSession } from '@ably/ai-transport/vercel';
// Live messages wait until the history load is folded (the browser example's live_hold.js says why:
// 0.8.0 places a run by the first wire of it it meets, and a resumed run met live first is hidden).
import { holdLiveMessages } from '../browser/live_hold.js';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';

const DEFAULT_QUESTION = "What's the weather in Paris right now? Should I take an umbrella?";

function conversationId() {
  const url = new URL(location.href);
  let id = url.searchParams.get('c');
  if (!id || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) {
    id = crypto.randomUUID().replaceAll('-', '').slice(0, 12);
    url.searchParams.set('c', id);
    history.replaceState(null, '', url);
  }
  return id;
}

function ToolPart({ part, onAnswer }) {
  const name = part.type.slice('tool-'.length);
  const label = {
    'input-streaming': 'preparing the call…',
    'input-available': 'called',
    'approval-requested': 'needs your approval',
    'approval-responded': part.approval?.approved ? 'approved, running…' : 'denied',
    'output-available': 'done',
    'output-error': `failed: ${part.errorText ?? ''}`,
    'output-denied': 'denied',
  }[part.state] ?? part.state;
  return (
    <div className="tool" data-state={part.state} data-call-id={part.toolCallId}>
      <div className="tool-head">
        <span className="tool-name">{name}</span>
        <span className="tool-state">{label}</span>
      </div>
      {part.input !== undefined && <pre className="tool-input">{JSON.stringify(part.input)}</pre>}
      {part.state === 'approval-requested' && (
        <div className="actions">
          <button className="approve" onClick={() => onAnswer(part.approval.id, true)}>Approve</button>
          <button className="deny" onClick={() => onAnswer(part.approval.id, false)}>Deny</button>
        </div>
      )}
      {part.state === 'output-available' && <pre className="tool-output">{JSON.stringify(part.output, null, 1)}</pre>}
    </div>
  );
}

function Message({ message, onAnswer }) {
  return (
    <div className="message" data-role={message.role} data-id={message.id}>
      <div className="avatar">{message.role === 'user' ? 'You' : 'AI'}</div>
      <div className="bubble">
        {message.parts.map((part, i) => {
          if (part.type === 'text') return <p key={i} className="text">{part.text}</p>;
          if (part.type === 'reasoning') return part.text ? <p key={i} className="reasoning">{part.text}</p> : null;
          if (part.type.startsWith('tool-')) return <ToolPart key={part.toolCallId} part={part} onAnswer={onAnswer} />;
          return null; // step-start, sources, data parts…: not shown by this page
        })}
      </div>
    </div>
  );
}

function statusOf(status, messages) {
  if (status === 'error') return ['error', 'error'];
  if (status === 'submitted') return ['submitted', 'waking the agent…'];
  if (status === 'streaming') return ['streaming', 'agent answering…'];
  const waiting = messages.some((m) => m.parts.some((p) => p.state === 'approval-requested'));
  return waiting ? ['approval', 'waiting for your approval'] : ['ready', 'ready'];
}

function Chat({ id, transport, initialMessages }) {
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    id,
    transport,
    messages: initialMessages,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState(DEFAULT_QUESTION);
  const [key, label] = statusOf(status, messages);

  useEffect(() => {
    // How much assistant text each render showed (a test reads it to see the answer stream in).
    const shown = messages
      .filter((m) => m.role === 'assistant')
      .flatMap((m) => m.parts)
      .filter((p) => p.type === 'text' || p.type === 'reasoning')
      .reduce((n, p) => n + (p.text ?? '').length, 0);
    (window.shownTextLengths ??= []).push(shown);
    document.body.dataset.chatStatus = key;
  });

  const onAnswer = (approvalId, approved) =>
    addToolApprovalResponse({ id: approvalId, approved, ...(approved ? {} : { reason: 'Denied in the browser' }) });

  return (
    <main>
      <header>
        <div>
          <h1>useChat over Ably</h1>
          <p className="sub">A Python agent answers on an Ably channel. It asks before it calls a tool.</p>
        </div>
        <span className="status" data-status={key}>{label}</span>
      </header>
      {messages.length === 0 && <p className="empty">Ask something to start the conversation.</p>}
      {messages.map((m) => <Message key={m.id} message={m} onAnswer={onAnswer} />)}
      {error && <p className="error">{error.message}</p>}
      <form
        className="ask"
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim()) return;
          sendMessage({ text: input.trim() });
          setInput('');
        }}
      >
        <div>
          <input id="question" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Ask about the weather…" />
          <button id="send" type="submit" disabled={key !== 'ready'}>Send</button>
        </div>
      </form>
    </main>
  );
}

async function main() {
  const config = await (await fetch('/config.json')).json();
  const channelName = `${config.namespace}:${conversationId()}`;
  const client = new Ably.Realtime({
    ...config.ably,
    authUrl: '/token-request',
    authParams: { channel: channelName },
    clientId: config.clientId,
  });
  const releaseLive = holdLiveMessages(client.channels.get(channelName)); // the session's channel
  const session = createClientSession({ client, channelName });
  await session.connect();
  await session.view.loadOlder(50); // a reload: the conversation so far, from channel history
  releaseLive(); // then what came live meanwhile, and from now on everything as it comes
  const transport = createChatTransport(session, { api: '/api/chat' });
  const initialMessages = session.view.getMessages().map((m) => m.message);
  createRoot(document.getElementById('root')).render(
    <Chat id={channelName} transport={transport} initialMessages={initialMessages} />,
  );
  document.body.dataset.ready = 'true';
}

main().catch((err) => {
  document.getElementById('root').innerHTML = '';
  const p = document.createElement('p');
  p.className = 'error';
  p.textContent = `error: ${err.message}`;
  document.getElementById('root').append(p);
  console.error(err);
});
