// Dashboard benchmark (docs/dashboard.md, Performance), in Debian's
// chromium driven by puppeteer-core (tests/dashboard/node_modules):
//
//   node bench/dashboard_bench.mjs [BUILD_DIR] [ROUNDS]
//
// Rows (median of ROUNDS, the two columns alternating within each round):
//   runs page     10,000 runs in hwfarmd's database: from navigating to
//                 #/runs to its first screen drawn (goal: under 1 s),
//                 against the same 50 rows drawn from a static JSON file by
//                 a bare table (the floor: one fetch and 50 rows of DOM)
//   run grid      a run of 100 outputs x 8 targets: from its data loaded to
//                 the accuracy grid drawn (goal: under 300 ms), against a
//                 bare table of the same 800 values
//   GET /v1/runs  the first page's answer time over HTTP, and the bytes
//   RSS           hwfarmd's idle RSS with the page served, after every view
//                 was loaded once
// The runs are made by one real run on a simulated board, whose record is
// copied 10,000 times (new ids, times, commits, states) into the database
// while hwfarmd is stopped; hwfarmd indexes them at start-up.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const build = path.resolve(process.argv[2] || "build");
const rounds = Number(process.argv[3] || 7);
process.env.HWFARMD ||= path.join(build, "daemon/hwfarmd");
process.env.HWFARM_FIRMWARE_DIR ||= path.join(build, "firmware");
const h = await import(path.join(here, "../tests/dashboard/harness.mjs"));

const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x, unit = "ms") => `${x.toFixed(1)} ${unit}`;

