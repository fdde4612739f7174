// What the dashboard's browser tests run against: real hwfarmd processes on
// simulated (QEMU) boards, real runs through the API, Debian's chromium
// driven by puppeteer-core. Every process started here is stopped by its pid.
import {spawn} from "node:child_process";
import {createHash} from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";

export const env = {
  hwfarmd: process.env.HWFARMD,
  firmware: process.env.HWFARM_FIRMWARE_DIR,
  chromium: process.env.HWFARM_CHROMIUM || "/usr/bin/chromium",
  screenshots: process.env.HWFARM_SCREENSHOTS,
  s3rver: process.env.HWFARM_S3RVER,
};

const children = new Set();
const tempDirs = [];
// At exit every child is killed, then every temporary directory removed,
// unless the test failed: then they are kept for a look and named.
process.on("exit", code => {
  for (const c of children) try { process.kill(c.pid, "SIGKILL"); } catch { /* gone */ }
  for (const dir of tempDirs) {
    if (code === 0) try { fs.rmSync(dir, {recursive: true, force: true, maxRetries: 3}); } catch { /* best effort */ }
    else console.error(`kept ${dir}`);
  }
});

export function tempDir(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hwfarm-${name}-`));
  tempDirs.push(dir);
  return dir;
}

export const sleep = ms => new Promise(r => setTimeout(r, ms));

export async function waitFor(what, fn, ms = 60000, every = 50) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await sleep(every);
  }
  throw new Error(`timed out waiting for ${what}${last instanceof Error ? ": " + last.message : ""}`);
}

export const tokens = {viewer: "secret-viewer", pipeline: "secret-pipeline", operator: "secret-operator"};

function tokensFile(dir) {
  let text = "";
  for (const [role, secret] of Object.entries(tokens))
    text += `[[token]]\nname = "${role}"\nrole = "${role}"\nsha256 = "${createHash("sha256").update(secret).digest("hex")}"\n`;
  const file = path.join(dir, "tokens.toml");
  fs.writeFileSync(file, text, {mode: 0o600});
  return file;
}

// A hwfarmd on `boards` QEMU boards of type mps2-an385, with tokens (no
// anonymous access). `extra`: more TOML (an [upload] table).
export async function startDaemon(dir, {boards = 2, agent = "test-lab", extra = ""} = {}) {
  const state = path.join(dir, "state");
  fs.mkdirSync(state, {recursive: true});
  let config = `[agent]\nname = "${agent}"\nlisten = "127.0.0.1:0"\nstate_dir = "${state}"\nlock_dir = "${state}"\n` +
               `tier = 1\ntokens_file = "${tokensFile(dir)}"\n\n[[worker]]\nname = "w0"\n`;
  for (let i = 0; i < boards; ++i) config += `  [[worker.board]]\n  name = "sim-${i}"\n  type = "mps2-an385"\n  driver = "qemu"\n`;
  config += extra;
  const configFile = path.join(dir, "fleet.toml");
  fs.writeFileSync(configFile, config);
  const log = path.join(dir, "hwfarmd.log");
  const start = fs.existsSync(log) ? fs.statSync(log).size : 0; // a restart appends
  const out = fs.openSync(log, "a");
  const child = spawn(env.hwfarmd, ["--config", configFile], {
    stdio: ["ignore", out, out], env: {...process.env, NOTIFY_SOCKET: "", JOURNAL_STREAM: "", WATCHDOG_USEC: ""}});
  children.add(child);
  const url = await waitFor("hwfarmd to listen", () => {
    const text = fs.readFileSync(log).subarray(start).toString();
    const m = /listening on (http:\/\/\S+)/.exec(text);
    return m && / ready: /.test(text) ? m[1] : null;
  }, 60000, 20);
  return {
    url, dir, log, child,
    api: (method, p, body, token = tokens.pipeline, type = "application/json") => api(url, method, p, body, token, type),
    async stop() {
      child.kill("SIGTERM");
      await new Promise(r => (child.exitCode !== null ? r() : child.once("exit", r)));
      children.delete(child);
    },
  };
}

export async function api(url, method, p, body, token, type = "application/json") {
  const res = await fetch(url + p, {method, body: body === undefined ? undefined : typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
    headers: {...(token ? {Authorization: `Bearer ${token}`} : {}), ...(body !== undefined ? {"Content-Type": type} : {})}});
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return {status: res.status, json, text};
}

// A lease of `count` boards for `holder`.
export async function lease(d, count, holder = {job: "nightly", build: "1", stage: "hil"}, context = "nightly") {
  const r = await d.api("POST", "/v1/leases", {selector: {type: "mps2-an385"}, count, context, holder, wait_s: 60, ttl_s: 3600});
  if (r.status !== 201) throw new Error(`lease: ${r.status} ${r.text}`);
  return r.json.id;
}

// Runs firmware `variant` (hwfarm-<variant>.elf) on the lease; the record
// once it ended (or, with `wait` false, at once).
// `reference`: the QEMU reference runs that variant instead (a board whose
// console damages what the reference printed whole: the lab's failure).
export async function run(d, leaseId, variant, {name, suite = "selftest", commit, deadline_s, targets, mode, reference,
                                                wait = true} = {}) {
  const upload = async (v, as) => {
    const bytes = fs.readFileSync(path.join(env.firmware, `hwfarm-${v}.elf`));
    const up = await d.api("POST", `/v1/leases/${leaseId}/images?name=${encodeURIComponent(as)}.elf`, bytes,
                           tokens.pipeline, "application/octet-stream");
    if (up.status !== 201) throw new Error(`upload: ${up.status} ${up.text}`);
    return up.json.image;
  };
  const image = {image: await upload(variant, name || variant), name: name || variant};
  if (reference) image.reference_image = await upload(reference, `${name || variant}-ref`);
  const body = {images: [image], suite};
  if (commit) body.commit = commit;
  if (deadline_s) body.deadline_s = deadline_s;
  if (targets) body.targets = targets;
  if (mode) body.mode = mode;
  const r = await d.api("POST", `/v1/leases/${leaseId}/runs`, body);
  if (r.status !== 201) throw new Error(`run: ${r.status} ${r.text}`);
  if (!wait) return r.json;
  return waitRun(d, r.json.id);
}

export async function waitRun(d, id) {
  return waitFor(`run ${id} to end`, async () => {
    const r = await d.api("GET", `/v1/runs/${id}`, undefined, tokens.viewer);
    return r.json && r.json.state !== "running" ? r.json : null;
  }, 120000, 100);
}

// A tar archive (ustar) of `files`, {path: string or bytes}: for each a
// 512-byte header (its checksum the sum of the header's bytes, the checksum
// field read as spaces), its bytes padded to 512; then two zero blocks.
export function tarOf(files) {
  const blocks = [];
  for (const [name, content] of Object.entries(files)) {
    const data = typeof content === "string" ? Buffer.from(content, "utf8") : Buffer.from(content);
    if (Buffer.byteLength(name) > 100) throw new Error(`tarOf: ${name}: longer than 100 bytes`);
    const header = Buffer.alloc(512);
    const field = (at, length, text) => header.write(text, at, length, "latin1");
    const octal = (at, length, n) => field(at, length, n.toString(8).padStart(length - 1, "0") + "\0");
    field(0, 100, name);
    octal(100, 8, 0o644);                               // mode
    octal(108, 8, 0);                                   // uid
    octal(116, 8, 0);                                   // gid
    octal(124, 12, data.length);                        // size
    octal(136, 12, Math.floor(Date.now() / 1000));      // mtime
    field(148, 8, " ".repeat(8));                       // checksum, as spaces while summed
    field(156, 1, "0");                                 // a regular file
    field(257, 8, "ustar\u000000");                     // magic "ustar\0", version "00"
    field(265, 32, "hwfarm");
    field(297, 32, "hwfarm");
    let sum = 0;
    for (const byte of header) sum += byte;
    field(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
    blocks.push(header, data, Buffer.alloc((512 - data.length % 512) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return new Uint8Array(Buffer.concat(blocks));
}

// Chromium, headless, with a page that records every console error, page
// error, failed request and CSP violation.
export async function browser() {
  return puppeteer.launch({executablePath: env.chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check"]});
}

export async function watchedPage(b, {width = 1440, height = 900} = {}) {
  const page = await b.newPage();
  await page.setViewport({width, height});
  const problems = [];
  const requests = [];
  page.on("console", m => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", e => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", r => { if (!/ERR_ABORTED/.test(r.failure()?.errorText || "")) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`); });
  page.on("response", r => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  page.on("request", r => requests.push(r));
  page.on("dialog", d => { problems.push(`dialog: ${d.message()}`); d.dismiss(); });
  return {page, problems, requests};
}

