// Where the page's data comes from: hwfarmd's JSON API (live), or the
// static copy in an S3 bucket (bucket), which reads the files every lab's
// hwfarmd uploads. Both give the pages the same shapes.

import {historyFileName} from "./names.js";

const TOKEN_KEY = "hwfarm.token";

export class AuthError extends Error {}
export class NotFound extends Error {}

// The bearer token, kept for this tab only (sessionStorage: gone when the
// tab closes, never in a URL, a cookie or a log).
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: t => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

async function check(res, what) {
  if (res.status === 401) throw new AuthError(`${what}: sign in with a token (401)`);
  if (res.status === 404) throw new NotFound(`${what}: not found`);
  if (!res.ok) {
    let detail = "";
    try { detail = (await res.json()).detail || ""; } catch { /* not JSON */ }
    throw new Error(`${what}: HTTP ${res.status}${detail ? ": " + detail : ""}`);
  }
  return res;
}

// Percent-encodes each segment of a path ("a b/c" -> "a%20b/c").
export function encodePath(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

export class LiveSource {
  constructor() { this.kind = "live"; }

  headers() {
    const t = token.get();
    return t ? {Authorization: `Bearer ${t}`} : {};
  }
  async fetch(path, init = {}) {
    const res = await fetch(path, {...init, headers: {...this.headers(), ...(init.headers || {})}, cache: "no-store"});
    return check(res, path.split("?")[0]);
  }
  async json(path) { return (await this.fetch(path)).json(); }
  async text(path) { return (await this.fetch(path)).text(); }
  async bytes(path) { return (await this.fetch(path)).arrayBuffer(); }
  async post(path, body) {
    return (await this.fetch(path, {method: "POST", body: JSON.stringify(body || {}),
                                    headers: {"Content-Type": "application/json"}})).json();
  }

  whoami() { return this.json("v1/whoami"); }
  boards() { return this.json("v1/boards"); }
  board(name) { return this.json(`v1/boards/${encodeURIComponent(name)}`); }
  leases() { return this.json("v1/leases"); }
  queue() { return this.json("v1/queue"); }
  sla() { return this.json("v1/sla"); }
  tier() { return this.json("v1/tier"); }
  healthz() { return this.json("v1/healthz"); }
  // {"runs": [...], "next": cursor or null}; `filters` as the runs view's.
  runs(filters = {}, cursor = null, limit = 50) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    q.set("limit", limit);
    if (cursor) q.set("before", cursor);
    return this.json(`v1/runs?${q}`);
  }
  run(id) { return this.json(`v1/runs/${encodeURIComponent(id)}`); }
  artifactUrl(run, path) { return `v1/runs/${encodeURIComponent(run.id)}/artifacts/${encodePath(path)}`; }
  artifactJson(run, path) { return this.json(this.artifactUrl(run, path)); }
  artifactText(run, path) { return this.text(this.artifactUrl(run, path)); }
  artifactBytes(run, path) { return this.bytes(this.artifactUrl(run, path)); }
  history(params) { return this.json(`v1/history?${new URLSearchParams(params)}`); }
  compare(base, head) {
    return this.json(`v1/compare?${new URLSearchParams({base, head})}`);
  }
  boardAction(name, action) { return this.post(`v1/boards/${encodeURIComponent(name)}/${action}`); }
  pin(tier, reason) { return this.post("v1/tier/pin", {tier, reason}); }
  unpin(reason) { return this.post("v1/tier/unpin", {reason}); }

  // Follows GET /v1/runs/{id}/events (newline-delimited JSON) until its end
  // line or `signal` aborts; `onEvent` gets each parsed line.
  async follow(id, onEvent, signal) {
    const res = await this.fetch(`v1/runs/${encodeURIComponent(id)}/events`, {signal});
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, {stream: true});
      let nl;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim()) onEvent(JSON.parse(line));
      }
    }
  }
}

// The bucket: the page is <prefix>/dashboard/index.html; every lab's files
// are under <prefix>/<agent>/ (docs/uploads.md). labs.json (beside the page)
// names the labs and the days each has an index for; each run's files are
// under its index entry's key.
export class BucketSource {
  constructor(site) {
    this.kind = "bucket";
    this.site = site;
    // The bucket's root: the page's URL less "<prefix>/dashboard/".
    const depth = (site.prefix ? site.prefix.split("/").filter(Boolean).length : 0) + 1;
    this.root = new URL("../".repeat(depth), document.baseURI).href;
    this.runsByKey = new Map();
  }
  async fetch(path) {
    const res = await fetch(new URL(path, this.root), {cache: "no-cache"});
    return check(res, path);
  }
  async json(path) { return (await this.fetch(path)).json(); }
  under(path) { return encodePath((this.site.prefix ? this.site.prefix + "/" : "") + path); }

