// The dashboard in a real browser (Debian's chromium, puppeteer-core)
// against a real hwfarmd on simulated boards, with runs that pass, drift,
// fail, fail the lab's way and hang, and one whose firmware and requests
// put markup and script into every field they choose.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import {after, before, describe, it} from "node:test";
import {browser, downloadingPage, env, lease, run, screenshot, signIn, startDaemon, tarOf, tempDir, tokens, view, waitFor, watchedPage} from "./harness.mjs";

const XSS = {
  job: "<img src=x onerror=\"window.__xss='job'\">",
  stage: "<script>window.__xss='stage'</script>",
  url: "javascript:window.__xss='url'",
  suite: "<b onmouseover=\"window.__xss='suite'\">suite</b>",
  commit: "<img src=x onerror=window.__xss=commit>",
  reason: "<img src=x onerror=\"window.__xss='reason'\">",
};

let d, b, runs = {}, xssRun;

before(async () => {
  d = await startDaemon(tempDir("dashboard"), {boards: 2});
  const l = await lease(d, 2, {job: "tvm/nightly", build: "41", stage: "hil", url: "https://ci.example.org/job/tvm/41/"});
  // One image, "model", over commits: steady, a lab failure, a hang, then a drift and a drop.
  const opts = (commit, extra = {}) => ({name: "model", commit, mode: "each", ...extra});
  runs.pass1 = await run(d, l, "pass", opts("c1"));
  runs.pass2 = await run(d, l, "pass", opts("c2"));
  runs.pass3 = await run(d, l, "pass", opts("c3"));
  // (damaged records on the board only, the reference's whole: the lab's)
  runs.infra = await run(d, l, "crc", opts("c4", {reference: "pass"}));
  runs.hang = await run(d, l, "hang", opts("c5", {deadline_s: 3}));
  runs.drift = await run(d, l, "slight", opts("c6"));
  runs.bad = await run(d, l, "bad", opts("c7"));
  assert.equal(runs.pass3.state, "passed");
  assert.equal(runs.infra.state, "error");
  assert.equal(runs.hang.state, "failed");
  assert.equal(runs.drift.state, "passed");
  assert.equal(runs.bad.state, "failed");
  await d.api("DELETE", `/v1/leases/${l}`);
  // Markup and script through firmware (names, message, trace) and requests (holder, suite, commit).
  const x = await lease(d, 1, {job: XSS.job, build: "1", stage: XSS.stage, url: XSS.url});
  xssRun = await run(d, x, "xss", {suite: XSS.suite, commit: XSS.commit});
  // More outputs in a case, and more cases, than a run's record lists.
  runs.wide = await run(d, x, "manyoutputs", {suite: "wide"});
  runs.many = await run(d, x, "manycases", {suite: "many"});
  await d.api("DELETE", `/v1/leases/${x}`);
  b = await browser();
});

after(async () => {
  if (b) await b.close();
  if (d) await d.stop();
});

async function viewer() {
  const w = await watchedPage(b);
  await signIn(w.page, d.url, tokens.viewer);
  return w;
}

