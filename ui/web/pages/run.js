// A run: the verdict per image and target with the reason, the accuracy
// grid (outputs x targets, each cell its value and its margin against the
// threshold), a cell's values against the reference's, the cases, traces
// and logs; live progress while it runs.
import {badge, duration, empty, h, link, num, replace, section, table, when} from "../dom.js";
import {holder} from "../widgets.js";
import {parseNpy} from "../npy.js";
import {outputPath} from "../names.js";
import {histogramChart, valuesChart} from "../charts.js";

// A PCC this close above its threshold is "near" (amber, with "≈").
export const NEAR_MARGIN = 0.01;
const EXACT = /^(i8|u8|i16|i32)$/;

export async function render(ctx) {
  const id = ctx.args[0];
  const record = await ctx.source.run(id);
  const multi = (record.images || []).length > 1;
  const head = h("div");
  const progress = h("div");
  const verdicts = h("div");
  const grid = h("div");
  const detail = h("div");
  const cases = h("div");
  const files = h("div");
  // A harness's published results are cases with no output compared: no Accuracy section.
  const accuracy = record.kind !== "external";
  replace(ctx.main, head, progress, section("Verdicts", verdicts), accuracy ? section("Accuracy", grid, detail) : null,
          section("Cases", cases), section("Traces, logs and files", files));
  const draw = () => {
    replace(head, header(ctx, record));
    replace(verdicts, verdictTable(record));
    replace(cases, caseTable(record));
  };
  draw();
  replace(files, fileList(ctx, record));
  if (accuracy) {
    const goldens = await loadGoldens(ctx, record);
    const model = gridModel(record, goldens, multi);
    replace(grid, renderGrid(ctx, record, model));
    if (ctx.params.cell) await cellDetail(ctx, record, model, detail, ctx.params.cell);
  }
  if (record.state === "running" && ctx.source.follow) followProgress(ctx, record, progress, draw);
}

function header(ctx, r) {
  const took = r.ended_ms ? r.ended_ms - r.created_ms : null;
  // A harness's published results: made ended, on the board it ran on.
  const external = r.kind === "external";
  return [
    h("h1", {}, `Run ${r.id} `, badge(r.state === "error" ? "error (infrastructure)" : r.state === "failed" ? "failed (test)" : r.state, r.state)),
    r.reason ? h("p", {class: `banner ${r.state === "error" || r.state === "interrupted" ? "" : "bad"}`}, r.failure_class ? `${r.failure_class}: ` : "", r.reason) : null,
    h("dl", {class: "kv"},
      r.kind === "external" ? [h("dt", {}, "Results"), h("dd", {}, `published by a test harness (${r.harness || "?"})`)] : null,
      r.suite ? [h("dt", {}, "Suite"), h("dd", {}, r.suite)] : null,
      r.commit ? [h("dt", {}, "Commit"), h("dd", {class: "mono"}, r.commit)] : null,
      r.holder ? [h("dt", {}, "Holder"), h("dd", {}, holder(r.holder))] : null,
      external ? [h("dt", {}, "Board"), h("dd", {}, (r.attempts || [])[0]?.board || "(not named)"),
                  h("dt", {}, "Published"), h("dd", {}, when(r.created_ms))]
        : [h("dt", {}, "Images"), h("dd", {}, (r.images || []).map(i => i.name).join(", ")),
           h("dt", {}, "Targets"), h("dd", {}, (r.targets || []).map(t => `${t.name} (${t.board})`).join(", ")),
           h("dt", {}, "Reference"), h("dd", {}, r.reference || "none"),
           h("dt", {}, "Started"), h("dd", {}, when(r.created_ms)),
           r.ended_ms ? [h("dt", {}, "Ended"), h("dd", {}, when(r.ended_ms), ` (took ${duration(took)})`)] : null],
      h("dt", {}, "Compare"), h("dd", {}, h("a", {href: ctx.hashOf("compare", [], {head: r.id})}, "with another run…")))];
}

