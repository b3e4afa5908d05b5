// Drive the browser example in headless Chromium (Debian's /usr/bin/chromium) with playwright-core.
//
//   node browser_e2e.mjs <page-url> <chromium-path> <user-data-dir> [approve|deny]
//
// Prints one JSON line: what the page showed while the call was pending, and at the end.
// playwright-core is resolved from examples/browser/node_modules (the example's devDependency).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const exampleDir = path.resolve(here, '..', '..', '..', 'examples', 'browser');
const require = createRequire(path.join(exampleDir, 'package.json'));
const { chromium } = require('playwright-core');

const [url, executablePath, userDataDir, decision = 'approve'] = process.argv.slice(2);
const STEP_MS = 20000;

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const consoleLines = [];
const result = { ok: false, console: consoleLines };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: STEP_MS });
  await page.click('#send');

  // The run streams, then suspends on the gated call: buttons appear.
  const pendingCall = '.call[data-state="awaiting approval"]';
  await page.waitForSelector(`${pendingCall} button.${decision}`, { timeout: STEP_MS });
  await page.waitForSelector('body[data-run-status="suspended"]', { timeout: STEP_MS });
  result.pending = await page.evaluate(() => ({
    user: [...document.querySelectorAll('.user-text')].map((e) => e.textContent),
    reasoning: [...document.querySelectorAll('.reasoning')].map((e) => e.textContent),
    assistant: [...document.querySelectorAll('.assistant-text')].map((e) => e.textContent),
    calls: [...document.querySelectorAll('.call')].map((e) => ({
      id: e.dataset.callId,
      state: e.dataset.state,
      desc: e.querySelector('.call-desc')?.textContent,
    })),
    runStatus: document.body.dataset.runStatus,
    shownTextLengths: window.shownTextLengths,
  }));

  await page.click(`${pendingCall} button.${decision}`);

  // The agent resumes, runs (or skips) the tool, asks the model again and completes the run.
  await page.waitForFunction(
    () => {
      const runs = document.querySelector('#runs').textContent;
      const calls = [...document.querySelectorAll('.call')];
      return (
        document.body.dataset.runStatus === 'complete' &&
        !runs.includes('suspended') &&
        !runs.includes('active') &&
        calls.length > 0 &&
        calls.every((c) => c.dataset.state === 'done' || c.dataset.state.startsWith('denied'))
      );
    },
    null,
    { timeout: STEP_MS },
  );
  result.final = await page.evaluate(() => ({
    assistant: [...document.querySelectorAll('.assistant-text')].map((e) => e.textContent),
    results: [...document.querySelectorAll('.result')].map((e) => e.textContent),
    calls: [...document.querySelectorAll('.call')].map((e) => ({ id: e.dataset.callId, state: e.dataset.state })),
    buttons: document.querySelectorAll('button.approve, button.deny').length,
    runs: document.querySelector('#runs').textContent,
    status: document.querySelector('#status').textContent,
  }));
  result.ok = true;
} catch (err) {
  result.error = String(err?.message ?? err);
} finally {
  await context.close();
}
process.stdout.write(JSON.stringify(result) + '\n');
