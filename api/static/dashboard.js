// connect-state dashboard: vanilla JavaScript, no external assets. Reads the API's own endpoints, draws the
// timeline in SVG, and acts through the API's write endpoints behind a confirmation.
"use strict";

const $ = (sel) => document.querySelector(sel);
const enc = encodeURIComponent;
const state = { connectors: [], selected: null, timer: null };
// The page's cluster (issue 37): served at <root>/clusters/<id>/ui it asks every path under <root>/clusters/<id>;
// at <root>/ui, Connect's own paths (the default cluster).
const BASE = document.body.dataset.base || "";
const ROOT = document.body.dataset.root || "";
const COLORS = { RUNNING: "#2e9d58", PAUSED: "#d9a400", STOPPED: "#6b7686", FAILED: "#c83c3c",
  UNASSIGNED: "#c83c3c", RESTARTING: "#3b79c9", DESTROYED: "#222" };

async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const res = await fetch(BASE + path, init);
  const text = await res.text();
  let data = text;
  try { data = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
  return { status: res.status, ok: res.ok, data };
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}

function stateBadge(s) { return el("span", { class: "state " + (s || "") }, s || "?"); }
function fmtJson(v) { return typeof v === "string" ? v : JSON.stringify(v); }
function fmtMs(ms) {
  if (ms == null) return "";
  if (ms < 1000) return ms + " ms";
  const s = Math.round(ms / 1000);
  return s < 120 ? s + " s" : s < 7200 ? Math.round(s / 60) + " min" : Math.round(s / 3600) + " h";
}
function fmtTime(ms) { return ms == null ? "" : new Date(ms).toLocaleString(); }