// The attempts that count: a retried attempt is superseded by its retry.
function current(record) {
  return (record.attempts || []).filter(a => !a.retried);
}

function verdictTable(record) {
  const attempts = current(record);
  if (!attempts.length) return empty("No attempt yet.");
  return table(["Image", "Target", "Board", "Phase", "Outcome", "Reason", "Took"], attempts.map(a => h("tr", {class: a.failure_class === "infrastructure" ? "infra" : a.outcome === "fail" ? "testfail" : null},
    h("td", {}, a.image),
    h("td", {}, a.target, a.reference ? " (reference)" : ""),
    h("td", {}, a.board),
    h("td", {}, a.phase),
    h("td", {}, a.outcome ? badge(a.outcome) : "", a.failure_class ? [" ", badge(a.failure_class)] : ""),
    h("td", {}, a.reason || "", a.retry_of_board ? h("div", {class: "help"}, `retry of ${a.retry_of_board}`) : null,
      a.not_retried ? h("div", {class: "help"}, a.not_retried) : null),
    h("td", {class: "num"}, a.seconds !== undefined ? `${a.seconds.toFixed(2)} s` : ""))), {"aria-label": "Verdicts"});
}

// A case's class: a harness's error is the lab's only by an operator's
// rule (named beside it), else the firmware's like its failures.
function caseClass(record, c) {
  if (c.infrastructure_rule) return "infra";
  if (c.outcome === "fail" || (record.kind === "external" && c.outcome === "error")) return "testfail";
  return c.outcome === "error" ? "infra" : null;
}

function caseTable(record) {
  const rows = [];
  for (const a of current(record)) {
    for (const c of a.cases || []) {
      // The outcome's badge in its class's colour: a harness's error that is the firmware's is red, not the lab's purple.
      const cls = caseClass(record, c);
      rows.push(h("tr", {class: cls},
        h("td", {}, a.image), h("td", {}, a.target), h("td", {}, c.name),
        h("td", {}, badge(c.outcome, cls === "testfail" ? "fail" : cls === "infra" ? "error" : c.outcome), c.infrastructure_rule ? [" ", badge("infrastructure")] : ""),
        h("td", {}, c.message || "", c.infrastructure_rule ? h("div", {class: "help"}, `the lab's by rule “${c.infrastructure_rule}”`) : null)));
    }
    // The record keeps the first cases in full (failing ones first); the
    // rest are counted in the verdicts, and every case is in the trace.
    if (a.cases_left_out)
      rows.push(h("tr", {class: "left-out"}, h("td", {}, a.image), h("td", {}, a.target),
        h("td", {colspan: 3}, `${a.cases_left_out} more ${a.cases_left_out === 1 ? "case" : "cases"} not listed ` +
          `(counted in the verdict; every case is in the trace)`)));
  }
  return rows.length ? table(["Image", "Target", "Case", "Outcome", "Message"], rows) : empty("No case reported yet.");
}

// golden_results, as {target: {key: fields}}: the nested file when the run
// wrote one, else each target's flat file.
async function loadGoldens(ctx, record) {
  const artifacts = new Set(record.artifacts || []);
  const out = {};
  if (artifacts.has("golden_results.json")) {
    const nested = await ctx.source.artifactJson(record, "golden_results.json");
    for (const [key, devices] of Object.entries(nested))
      for (const fields of Object.values(devices)) (out[fields.target] ||= {})[key] = fields;
    return out;
  }
  await Promise.all((record.targets || []).map(async t => {
    const path = `golden_results__${t.name}.json`;
    if (artifacts.has(path)) out[t.name] = await ctx.source.artifactJson(record, path);
  }));
  return out;
}