function rss(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

// Copies `record` (a real run's) into `count` runs of the database.
function seedRuns(db, record, count) {
  const script = `
import json, sqlite3, sys
db, count = sys.argv[1], int(sys.argv[2])
rec = json.loads(sys.stdin.read())
c = sqlite3.connect(db)
states = ["passed"] * 7 + ["failed", "error", "passed"]
t0 = rec["created_ms"] - count * 60000
rows = []
for i in range(count):
    r = dict(rec)
    r["id"] = "run-%016x" % (0x1000 + i)
    r["created_ms"] = t0 + i * 60000
    r["ended_ms"] = r["created_ms"] + 1500
    r["state"] = states[i % len(states)]
    r["commit"] = "%040x" % (i * 2654435761 % (1 << 160))
    rows.append((r["id"], r["lease_id"], r["state"], r["created_ms"], r["ended_ms"], json.dumps(r)))
c.executemany("INSERT OR REPLACE INTO runs(id, lease_id, state, created_ms, ended_ms, record) VALUES(?,?,?,?,?,?)", rows)
c.commit()
`;
  execFileSync("/usr/bin/python3", ["-c", script, db, String(count)], {input: JSON.stringify(record)});
}

// A run of `outputs` outputs on `targets` targets, as the run page reads it.
function gridRecord(outputs, targets) {
  const names = Array.from({length: targets}, (_, t) => `board_${t}`);
  const goldens = {};
  const attempts = names.map(target => ({image: "model", target, board: target, reference: false, phase: "done", outcome: "pass",
    cases: Array.from({length: outputs}, (_, o) => {
      const pcc = 1 - ((o * 7 + target.length * 13) % 100) / 5000;
      (goldens[target] ||= {})[`layer${o}.out`] = {expected_pcc: 0.99, actual_pcc: pcc, atol: 1e-8, rtol: 1e-5, allclose: false,
        max: 0.01, mean_absolute_error: 0.001, root_mean_square_error: 0.002, cosine_similarity: pcc, count: 4096, dtype: "f32",
        verdict: pcc >= 0.99 ? "pass" : "fail", reason: ""};
      return {name: `layer${o}`, outcome: pcc >= 0.99 ? "pass" : "fail", outputs: [{key: `layer${o}.out`, verdict: pcc >= 0.99 ? "pass" : "fail", actual_pcc: pcc}]};
    })}));
  return {record: {id: "run-grid", state: "passed", created_ms: Date.now(), ended_ms: Date.now(), images: [{name: "model"}],
                   targets: names.map(n => ({board: n, name: n})), attempts, artifacts: names.map(n => `golden_results__${n}.json`)},
          goldens};
}

// hwfarmd's RSS with no run, idle, then once every view was served (the
// page's files, the chart library, every API a view reads).
async function rssServed() {
  const d = await h.startDaemon(h.tempDir("dashboard-rss"), {boards: 1});
  await h.sleep(1000);
  const before = rss(d.child.pid);
  const b = await h.browser();
  const {page} = await h.watchedPage(b);
  await h.signIn(page, d.url, h.tokens.viewer);
  for (let i = 0; i < 3; ++i)
    for (const v of ["#/tier", "#/runs", "#/history?image=x&output=y.z", "#/compare", "#/fleet"]) await h.view(page, v);
  await b.close();
  await h.sleep(1000);
  const after = rss(d.child.pid);
  await d.stop();
  return [before, after];
}

async function main() {
  const [rssBefore, rssAfter] = await rssServed();
  const dir = h.tempDir("dashboard-bench");
  let d = await h.startDaemon(dir, {boards: 1});
  const l = await h.lease(d, 1);
  const one = await h.run(d, l, "pass", {commit: "seed"});
  await d.api("DELETE", `/v1/leases/${l}`);
  await d.stop();
  seedRuns(path.join(dir, "state/hwfarm.db"), one, 10000);
  let t = Date.now();
  d = await h.startDaemon(dir, {boards: 1}); // indexes the 10,000 runs once
  const catchUp = Date.now() - t;
  await d.stop();
  t = Date.now();
  d = await h.startDaemon(dir, {boards: 1});
  const startup = Date.now() - t;
  const b = await h.browser();
  const {page} = await h.watchedPage(b);
  await h.signIn(page, d.url, h.tokens.viewer);

  // The floor: 50 rows from a static file by a bare table.
  const firstPage = (await d.api("GET", "/v1/runs?limit=50", undefined, h.tokens.viewer)).json;
  const rows = {runs: [], api: [], bytes: 0, floor: [], grid: [], gridFloor: []};
  rows.bytes = JSON.stringify(firstPage).length;
  const {record, goldens} = gridRecord(100, 8);
  for (let r = 0; r < rounds; ++r) {
    // runs page, from navigation to the table drawn
    await h.view(page, "#/fleet");
    const t0 = await page.evaluate(() => performance.now());
    await h.view(page, "#/runs");
    await page.waitForSelector("table.runs tbody tr");
    rows.runs.push((await page.evaluate(() => performance.now())) - t0);
    // the floor
    rows.floor.push(await page.evaluate(async data => {
      const t = performance.now();
      const json = await new Response(data).json();
      const table = document.createElement("table");
      for (const run of json.runs) {
        const tr = table.insertRow();
        for (const v of [run.id, run.state, run.suite, run.commit, run.ended_ms]) tr.insertCell().textContent = v ?? "";
      }
      document.body.append(table);
      table.getBoundingClientRect();
      table.remove();
      return performance.now() - t;
    }, JSON.stringify(firstPage)));
    // GET /v1/runs first page
    const a = process.hrtime.bigint();
    await d.api("GET", "/v1/runs?limit=50", undefined, h.tokens.viewer);
    rows.api.push(Number(process.hrtime.bigint() - a) / 1e6);
    // the grid: the run page's own code on the synthetic run
    const times = await page.evaluate(async (rec, gold) => {
      const {gridModel, renderGrid} = await import("./ui/pages/run.js");
      let t = performance.now();
      const el = renderGrid({hashOf: () => "#", source: {kind: "live"}}, rec, gridModel(rec, gold, false));
      document.body.append(el);
      el.getBoundingClientRect();
      const ours = performance.now() - t;
      el.remove();
      t = performance.now();
      const table = document.createElement("table");
      const keys = Object.keys(gold["board_0"]);
      for (const k of keys) {
        const tr = table.insertRow();
        tr.insertCell().textContent = k;
        for (const target of Object.keys(gold)) tr.insertCell().textContent = gold[target][k].actual_pcc.toPrecision(5);
      }
      document.body.append(table);
      table.getBoundingClientRect();
      const floor = performance.now() - t;
      table.remove();
      return [ours, floor];
    }, record, goldens);
    rows.grid.push(times[0]);
    rows.gridFloor.push(times[1]);
  }
  for (const v of ["#/fleet", "#/tier", "#/runs", `#/run/${one.id}`]) await h.view(page, v);
  await b.close();
  await h.sleep(1000);
  const idle = rss(d.child.pid);
  await d.stop();

  const line = (label, a, b, goal) => console.log(`${label.padEnd(44)}${a.padStart(12)}${b.padStart(14)}${goal ? "   " + goal : ""}`);
  console.log(`dashboard benchmark: 10,000 runs in the database, a run of 100 outputs x 8 targets, Chromium ${await chromiumVersion()}, median of ${rounds} rounds, 2 cores, load ${fs.readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
  line("", "dashboard", "bare table");
  line("runs page: navigation to first screen", fmt(median(rows.runs)), fmt(median(rows.floor)), median(rows.runs) < 1000 ? "goal < 1 s: met" : "goal < 1 s: NOT met");
  line("run grid (100 x 8): data to grid drawn", fmt(median(rows.grid)), fmt(median(rows.gridFloor)), median(rows.grid) < 300 ? "goal < 300 ms: met" : "goal < 300 ms: NOT met");
  line("GET /v1/runs?limit=50 (first page)", fmt(median(rows.api)), `${rows.bytes} B`);
  line("hwfarmd start-up, 10,000 runs to index", fmt(catchUp), "");
  line("hwfarmd start-up, 10,000 runs indexed", fmt(startup), "");
  line("hwfarmd RSS, no run, idle", fmt(rssBefore, "MiB"), "");
  line("hwfarmd RSS, no run, every view served", fmt(rssAfter, "MiB"), `+${(rssAfter - rssBefore).toFixed(1)} MiB`);
  line("hwfarmd RSS, 10,000 runs, every view served", fmt(idle, "MiB"), "");
}

async function chromiumVersion() {
  return execFileSync(h.env.chromium, ["--version"]).toString().trim().replace(/^Chromium /, "").split(" ")[0];
}

await main();
process.exit(0);
