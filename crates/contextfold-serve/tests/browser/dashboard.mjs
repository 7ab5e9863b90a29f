// Drives the dashboard in headless Chromium (playwright-core, no browser download) and
// checks what it shows against what the Rust test read from the store through the library.
//
//   node dashboard.mjs CONFIG.json
//
// CONFIG: {url, token, chromium, playwright (a node_modules), out (screenshots), session:
// {id, messages, compactions, payloads, calls}, summary: {index, text}, payload: {compaction,
// ref, text}, search: {word, hits: [{session, ref|message}]}}. Prints one line per check; exits
// 1 at the first that fails.

import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(config.playwright, "..", "resolve-from-here.js"));
const { chromium } = require("playwright-core");

function check(ok, what, detail) {
  if (!ok) {
    console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
    throw Object.assign(new Error(what), { reported: true });
  }
  console.log(`ok ${what}`);
}

const profile = mkdtempSync(path.join(tmpdir(), "contextfold-chromium-"));
// A fresh profile (playwright passes it as --user-data-dir), deleted at the end.
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: config.chromium,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
  viewport: { width: 1280, height: 900 },
  timeout: 60_000,
});
let failed = false;
try {
  const page = await browser.newPage();
  const problems = [];
  page.on("pageerror", (err) => problems.push("page error: " + err.message));
  page.on("console", (msg) => { if (msg.type() === "error") problems.push("console: " + msg.text()); });
  page.on("response", (response) => { if (response.status() >= 400) problems.push(`${response.status()} ${response.url()}`); });
  // Nothing but the dashboard's own origin is ever asked for.
  const origin = new URL(config.url).origin;
  page.on("request", (request) => { if (!request.url().startsWith(origin)) problems.push("left the origin: " + request.url()); });
  const ready = async () => page.waitForSelector("#view[data-ready]", { timeout: 20_000 });
  const shot = async (name) => page.screenshot({ path: path.join(config.out, name), fullPage: true });
  const text = async (selector) => (await page.textContent(selector)) ?? "";

  // The sessions page; with a token, opened once with ?token= (then the cookie).
  const first = config.token ? `${config.url}/ui?token=${encodeURIComponent(config.token)}` : `${config.url}/ui`;
  await page.goto(first);
  await ready();
  check(new URL(page.url()).search === "", "the token left the address bar", page.url());
  const row = `#sessions tr[data-session="${config.session.id}"]`;
  for (const field of ["messages", "compactions", "payloads", "calls"]) {
    const shown = (await text(`${row} td.${field}`)).replace(/,/g, "");
    check(shown === String(config.session[field]), `the sessions page shows ${config.session[field]} ${field}`, shown);
  }
  check(/\d+%/.test(await text(`${row} td.saved`)), "the sessions page shows the savings", await text(`${row} td.saved`));
  await shot("1-sessions.png");

  // The conversation: a point per call, each compaction marked, the window drawn.
  await page.click(`${row} td.name a`);
  await ready();
  const points = await page.locator("#chart circle.point").count();
  check(points === config.session.calls, `the chart has one point per call (${config.session.calls})`, points);
  const marks = await page.locator("#chart .compaction-mark").count();
  check(marks === config.session.compactions, `the chart marks the ${config.session.compactions} compactions`, marks);
  check(await page.locator("#chart line.window").count() === 1, "the chart draws the window");
  const rows = await page.locator("#compactions tbody tr").count();
  check(rows === config.session.compactions, "the compactions are listed", rows);
  await shot("2-conversation.png");

  // A compaction's report: its summary, as text.
  await page.locator("#compactions a.open-report").nth(config.summary.index).click();
  await ready();
  const summary = await text("#report pre.summary");
  check(summary === config.summary.text, `compaction ${config.summary.index + 1} shows its summary`, summary.slice(0, 200));
  await page.locator("#report").screenshot({ path: path.join(config.out, "3-compaction.png") });

  // A ref: the payload exactly as stored; stored markup stays text.
  if (config.payload.compaction !== config.summary.index) {
    await page.locator("#compactions a.open-report").nth(config.payload.compaction).click();
    await ready();
  }
  await page.click(`#report a.ref:text-is("${config.payload.ref}")`);
  await ready();
  const payload = await text("#payload");
  check(payload === config.payload.text, `${config.payload.ref} shows the payload exactly`, payload.slice(0, 200));
  check(await page.evaluate(() => window.__pwned === undefined), "stored markup did not run");
  check(await page.locator("#payload *").count() === 0, "the payload is text, no element");
  // The screenshot shows the payload's end, where the stored markup is, as text.
  await page.$eval("#payload", (pre) => { pre.scrollTop = pre.scrollHeight; });
  await shot("4-payload.png");

  // Search: the word of an evicted output.
  await page.fill("#search input[name=q]", config.search.word);
  await page.press("#search input[name=q]", "Enter");
  await ready();
  const hits = await page.locator("#hits > li").count();
  check(hits === config.search.hits.length, `search finds the ${config.search.hits.length} hits the store finds`, hits);
  for (const hit of config.search.hits.filter((hit) => hit.ref)) {
    check(await page.locator(`#hits a.ref:text-is("${hit.ref}")`).count() >= 1, `search lists ${hit.ref}`);
  }
  await shot("5-search.png");

  check(problems.length === 0, "no page error, console error, failed request or request elsewhere", problems);

  // A missing ref is said in words (its 404 is the one failed request expected).
  await page.goto(`${config.url}/ui#/ref/cf-000000000000`);
  await ready();
  check((await text("#view .error")).includes("cf-000000000000"), "a missing ref is said");
} catch (err) {
  failed = true;
  if (!err.reported) console.log(`FAIL ${err.stack}`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