// Rows (output keys), columns (targets) and cells {value, exact, pass, ...}.
export function gridModel(record, goldens, multi) {
  const targets = (record.targets || []).map(t => t.name);
  for (const a of current(record)) if (!a.reference && !targets.includes(a.target)) targets.push(a.target);
  const rows = [], seen = new Set(), cells = new Map();
  const add = (image, key) => {
    const row = multi ? `${image}/${key}` : key;
    if (!seen.has(row)) { seen.add(row); rows.push({row, image, key}); }
    return row;
  };
  const cell = (image, target, key, row, o, g) => cells.set(`${row}\u0000${target}`, {
    image, target, key, row, pass: (g ? g.verdict : o.verdict) === "pass",
    actual_pcc: g ? g.actual_pcc : o.actual_pcc ?? null, expected_pcc: g ? g.expected_pcc : null,
    max: g ? g.max : null, dtype: g ? g.dtype : null, reason: g ? g.reason : "", fields: g || null});
  for (const a of current(record))
    for (const c of a.cases || [])
      for (const o of c.outputs || []) {
        const row = add(a.image, o.key);
        if (!a.reference) cell(a.image, a.target, o.key, row, o, (goldens[a.target] || {})[row]);
      }
  // The record lists a case's first outputs; golden_results has them all.
  const single = (record.images || [])[0]?.name || "";
  for (const target of targets)
    for (const [row, g] of Object.entries(goldens[target] || {})) {
      if (cells.has(`${row}\u0000${target}`)) continue;
      const cut = multi ? row.indexOf("/") : -1;
      const image = cut > 0 ? row.slice(0, cut) : single, key = cut > 0 ? row.slice(cut + 1) : row;
      add(image, key);
      cell(image, target, key, row, g, g);
    }
  return {targets, rows, cells};
}

// The text and class of a cell: the value always, with a mark (✓ ≈ ✗), so
// the colour is never the only signal.
export function cellView(cell) {
  if (!cell) return {text: "—", cls: "m-none", title: "not compared"};
  const exact = cell.dtype && EXACT.test(cell.dtype);
  const value = exact ? `max ${num(cell.max)}` : num(cell.actual_pcc, 5);
  const margin = cell.actual_pcc !== null && cell.expected_pcc !== null ? cell.actual_pcc - cell.expected_pcc : null;
  const near = cell.pass && !exact && margin !== null && margin < NEAR_MARGIN;
  const mark = !cell.pass ? "✗" : near ? "≈" : "✓";
  const title = `${cell.target}: ${cell.key}: ${cell.pass ? "pass" : "FAIL"}; PCC ${num(cell.actual_pcc, 6)}` +
    (cell.expected_pcc !== null ? ` (threshold ${cell.expected_pcc}, margin ${num(margin, 3)})` : "") +
    (cell.max !== null ? `; max |Δ| ${num(cell.max)}` : "") + (cell.reason ? `; ${cell.reason}` : "");
  return {text: `${mark} ${value}`, cls: !cell.pass ? "m-bad" : near ? "m-near" : "m-good", title};
}