  whoami() { return Promise.resolve({name: "public", role: "viewer"}); }
  async labs() {
    const res = await fetch(new URL("labs.json", document.baseURI), {cache: "no-cache"});
    return (await check(res, "labs.json")).json();
  }
  // Every lab's runs of its last `days` days with an index, newest first.
  async runs(filters = {}, cursor = null, limit = 50) {
    const labs = (await this.labs()).labs || [];
    const fetches = [];
    for (const lab of labs)
      for (const day of (lab.days || []).slice(0, this.site.days || 14))
        fetches.push(this.json(this.under(`${lab.agent}/${day}/index.json`)).catch(() => ({runs: []}))
                        .then(index => (index.runs || []).map(r => this.row(lab.agent, r))));
    let rows = (await Promise.all(fetches)).flat();
    rows = rows.filter(r => matches(r, filters)).sort((a, b) => (b.ended_ms || 0) - (a.ended_ms || 0));
    const start = cursor ? Number(cursor) : 0;
    return {runs: rows.slice(start, start + limit), next: start + limit < rows.length ? String(start + limit) : null};
  }
  row(agent, r) {
    const row = {id: r.run, agent, state: r.verdict, commit: r.commit, lease_id: r.lease, key: r.key,
                 ended_ms: Date.parse(r.ended_at) || 0, uploaded: r.uploaded, ...(r.dashboard || {})};
    this.runsByKey.set(r.run, row);
    return row;
  }
  async run(id) {
    let row = this.runsByKey.get(id);
    if (!row) { await this.runs({}, null, 1e9); row = this.runsByKey.get(id); }
    if (!row) throw new NotFound(`run ${id}: not in the last days' indexes`);
    const record = await this.json(encodePath(row.key) + "/summary.json");
    record.key = row.key;
    record.agent = row.agent;
    return record;
  }
  artifactUrl(run, path) { return new URL(encodePath(run.key) + "/" + encodePath(path), this.root).href; }
  async artifactJson(run, path) { return (await check(await fetch(this.artifactUrl(run, path)), path)).json(); }
  async artifactText(run, path) { return (await check(await fetch(this.artifactUrl(run, path)), path)).text(); }
  async artifactBytes(run, path) { return (await check(await fetch(this.artifactUrl(run, path)), path)).arrayBuffer(); }
  // History: every lab's precomputed file for the image and output, merged.
  async history(params) {
    const labs = (await this.labs()).labs || [];
    const name = historyFileName(params.image, params.output);
    const parts = await Promise.all(labs.filter(l => (l.history || []).includes(name))
      .map(l => this.json(this.under(`${l.agent}/history/${name}`)).then(h => ({...h, agent: l.agent}))));
    if (!parts.length) throw new NotFound(`no lab has a history of ${params.image} ${params.output}`);
    return {...parts[0], series: parts.flatMap(p => p.series.map(s => ({...s, agent: p.agent})))};
  }
  // Compare: the precomputed comparison of `head` with the run before it.
  async compare(base, head) {
    const run = await this.run(head);
    const diff = await this.artifactJson(run, "compare.json");
    if (base && diff.base !== base)
      throw new NotFound(`the bucket compares run ${head} with ${diff.base}, the run of its suite before it`);
    return diff;
  }
}

// Whether a runs row passes the runs view's filters (the bucket filters in
// the browser; hwfarmd filters in its database).
export function matches(row, f) {
  const has = (list, v) => (list || []).some(x => x === v);
  if (f.state && row.state !== f.state) return false;
  if (f.failure_class && row.failure_class !== f.failure_class) return false;
  if (f.commit && !(row.commit || "").startsWith(f.commit)) return false;
  if (f.board_type && !has(row.board_types, f.board_type)) return false;
  if (f.image && !has(row.images, f.image)) return false;
  if (f.holder && !((row.holder && row.holder.job) || "").includes(f.holder)) return false;
  return true;
}

// The page's source: site.json beside the page says which.
export async function openSource() {
  let site = {mode: "live"};
  try {
    const res = await fetch(new URL("site.json", document.baseURI), {cache: "no-cache"});
    if (res.ok) site = await res.json();
  } catch { /* live */ }
  return site.mode === "bucket" ? new BucketSource(site) : new LiveSource();
}
