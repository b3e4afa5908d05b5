// Drive the useChat example page in headless Chromium (Debian's /usr/bin/chromium) with playwright-core.
//
//   node usechat_browser.mjs <page-url> <chromium-path> <user-data-dir> <screenshot-dir> [approve|deny]
//
// Asks the default question, waits for the streamed answer and the tool call awaiting approval,
// clicks Approve (or Deny), waits for the final answer, then reloads the page (same ?c=) to see the
// conversation come back from channel history. Prints one JSON line with what the page showed at each
// point; saves pending.png / final.png / reloaded.png. playwright-core is the example's devDependency.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const exampleDir = path.resolve(here, '..', '..', '..', 'examples', 'usechat');
const require = createRequire(path.join(exampleDir, 'package.json'));
const { chromium } = require('playwright-core');

const [url, executablePath, userDataDir, shots, decision = 'approve'] = process.argv.slice(2);
const STEP_MS = 20000;

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 900, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const consoleLines = [];
const result = { ok: false, console: consoleLines };

const read = (page) =>
  page.evaluate(() => ({
    messages: [...document.querySelectorAll('.message')].map((m) => ({
      role: m.dataset.role,
      text: [...m.querySelectorAll('.text')].map((e) => e.textContent),
      reasoning: [...m.querySelectorAll('.reasoning')].map((e) => e.textContent),
      tools: [...m.querySelectorAll('.tool')].map((t) => ({
        state: t.dataset.state,
        name: t.querySelector('.tool-name')?.textContent,
        label: t.querySelector('.tool-state')?.textContent,
        input: t.querySelector('.tool-input')?.textContent,
        output: t.querySelector('.tool-output')?.textContent ?? null,
        buttons: [...t.querySelectorAll('button')].map((b) => b.textContent),
      })),
    })),
    status: document.querySelector('.status')?.textContent,
    chatStatus: document.body.dataset.chatStatus,
    errors: [...document.querySelectorAll('.error')].map((e) => e.textContent),
    shownTextLengths: window.shownTextLengths ?? [],
    url: location.href,
  }));

try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: STEP_MS });
  result.empty = await read(page);
  await page.click('#send');

  const pending = '.tool[data-state="approval-requested"]';
  await page.waitForSelector(`${pending} button.${decision}`, { timeout: STEP_MS });
  await page.waitForSelector('body[data-chat-status="approval"]', { timeout: STEP_MS });
  result.pending = await read(page);
  await page.screenshot({ path: path.join(shots, 'pending.png'), fullPage: true });

  await page.click(`${pending} button.${decision}`);
  const done = decision === 'approve' ? 'output-available' : 'output-denied';
  await page.waitForSelector(`.tool[data-state="${done}"]`, { timeout: STEP_MS });
  await page.waitForSelector('body[data-chat-status="ready"]', { timeout: STEP_MS });
  await page.waitForFunction(
    () => [...document.querySelectorAll('.message[data-role="assistant"] .text')].some((e) =>
      /^(Right now in|I did not check)/.test(e.textContent)),
    null,
    { timeout: STEP_MS },
  );
  result.final = await read(page);
  await page.screenshot({ path: path.join(shots, 'final.png'), fullPage: true });

  await page.reload();
  await page.waitForSelector('body[data-ready="true"]', { timeout: STEP_MS });
  await page.waitForSelector(`.tool[data-state="${done}"]`, { timeout: STEP_MS });
  result.reloaded = await read(page);
  await page.screenshot({ path: path.join(shots, 'reloaded.png'), fullPage: true });
  result.ok = true;
} catch (err) {
  result.error = String(err?.message ?? err);
  try {
    const page = context.pages()[0];
    result.atError = await read(page);
    await page.screenshot({ path: path.join(shots, 'error.png'), fullPage: true });
  } catch {
    /* the page is gone */
  }
} finally {
  await context.close();
}
process.stdout.write(JSON.stringify(result) + '\n');