// The accuracy grid of `model` (gridModel), with its legend and the overlay files.
export function renderGrid(ctx, record, model) {
  if (!model.rows.length) return empty("No output was compared in this run.");
  // Built with the DOM's own calls: a grid of 100 outputs x 8 targets is
  // 800 cells (bench/dashboard_bench.mjs times it). Every text is textContent.
  const base = ctx.hashOf("run", [record.id]) + "?cell=";
  const tbody = document.createElement("tbody");
  model.rows.forEach((r, i) => {
    const tr = tbody.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = r.row;
    tr.append(th);
    model.targets.forEach((t, j) => {
      const cell = model.cells.get(`${r.row}\u0000${t}`);
      const v = cellView(cell);
      const td = tr.insertCell();
      td.className = v.cls;
      const el = document.createElement(cell ? "a" : "span");
      if (cell) el.href = base + encodeURIComponent(`${r.image}|${t}|${r.key}`);
      else el.className = "cell";
      el.title = v.title;
      el.tabIndex = i === 0 && j === 0 ? 0 : -1;
      el.dataset.r = i;
      el.dataset.c = j;
      el.textContent = v.text;
      td.append(el);
    });
  });
  const grid = h("table", {class: "grid", role: "grid", "aria-label": "Accuracy: outputs by target", "aria-rowcount": model.rows.length + 1},
    h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Output"), model.targets.map(t => h("th", {scope: "col"}, t)))),
    tbody);
  grid.addEventListener("keydown", ev => gridKeys(grid, ev));
  const overlay = (record.artifacts || []).filter(p => p === "golden_results.json" || p.startsWith("nodedata/"));
  return h("div", {class: "grid-view"},
    h("ul", {class: "legend", "aria-label": "Legend"},
      h("li", {}, h("span", {class: "sw m-good"}, "✓"), "at or above the threshold"),
      h("li", {}, h("span", {class: "sw m-near"}, "≈"), `passes by less than ${NEAR_MARGIN}`),
      h("li", {}, h("span", {class: "sw m-bad"}, "✗"), "below the threshold, or failed"),
      h("li", {}, h("span", {class: "sw m-none"}, "—"), "not compared"),
      h("li", {}, "PCC; max |Δ| for integer outputs. Arrow keys move, Enter opens a cell.")),
    h("div", {class: "grid-wrap"}, grid),
    overlay.length ? h("p", {class: "help"}, "Accuracy overlay files (Model Explorer: Add per-node data; ttrt's nested golden_results.json): ",
                       overlay.map(p => [downloadLink(ctx, record, p), " "])) : null);
}

function gridKeys(grid, ev) {
  const at = ev.target.closest("[data-r]");
  if (!at) return;
  const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], Home: [0, -1e9], End: [0, 1e9]};
  const m = moves[ev.key];
  if (!m) return;
  ev.preventDefault();
  const rows = grid.tBodies[0].rows.length, cols = grid.tHead.rows[0].cells.length - 1;
  const r = Math.max(0, Math.min(rows - 1, Number(at.dataset.r) + m[0]));
  const c = Math.max(0, Math.min(cols - 1, Number(at.dataset.c) + m[1]));
  const next = grid.querySelector(`[data-r="${r}"][data-c="${c}"]`);
  if (!next) return;
  at.tabIndex = -1;
  next.tabIndex = 0;
  next.focus();
}

async function cellDetail(ctx, record, model, el, spec) {
  const [image, target, key] = spec.split("|");
  const multi = (record.images || []).length > 1;
  const row = multi ? `${image}/${key}` : key;
  const cell = model.cells.get(`${row}\u0000${target}`);
  const ref = (record.attempts || []).find(a => a.reference && a.image === image);
  const panel = h("div", {class: "panel", id: "cell-detail", "aria-label": `Output ${key} on ${target}`});
  replace(el, panel);
  const fields = cell && cell.fields ? Object.entries(cell.fields).filter(([k]) => k !== "target") : [];
  const boardType = ((record.targets || []).find(t => t.name === target) || {}).type;
  replace(panel,
    h("h2", {}, `${key} on ${target}`, cell ? [" ", badge(cell.pass ? "pass" : "fail")] : ""),
    h("p", {}, h("a", {href: ctx.hashOf("history", [], {image, output: key, board_type: boardType || ""})}, "History of this output"),
      " · ", h("a", {href: ctx.hashOf("run", [record.id])}, "Close")),
    fields.length ? h("dl", {class: "kv"}, fields.map(([k, v]) => [h("dt", {}, k), h("dd", {class: "mono"}, typeof v === "number" ? num(v, 8) : String(v))])) : null);
  if (!ref) return panel.append(h("p", {class: "empty"}, "The run has no reference to plot against."));
  const tPath = outputPath(image, target, key), rPath = outputPath(image, ref.target, key);
  const have = new Set(record.artifacts || []);
  if (!have.has(tPath) || !have.has(rPath))
    return panel.append(h("p", {class: "empty"}, `The output files are not in the run (${!have.has(tPath) ? tPath : rPath}).`));
  const [t, r] = (await Promise.all([ctx.source.artifactBytes(record, tPath), ctx.source.artifactBytes(record, rPath)])).map(parseNpy);
  const n = Math.min(t.values.length, r.values.length);
  const diffs = Array.from({length: n}, (_, i) => t.values[i] - r.values[i]);
  const values = h("div", {class: "chart"}), hist = h("div", {class: "chart"});
  const worst = [...diffs.keys()].sort((a, b) => badness(diffs[b]) - badness(diffs[a])).slice(0, 10);
  panel.append(h("div", {class: "cols"},
    h("div", {}, h("h3", {}, `Values: ${target} and ${ref.target}`), values),
    h("div", {}, h("h3", {}, "Difference histogram"), hist)),
    h("h3", {}, "Worst positions"),
    table(["Position", target, ref.target, "Difference"], worst.map(i => h("tr", {},
      h("td", {class: "num"}, i), h("td", {class: "num"}, num(t.values[i], 8)), h("td", {class: "num"}, num(r.values[i], 8)),
      h("td", {class: "num"}, num(diffs[i], 6)))), {"aria-label": "Worst positions"}),
    h("p", {class: "help"}, `${n} values (${t.dtype}); files `, downloadLink(ctx, record, tPath), " ", downloadLink(ctx, record, rPath)));
  valuesChart(values, t.values, r.values, [target, ref.target]);
  histogramChart(hist, diffs);
  panel.scrollIntoView({block: "nearest"});
}

