// Labs (the bucket's page): every lab whose hwfarmd publishes under this
// prefix, with the days it has runs for.
import {empty, h, replace, table, when} from "../dom.js";

export async function render(ctx) {
  const labs = (await ctx.source.labs()).labs || [];
  replace(ctx.main, h("h1", {}, "Labs"),
    h("p", {class: "sub"}, "Each lab's hwfarmd adds itself here when it publishes; no server coordinates them."),
    labs.length ? table(["Lab", "Published", "Days with runs"], labs.map(l => h("tr", {},
      h("th", {scope: "row"}, l.agent), h("td", {class: "nowrap"}, when(Date.parse(l.updated))),
      h("td", {}, (l.days || []).slice(0, 7).join(", "), (l.days || []).length > 7 ? " …" : ""))))
    : empty("No lab has published yet."));
}