describe("as a viewer", () => {
  it("every view loads with no console error, and its screenshot is taken", async () => {
    const {page, problems} = await viewer();
    const views = [
      ["fleet", "#/fleet"], ["tier", "#/tier"], ["runs", "#/runs"], ["runs-infrastructure", "#/runs?state=error"],
      ["run", `#/run/${runs.bad.id}`], ["run-cell", `#/run/${runs.drift.id}?cell=model%7Cmps2_an385_0%7Csquare.y`],
      ["history", "#/history?image=model&output=square.y&board_type=&last=30"],
      ["compare", `#/compare?base=${runs.pass3.id}&head=${runs.bad.id}`]];
    for (const [name, hash] of views) {
      await view(page, hash);
      assert.equal(await page.$("main > .error[role=alert]"), null, `${name}: ${await page.$eval("main", m => m.innerText)}`);
      await screenshot(page, name);
    }
    assert.deepEqual(problems, []);
  });

  it("shows who is signed in, keeps the token out of every URL, and offers no operator button", async () => {
    const {page, requests} = await viewer();
    assert.match(await page.$eval("#who", e => e.textContent), /Signed in as viewer \(viewer\)/);
    await view(page, "#/fleet");
    await view(page, `#/run/${runs.drift.id}?cell=model%7Cmps2_an385_1%7Csquare.y`);
    await page.waitForSelector("#cell-detail table");
    for (const r of requests) assert.ok(!r.url().includes(tokens.viewer), r.url());
    assert.ok(!(await page.evaluate(() => location.href)).includes(tokens.viewer));
    assert.equal(await page.evaluate(() => sessionStorage.getItem("hwfarm.token")), tokens.viewer);
    assert.equal(await page.evaluate(() => localStorage.length + document.cookie.length), 0);
    await view(page, "#/fleet");
    assert.equal(await page.$$eval("main button", bs => bs.filter(x => /Maintenance|Resume|Check/.test(x.textContent)).length), 0);
  });

  it("shows each grid cell's value as the API and the golden_results file have it", async () => {
    const {page} = await viewer();
    await view(page, `#/run/${runs.drift.id}`);
    const cells = await page.$$eval("table.grid tbody tr", trs => trs.map(tr => ({
      output: tr.querySelector("th").textContent,
      values: [...tr.querySelectorAll("td")].map(td => ({text: td.textContent, cls: td.className}))})));
    const golden = JSON.parse(fs.readFileSync(path.join(d.dir, "state/runs", runs.drift.id, "golden_results__mps2_an385_0.json"), "utf8"));
    const fromApi = runs.drift.attempts.find(a => a.target === "mps2_an385_0").cases.flatMap(c => c.outputs);
    const square = cells.find(c => c.output === "square.y");
    const pcc = golden["square.y"].actual_pcc;
    assert.ok(pcc > 0.994 && pcc < 0.996);
    assert.equal(fromApi.find(o => o.key === "square.y").actual_pcc, pcc);
    assert.equal(square.values[0].text, `≈ ${Number(pcc.toPrecision(5))}`);
    assert.equal(square.values[0].cls, "m-near");
    // The integer output shows its max error, the exact one passes.
    const ramp = cells.find(c => c.output === "ramp.y");
    assert.equal(ramp.values[0].text, `✓ max ${golden["ramp.y"].max}`);
    // Two targets, every output of the API in the grid.
    assert.equal(square.values.length, 2);
    assert.deepEqual(cells.map(c => c.output).sort(), fromApi.map(o => o.key).sort());
    // The overlay files: ttrt's nested golden_results.json (device "0" is
    // mps2_an385_0) and Model Explorer's node data, keyed by output name.
    const dir = path.join(d.dir, "state/runs", runs.drift.id);
    const nested = JSON.parse(fs.readFileSync(path.join(dir, "golden_results.json"), "utf8"));
    assert.equal(nested["square.y"]["0"].actual_pcc, pcc);
    assert.equal(nested["square.y"]["0"].target, "mps2_an385_0");
    assert.equal(nested["square.y"]["1"].target, "mps2_an385_1");
    const nodedata = fs.readFileSync(path.join(dir, "nodedata/model__mps2_an385_0.json"), "utf8");
    assert.doesNotMatch(nodedata, /NaN/);
    const nd = JSON.parse(nodedata);
    assert.equal(nd.results["square.y"].value, pcc - golden["square.y"].expected_pcc); // "y" is shared: whole keys
    assert.equal(nd.thresholds.length, 2);
    // Keyboard: the arrow keys move between cells.
    await page.focus("table.grid [data-r='0'][data-c='0']");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("ArrowRight");
    assert.deepEqual(await page.evaluate(() => [document.activeElement.dataset.r, document.activeElement.dataset.c]), ["1", "1"]);
    // A failing cell says so in text, not only in colour.
    await view(page, `#/run/${runs.bad.id}`);
    const bad = await page.$eval("table.grid tbody tr:first-child td", td => [td.textContent, td.className]);
    assert.match(bad[0], /^✗ 0\.49/);
    assert.equal(bad[1], "m-bad");
  });

  it("shows every output of a case in the grid and says how many cases the record does not list", async () => {
    const {page} = await viewer();
    // Given a case with 30 outputs (the record lists the first 20 of a case),
    const listed = runs.wide.attempts.find(a => !a.reference).cases.find(c => c.name === "wide");
    assert.ok(listed.outputs.length < 30);
    // the grid has a row for each, from golden_results,
    await view(page, `#/run/${runs.wide.id}`);
    const rows = await page.$$eval("table.grid tbody tr th", ths => ths.map(th => th.textContent));
    assert.equal(rows.filter(r => r.startsWith("wide.y")).length, 30);
    assert.ok(rows.includes("wide.y29"));
    const last = await page.$$eval("table.grid tbody tr", trs =>
      trs.filter(tr => tr.querySelector("th").textContent === "wide.y29").map(tr => tr.querySelector("td").textContent));
    assert.deepEqual(last, ["✓ max 0"]);
    // and a run of 10,000 cases lists 100 and says how many more there are.
    await view(page, `#/run/${runs.many.id}`);
    const note = await page.$eval("tr.left-out", tr => tr.textContent);
    assert.match(note, /9900 more cases not listed \(counted in the verdict; every case is in the trace\)/);
  });

  it("plots a cell's values against the reference's from the .npy files, with the worst positions", async () => {
    const {page} = await viewer();
    await view(page, `#/run/${runs.bad.id}?cell=model%7Cmps2_an385_0%7Csquare.y`);
    await page.waitForSelector("#cell-detail canvas");
    const worst = await page.$$eval("#cell-detail table[aria-label='Worst positions'] tbody tr",
                                     trs => trs.map(tr => [...tr.cells].map(c => c.textContent)));
    // square.y of the bad variant: every element moved by 2.7, so each difference is ±2.7.
    assert.equal(worst.length, 8);
    for (const row of worst) assert.equal(Math.abs(Number(row[3])).toFixed(4), "2.7000");
    assert.equal(await page.$$eval("#cell-detail canvas", cs => cs.length), 2);
  });

  it("filters runs, with infrastructure failures apart from test failures", async () => {
    const {page} = await viewer();
    const ids = async () => page.$$eval("table.runs tbody th a", as => as.map(a => a.textContent));
    await view(page, "#/runs?state=error");
    assert.deepEqual(await ids(), [runs.infra.id]);
    await view(page, "#/runs?failure_class=test");
    assert.deepEqual((await ids()).sort(), [runs.hang.id, runs.bad.id, xssRun.id, runs.many.id].sort());
    await view(page, "#/runs?commit=c6");
    assert.deepEqual(await ids(), [runs.drift.id]);
    await view(page, "#/runs?holder=tvm%2Fnightly&state=passed");
    assert.deepEqual((await ids()).sort(), [runs.pass1.id, runs.pass2.id, runs.pass3.id, runs.drift.id].sort());
    await view(page, "#/runs");
    const chips = await page.$$eval("ul.chips li", lis => lis.map(li => li.textContent));
    assert.ok(chips.includes("4test failures"), chips.join("|"));
    assert.ok(chips.includes("1infrastructure failures"), chips.join("|"));
    assert.equal((await ids())[0], runs.many.id); // newest first
  });

  it("flags the drop in an output's history at the run where it left its band", async () => {
    const {page} = await viewer();
    await view(page, "#/history?image=model&output=square.y&board_type=&last=30");
    const banners = await page.$$eval("p.banner.bad", ps => ps.map(p => p.textContent));
    assert.equal(banners.length, 2); // one per board
    for (const text of banners) assert.match(text, new RegExp(`at run ${runs.drift.id} \\(commit c6\\)`));
    assert.equal(await page.$$eval("main section canvas", cs => cs.length), 2);
  });

  it("compares two runs: newly failing cases and each output's PCC change", async () => {
    const {page} = await viewer();
    await view(page, `#/compare?base=${runs.pass3.id}&head=${runs.bad.id}`);
    const text = await page.$eval("main", m => m.innerText);
    assert.match(text, /Newly failing: 2 case\(s\)/);
    const rows = await page.$$eval("table[aria-label=Outputs] tbody tr", trs => trs.map(tr => [...tr.cells].map(c => c.textContent)));
    const square = rows.filter(r => r[2] === "square.y");
    assert.equal(square.length, 2);
    for (const r of square) {
      assert.equal(r[3], "newly failing");
      assert.match(r[6], /^-0\.50/);
    }
  });
});

