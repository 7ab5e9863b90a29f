// The contextfold dashboard: a single page over the JSON API at /ui/api/, routed by the
// address's hash. Every stored text is written as text content (never as markup), and the
// chart is SVG built element by element.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

// An element with attributes and children; a string child is a text node.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}

// An SVG element with attributes and an optional tooltip.
function svg(tag, attrs, title) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  if (title) {
    const tip = document.createElementNS(SVG, "title");
    tip.textContent = title;
    node.append(tip);
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
}

function number(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

function short(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + "k";
  return String(n);
}

function dollars(n) {
  return n === null || n === undefined ? "–" : "$" + Number(n).toFixed(n < 10 ? 3 : 2);
}

function when(secs) {
  if (!secs) return "–";
  return new Date(secs * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

// What compaction saved: tokens received vs sent, as a share.
function saved(received, sent) {
  if (received === null || received === undefined || !received) return "–";
  return Math.round((100 * (received - sent)) / received) + "%";
}

async function api(call, params) {
  const query = new URLSearchParams(params || {}).toString();
  const response = await fetch("/ui/api/" + call + (query ? "?" + query : ""), { credentials: "same-origin" });
  let body;
  try {
    body = await response.json();
  } catch (_) {
    body = { error: "the dashboard's API answered " + response.status };
  }
  if (!response.ok) throw new Error(body.error || "the dashboard's API answered " + response.status);
  return body;
}

function sessionLink(id, text) {
  return el("a", { href: "#/session/" + encodeURIComponent(id) }, text);
}

function refLink(ref) {
  return el("a", { class: "ref", href: "#/ref/" + encodeURIComponent(ref) }, ref);
}

function card(label, value, extra) {
  return el("div", { class: "card" + (extra ? " " + extra : "") }, el("span", { class: "label" }, label), el("span", { class: "value" }, value));
}

// The sessions: each with its totals, the most recently active first.
async function sessionsPage(view) {
  const { sessions } = await api("sessions");
  document.title = "Sessions · contextfold";
  const withCalls = sessions.filter((s) => s.tokens_received !== null);
  const received = withCalls.reduce((sum, s) => sum + s.tokens_received, 0);
  const sent = withCalls.reduce((sum, s) => sum + s.tokens_sent, 0);
  view.append(
    el("h1", {}, "Sessions"),
    el("div", { class: "cards" },
      card("Sessions", number(sessions.length)),
      card("Calls", number(sessions.reduce((sum, s) => sum + s.calls, 0))),
      card("Compactions", number(sessions.reduce((sum, s) => sum + s.compactions, 0))),
      card("Tokens received", withCalls.length ? number(received) : "–"),
      card("Tokens sent", withCalls.length ? number(sent) : "–"),
      card("Saved", withCalls.length ? saved(received, sent) : "–", "good")),
  );
  if (!sessions.length) {
    view.append(el("p", { class: "notice" }, "The store holds no session yet."));
    return;
  }
  const rows = sessions.map((s) =>
    el("tr", { "data-session": s.id },
      el("td", { class: "name" }, sessionLink(s.id, s.name || s.id), el("div", { class: "id" }, s.id)),
      el("td", { class: "num messages" }, number(s.messages)),
      el("td", { class: "num compactions" }, number(s.compactions)),
      el("td", { class: "num payloads" }, number(s.payloads)),
      el("td", { class: "num calls" }, number(s.calls)),
      el("td", { class: "num received" }, number(s.tokens_received)),
      el("td", { class: "num sent" }, number(s.tokens_sent)),
      el("td", { class: "num saved" }, saved(s.tokens_received, s.tokens_sent)),
      el("td", { class: "when" }, when(s.last_activity))));
  view.append(el("table", { id: "sessions" },
    el("thead", {}, el("tr", {}, ["Session", "Messages", "Compactions", "Payloads", "Calls", "Tokens received", "Tokens sent", "Saved", "Last activity"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows)));
}

// The points of the chart: one per call from the call records, else two per compaction
// (before and after) from the reports.
function chartData(detail) {
  if (detail.calls.length) {
    return {
      fromCalls: true,
      points: detail.calls.map((call, i) => ({
        x: i + 1, received: call.tokens_received || 0, sent: call.tokens_sent || 0,
        compacted: call.action === "compacted", call,
      })),
    };
  }
  return {
    fromCalls: false,
    points: detail.compactions.map((c, i) => ({ x: i + 1, received: c.tokens_before || 0, sent: c.tokens_after || 0, compacted: true })),
  };
}

// Request tokens per call as SVG: received (grey), sent (blue, a point per call),
// compactions as dashed verticals, the window as a red line.
function chart(detail) {
  const { fromCalls, points } = chartData(detail);
  const width = 960, height = 320, left = 64, right = 24, top = 20, bottom = 40;
  const top_value = Math.max(detail.window || 0, ...points.map((p) => Math.max(p.received, p.sent)), 1);
  const step = niceStep(top_value / 4);
  const ceiling = step * Math.ceil((top_value * 1.04) / step);
  const n = Math.max(points.length, 1);
  const x = (i) => left + (n === 1 ? (width - left - right) / 2 : ((i - 1) * (width - left - right)) / (n - 1));
  const y = (v) => top + (height - top - bottom) * (1 - v / ceiling);
  const root = svg("svg", { id: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "Request tokens per call" });
  for (let value = 0; value <= ceiling; value += step) {
    root.append(svg("line", { class: "grid", x1: left, x2: width - right, y1: y(value), y2: y(value) }));
    const label = svg("text", { class: "tick", x: left - 8, y: y(value) + 4, "text-anchor": "end" });
    label.textContent = short(value);
    root.append(label);
  }
  const axis = svg("text", { class: "tick", x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle" });
  axis.textContent = fromCalls ? "call" : "compaction";
  root.append(axis);
  for (const [i, p] of points.entries()) {
    if (p.compacted && fromCalls) {
      root.append(svg("line", { class: "compaction-mark", "data-call": i + 1, x1: x(p.x), x2: x(p.x), y1: top, y2: height - bottom },
        `call ${p.x}: compacted`));
    }
    if (i === 0 || points.length < 30 || (i + 1) % Math.ceil(points.length / 15) === 0) {
      const tick = svg("text", { class: "tick", x: x(p.x), y: height - bottom + 16, "text-anchor": "middle" });
      tick.textContent = String(p.x);
      root.append(tick);
    }
  }
  if (detail.window) {
    root.append(svg("line", { class: "window", x1: left, x2: width - right, y1: y(detail.window), y2: y(detail.window) },
      `window: ${number(detail.window)} tokens`));
    const label = svg("text", { class: "window-label", x: width - right - 4, y: y(detail.window) - 6, "text-anchor": "end" });
    label.textContent = `window ${number(detail.window)}`;
    root.append(label);
  }
  const path = (key) => points.map((p, i) => (i ? "L" : "M") + x(p.x).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
  if (points.length) {
    root.append(svg("path", { class: "line received", d: path("received") }));
    root.append(svg("path", { class: "line sent", d: path("sent") }));
  }
  for (const [i, p] of points.entries()) {
    const what = fromCalls
      ? `call ${p.x}: ${number(p.sent)} tokens sent, ${number(p.received)} received` + (p.call.action ? ` (${p.call.action})` : "") + (p.call.note ? `\n${p.call.note}` : "")
      : `compaction ${p.x}: ${number(p.received)} tokens before, ${number(p.sent)} after`;
    root.append(svg("circle", { class: "received-point", cx: x(p.x), cy: y(p.received), r: 2.5 }));
    const failed = fromCalls && p.call.status >= 400;
    const kind = "point" + (p.compacted ? " compacted" : "") + (failed ? " failed" : "");
    root.append(svg("circle", { class: kind, "data-index": i + 1, cx: x(p.x), cy: y(p.sent), r: p.compacted ? 5 : 3.5 },
      what + (failed ? ` · status ${p.call.status}` : "")));
    if (p.compacted && !fromCalls) {
      root.append(svg("line", { class: "compaction-mark", x1: x(p.x), x2: x(p.x), y1: y(p.received), y2: y(p.sent) }, what));
    }
  }
  const legend = el("div", { class: "legend" },
    el("span", { class: "key received" }, fromCalls ? "tokens received from the client" : "tokens before"),
    el("span", { class: "key sent" }, fromCalls ? "tokens sent upstream" : "tokens after"),
    el("span", { class: "key mark" }, "compaction"),
    detail.window ? el("span", { class: "key window" }, "context window") : null);
  const figure = el("figure", { class: "chart" }, root, legend);
  if (!fromCalls) {
    figure.append(el("figcaption", {}, "This session has no call records (it was not written by contextfold serve, or by an older one): the chart shows each compaction's tokens before and after."));
  }
  return figure;
}

// A round step (1, 2 or 5 times a power of ten) of at least `value`.
function niceStep(value) {
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const factor of [1, 2, 5]) if (factor * power >= value) return factor * power;
  return 10 * power;
}

// The calls at which each compaction ran (the k-th `compacted` call for the k-th report).
function compactionCalls(detail) {
  const at = [];
  detail.calls.forEach((call, i) => { if (call.action === "compacted") at.push(i + 1); });
  return at;
}

// A conversation: totals, the chart, the compactions; `open` is a compaction to show.
async function sessionPage(view, id, open) {
  const detail = await api("session", { id });
  const s = detail.session;
  document.title = (s.name || s.id) + " · contextfold";
  const origin = detail.meta && typeof detail.meta === "object" ? Object.entries(detail.meta).filter(([, v]) => typeof v !== "object").map(([k, v]) => `${k}: ${v}`).join(" · ") : "";
  view.append(
    el("p", { class: "crumbs" }, el("a", { href: "#/" }, "Sessions"), " / ", s.name || s.id),
    el("h1", {}, s.name || s.id),
    el("p", { class: "meta" }, `session ${s.id} · created ${when(s.created)} · last activity ${when(s.last_activity)}` + (origin ? " · " + origin : "")),
    el("div", { class: "cards" },
      card("Messages", number(s.messages)), card("Calls", number(s.calls)), card("Compactions", number(s.compactions)),
      card("Payloads", number(s.payloads)), card("Tokens received", number(s.tokens_received)),
      card("Tokens sent", number(s.tokens_sent)), card("Saved", saved(s.tokens_received, s.tokens_sent), "good"),
      s.cost_without !== null ? card("Est. input cost without → with", dollars(s.cost_without) + " → " + dollars(s.cost_with)) : null),
    el("h2", {}, "Request tokens per call"),
    chart(detail));
  const at = compactionCalls(detail);
  view.append(el("h2", {}, "Compactions"));
  if (!detail.compactions.length) {
    view.append(el("p", { class: "notice" }, "No compaction yet: every request went upstream as the client sent it."));
    return;
  }
  const base = "#/session/" + encodeURIComponent(s.id) + "/compaction/";
  view.append(el("table", { id: "compactions" },
    el("thead", {}, el("tr", {}, ["#", "Call", "Tokens before", "Tokens after", "Evicted", "Clipped", "Steps", ""].map((h) => el("th", {}, h)))),
    el("tbody", {}, detail.compactions.map((c, k) =>
      el("tr", { class: open === k ? "open" : "" },
        el("td", {}, String(k + 1)),
        el("td", {}, at[k] ? String(at[k]) : "–"),
        el("td", { class: "num" }, number(c.tokens_before)),
        el("td", { class: "num" }, number(c.tokens_after)),
        el("td", { class: "num" }, number((c.items || []).length)),
        el("td", { class: "num" }, number((c.clipped || []).length)),
        el("td", {}, String(c.strategy_used || "")),
        el("td", {}, el("a", { class: "open-report", href: base + k }, "open report")))))));
  if (open !== null && open !== undefined) {
    const c = detail.compactions[open];
    if (!c) throw new Error(`this session has no compaction ${open + 1}`);
    view.append(report(c, open, at[open]));
  }
}

// One compaction's report: tokens, what was evicted and clipped (with refs), the summary.
function report(c, k, call) {
  const items = (c.items || []).map((item) =>
    el("tr", {}, el("td", {}, refLink(item.ref)), el("td", {}, item.tool || ""), el("td", {}, item.kind || ""),
      el("td", { class: "target" }, item.target || ""), el("td", { class: "num" }, number(item.tokens)), el("td", {}, item.reason || "")));
  const clipped = (c.clipped || []).map((item) =>
    el("tr", {}, el("td", {}, refLink(item.ref)), el("td", {}, item.tool || ""),
      el("td", { class: "num" }, number(item.tokens_before)), el("td", { class: "num" }, number(item.tokens_after))));
  return el("section", { id: "report" },
    el("h2", {}, `Compaction ${k + 1}` + (call ? ` (call ${call})` : "")),
    el("div", { class: "cards" },
      card("Tokens before", number(c.tokens_before)), card("Tokens after", number(c.tokens_after)),
      card("Target", number(c.target_tokens)), card("Summary tokens", number(c.summary_tokens)),
      card("Messages folded", number(c.messages_folded))),
    el("p", { class: "meta" }, `steps: ${c.strategy_used || "none"}` + (c.summarizer ? ` · summarizer: ${c.summarizer}` : "")),
    el("h3", {}, `Evicted (${items.length})`),
    items.length ? el("table", { class: "evicted" }, el("thead", {}, el("tr", {}, ["Ref", "Tool", "Kind", "Target", "Tokens", "Reason"].map((h) => el("th", {}, h)))), el("tbody", {}, items)) : el("p", { class: "muted" }, "Nothing evicted."),
    clipped.length ? [el("h3", {}, `Clipped (${clipped.length})`), el("table", { class: "clipped" }, el("thead", {}, el("tr", {}, ["Ref", "Tool", "Tokens before", "Tokens after"].map((h) => el("th", {}, h)))), el("tbody", {}, clipped))] : null,
    el("h3", {}, "Summary"),
    c.summary !== null && c.summary !== undefined ? el("pre", { class: "summary" }, c.summary) : el("p", { class: "muted" }, "This compaction wrote no summary."),
    (c.notes || []).length ? [el("h3", {}, "Notes"), el("ul", { class: "notes" }, c.notes.map((n) => el("li", {}, String(n))))] : null);
}

// A payload exactly as stored.
async function refPage(view, ref) {
  const found = await api("payload", { ref });
  document.title = ref + " · contextfold";
  view.append(
    el("p", { class: "crumbs" }, el("a", { href: "#/" }, "Sessions"), " / ", ref),
    el("h1", {}, "Payload ", el("code", {}, ref)),
    el("p", { class: "meta" }, `${number(found.text.length)} characters, exactly as stored (what contextfold recall ${ref} prints)`),
    el("pre", { id: "payload" }, found.text));
}

// A snippet with its matches (marked `[`…`]` by the store) highlighted, as text.
function snippet(text) {
  const out = el("span", { class: "snippet" });
  const parts = text.split(/\[([^\[\]]*)\]/);
  parts.forEach((part, i) => out.append(i % 2 ? el("mark", {}, part) : part));
  return out;
}

async function searchPage(view, query) {
  const input = document.querySelector("#search input");
  if (input && input.value !== query) input.value = query;
  const { hits } = await api("search", { q: query });
  document.title = "Search · contextfold";
  view.append(el("h1", {}, "Search ", el("q", {}, query)));
  if (!hits.length) {
    view.append(el("p", { class: "notice" }, "Nothing found."));
    return;
  }
  view.append(el("ul", { id: "hits" }, hits.map((hit) =>
    el("li", {},
      el("div", { class: "where" }, sessionLink(hit.session, hit.name || hit.session), " · ",
        hit.ref ? refLink(hit.ref) : `message ${hit.message}`),
      snippet(hit.snippet)))));
}

// Each route renders into a page of its own, shown only if no later route started meanwhile.
let generation = 0;

async function route() {
  const mine = ++generation;
  const shown = document.getElementById("view");
  shown.removeAttribute("data-ready");
  const view = el("div", { class: "page" });
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "session" && parts[1]) {
      const open = parts[2] === "compaction" ? Number(parts[3]) : null;
      await sessionPage(view, parts[1], Number.isInteger(open) ? open : null);
    } else if (parts[0] === "ref" && parts[1]) {
      await refPage(view, parts[1]);
    } else if (parts[0] === "search" && parts[1] !== undefined) {
      await searchPage(view, parts.slice(1).join("/"));
    } else {
      await sessionsPage(view);
    }
  } catch (err) {
    view.append(el("p", { class: "error" }, err.message));
  }
  if (mine !== generation) return;
  shown.replaceChildren(view);
  const opened = document.getElementById("report");
  if (opened) opened.scrollIntoView();
  else window.scrollTo(0, 0);
  shown.setAttribute("data-ready", "1");
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("search").addEventListener("submit", (event) => {
    event.preventDefault();
    const q = new FormData(event.target).get("q").trim();
    if (q) location.hash = "#/search/" + encodeURIComponent(q);
  });
  route();
});
