// Compare two runs (say the nightly and a pull request's): the cases and
// outputs that newly fail, are fixed, still fail, appeared or disappeared,
// and each output's PCC change.
import {badge, empty, h, num, replace, section, table} from "../dom.js";

const ORDER = ["newly_failing", "fixed", "still_failing", "appeared", "disappeared", "infrastructure", "skipped", "passing"];
const TITLE = {newly_failing: "Newly failing", fixed: "Fixed", still_failing: "Still failing", appeared: "Appeared",
               disappeared: "Disappeared", infrastructure: "Infrastructure errors (not test results)", skipped: "Skipped",
               passing: "Passing in both"};

export async function render(ctx) {
  const base = ctx.params.base || "", head = ctx.params.head || "";
  const form = h("form", {class: "filters", role: "search", "aria-label": "Runs to compare"},
    h("label", {for: "c-base"}, "Base run (e.g. the nightly)", h("input", {id: "c-base", name: "base", value: base, size: 28})),
    h("label", {for: "c-head"}, "Run (e.g. the pull request's)", h("input", {id: "c-head", name: "head", value: head, size: 28})),
    h("button", {type: "submit", class: "primary"}, "Compare"));
  form.addEventListener("submit", ev => { ev.preventDefault(); ctx.go("compare", [], Object.fromEntries(new FormData(form))); });
  const out = h("div");
  replace(ctx.main, h("h1", {}, "Compare runs"), form, out);
  if (!head || (!base && ctx.source.kind === "live")) return replace(out, empty("Name two runs."));
  const d = await ctx.source.compare(base, head);
  const runLink = id => h("a", {href: ctx.hashOf("run", [id]), class: "mono"}, id);
  const count = (group, change) => (d.counts[group] || {})[change] || 0;
  replace(out,
    h("p", {class: "sub"}, "From ", runLink(d.base), " to ", runLink(d.head)),
    h("ul", {class: "chips", "aria-label": "Cases by change"},
      ORDER.filter(c => c !== "passing").map(c => h("li", {class: c === "infrastructure" ? "infrastructure" : c.includes("fail") ? "test" : ""},
        h("strong", {}, count("cases", c)), `${TITLE[c].split(" (")[0].toLowerCase()} case(s)`))),
    ORDER.map(c => {
      const rows = d.cases.filter(x => x.change === c);
      if (!rows.length || c === "passing") return null;
      return section(`${TITLE[c]}: ${rows.length} case(s)`, table(["Image", "Target", "Case", "Before", "After", "Message"], rows.map(x => h("tr", {},
        h("td", {}, x.image), h("td", {}, x.target), h("td", {}, x.case),
        h("td", {}, x.before ? badge(x.before) : "—"), h("td", {}, x.after ? badge(x.after) : "—"), h("td", {}, x.message)))));
    }),
    section("Outputs", d.outputs.length ? table(["Image", "Target", "Output", "Change", "PCC before", "PCC after", "Δ PCC"],
      [...d.outputs].sort((a, b) => ORDER.indexOf(a.change) - ORDER.indexOf(b.change) || (a.delta ?? 0) - (b.delta ?? 0)).map(o => h("tr", {},
        h("td", {}, o.image), h("td", {}, o.target), h("td", {}, o.key), h("td", {}, badge(o.change.replace("_", " "), o.change)),
        h("td", {class: "num"}, num(o.before_pcc, 6)), h("td", {class: "num"}, num(o.after_pcc, 6)),
        h("td", {class: "num"}, o.delta === null ? "n/a" : (o.delta > 0 ? "+" : "") + num(o.delta, 3)))), {"aria-label": "Outputs"})
      : empty("Neither run compared an output.")));
}