describe("live", () => {
  it("the fleet shows a new lease and its holder without a reload", async () => {
    const {page, problems} = await viewer();
    await view(page, "#/fleet");
    const l = await lease(d, 1, {job: "zephyr/PR-7", build: "3", stage: "hil", url: "https://ci.example.org/pr/7"});
    await page.waitForFunction(() => /zephyr\/PR-7 #3/.test(document.querySelector("main").innerText), {timeout: 10000});
    await screenshot(page, "fleet-leased");
    await d.api("DELETE", `/v1/leases/${l}`);
    await page.waitForFunction(() => !/zephyr\/PR-7/.test(document.querySelector("main").innerText), {timeout: 10000});
    assert.deepEqual(problems, []);
  });

  it("a running run's page shows its progress and its end without a reload", async () => {
    const {page, problems} = await viewer();
    const l = await lease(d, 1);
    const started = await run(d, l, "hang", {deadline_s: 4, wait: false});
    await view(page, `#/run/${started.id}`);
    await page.waitForSelector("progress");
    await page.waitForFunction(() => /Run run-\S+ failed/.test(document.querySelector("h1").textContent), {timeout: 30000});
    assert.match(await page.$eval("main", m => m.innerText), /BEGIN without END|hang|deadline/i);
    await d.api("DELETE", `/v1/leases/${l}`);
    assert.deepEqual(problems, []);
  });
});

describe("hostile text", () => {
  it("markup and script from firmware and requests are shown as text and never run", async () => {
    const {page, problems} = await viewer();
    const l = await lease(d, 1, {job: XSS.job, build: "2", stage: XSS.stage, url: XSS.url});
    for (const hash of ["#/fleet", "#/runs", `#/run/${xssRun.id}`, `#/compare?base=${runs.pass1.id}&head=${xssRun.id}`]) {
      await view(page, hash);
      const text = await page.$eval("main", m => m.innerText);
      if (hash === "#/fleet") assert.ok(text.includes(XSS.job), "the holder's job shows as text");
      if (hash === `#/run/${xssRun.id}`) {
        assert.ok(text.includes("<img/src=x/onerror=window.__xss='case'>"), "the case name shows as text");
        assert.ok(text.includes(XSS.suite) && text.includes(XSS.commit));
        // The trace, as text.
        const trace = await page.$$("main .tabs button");
        for (const t of trace) if (/traces\/xss__mps2_an385\.txt/.test(await t.evaluate(e => e.textContent))) await t.click();
        await page.waitForFunction(() => /<script>window.__xss='trace'<\/script>/.test(document.querySelector("main pre")?.textContent || ""));
      }
      assert.equal(await page.evaluate(() => window.__xss), undefined, hash);
      assert.equal(await page.$$eval("main img, main script, main svg, main b", e => e.length), 0, hash);
      assert.equal(await page.$$eval("a[href^='javascript']", e => e.length), 0, hash);
    }
    await d.api("POST", "/v1/tier/pin", {tier: 1, reason: XSS.reason}, tokens.operator);
    await view(page, "#/tier");
    assert.ok((await page.$eval("main", m => m.innerText)).includes(XSS.reason));
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    await d.api("POST", "/v1/tier/unpin", {}, tokens.operator);
    await d.api("DELETE", `/v1/leases/${l}`);
    await screenshot(page, "hostile-text");
    assert.deepEqual(problems.filter(p => !/dialog/.test(p)), []);
    assert.ok(!problems.some(p => /dialog/.test(p)), "no dialog opened");
  });

  it("the page has a strict Content-Security-Policy", async () => {
    const res = await fetch(d.url + "/");
    const csp = res.headers.get("content-security-policy");
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    const html = await res.text();
    assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]+<\/script>|\son[a-z]+=/i); // no inline script or handler
  });
});

