// kvgate live dashboard: polls /dashboard/data every 2 s, keeps the last 10 minutes in memory, and
// draws them with uPlot (vendored). The figures are cumulative counters; rates come from differences.
"use strict";

const POLL_MS = 2000;
const KEEP = 300;
const COLORS = ["#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#d35400", "#2c3e50"];
const state = { points: 0, errors: 0, history: [], charts: {} };
window.kvgateDashboard = state;

const pct = (v) => (v == null ? "-" : (100 * v).toFixed(1) + "%");
const num = (v) => (v == null ? "-" : Number.isInteger(v) || Math.abs(v) >= 100
  ? Math.round(v).toLocaleString() : v.toFixed(1));
const rate = (v) => (v == null ? "-" : v.toFixed(1));
const secs = (v) => (v == null ? "-" : v < 1 ? (1000 * v).toFixed(0) + " ms" : v.toFixed(2) + " s");

// The last value that is not null (what a legend shows while the cursor is off the chart).
function latest(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] != null) return values[i];
  return null;
}

// Whether any series has a value to draw (`zero`: whether 0 counts as one, not for counts of events).
function hasData(series, zero = true) {
  return series.some((s) => s[1].some((v) => v != null && (zero || v !== 0)));
}

// The note under a chart: why it is empty ("" hides it).
function explain(id, text) {
  let note = document.getElementById("note-" + id);
  if (!note && !text) return;
  if (!note) {
    note = Object.assign(document.createElement("p"), { id: "note-" + id, className: "note" });
    document.getElementById(id).insertAdjacentElement("afterend", note);
  }
  note.textContent = text;
}

function ratio(a, b) {
  return b > 0 ? a / b : null;
}

function worker(point, id) {
  return point.workers.find((w) => w.worker === id);
}

function workerIds(history) {
  const last = history[history.length - 1];
  return last ? last.workers.map((w) => w.worker) : [];
}

// Share of a worker's `tier` blocks in `state` (null when the worker is gone or has no such tier).
function share(w, tier, state) {
  const blocks = w && w.blocks[tier];
  if (!blocks) return null;
  const total = Object.values(blocks).reduce((a, b) => a + b, 0);
  return total > 0 ? (blocks[state] ?? 0) / total : null;
}

// One series per worker that has `tier` now, and per state: one colour per worker, dashed after the
// first state.
function tierSeries(h, tier, states) {
  const ids = h[h.length - 1].workers.filter((w) => w.blocks[tier]).map((w) => w.worker);
  return ids.flatMap((id, i) => states.map((state, j) => [`${id} ${state}`,
    h.map((d) => share(worker(d, id), tier, state)),
    { stroke: COLORS[i % COLORS.length], dash: j ? [6, 4] : undefined }]));
}

// Per-second increase of a cumulative figure; a drop (a worker restarted or left) counts as 0.
function perSecond(h, value) {
  return h.map((d, i) => {
    if (i === 0) return null;
    const dt = d.time - h[i - 1].time;
    return dt > 0 ? Math.max(value(d) - value(h[i - 1]), 0) / dt : null;
  });
}

function evicted(d, cause) {
  return d.workers.reduce((sum, w) => sum + (w.evicted[cause] ?? 0), 0);
}

// Reusable prompt tokens missed per second, by diagnosed cause: one series per cause that has missed
// any since the gateway started (a hit misses none), and under the chart the totals and last rates,
// or why there is nothing to draw.
function drawMisses(h, xs) {
  const missed = h[h.length - 1].diagnosis.missed;
  const causes = Object.keys(missed).filter((c) => missed[c] > 0).sort();
  const series = causes.map((c) => [c, perSecond(h, (d) => d.diagnosis.missed[c] ?? 0)]);
  draw("chart-misses", xs, series, rate);
  document.getElementById("misses-now").textContent = missesNote(h[h.length - 1].diagnosis, series);
}

function missesNote(diagnosis, series) {
  if (!diagnosis.enabled) return "Cache-miss diagnosis is off (diagnosis.enabled = false): nothing is diagnosed.";
  if (!series.length) {
    return "No missed tokens diagnosed yet: no request has finished, or every one reused all it could.";
  }
  return "Since start: " + series.map(([c, values]) =>
    `${c} ${num(diagnosis.missed[c])} tokens (now ${rate(values[values.length - 1])}/s)`).join(" · ");
}

