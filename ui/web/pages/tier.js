// Tier and SLA: registered and effective tier, the pin, open incidents with
// their age and deadline, the failure ratio in its window, the warning
// before a demotion, and the transitions on a timeline. Live: polled.
import {badge, duration, empty, h, replace, section, table, when} from "../dom.js";
import {confirmAction, poll, update} from "../widgets.js";
import {tierChart} from "../charts.js";

const POLL_MS = 5000;

export async function render(ctx) {
  const standing = h("div");
  const incidents = h("div");
  const ratio = h("div");
  const pin = h("div");
  const chart = h("div", {class: "chart"});
  const timeline = h("div");
  replace(ctx.main, h("h1", {}, "Tier and SLA"), h("p", {class: "sub live"}, "Live: updated every 5 seconds"),
          standing, section("Open incidents", incidents), section("Infrastructure failure ratio", ratio),
          ctx.operator ? section("Pin", pin) : null, section("Transitions", chart, timeline));
  let charted = null;
  await poll(ctx, async () => {
    const [sla, tier] = await Promise.all([ctx.source.sla(), ctx.source.tier()]);
    update(standing, {sla: {...sla, now: null, incidents: null, ratio: null}, pinned: tier.pinned}, () => standingView(sla, tier));
    update(incidents, sla.incidents, () => incidentTable(sla));
    update(ratio, sla.ratio, () => ratioView(sla.ratio));
    if (ctx.operator) update(pin, tier.pinned, () => pinForm(ctx, tier));
    update(timeline, tier.transitions, () => transitionList(tier.transitions));
    const key = JSON.stringify(tier.transitions);
    if (key !== charted && tier.transitions.length) { charted = key; tierChart(chart, tier); }
    chart.hidden = !tier.transitions.length;
  }, POLL_MS);
}

function standingView(sla, tier) {
  const warn = sla.warning;
  return [
    warn ? h("p", {class: `banner ${sla.seconds_to_demotion !== null ? "bad" : ""}`, role: "status"},
             sla.seconds_to_demotion !== null ? `Demotion in ${duration(sla.seconds_to_demotion * 1000)}: ` : "", warn)
         : h("p", {class: "banner ok"}, "No demotion ahead."),
    h("ul", {class: "chips"},
      h("li", {}, h("strong", {}, tier.effective_tier <= 3 ? tier.effective_tier : "suspended"), "effective tier"),
      h("li", {}, h("strong", {}, tier.registered_tier), "registered tier"),
      h("li", {}, h("strong", {}, tier.policy_tier), "policy tier"),
      h("li", {}, h("strong", {}, tier.pinned ? tier.pinned.tier : "no"), "pin")),
    h("dl", {class: "kv"},
      tier.since ? [h("dt", {}, "Since"), h("dd", {}, when(Date.parse(tier.since)))] : null,
      h("dt", {}, "Why"), h("dd", {}, tier.reason),
      tier.pinned ? [h("dt", {}, "Pinned by"), h("dd", {}, `${tier.pinned.by}: ${tier.pinned.reason}`)] : null,
      sla.demotion_at ? [h("dt", {}, "Demotion at"), h("dd", {}, when(Date.parse(sla.demotion_at)))] : null,
      sla.promotion_at ? [h("dt", {}, "Promotion at"), h("dd", {}, when(Date.parse(sla.promotion_at)))] : null)];
}

function incidentTable(sla) {
  if (!sla.incidents.length) return empty("No open incident.");
  return table(["Subject", "What", "Opened", "Age", "Window", "Demotes at", "Unresolved"], sla.incidents.map(i => h("tr", {class: "infra"},
    h("td", {}, badge(i.scope, "infrastructure"), " ", i.subject),
    h("td", {}, i.description, i.hub ? h("div", {class: "help"}, `hub ${i.hub}`) : null),
    h("td", {class: "nowrap"}, when(Date.parse(i.opened))),
    h("td", {class: "num"}, duration(i.age_s * 1000)),
    h("td", {class: "num"}, duration(i.window_s * 1000)),
    h("td", {class: "nowrap"}, i.demotes_at ? [when(Date.parse(i.demotes_at)), h("div", {class: "help"}, `in ${duration(Date.parse(i.demotes_at) - Date.parse(sla.now))}`)] : "pinned"),
    h("td", {}, (i.unresolved || []).join(", ")))));
}

function ratioView(r) {
  if (!r) return empty("No runs counted yet.");
  const pct = x => `${(100 * x).toFixed(1)} %`;
  return h("div", {},
    h("p", {}, `${r.infra_failures} infrastructure failure(s) in ${r.runs} run(s) since `, when(Date.parse(r.from)),
      `: ${pct(r.ratio)} (the tier allows ${pct(r.max)}`, r.runs < r.min_runs ? `, counted from ${r.min_runs} runs` : "", ")."),
    h("meter", {min: 0, max: Math.max(r.max * 2, r.ratio, 0.01), high: r.max, value: r.ratio, "aria-label": "failure ratio"}));
}

function pinForm(ctx, tier) {
  const select = h("select", {id: "pin-tier", name: "tier"},
    [1, 2, 3].filter(t => t >= tier.registered_tier).map(t => h("option", {value: t}, `tier ${t}`)));
  const reason = h("input", {id: "pin-reason", name: "reason", required: true, maxlength: 256, size: 40});
  const form = h("form", {class: "filters"},
    h("label", {for: "pin-tier"}, "Tier", select), h("label", {for: "pin-reason"}, "Reason", reason),
    h("button", {type: "submit", class: "primary"}, "Pin"),
    tier.pinned ? h("button", {type: "button", class: "danger", onclick: async () => {
      if (!await confirmAction("Lift the pin?", `Pinned to tier ${tier.pinned.tier} by ${tier.pinned.by}.`, "Unpin")) return;
      try { await ctx.source.unpin("unpinned from the dashboard"); ctx.setStatus("unpinned"); } catch (e) { ctx.setStatus(e.message); }
    }}, "Unpin") : null);
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const t = Number(select.value);
    if (!await confirmAction(`Pin the effective tier to ${t}?`, reason.value, "Pin")) return;
    try { await ctx.source.pin(t, reason.value); ctx.setStatus(`pinned to tier ${t}`); } catch (e) { ctx.setStatus(e.message); }
  });
  return form;
}

function transitionList(transitions) {
  if (!transitions.length) return empty("No transition yet.");
  return h("ol", {class: "timeline", reversed: true}, transitions.map(t => h("li", {class: t.kind},
    when(Date.parse(t.at)), " ", badge(t.kind, t.kind === "demoted" ? "failed" : t.kind === "promoted" ? "passed" : "warning"),
    ` tier ${t.from} → ${t.to}: `, t.reason)));
}