describe("as an operator", () => {
  it("takes a board out of service and back, each after a confirmation", async () => {
    const {page, problems} = await watchedPage(b);
    await signIn(page, d.url, tokens.operator);
    await view(page, "#/fleet");
    const button = async (label, board) => page.waitForSelector(`tr[data-board="${board}"] button[data-key="${label}:${board}"]`);
    // Cancelled: nothing changes.
    await (await button("maintenance", "sim-1")).click();
    await page.waitForSelector("dialog[open]");
    await screenshot(page, "operator-confirm");
    await page.click("dialog[open] button[value=no]");
    assert.equal((await d.api("GET", "/v1/boards/sim-1", undefined, tokens.viewer)).json.state, "available");
    // Confirmed: the board goes to maintenance, and back.
    await (await button("maintenance", "sim-1")).click();
    await page.click("dialog[open] button[value=yes]");
    await waitFor("maintenance", async () => (await d.api("GET", "/v1/boards/sim-1", undefined, tokens.viewer)).json.state === "maintenance");
    await (await button("resume", "sim-1")).click();
    await page.click("dialog[open] button[value=yes]");
    await waitFor("resume", async () => (await d.api("GET", "/v1/boards/sim-1", undefined, tokens.viewer)).json.state !== "maintenance");
    assert.deepEqual(problems, []);
  });

  it("a wrong token is refused with the sign-in form again", async () => {
    const {page} = await watchedPage(b);
    await page.goto(d.url + "/", {waitUntil: "networkidle0"});
    await page.type("#token", "not-a-token");
    await page.click("form.signin button[type=submit]");
    await page.waitForFunction(() => /not valid/.test(document.querySelector("main").innerText));
    assert.equal(await page.$("#who strong"), null);
  });
});