function table(headers, rows) {
  if (!rows.length) return el("p", { class: "muted" }, "none");
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

// --- the connector list ------------------------------------------------------------------------------------------

async function loadConnectors() {
  const res = await api("GET", "/connectors?expand=status&expand=info&expand=verdict");
  let entries = [];
  if (res.ok && res.data && !Array.isArray(res.data)) {
    entries = Object.entries(res.data)
      .map(([name, v]) => ({ name, status: v.status || null, verdict: v.verdict || null }));
  } else if (res.ok && Array.isArray(res.data)) {
    entries = await Promise.all(res.data.map(async (name) => {
      const st = await api("GET", `/connectors/${enc(name)}/status`);
      return { name, status: st.ok ? st.data : null };
    }));
  }
  state.connectors = entries.sort((a, b) => a.name.localeCompare(b.name));
  renderList();
}

function renderList() {
  const filter = $("#filter").value.trim().toLowerCase();
  const body = $("#connectors tbody");
  body.replaceChildren();
  for (const c of state.connectors) {
    const s = c.status || {};
    const cs = (s.connector || {}).state || "";
    const tasks = s.tasks || [];
    const verdict = (c.verdict && c.verdict.verdict) || "";
    const text = [c.name, cs, s.type || "", verdict].join(" ").toLowerCase();
    if (filter && !text.includes(filter)) continue;
    const summary = tasks.length ? tasks.map((t) => t.state).join(", ") : "0";
    const row = el("tr", { class: "connector" + (c.name === state.selected ? " selected" : ""), "data-name": c.name,
      onclick: () => select(c.name) }, el("td", {}, c.name), el("td", {}, stateBadge(cs)), el("td", {}, s.type || ""),
      el("td", { class: "tasks" }, `${tasks.length} (${summary})`), el("td", {}, verdictBadge(c.verdict)));
    body.append(row);
  }
}

// The watch job's verdict (issue 35): a badge whose tooltip is the evidence.
function verdictBadge(v) {
  if (!v) return "";
  const badge = el("span", { class: "state verdict-" + v.verdict }, v.verdict);
  badge.title = JSON.stringify(v.evidence || {}) + (v.since ? " since " + v.since : "");
  return badge;
}

async function loadClusters() {
  const res = await fetch(ROOT + "/clusters", { headers: { Accept: "application/json" } });
  const listed = res.ok ? await res.json() : [];
  const picker = $("#cluster");
  picker.replaceChildren(...listed.map((c) => el("option", { value: c.id }, c.id + (c.default ? " (default)" : ""))));
  picker.value = document.body.dataset.cluster;
}

function switchCluster() {
  location.href = ROOT + "/clusters/" + enc($("#cluster").value) + "/ui";
}

async function loadHealth() {
  const res = await api("GET", "/health");
  const h = $("#health");
  const status = (res.data && res.data.status) || "unknown";
  h.className = "badge " + status;
  h.textContent = "health: " + status;
  h.title = (res.data && res.data.message) || "";
}

// --- one connector -----------------------------------------------------------------------------------------------

const ACTIONS = [
  { label: "Stop", method: "PUT", path: "stop" },
  { label: "Pause", method: "PUT", path: "pause" },
  { label: "Resume", method: "PUT", path: "resume" },
  { label: "Restart", method: "POST", path: "restart?includeTasks=true", restart: true },
  { label: "Reset topics", method: "PUT", path: "topics/reset" },
  { label: "Reset offsets", method: "DELETE", path: "offsets" },
];

function confirmAction(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

async function act(name, action) {
  const path = `/connectors/${enc(name)}/${action.path}`;
  if (!(await confirmAction(`${action.label} ${name}? (${action.method} ${path})`))) return;
  const res = await api(action.method, path);
  const answer = $("#answer");
  answer.hidden = false;
  answer.className = res.ok ? "ok" : "error";
  answer.textContent = `${action.method} ${path} → ${res.status}\n` + (res.data == null ? "" : JSON.stringify(res.data, null, 2));
  await refresh();
}

function renderActions(name) {
  const restart = document.body.dataset.restart === "1";
  $("#actions").replaceChildren(...ACTIONS.filter((a) => restart || !a.restart).map((a) =>
    el("button", { type: "button", "data-action": a.label.toLowerCase().replace(" ", "-"), onclick: () => act(name, a) }, a.label)));
}

async function select(name) {
  if (state.selected !== name) $("#answer").hidden = true;
  state.selected = name;
  history.replaceState(null, "", "#" + enc(name));
  renderList();
  $("#detail").hidden = false;
  $("#name").textContent = name;
  renderActions(name);
  await loadDetail(name);
}

async function loadDetail(name) {
  const base = `/connectors/${enc(name)}`;
  const [status, topics, offsets, beats, deletions, timeline, restarts] = await Promise.all([
    api("GET", base + "/status"), api("GET", base + "/topics"), api("GET", base + "/offsets"),
    api("GET", base + "/heartbeats"), api("GET", base + "/deletions"), api("GET", `/ui/timeline/${enc(name)}`),
    api("GET", base + "/restarts")]);
  if (state.selected !== name) return;
  const s = status.ok ? status.data : null;
  $("#status").replaceChildren(s ? el("div", {},
    el("p", {}, "Connector ", stateBadge(s.connector.state), ` ${s.type || ""} on ${s.connector.worker_id || "?"}`),
    table(["Task", "State", "Worker", "Trace"], (s.tasks || []).map((t) => [t.id, stateBadge(t.state), t.worker_id,
      t.trace ? t.trace.split("\n")[0] : ""]))) : el("p", { class: "muted" }, errorText(status)));
  const t = topics.ok && topics.data[name] ? topics.data[name].topics : [];
  $("#topics").replaceChildren(topics.ok ? el("p", { id: "topic-list" }, t.length ? t.join(", ") : "none") :
    el("p", { class: "muted" }, errorText(topics)));
  const offs = offsets.ok ? offsets.data.offsets || [] : [];
  $("#offsets").replaceChildren(offsets.ok ? table(["Partition", "Offset"], offs.map((o) => [fmtJson(o.partition), fmtJson(o.offset)])) :
    el("p", { class: "muted" }, errorText(offsets)));
  const parts = beats.ok ? beats.data.partitions || [] : [];
  const sent = beats.ok ? beats.data.heartbeats || [] : [];
  $("#heartbeats").replaceChildren(
    table(["Partition", "Offset", "Idle for", "Last heartbeat", "Next"], parts.map((p) => [fmtJson(p.partition),
      fmtJson(p.offset), fmtMs(p.idle_ms), fmtTime(p.last_heartbeat_at), fmtTime(p.next_heartbeat_at)])),
    sent.length ? table(["Heartbeat at", "Partition", "Outcome"], sent.slice(0, 10).map((h) => [fmtTime(h.emitted_at),
      fmtJson(h.partition), h.outcome])) : "");
  const tries = restarts.ok ? restarts.data.restarts || [] : [];
  $("#restarts").replaceChildren(restarts.ok ? (tries.length ? table(["Requested", "#", "Why", "Outcome", "Seen at",
    "Trace"], tries.slice(0, 20).map((r) => [fmtTime(r.requested_at), r.attempt, r.reason, r.outcome,
    fmtTime(r.outcome_at), r.trace ? r.trace.split("\n")[0] : ""])) : el("p", { class: "muted" }, "none")) :
    el("p", { class: "muted" }, errorText(restarts)));
  const dels = deletions.ok ? deletions.data.deletions || [] : [];
  $("#deletions").replaceChildren(deletions.ok && dels.length ? el("pre", {}, JSON.stringify(dels, null, 2)) :
    el("p", { class: "muted" }, "none"));
  $("#chart").replaceChildren(timeline.ok ? drawTimeline(timeline.data) : el("p", { class: "muted" }, errorText(timeline)));
  await loadAvailability(name);
}

// --- availability (GET /connectors/<name>/availability, GET /availability): SVG by hand ------------------------------

const AVAILABILITY = { running: "#2e9d58", degraded: "#e38b2c", failed: "#c83c3c", paused: "#d9a400",
  stopped: "#6b7686", unknown: "#c9ced6" };
function windowQuery() {
  const until = Date.now();
  return `since=${until - Number($("#window").value)}&until=${until}`;
}
function pct(share) { return (100 * (share || 0)).toFixed(1) + "%"; }
function legend(body) {
  // Shares of the time it existed in the window, as the band shows it (the API's shares are of the whole window).
  const r = body.recovery || {}, shares = existingShares(body);
  return el("div", { class: "legend" },
    Object.keys(AVAILABILITY).map((k) => el("span", { class: "share", "data-state": k },
      el("span", { class: "swatch", style: `background:${AVAILABILITY[k]}` }), `${k} ${pct(shares[k])}`)),
    el("span", {}, `failures ${body.failures}`), el("span", {}, `recovery mean ${fmtMs(r.mean_ms) || "-"}, worst ${fmtMs(r.worst_ms) || "-"}`),
    el("span", {}, `restarts ${body.restarts}`));
}

async function loadAvailability(name) {
  const res = await api("GET", `/connectors/${enc(name)}/availability?${windowQuery()}`);
  if (state.selected !== name) return;
  $("#availability").replaceChildren(...(res.ok ? [drawAvailability(res.data), legend(res.data)] :
    [el("p", { class: "muted" }, errorText(res))]));
}

function drawAvailability(body) {
  // The band starts where the connector came to exist in the window (before it: not existing, said under the band).
  const W = 900, H = 64, L = 4, R = 4, bandY = 4, bandH = 26;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "availability-chart" });
  const first = body.segments.find((seg) => seg.reason !== "not_existing");
  const t0 = first ? first.start : body.since;
  const x = (t) => L + ((Math.max(t, t0) - t0) / Math.max(body.until - t0, 1)) * (W - L - R);
  for (const seg of body.segments) {
    if (seg.end <= t0) continue;
    const why = seg.reason ? ` (${seg.reason})` : "";
    root.append(svg("rect", { x: x(seg.start), y: bandY, width: Math.max(x(seg.end) - x(seg.start), 1), height: bandH,
      fill: AVAILABILITY[seg.state] || "#999", class: "segment", "data-state": seg.state },
      `${seg.state}${why}: ${fmtTime(seg.start)} – ${fmtTime(seg.end)} (${fmtMs(seg.end - seg.start)})`));
  }
  const axis = (t, anchor, prefix) => { const n = svg("text", { x: x(t), y: H - 6, "text-anchor": anchor });
    n.textContent = prefix + fmtTime(t); root.append(n); };
  axis(t0, "start", t0 > body.since ? "created " : ""); axis(body.until, "end", "");
  return root;
}

