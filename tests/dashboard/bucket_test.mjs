// The dashboard's static copy in the results bucket: two hwfarmd (two labs)
// upload under one prefix of a real S3-compatible server (s3rver, as the
// upload tests use), each publishes the page and puts itself in labs.json;
// the page, opened from the bucket in Chromium, shows both labs' runs, a
// run's grid, an output's history and a comparison, from the bucket alone.
import assert from "node:assert/strict";
import {spawn} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {after, before, describe, it} from "node:test";
import {browser, env, lease, run, screenshot, startDaemon, tempDir, tokens, view, waitFor, watchedPage} from "./harness.mjs";

const BUCKET = "hw-results";
const PREFIX = "hw/ci";
let s3, s3url, labs = [], b, runs = {};

async function startS3rver(dir) {
  const log = path.join(dir, "s3rver.log");
  const out = fs.openSync(log, "a");
  const child = spawn(process.execPath, [env.s3rver, "-d", path.join(dir, "s3data"), "-a", "127.0.0.1", "-p", "0",
                                         "--configure-bucket", BUCKET], {stdio: ["ignore", out, out]});
  const port = await waitFor("s3rver", () => {
    const m = /listening on 127\.0\.0\.1:(\d+)/.exec(fs.readFileSync(log, "utf8"));
    return m ? Number(m[1]) : null;
  }, 20000);
  return {child, url: `http://127.0.0.1:${port}`};
}

function uploadConfig(dir, url) {
  const creds = path.join(dir, "s3.toml");
  fs.writeFileSync(creds, 'access_key_id = "S3RVER"\nsecret_access_key = "S3RVER"\n', {mode: 0o600});
  return `\n[upload]\nenabled = true\nendpoint = "${url}"\nbucket = "${BUCKET}"\nprefix = "${PREFIX}"\n` +
         `credentials_file = "${creds}"\nretry_initial_s = 0.2\nretry_max_s = 1\n`;
}

async function uploaded(d) {
  await waitFor("uploads to finish", async () => {
    const r = await d.api("GET", "/v1/uploads", undefined, tokens.viewer);
    return r.status === 200 && r.json.uploads.length === 0;
  }, 60000, 100);
}

before(async () => {
  const dir = tempDir("bucket");
  s3 = await startS3rver(dir);
  s3url = `${s3.url}/${BUCKET}/${PREFIX}/dashboard/index.html`;
  for (const agent of ["lab-a", "lab-b"]) {
    const d = tempDir(agent);
    labs.push(await startDaemon(d, {boards: 1, agent, extra: uploadConfig(d, s3.url)}));
  }
  const [a, bb] = labs;
  const la = await lease(a, 1);
  runs.a1 = await run(a, la, "pass", {name: "model", suite: "nightly", commit: "c1"});
  runs.a2 = await run(a, la, "pass", {name: "model", suite: "nightly", commit: "c2"});
  runs.a3 = await run(a, la, "bad", {name: "model", suite: "nightly", commit: "c3"});
  const lb = await lease(bb, 1);
  runs.b1 = await run(bb, lb, "pass", {name: "model", suite: "nightly", commit: "c1"});
  runs.b2 = await run(bb, lb, "slight", {name: "model", suite: "nightly", commit: "c2"});
  await Promise.all(labs.map(uploaded));
  b = await browser();
});

after(async () => {
  if (b) await b.close();
  for (const d of labs) await d.stop();
  if (s3) s3.child.kill("SIGTERM");
});

async function page() {
  const w = await watchedPage(b);
  await w.page.goto(s3url, {waitUntil: "networkidle0"});
  await w.page.waitForFunction(() => document.querySelector("main").dataset.rendered !== undefined);
  return w;
}

describe("the page in the bucket", () => {
  it("lists both labs and every run they uploaded, newest first, with no console error", async () => {
    const {page: p, problems} = await page();
    await view(p, "#/labs");
    const names = await p.$$eval("main tbody th", ths => ths.map(t => t.textContent));
    assert.deepEqual(names, ["lab-a", "lab-b"]);
    await view(p, "#/runs");
    const rows = await p.$$eval("table.runs tbody tr", trs => trs.map(tr => [tr.querySelector("th a").textContent, tr.querySelector("th .help").textContent]));
    const expected = [runs.a1, runs.a2, runs.a3, runs.b1, runs.b2].sort((x, y) => y.ended_ms - x.ended_ms);
    assert.deepEqual(rows.map(r => r[0]), expected.map(r => r.id));
    assert.equal(rows.find(r => r[0] === runs.b2.id)[1], "lab-b");
    await screenshot(p, "bucket-runs");
    assert.deepEqual(problems, []);
  });

  it("shows a run's grid from the bucket's files", async () => {
    const {page: p, problems} = await page();
    await view(p, `#/run/${runs.a3.id}`);
    const cell = await p.$eval("table.grid tbody tr:first-child td", td => td.textContent);
    assert.match(cell, /^✗ 0\.49/);
    await view(p, `#/run/${runs.a3.id}?cell=model%7Cmps2_an385%7Csquare.y`);
    await p.waitForSelector("#cell-detail canvas");
    assert.deepEqual(problems, []);
  });

  it("shows an output's history across both labs, and a run's precomputed comparison", async () => {
    const {page: p, problems} = await page();
    await view(p, "#/history?image=model&output=square.y&board_type=&last=30");
    const sections = await p.$$eval("main section h2", hs => hs.map(x => x.textContent));
    assert.equal(sections.length, 2);
    assert.ok(sections.some(s => /lab-a/.test(s)) && sections.some(s => /lab-b/.test(s)), sections.join("|"));
    await screenshot(p, "bucket-history");
    await view(p, `#/compare?base=${runs.a2.id}&head=${runs.a3.id}`);
    assert.match(await p.$eval("main", m => m.innerText), /Newly failing: 1 case\(s\)/);
    assert.deepEqual(problems, []);
  });
});