// pytest's JUnit XML (--junitxml, xunit2): a pass, a failure, an error the
// lab's (the board's serial port lost at setup: rule "serial port lost")
// and an error that is the test's (its own fixture).
const PYTEST_XML = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="2" failures="1" skipped="0" tests="4" \
time="1.412" timestamp="2025-05-01T10:00:00.000000+00:00" hostname="ci-7"><testcase classname="tests.test_board" name="test_banner" time="0.812" />\
<testcase classname="tests.test_board" name="test_echo" time="0.301"><failure message="AssertionError: assert 'pong' == 'ping'&#10;  - ping&#10;  + pong">board = &lt;Board sim-0&gt;

    def test_echo(board):
&gt;       assert board.ask("ping") == "ping"
E       AssertionError: assert 'pong' == 'ping'
E         - ping
E         + pong (answered in 12 µs)

tests/test_board.py:14: AssertionError</failure></testcase>\
<testcase classname="tests.test_board" name="test_uart" time="0.000"><error message="failed on setup with &quot;conftest.SerialException: could not open port&quot;">@pytest.fixture
    def board(request):
&gt;       raise SerialException("could not open port")
E       conftest.SerialException: could not open port

conftest.py:9: SerialException</error></testcase>\
<testcase classname="tests.test_board" name="test_config" time="0.000"><error message="failed on setup with &quot;ValueError: empty&quot;">@pytest.fixture
    def config():
&gt;       raise ValueError("empty")
E       ValueError: empty