async function loadFleet() {
  const res = await api("GET", `/availability?${windowQuery()}`);
  $("#fleet").replaceChildren(res.ok ? drawFleet(res.data) : el("p", { class: "muted" }, errorText(res)));
}

function existingShares(body) {
  // Shares of the time the connector existed in the window (its "not existing" time left out).
  const total = Object.values(body.durations_ms).reduce((a, b) => a + b, 0) - (body.unknown_ms.not_existing || 0);
  const shares = {};
  for (const k of Object.keys(AVAILABILITY)) {
    shares[k] = ((body.durations_ms[k] || 0) - (k === "unknown" ? body.unknown_ms.not_existing || 0 : 0)) / Math.max(total, 1);
  }
  return shares;
}

function drawFleet(body) {
  const rows = [...body.connectors.map((c) => ({ connector: c.connector, shares: existingShares(c) })),
    { connector: `all ${body.connector_count}`, shares: existingShares(body) }];
  const W = 320, rowH = 18, labelW = 120, H = rows.length * rowH + 4;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "fleet-chart" });
  rows.forEach((row, i) => {
    const y = 2 + i * rowH;
    const n = svg("text", { x: 0, y: y + 12 }); n.textContent = row.connector.slice(0, 18); root.append(n);
    let at = labelW;
    for (const k of Object.keys(AVAILABILITY)) {
      const w = (row.shares[k] || 0) * (W - labelW);
      if (w <= 0) continue;
      root.append(svg("rect", { x: at, y, width: w, height: rowH - 4, fill: AVAILABILITY[k], class: "fleet-bar",
        "data-connector": row.connector, "data-state": k }, `${row.connector}: ${k} ${pct(row.shares[k])} of the time it existed`));
      at += w;
    }
  });
  return root;
}

function errorText(res) { return `${res.status}: ${(res.data && res.data.message) || res.data || ""}`; }