// A watched page (watchedPage) in a browser context of its own whose
// downloads are saved in `dir`; `downloaded(name)` waits for a finished one
// and returns its bytes.
export async function downloadingPage(b, dir, size) {
  const context = await b.createBrowserContext({downloadBehavior: {policy: "allow", downloadPath: dir}});
  const w = await watchedPage(context, size);
  w.downloaded = name => waitFor(`the download of ${name}`, () => {
    const file = path.join(dir, name);
    return fs.existsSync(file) && !fs.readdirSync(dir).some(f => f.endsWith(".crdownload")) ? fs.readFileSync(file) : null;
  }, 30000);
  w.close = () => context.close();
  return w;
}

// Signs in through the page's form (the token goes to session storage).
export async function signIn(page, url, token) {
  await page.goto(url + "/", {waitUntil: "networkidle0"});
  await page.waitForSelector("#token");
  await page.type("#token", token);
  await Promise.all([page.waitForSelector("#who strong"), page.click("form.signin button[type=submit]")]);
}

// Goes to a view and waits until it has rendered (main not busy, no "Loading").
// Goes to a view and waits until it is drawn.
export async function view(page, hash) {
  await page.evaluate(h => {
    document.querySelector("main").dataset.rendered = "";
    if (location.hash === h) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = h;
  }, hash);
  await page.waitForFunction(h => document.querySelector("main").dataset.rendered === h, {timeout: 30000}, hash);
}

export async function screenshot(page, name) {
  if (!env.screenshots) return;
  fs.mkdirSync(env.screenshots, {recursive: true});
  await page.screenshot({path: path.join(env.screenshots, `${name}.png`), fullPage: true});
}
