// Runs, newest first, with filters. Infrastructure failures (state
// "error") are apart from test failures (state "failed"): their own
// colour, their own filter and their own count, never one number for both.
import {badge, duration, empty, h, replace, table, when} from "../dom.js";
import {holder, poll} from "../widgets.js";

const FILTERS = [
  ["state", "State", ["", "running", "passed", "failed", "error", "cancelled", "interrupted"]],
  ["failure_class", "Failure", ["", "test", "infrastructure"]],
  ["board_type", "Board type"], ["image", "Image"], ["commit", "Commit"], ["holder", "Holder (job)"],
];
const STATE_TEXT = {failed: "failed (test)", error: "error (infrastructure)"};

export async function render(ctx) {
  const filters = {};
  for (const [key] of FILTERS) if (ctx.params[key]) filters[key] = ctx.params[key];
  const form = filterForm(ctx, filters);
  const chips = h("ul", {class: "chips", "aria-label": "Runs by outcome"});
  const list = h("div");
  replace(ctx.main, h("h1", {}, "Runs"), form, chips, list);
  const rows = [];
  let next = null;
  const more = h("button", {type: "button", onclick: async () => {
    const page = await ctx.source.runs(filters, next);
    rows.push(...page.runs);
    next = page.next;
    draw();
  }}, "Older runs");
  const draw = (counts) => {
    if (counts) replace(chips, countChips(ctx, counts, filters));
    replace(list, rows.length ? runTable(ctx, rows) : empty("No run matches."), next ? h("p", {}, more) : null);
  };
  const first = async () => {
    const page = await ctx.source.runs(filters, null);
    rows.splice(0, rows.length, ...page.runs);
    next = page.next;
    draw(page.counts);
  };
  // The first page is live while nothing older is shown.
  await poll(ctx, async () => { if (rows.length <= 50) await first(); }, ctx.source.kind === "live" ? 5000 : 60000);
}

function filterForm(ctx, filters) {
  const form = h("form", {class: "filters", role: "search", "aria-label": "Filter runs"},
    FILTERS.map(([key, label, options]) => h("label", {for: `f-${key}`}, label, options
      ? h("select", {id: `f-${key}`, name: key}, options.map(o => h("option", {value: o, selected: filters[key] === o}, o ? (STATE_TEXT[o] || o) : "any")))
      : h("input", {id: `f-${key}`, name: key, value: filters[key] || "", size: 14}))),
    h("button", {type: "submit", class: "primary"}, "Filter"),
    h("a", {href: "#/runs"}, "Clear"));
  form.addEventListener("change", ev => { if (ev.target.tagName === "SELECT") form.requestSubmit(); });
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    ctx.go("runs", [], Object.fromEntries(new FormData(form)));
  });
  return form;
}

function countChips(ctx, counts, filters) {
  const chip = (state, label, cls) => h("li", {class: cls},
    h("a", {href: ctx.hashOf("runs", [], {...filters, state})}, h("strong", {}, counts[state] || 0), label));
  return [chip("passed", "passed", "passed"), chip("failed", "test failures", "test"),
          chip("error", "infrastructure failures", "infrastructure"), chip("running", "running", "running"),
          (counts.cancelled || counts.interrupted) ? chip("cancelled", "cancelled", "") : null];
}

function runTable(ctx, rows) {
  return table(["Run", "State", "Suite", "Images", "Targets", "Commit", "Holder", "Ended", "Took", "Reason"], rows.map(r => {
    const cls = r.state === "error" || r.state === "interrupted" ? "infra" : r.state === "failed" ? "testfail" : null;
    return h("tr", {class: cls},
      h("th", {scope: "row", class: "mono"}, h("a", {href: ctx.hashOf("run", [r.id])}, r.id), r.agent ? h("div", {class: "help"}, r.agent) : null),
      h("td", {}, badge(STATE_TEXT[r.state] || r.state, r.state)),
      h("td", {}, r.suite || ""),
      h("td", {}, (r.images || []).join(", ")),
      h("td", {}, (r.board_types || []).join(", ")),
      h("td", {class: "mono"}, r.commit ? r.commit.slice(0, 12) : ""),
      h("td", {}, holder(r.holder)),
      h("td", {class: "nowrap"}, r.ended_ms ? when(r.ended_ms) : r.state === "running" ? badge("running") : ""),
      h("td", {class: "num"}, r.ended_ms && r.created_ms ? duration(r.ended_ms - r.created_ms) : ""),
      h("td", {}, r.reason || ""));
  }), {class: "runs"});
}
