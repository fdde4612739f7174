// DOM helpers. Everything the daemon, a firmware or a client chose (names,
// messages, traces, holders, labels) reaches the page through these as
// text: never as markup. Links are made only for http(s) URLs and for the
// page's own views (#/...).

// h("td", {class: "num", title: "..."}, child, "text", ...): an element
// with attributes and children; a child is a Node, a string or number
// (text), null/undefined/false (skipped) or an array of those.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "href") setHref(el, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Replaces what `el` holds.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// A URL that is safe as a link target: an http(s) URL (as the URL parser
// reads it, so "JaVaScRiPt:" and " javascript:" are refused too), or a
// view of this page ("#/..."). Anything else: null.
export function safeUrl(url) {
  if (typeof url !== "string" || url === "") return null;
  if (url.startsWith("#/")) return url;
  try {
    const u = new URL(url, document.baseURI);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

function setHref(el, url) {
  const safe = url instanceof Blob ? URL.createObjectURL(url) : safeUrl(url);
  if (safe) el.setAttribute("href", safe);
}

// A link when `url` is safe, else its text alone (the URL shown as text).
export function link(url, text, attrs = {}) {
  const safe = safeUrl(url);
  if (!safe) return h("span", {class: "unlinked", title: typeof url === "string" ? url : ""}, text ?? url);
  const external = !safe.startsWith("#/");
  return h("a", {...attrs, href: safe, rel: external ? "noopener noreferrer" : null, target: external ? "_blank" : null},
           text ?? url);
}

// "3 h 12 min", "45 s", "2 d 4 h".
export function duration(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return "";
  let s = Math.max(0, Math.round(ms / 1000));
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return `${d} d ${hr} h`;
  if (hr) return `${hr} h ${m} min`;
  if (m) return `${m} min ${s} s`;
  return `${s} s`;
}

// "2026-12-01 14:02:11" (UTC) with a <time> element for machines.
export function when(ms) {
  if (!ms) return "";
  const iso = new Date(ms).toISOString();
  return h("time", {datetime: iso, title: iso}, iso.slice(0, 19).replace("T", " "));
}

export function ago(ms, now = Date.now()) {
  return ms ? duration(now - ms) + " ago" : "";
}

// A number for a table cell: up to `digits` significant digits, "n/a" for
// none (null: NaN in the daemon's JSON).
export function num(v, digits = 4) {
  if (v === null || v === undefined) return "n/a";
  if (typeof v !== "number") return String(v);
  if (v === 0 || (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6)) return String(Number(v.toPrecision(digits)));
  return v.toExponential(digits - 1);
}

// A badge: text always, colour as a second signal (class).
export function badge(text, kind) {
  return h("span", {class: `badge ${kind || text}`}, text);
}

export function table(headers, rows, attrs = {}) {
  return h("table", attrs,
           h("thead", {}, h("tr", {}, headers.map(x => h("th", {scope: "col"}, x)))),
           h("tbody", {}, rows));
}

export function section(title, ...children) {
  return h("section", {"aria-label": title}, h("h2", {}, title), children);
}

// An <h2>-less empty state.
export function empty(text) {
  return h("p", {class: "empty"}, text);
}