function badness(d) { return Number.isFinite(d) ? Math.abs(d) : Infinity; }

// A file of the run: fetched with the page's credentials when clicked, then
// saved (a plain link could not carry the bearer token).
function downloadLink(ctx, record, path) {
  if (ctx.source.kind === "bucket") return link(ctx.source.artifactUrl(record, path), path);
  return h("button", {type: "button", class: "link", onclick: async () => {
    const bytes = await ctx.source.artifactBytes(record, path);
    const a = h("a", {href: new Blob([bytes]), download: path.split("/").pop()});
    document.body.append(a); a.click(); a.remove();
  }}, path);
}

function fileList(ctx, record) {
  const paths = record.artifacts || [];
  if (!paths.length) return empty(record.state === "running" ? "Files are written when the run ends." : "No files.");
  const viewer = h("div");
  const texts = paths.filter(p => p.endsWith(".txt") || p === "junit.xml");
  const show = async path => {
    const text = await ctx.source.artifactText(record, path);
    replace(viewer, h("h3", {}, path), h("pre", {tabindex: 0, "aria-label": path}, text));
  };
  return [
    h("div", {class: "tabs"}, texts.map(p => h("button", {type: "button", onclick: () => show(p)}, p))),
    viewer,
    h("details", {}, h("summary", {}, `All ${paths.length} files`),
      h("ul", {}, paths.map(p => h("li", {}, downloadLink(ctx, record, p)))))];
}

function followProgress(ctx, record, el, draw) {
  const abort = new AbortController();
  ctx.onCleanup(() => abort.abort());
  const bar = h("progress", {max: 1, value: 0, "aria-label": "progress"});
  const text = h("span", {class: "live"}, "running");
  replace(el, h("p", {role: "status"}, bar, " ", text));
  const setProgress = p => { bar.max = p.total || 1; bar.value = p.done || 0; text.textContent = `running: ${p.done} of ${p.total} done`; };
  if (record.progress) setProgress(record.progress);
  ctx.source.follow(record.id, ev => {
    if (ev.event === "run") { Object.assign(record, ev.run); draw(); if (ev.run.progress) setProgress(ev.run.progress); }
    else if (ev.event === "attempt") { record.attempts[ev.index] = {...record.attempts[ev.index], ...ev.attempt}; draw(); }
    else if (ev.event === "progress") setProgress(ev);
    else if (ev.event === "end") { text.textContent = `ended: ${ev.state}`; ctx.reload(); }
  }, abort.signal).catch(e => { if (!abort.signal.aborted) ctx.setStatus(`progress: ${e.message}`); });
}