// --- the timeline chart (SVG by hand) ------------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) { const title = document.createElementNS(SVG, "title"); title.textContent = text; node.append(title); }
  return node;
}

function numeric(offset, fallback) {
  if (typeof offset === "number") return offset;
  if (offset && typeof offset === "object") for (const v of Object.values(offset)) if (typeof v === "number") return v;
  return fallback;
}

function drawTimeline(data) {
  const W = 900, H = 190, L = 70, R = 10, laneY = 18, laneH = 22, plotTop = 70, plotH = 100;
  const now = Date.now();
  const times = [...data.events.map((e) => e.at), ...data.offsets.map((o) => o.at)].filter((t) => t != null);
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "timeline" });
  if (!times.length) { root.append(svg("text", { x: L, y: 40 })); root.lastChild.textContent = "no history yet"; return root; }
  const t0 = Math.min(...times), t1 = Math.max(now, ...times);
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  const label = (text, y) => { const n = svg("text", { x: 4, y }); n.textContent = text; root.append(n); };
  label("state", laneY + 15); label("offsets", plotTop + plotH / 2);
  // States over time: a band per connector status, from one status change to the next.
  const changes = data.events.filter((e) => e.event === "status_changed" && e.details && e.at != null);
  changes.forEach((e, i) => {
    const end = i + 1 < changes.length ? changes[i + 1].at : t1;
    const to = e.details.to || "DESTROYED";
    root.append(svg("rect", { x: x(e.at), y: laneY, width: Math.max(x(end) - x(e.at), 2), height: laneH,
      fill: COLORS[to] || "#999", class: "band", "data-state": to }, `${to} from ${fmtTime(e.at)}`));
  });
  // Every other event as a tick under the band.
  for (const e of data.events) {
    if (e.at == null || e.event === "status_changed") continue;
    root.append(svg("rect", { x: x(e.at) - 1, y: laneY + laneH + 3, width: 2, height: 10, fill: "#334", class: "tick" },
      `${e.event} at ${fmtTime(e.at)} ${JSON.stringify(e.details)}`));
  }
  // Offset movement: one line per source partition (the offset's first number, else the record's rank).
  const byPartition = new Map();
  data.offsets.forEach((o, i) => {
    if (o.at == null) return;
    const list = byPartition.get(o.partition) || [];
    list.push([o.at, numeric(o.offset, list.length), o]);
    byPartition.set(o.partition, list);
  });
  const values = [...byPartition.values()].flat().map((p) => p[1]);
  const v0 = Math.min(0, ...values), v1 = Math.max(1, ...values);
  const y = (v) => plotTop + plotH - ((v - v0) / Math.max(v1 - v0, 1)) * plotH;
  root.append(svg("line", { x1: L, y1: plotTop + plotH, x2: W - R, y2: plotTop + plotH, stroke: "#ccd" }));
  const palette = ["#3b79c9", "#c8663c", "#2e9d58", "#8a4fc8", "#c83c8a"];
  [...byPartition.entries()].forEach(([partition, points], i) => {
    const color = palette[i % palette.length];
    root.append(svg("polyline", { points: points.map(([t, v]) => `${x(t)},${y(v)}`).join(" "), fill: "none",
      stroke: color, "stroke-width": 1.5, class: "offset-line" }, partition));
    for (const [t, v, o] of points) root.append(svg("circle", { cx: x(t), cy: y(v), r: 2.5, fill: color },
      `${partition}: ${fmtJson(o.offset)} at ${fmtTime(t)}`));
  });
  for (const v of [v0, v1]) { const n = svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }); n.textContent = v; root.append(n); }
  const axis = (t, anchor) => { const n = svg("text", { x: x(t), y: H - 4, "text-anchor": anchor }); n.textContent = fmtTime(t); root.append(n); };
  axis(t0, "start"); axis(t1, "end");
  return root;
}

// --- refresh without a reload ------------------------------------------------------------------------------------

async function refresh() {
  try {
    await Promise.all([loadConnectors(), loadHealth()]);
    await Promise.all([loadFleet(), state.selected ? loadDetail(state.selected) : null]);
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("#updated").textContent = "refresh failed: " + err;
  }
}

function schedule() {
  clearInterval(state.timer);
  const seconds = Number($("#interval").value);
  if (seconds > 0) state.timer = setInterval(refresh, seconds * 1000);
}

$("#filter").addEventListener("input", renderList);
$("#refresh").addEventListener("click", refresh);
$("#interval").addEventListener("change", schedule);
$("#window").addEventListener("change", refresh);
$("#cluster").addEventListener("change", switchCluster);
loadClusters();
const initial = decodeURIComponent(location.hash.slice(1));
refresh().then(() => { if (initial) select(initial); });
schedule();