// series: [label, values, uPlot series options (optional)]; fmt: value formatter; unit: true for
// fractions in [0, 1] (fixed 0-100% axis); why: the note shown while no series has data ("": none).
// Legends show each series' latest value, or the one under the cursor while it is on the chart.
function draw(id, xs, series, fmt, unit = false, why = "", zero = true) {
  explain(id, hasData(series, zero) ? "" : why);
  const el = document.getElementById(id);
  const key = series.map((s) => s[0]).join("|");
  const data = [xs, ...series.map((s) => s[1])];
  let chart = state.charts[id];
  if (!chart || chart.key !== key) {
    if (chart) chart.plot.destroy();
    const opts = {
      width: el.clientWidth || 540,
      height: 240,
      scales: unit ? { x: { time: true }, y: { range: [0, 1] } } : { x: { time: true } },
      series: [{}, ...series.map((s, i) => ({
        label: s[0], stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true,
        value: (u, v, si, idx) => fmt(idx == null ? latest(u.data[si]) : v), ...s[2],
      }))],
      axes: [{}, { values: (u, vals) => vals.map(fmt), size: 70 }],
    };
    chart = state.charts[id] = { key, plot: new uPlot(opts, data, el) };
  } else {
    chart.plot.setData(data);
    chart.plot.setLegend({ idx: chart.plot.cursor.idx ?? null });  // the new latest values
  }
}

function render() {
  const h = state.history;
  const xs = h.map((d) => d.time);
  const ids = workerIds(h);
  const since = h.map((d) => ratio(d.totals.cached_tokens, d.totals.prompt_tokens));
  const recent = h.map((d, i) => (i === 0 ? null : ratio(
    d.totals.cached_tokens - h[i - 1].totals.cached_tokens, d.totals.prompt_tokens - h[i - 1].totals.prompt_tokens)));
  const idle = "No prompt tokens yet: no request has finished since this gateway started.";
  draw("chart-hit", xs, [["since start", since], ["last interval", recent]], pct, true, idle);
  draw("chart-workers", xs, ids.map((id) => [id, h.map((d) => {
    const w = worker(d, id);
    return w ? ratio(w.cached_tokens, w.prompt_tokens) : null;
  })]), pct, true, idle);
  draw("chart-predicted", xs, [["predicted", h.map((d) => d.totals.predicted)],
    ["actual", h.map((d) => d.totals.cached_tokens)]], num, false, "No request routed yet.");
  const causes = Object.keys(h[h.length - 1].mispredicted).sort();
  draw("chart-mispredicted", xs, causes.map((c) => [c, h.map((d) => d.mispredicted[c] ?? 0)]), num, false,
    "No mispredicted tokens: every request so far found cached what the router predicted.", false);
  drawMisses(h, xs);
  const unreported = "No live worker has reported its KV tiers yet.";
  draw("chart-gpu", xs, tierSeries(h, "gpu", ["used", "cached"]), pct, true, unreported);
  draw("chart-cpu", xs, tierSeries(h, "cpu", ["cached"]), pct, true, cpuTierNote(h[h.length - 1], unreported));
  draw("chart-evictions", xs, ["ttl", "pressure", "offload"].map((c) => [c, perSecond(h, (d) => evicted(d, c))]),
    rate, false, "Nothing evicted yet: the workers' KV tiers have had room for every block.", false);
  const reasons = Object.keys(h[h.length - 1].reasons).sort();
  draw("chart-reasons", xs, reasons.map((r) => [r, h.map((d) => d.reasons[r] ?? 0)]), num, false,
    "No routing decision yet: no request has arrived since this gateway started.");
  draw("chart-ttft", xs, [["p50", h.map((d) => d.ttft.p50)], ["p99", h.map((d) => d.ttft.p99)]], secs, false,
    "No first token yet: no generation has started since this gateway started.");
  header(h[h.length - 1]);
}

// Why the CPU tier chart is empty: no worker reports yet, or none has a CPU tier (off by default).
function cpuTierNote(last, unreported) {
  if (!last.workers.some((w) => w.live && w.blocks.gpu)) return unreported;
  return "No worker has a CPU tier: it is off by default. Start kvgate up with --num-cpu-blocks N to keep " +
    "blocks evicted from the GPU tier in host memory (N blocks of --block-size tokens per worker).";
}

function header(last) {
  const status = document.getElementById("status");
  status.textContent = last.degraded ? "index degraded: load-based routing" : "live";
  status.className = last.degraded ? "degraded" : "";
  const health = document.getElementById("health");
  health.innerHTML = last.workers.map((w) =>
    `<span class="${w.live ? "up" : "down"}">${w.worker} ${w.live ? "●" : "○"}</span>`).join(" ");
}

async function poll() {
  try {
    const reply = await fetch("/dashboard/data", { cache: "no-store" });
    state.history.push(await reply.json());
    if (state.history.length > KEEP) state.history.shift();
    state.points += 1;
    render();
  } catch (err) {
    state.errors += 1;
    document.getElementById("status").textContent = "gateway unreachable: " + err;
  }
}

poll();
setInterval(poll, POLL_MS);
