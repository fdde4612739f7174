// History: one output of one image over the last runs, a series per board
// type and board, across commits; a drop is flagged when a value leaves
// its usual band, with the run where it dropped.
import {badge, empty, h, num, replace, section, table, when} from "../dom.js";
import {historyChart} from "../charts.js";

export async function render(ctx) {
  const p = {image: ctx.params.image || "", output: ctx.params.output || "", board_type: ctx.params.board_type || "",
             last: ctx.params.last || "30"};
  const form = h("form", {class: "filters", role: "search", "aria-label": "Which output"},
    field("image", "Image", p.image), field("output", "Output (case.output)", p.output),
    field("board_type", "Board type (empty: all)", p.board_type), field("last", "Last runs", p.last, "number"),
    h("button", {type: "submit", class: "primary"}, "Show"));
  form.addEventListener("submit", ev => { ev.preventDefault(); ctx.go("history", [], Object.fromEntries(new FormData(form))); });
  const out = h("div");
  replace(ctx.main, h("h1", {}, "History"), form, out);
  if (!p.image || !p.output) return replace(out, empty("Name an image and an output (a cell of a run's accuracy grid links here)."));
  const hist = await ctx.source.history(p);
  const drops = hist.series.filter(s => s.first_drop);
  replace(out,
    h("p", {class: "sub"}, `${p.image} ${p.output}: ${hist.higher_is_better ? "PCC" : "max error"} over the last ${p.last} runs; `,
      `band: median ± ${hist.k} × spread of up to ${hist.window} runs before each.`),
    drops.length
      ? drops.map(s => h("p", {class: "banner bad", role: "status"}, `Dropped on ${s.board} (${s.board_type}) at run `,
          h("a", {href: ctx.hashOf("run", [s.first_drop])}, s.first_drop), commitOf(s, s.first_drop)))
      : h("p", {class: "banner ok"}, hist.series.length ? "Every series is within its usual band." : "No run has this output."),
    hist.series.map(s => seriesView(ctx, s, hist.higher_is_better)));
}

function field(name, label, value, type = "text") {
  return h("label", {for: `h-${name}`}, label, h("input", {id: `h-${name}`, name, value, type, size: 18}));
}

function commitOf(s, run) {
  const p = s.points.find(x => x.run === run);
  return p && p.commit ? ` (commit ${p.commit})` : "";
}

function seriesView(ctx, s, higher) {
  const chart = h("div", {class: "chart"});
  const el = section(`${s.board_type} · ${s.board}${s.agent ? " · " + s.agent : ""}`, chart,
    h("details", {}, h("summary", {}, `${s.points.length} runs`),
      table(["Run", "Ended", "Commit", "Value", "Verdict", "Band", "Out"], [...s.points].reverse().map(p => h("tr", {class: p.out ? "testfail" : null},
        h("td", {class: "mono"}, h("a", {href: ctx.hashOf("run", [p.run])}, p.run)),
        h("td", {class: "nowrap"}, when(p.ended_ms)),
        h("td", {class: "mono"}, (p.commit || "").slice(0, 12)),
        h("td", {class: "num"}, num(p.value, 6)),
        h("td", {}, badge(p.pass ? "pass" : "fail")),
        h("td", {class: "num"}, p.low !== null ? `${num(p.low, 5)} … ${num(p.high, 5)}` : "n/a"),
        h("td", {}, p.out ? badge("out of band", "fail") : ""))))));
  queueMicrotask(() => historyChart(chart, s, higher));
  return el;
}
