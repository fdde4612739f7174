// Fleet: workers and boards (state, health, since when, lease), the leases
// with their holders and expiry, the queue in grant order. Live: polled.
import {ago, badge, duration, empty, h, replace, section, table, when} from "../dom.js";
import {confirmAction, holder, poll, shortId, update} from "../widgets.js";

const POLL_MS = 2000;

export async function render(ctx) {
  const summary = h("ul", {class: "chips", "aria-label": "Boards by state"});
  const boardPanel = h("div");
  const boards = h("div");
  const leases = h("div");
  const queue = h("div");
  replace(ctx.main,
    h("h1", {}, "Fleet"),
    h("p", {class: "sub live"}, "Live: updated every 2 seconds"),
    summary, boardPanel,
    section("Boards", boards), section("Leases", leases), section("Queue", queue));
  if (ctx.params.board) await showBoard(ctx, boardPanel, ctx.params.board);
  await poll(ctx, async () => {
    const [b, l, q] = await Promise.all([ctx.source.json("v1/boards?health=1"), ctx.source.leases(), ctx.source.queue()]);
    const leaseById = new Map(l.leases.map(x => [x.id, x]));
    update(summary, b.boards.map(x => x.state), () => counts(b.boards));
    update(boards, {b: b.boards, l: l.leases.map(x => [x.id, x.holder]), op: ctx.operator},
           () => boardTables(ctx, b.boards, leaseById));
    update(leases, l.leases, () => leaseTable(l.leases));
    update(queue, q.queue, () => queueTable(q.queue));
  }, POLL_MS);
}

function counts(boards) {
  const n = {};
  for (const b of boards) n[b.state] = (n[b.state] || 0) + 1;
  return [h("li", {}, h("strong", {}, boards.length), "boards"),
          Object.entries(n).sort().map(([state, k]) => h("li", {}, h("strong", {}, k), badge(state)))];
}

function boardTables(ctx, boards, leaseById) {
  const workers = new Map();
  for (const b of boards) {
    if (!workers.has(b.worker)) workers.set(b.worker, []);
    workers.get(b.worker).push(b);
  }
  if (!boards.length) return empty("No boards are configured.");
  return [...workers].map(([worker, list]) => [
    h("h3", {}, `Worker ${worker}`, list[0].node && list[0].node !== worker ? ` (node ${list[0].node})` : ""),
    table(["Board", "Type", "State", "Since", "Health", "Last check", "Lease", ctx.operator ? "Actions" : null].filter(Boolean),
          list.map(b => boardRow(ctx, b, leaseById.get(b.lease))), {class: "boards"})]);
}

function healthCell(hl) {
  if (!hl) return "";
  const word = hl.state === "quarantined" ? `quarantined (${hl.failed_ladders}/${hl.quarantine_after})` : hl.state;
  return h("span", {}, badge(word, hl.state), hl.reason ? h("div", {class: "help"}, hl.reason) : null);
}

function boardRow(ctx, b, lease) {
  const since = Date.parse(b.since);
  const hl = b.health;
  return h("tr", {"data-board": b.name},
    h("th", {scope: "row"}, h("a", {href: ctx.hashOf("fleet", [], {board: b.name}), "data-key": `board:${b.name}`}, b.name)),
    h("td", {}, b.type),
    h("td", {}, badge(b.state), b.reason ? h("div", {class: "help"}, b.reason) : null),
    h("td", {class: "nowrap"}, when(since), h("div", {class: "help"}, duration(Date.now() - since))),
    h("td", {}, healthCell(hl)),
    h("td", {class: "nowrap"}, hl && hl.last_check ? [hl.last_passed ? badge("passed") : badge("failed"), " ", ago(Date.parse(hl.last_check))] : ""),
    h("td", {}, lease ? [holder(lease.holder), h("div", {class: "help mono"}, shortId(lease.id))] : b.lease ? shortId(b.lease) : ""),
    ctx.operator ? h("td", {class: "row-actions"}, boardActions(ctx, b)) : null);
}

