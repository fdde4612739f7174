// The dashboard: one page, a view per URL fragment (#/runs?state=failed),
// so every view has a URL to paste into a PR comment or a Jenkins
// description. Views render into <main> from the source's JSON.
import {AuthError, openSource, token} from "./api.js";
import {h, replace} from "./dom.js";
import * as fleet from "./pages/fleet.js";
import * as tier from "./pages/tier.js";
import * as runs from "./pages/runs.js";
import * as run from "./pages/run.js";
import * as history from "./pages/history.js";
import * as compare from "./pages/compare.js";
import * as labs from "./pages/labs.js";

const views = {fleet, tier, runs, run, history, compare, labs};
const main = document.getElementById("main");
const status = document.getElementById("status");
let source = null;
let who = null;
let cleanups = [];

// "#/run/abc?cell=x" -> {view: "run", args: ["abc"], params: {cell: "x"}}
export function parseHash(hash) {
  const [path, query] = hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return {view: parts[0] || "", args: parts.slice(1), params: Object.fromEntries(new URLSearchParams(query || ""))};
}

export function hashOf(view, args = [], params = {}) {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined));
  const path = [view, ...args.map(encodeURIComponent)].join("/");
  return `#/${path}${q.toString() ? "?" + q : ""}`;
}

function setStatus(text) { status.textContent = text || ""; }

function showError(e) {
  replace(main, h("div", {class: "error", role: "alert"}, h("h1", {}, "Something went wrong"), h("p", {}, String(e.message || e))));
}

function signIn(message) {
  const input = h("input", {type: "password", id: "token", name: "token", autocomplete: "off", required: true,
                             "aria-describedby": "token-help", spellcheck: "false"});
  const form = h("form", {class: "signin", "aria-labelledby": "signin-title"},
    h("h1", {id: "signin-title"}, "Sign in"),
    message ? h("p", {class: "error", role: "alert"}, message) : null,
    h("label", {for: "token"}, "Token"), input,
    h("p", {id: "token-help", class: "help"},
      "A token of this hwfarmd (role viewer or higher: hwfarmctl token new NAME --role viewer). ",
      "It is kept in this tab's session storage only, and sent as a bearer token."),
    h("button", {type: "submit"}, "Sign in"));
  form.addEventListener("submit", ev => {
    ev.preventDefault();
    token.set(input.value.trim());
    input.value = "";
    start();
  });
  replace(main, form);
  input.focus();
}

function renderWho() {
  const el = document.getElementById("who");
  if (!who) return replace(el);
  const out = source.kind === "live" && token.get()
    ? h("button", {type: "button", class: "link", onclick: () => { token.clear(); who = null; renderWho(); signIn(); }}, "Sign out")
    : null;
  replace(el, h("span", {}, "Signed in as ", h("strong", {}, who.name), ` (${who.role})`), " ", out);
}

function renderNav(current) {
  const items = source.kind === "live"
    ? [["fleet", "Fleet"], ["tier", "Tier and SLA"], ["runs", "Runs"], ["history", "History"], ["compare", "Compare"]]
    : [["labs", "Labs"], ["runs", "Runs"], ["history", "History"], ["compare", "Compare"]];
  replace(document.getElementById("nav"), h("ul", {}, items.map(([v, label]) =>
    h("li", {}, h("a", {href: `#/${v}`, "aria-current": v === current ? "page" : null}, label)))));
}

async function route() {
  for (const f of cleanups.splice(0)) f();
  if (!source || !who) return;
  let {view, args, params} = parseHash(location.hash);
  if (!views[view]) view = source.kind === "live" ? "fleet" : "runs";
  renderNav(view === "run" ? "runs" : view);
  const ctx = {
    source, who, args, params, main, setStatus,
    operator: who.role === "operator",
    onCleanup: f => cleanups.push(f),
    go: (v, a, p) => { location.hash = hashOf(v, a, p); },
    reload: () => route(),
    hashOf,
  };
  main.setAttribute("aria-busy", "true");
  try {
    await views[view].render(ctx);
  } catch (e) {
    if (e instanceof AuthError) return signIn(source.kind === "live" && token.get() ? "That token is not valid here." : null);
    showError(e);
  } finally {
    main.removeAttribute("aria-busy");
    main.dataset.rendered = location.hash; // the view is drawn (tests wait for it)
  }
  const heading = main.querySelector("h1");
  if (heading) { heading.tabIndex = -1; heading.focus({preventScroll: true}); }
}

async function start() {
  try {
    source = source || await openSource();
    document.body.dataset.mode = source.kind;
    who = await source.whoami();
    if (!who.name) {
      who = null;
      return signIn(token.get() ? "That token is not valid here." : null);
    }
    renderWho();
    await route();
  } catch (e) {
    if (e instanceof AuthError) return signIn(token.get() ? "That token is not valid here." : null);
    showError(e);
  }
}

window.addEventListener("hashchange", route);
start();