conftest.py:15: ValueError</error></testcase></testsuite></testsuites>
`;

// Last: the runs it publishes would change what the tests above count.
describe("a test harness's published results", () => {
  let ext;
  before(async () => {
    const l = await lease(d, 1, {job: "zephyr/pytest", build: "12", stage: "hil"});
    const archive = tarOf({"results/r.xml": PYTEST_XML, "artifacts/console.txt": "*** Booting Zephyr OS ***\n"});
    const r = await d.api("POST", `/v1/leases/${l}/results?name=pytest-board&commit=e1`, archive, tokens.pipeline, "application/x-tar");
    assert.equal(r.status, 201, r.text);
    ext = r.json;
    await d.api("DELETE", `/v1/leases/${l}`);
    assert.equal(ext.kind, "external");
    assert.equal(ext.harness, "junit");
    assert.equal(ext.state, "failed");
    assert.equal(ext.failure_class, "test");
    assert.ok(ext.artifacts.includes("results/r.xml"), ext.artifacts.join(" "));
  });

  it("shows the run as a harness's: its reason, each case the lab's or the test's, its files", async () => {
    const w = await downloadingPage(b, tempDir("downloads"));
    const {page, problems} = w;
    try {
      await signIn(page, d.url, tokens.viewer);
      await view(page, `#/run/${ext.id}`);
      // The header: published by a test harness, the run's reason in the banner.
      const kv = await page.$$eval("main dl.kv dt", dts => Object.fromEntries(dts.map(dt => [dt.textContent, dt.nextElementSibling.textContent])));
      assert.equal(kv.Results, "published by a test harness (junit)");
      assert.equal(kv.Suite, "pytest-board");
      assert.equal(await page.$eval("main p.banner", p => p.textContent), `test: ${ext.reason}`);
      // The verdict: the run's reason, the first failure with the lab's error counted beside it.
      const verdicts = await page.$$eval("table[aria-label=Verdicts] tbody tr", trs => trs.map(tr => [...tr.cells].map(c => c.textContent)));
      assert.equal(verdicts.length, 1);
      assert.equal(verdicts[0][5], ext.reason);
      assert.match(ext.reason, /^tests\.test_board\.test_echo failed: AssertionError/);
      assert.match(ext.reason, /1 error\(s\) the lab's, first: tests\.test_board\.test_uart/);
      // No outputs compared: no Accuracy section.
      assert.equal(await page.$("main section[aria-label=Accuracy]"), null);
      // The cases: the SerialException is the lab's by its rule, the ValueError and the failure the test's.
      const cases = Object.fromEntries(await page.$$eval("main section[aria-label=Cases] tbody tr", trs => trs.map(tr => [
        tr.cells[2].textContent,
        {cls: tr.className, badges: [...tr.cells[3].querySelectorAll(".badge")].map(x => `${x.textContent}:${x.className}`),
         message: tr.cells[4].firstChild?.textContent || "", help: tr.cells[4].querySelector(".help")?.textContent ?? null}])));
      assert.deepEqual(Object.keys(cases).sort(),
                       ["test_banner", "test_config", "test_echo", "test_uart"].map(n => `tests.test_board.${n}`));
      const uart = cases["tests.test_board.test_uart"];
      assert.equal(uart.cls, "infra");
      assert.deepEqual(uart.badges, ["error:badge error", "infrastructure:badge infrastructure"]);
      assert.equal(uart.message, "failed on setup with \"conftest.SerialException: could not open port\"");
      assert.equal(uart.help, "the lab's by rule “serial port lost”");
      const config = cases["tests.test_board.test_config"];
      assert.equal(config.cls, "testfail");
      assert.deepEqual(config.badges, ["error:badge fail"]); // the test's colour, no "infrastructure"
      assert.equal(config.message, "failed on setup with \"ValueError: empty\"");
      assert.equal(config.help, null);
      const echo = cases["tests.test_board.test_echo"];
      assert.equal(echo.cls, "testfail");
      assert.deepEqual(echo.badges, ["fail:badge fail"]);
      assert.equal(echo.help, null);
      assert.equal(cases["tests.test_board.test_banner"].cls, "");
      await screenshot(page, "run-external");
      // The files: results/r.xml downloads as it was published, byte for byte.
      await page.click("main section[aria-label='Traces, logs and files'] details summary");
      const files = await page.$$eval("main section[aria-label='Traces, logs and files'] details li", lis => lis.map(li => li.textContent));
      assert.ok(files.includes("results/r.xml") && files.includes("artifacts/console.txt"), files.join(" "));
      const [button] = await page.$$("xpath/.//main//section[@aria-label='Traces, logs and files']//details//li/button[.='results/r.xml']");
      await button.click();
      assert.ok((await w.downloaded("r.xml")).equals(Buffer.from(PYTEST_XML, "utf8")), "the downloaded results/r.xml is the published one");
      // The runs list: failed (a test failure), found as one, not as the lab's.
      const ids = async () => page.$$eval("table.runs tbody th a", as => as.map(a => a.textContent));
      await view(page, "#/runs");
      const row = await page.$$eval("table.runs tbody tr", (trs, id) => trs.filter(tr => tr.querySelector("th a").textContent === id)
        .map(tr => ({cls: tr.className, state: tr.cells[1].textContent, suite: tr.cells[2].textContent, reason: tr.cells[9].textContent})), ext.id);
      assert.deepEqual(row, [{cls: "testfail", state: "failed (test)", suite: "pytest-board", reason: ext.reason}]);
      await view(page, "#/runs?failure_class=test");
      assert.ok((await ids()).includes(ext.id));
      assert.ok(!(await ids()).includes(runs.infra.id));
      await view(page, "#/runs?failure_class=infrastructure");
      assert.deepEqual(await ids(), [runs.infra.id]);
      assert.deepEqual(problems, []);
    } finally {
      await w.close();
    }
  });
});