function boardActions(ctx, b) {
  const act = (label, action, question, detail) => h("button", {
    type: "button", "data-key": `${action}:${b.name}`,
    onclick: async () => {
      if (!await confirmAction(question, detail, label)) return;
      try {
        await ctx.source.boardAction(b.name, action);
        ctx.setStatus(`${label}: ${b.name} done`);
      } catch (e) { ctx.setStatus(`${label} ${b.name}: ${e.message}`); }
    }}, label);
  const out = [];
  if (b.state === "maintenance") out.push(act("Resume", "resume", `Resume ${b.name}?`, "It goes through recovering (a health check) back to available."));
  else if (b.state !== "leased") out.push(act("Maintenance", "maintenance", `Take ${b.name} out of service?`, "No lease gets it until it is resumed."));
  if (b.state !== "leased" && b.health) out.push(act("Check", "check", `Run a health check of ${b.name} now?`));
  return h("div", {class: "actions"}, out);
}

function leaseTable(leases) {
  if (!leases.length) return empty("No lease is held.");
  return table(["Lease", "Holder", "Context", "Boards", "Granted", "Expires"], leases.map(l => {
    const expires = Date.parse(l.expires_at);
    return h("tr", {},
      h("td", {class: "mono"}, shortId(l.id)),
      h("td", {}, holder(l.holder), h("div", {class: "help"}, l.holder.principal)),
      h("td", {}, l.context),
      h("td", {}, l.boards.map(b => h("div", {}, b.name, " ", b.status !== "ok" ? badge(b.status) : ""))),
      h("td", {class: "nowrap"}, when(Date.parse(l.granted_at))),
      h("td", {class: "nowrap"}, when(expires), h("div", {class: "help"}, `in ${duration(expires - Date.now())}`)));
  }));
}

function queueTable(queue) {
  if (!queue.length) return empty("No request is waiting.");
  return table(["#", "Holder", "Wants", "Count", "Priority", "Context", "Waiting"], queue.map(q => h("tr", {},
    h("td", {class: "num"}, q.position),
    h("td", {}, holder(q.holder)),
    h("td", {}, [q.selector.type, ...(q.selector.labels || [])].filter(Boolean).join(", "), q.selector.worker ? ` on ${q.selector.worker}` : ""),
    h("td", {class: "num"}, q.count),
    h("td", {class: "num"}, q.priority, h("div", {class: "help"}, `effective ${q.effective_priority.toFixed(2)}`)),
    h("td", {}, q.context),
    h("td", {class: "nowrap"}, duration(q.waiting_ms)))));
}

async function showBoard(ctx, el, name) {
  const b = await ctx.source.board(name);
  const hl = b.health;
  replace(el, h("div", {class: "panel", "aria-label": `Board ${name}`},
    h("h2", {}, `Board ${b.name}`, " ", badge(b.state)),
    h("dl", {class: "kv"},
      h("dt", {}, "Type"), h("dd", {}, b.type),
      h("dt", {}, "Worker"), h("dd", {}, b.worker),
      h("dt", {}, "Since"), h("dd", {}, when(Date.parse(b.since))),
      h("dt", {}, "Labels"), h("dd", {}, (b.labels || []).join(", ")),
      hl ? [h("dt", {}, "Health"), h("dd", {}, healthCell(hl))] : null,
      hl && hl.next_check ? [h("dt", {}, "Next check"), h("dd", {}, when(Date.parse(hl.next_check)))] : null),
    h("h3", {}, "Last checks"),
    hl && hl.history && hl.history.length
      ? table(["Started", "Trigger", "Result", "Took", "Steps", "Evidence"], hl.history.map(c => h("tr", {},
          h("td", {class: "nowrap"}, when(Date.parse(c.started))),
          h("td", {}, c.trigger),
          h("td", {}, badge(c.passed ? "passed" : "failed")),
          h("td", {class: "num"}, duration(c.duration_ms)),
          h("td", {}, c.steps.map(s => h("div", {}, `${s.step}: ${s.skipped ? "skipped" : s.ok ? "ok" : "failed"}`, s.detail ? ` (${s.detail})` : ""))),
          h("td", {}, c.evidence ? h("pre", {}, c.evidence) : ""))))
      : empty("No check yet."),
    h("p", {}, h("a", {href: "#/fleet"}, "Close"))));
}
