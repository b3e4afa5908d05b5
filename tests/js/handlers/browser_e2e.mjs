// Headless Chromium (Debian's /usr/bin/chromium) driven with playwright-core, one command per line.
//
//   node browser_e2e.mjs <chromium-path> <user-data-dir>
//
// Reads JSON commands on stdin, one a line, and answers each with one JSON line on stdout:
// {"ok": true, "value": ...} or {"ok": false, "error": "..."}. Commands ({"op": ..., ...}):
// goto {url}, reload, click {selector}, fill {selector, value}, wait {selector, timeout},
// waitFn {js, timeout} (a JS expression polled until truthy), eval {js} (an expression),
// screenshot {path}, console (the page's console lines and page errors so far), close.
// playwright-core is resolved from examples/browser/node_modules (the example's devDependency);
// no browser is downloaded.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import readline from 'node:readline';

const here = path.dirname(fileURLToPath(import.meta.url));
const exampleDir = path.resolve(here, '..', '..', '..', 'examples', 'browser');
const require = createRequire(path.join(exampleDir, 'package.json'));
const { chromium } = require('playwright-core');

const [executablePath, userDataDir] = process.argv.slice(2);
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 1000, height: 760 },
  args: [
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
const page = context.pages()[0] ?? (await context.newPage());
page.on('console', (m) => consoleLines.push({ type: m.type(), text: m.text() }));
page.on('pageerror', (e) => consoleLines.push({ type: 'pageerror', text: String(e?.message ?? e) }));

const ops = {
  goto: (c) => page.goto(c.url).then(() => null),
  reload: () => page.reload().then(() => null),
  click: (c) => page.click(c.selector, { timeout: c.timeout ?? 10000 }).then(() => null),
  fill: (c) => page.fill(c.selector, c.value, { timeout: c.timeout ?? 10000 }).then(() => null),
  wait: (c) => page.waitForSelector(c.selector, { timeout: c.timeout ?? 20000 }).then(() => null),
  waitFn: (c) => page.waitForFunction(c.js, null, { timeout: c.timeout ?? 20000, polling: 25 }).then((h) => h.jsonValue()),
  eval: (c) => page.evaluate(c.js),
  screenshot: (c) => page.screenshot({ path: c.path, fullPage: false }).then(() => c.path),
  console: () => consoleLines.slice(),
};

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  if (command.op === 'close') break;
  let answer;
  try {
    const op = ops[command.op];
    if (!op) throw new Error(`unknown op ${command.op}`);
    answer = { ok: true, value: (await op(command)) ?? null };
  } catch (err) {
    answer = { ok: false, error: String(err?.message ?? err) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
lines.close();
await context.close();
process.stdout.write(JSON.stringify({ ok: true, value: 'closed' }) + '\n', () => process.exit(0));
