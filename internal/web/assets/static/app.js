// The dashboard's live parts: the overview follows /events (server-sent
// events) and a running job's page follows its output, when the CLS
// streams it. Text goes in with textContent; plots are SVG the server
// rendered with html/template.
"use strict";

// The state letters, in the order of the overview's columns: the server
// says which (data-states), so the live rows keep the header's columns.
function states() {
  const counts = document.getElementById("counts");
  return counts ? Array.from(counts.dataset.states || "") : [];
}

function cell(text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = String(text);
  return td;
}

// The way back to the dashboard's root from this page ("./", "../"): the
// dashboard links only relatively, so a proxy may serve it under a path.
function root() {
  return document.body.dataset.root || "./";
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = String(text);
  return a;
}

function clip(s, n) {
  s = String(s);
  return s.length > n ? s.slice(0, n - 1) + "\u2026" : s;
}

function renderQueues(queues, more) {
  const body = document.getElementById("queues");
  if (!body) return;
  const rows = [];
  const STATES = states();
  for (const q of queues || []) {
    const tr = document.createElement("tr");
    const name = document.createElement("td");
    name.appendChild(link(root() + "jobs?queue=" + encodeURIComponent(q.queue), clip(q.queue, 80)));
    tr.appendChild(name);
    let total = 0;
    for (const s of STATES) {
      const n = (q.counts && q.counts[s]) || 0;
      total += n;
      const td = cell("", "n");
      td.appendChild(link(root() + "jobs?queue=" + encodeURIComponent(q.queue) + "&state=" + s, n));
      tr.appendChild(td);
    }
    tr.appendChild(cell(total, "n"));
    tr.appendChild(cell(q.policy || ""));
    rows.push(tr);
  }
  // The queues beyond those shown, summed.
  if (more) {
    const tr = document.createElement("tr");
    tr.className = "more";
    tr.appendChild(cell(more.n + " more queues (mqstat --summary)"));
    let total = 0;
    for (const s of STATES) {
      const n = (more.counts && more.counts[s]) || 0;
      total += n;
      tr.appendChild(cell(n, "n"));
    }
    tr.appendChild(cell(total, "n"));
    tr.appendChild(cell(""));
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

function renderSites(sites) {
  const body = document.getElementById("sites");
  if (!body) return;
  const rows = [];
  for (const s of sites || []) {
    const tr = document.createElement("tr");
    tr.appendChild(cell(clip(s.name, 80)));
    tr.appendChild(cell(s.type));
    const st = cell(s.state, "st-" + s.state);
    if (s.error) {
      const e = document.createElement("span");
      e.className = "err";
      e.textContent = " " + clip(s.error, 200);
      st.appendChild(e);
    }
    if (s.paused) {
      const p = document.createElement("span");
      p.className = "err";
      p.textContent = " " + s.paused + " paused: output disk nearly full or refusing writes";
      st.appendChild(p);
    }
    if (s.broken) {
      const b = document.createElement("span");
      b.className = "err";
      b.textContent = " " + clip(s.broken, 300);
      st.appendChild(b);
    }
    if (s.cut) {
      const c = document.createElement("span");
      c.className = "err";
      c.textContent = " " + clip(s.cut, 200);
      st.appendChild(c);
    }
    tr.appendChild(st);
    for (const k of ["queued", "running", "idle", "busy"]) tr.appendChild(cell(s[k], "n"));
    tr.appendChild(cell(s.slots_busy + " / " + s.slots, "n"));
    tr.appendChild(cell(s.min + ".." + s.max, "n"));
    rows.push(tr);
  }
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = cell("no sites");
    td.colSpan = 9;
    tr.appendChild(td);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

function onUpdate(u) {
  renderQueues(u.queues, u.more);
  renderSites(u.sites);
  let all = 0;
  for (const s of states()) {
    const n = (u.totals && u.totals[s]) || 0;
    all += n;
    const td = document.getElementById("total-" + s);
    if (td) td.textContent = String(n);
  }
  const t = document.getElementById("total-all");
  if (t) t.textContent = String(all);
  const thr = document.getElementById("throughput");
  if (thr) thr.textContent = Number(u.throughput || 0).toFixed(1);
  for (const k of ["states", "throughput", "wait"]) {
    const div = document.getElementById("plot-" + k);
    if (div && u.plots && u.plots[k]) div.innerHTML = u.plots[k];
  }
  const up = document.getElementById("updated");
  if (up) {
    up.textContent = u.time.slice(11, 19) + " UTC, live";
    up.dataset.live = "on";
  }
}

// A session ends with the CLS that made it (the cookie is signed for that
// run): after a restart every request of an open page gets 401, its event
// streams' too. An EventSource cannot see a status: refused (401, or 429
// at the streams' bound) it stops for good, while one whose CLS is down
// keeps trying by itself. So when a stream stops, the page asks
// /session: a 401 there is a session ended, and the page says so; on
// anything else it opens the stream again a little later.
const RETRY_MS = 5000;
let sessionOver = false;

function sessionEnded() {
  if (sessionOver) return;
  sessionOver = true;
  const up = document.getElementById("updated");
  if (up) {
    up.dataset.live = "ended";
    up.textContent = "session ended";
  }
  const p = document.createElement("p");
  p.id = "session-ended";
  p.className = "err";
  const code = document.createElement("code");
  code.textContent = "cls dashboard url";
  p.append("This page's session has ended: the CLS was restarted. Open the address ", code, " prints again.");
  const main = document.querySelector("main");
  if (main) main.prepend(p);
}

// follow keeps an event stream open: open makes it (with its listeners),
// down is called whenever it loses the CLS.
function follow(open, down) {
  const es = open();
  const retry = () => setTimeout(() => { if (!sessionOver) follow(open, down); }, RETRY_MS);
  es.addEventListener("error", () => {
    if (down) down();
    if (es.readyState !== EventSource.CLOSED) return; // the CLS is away: the stream retries
    fetch(root() + "session", { cache: "no-store" }).then(
      (r) => (r.status === 401 ? sessionEnded() : retry()),
      retry);
  });
}

function followOverview() {
  const counts = document.getElementById("counts");
  if (!counts) return;
  // The jobs-per-state plot is of one queue, or of all.
  const q = counts.dataset.queue;
  follow(() => {
    const es = new EventSource(root() + "events" + (q ? "?queue=" + encodeURIComponent(q) : ""));
    es.addEventListener("update", (ev) => onUpdate(JSON.parse(ev.data)));
    return es;
  }, () => {
    const up = document.getElementById("updated");
    if (up && !sessionOver && up.dataset.live !== "off") {
      up.dataset.live = "off";
      up.textContent = up.textContent.replace(/, live$/, ", not live");
    }
  });
}

function followOutput() {
  for (const pre of document.querySelectorAll("pre[data-follow]")) {
    follow(() => {
      const es = new EventSource(pre.dataset.follow);
      // The stream replays the output's last 64 KiB so far (again after a
      // reconnect), then follows: it replaces what the page was served with.
      es.addEventListener("open", () => { pre.textContent = ""; });
      es.addEventListener("chunk", (ev) => {
        let text = pre.textContent + JSON.parse(ev.data);
        // Keep the page small however long the job writes: its last 256 KiB.
        if (text.length > 262144) text = text.slice(-196608);
        pre.textContent = text;
        pre.scrollTop = pre.scrollHeight;
      });
      es.addEventListener("end", (ev) => {
        es.close();
        // The job has ended: its state as the stream's end found it.
        const st = document.getElementById("state");
        if (st && ev.data) {
          const end = JSON.parse(ev.data);
          st.textContent = end.state + " " + end.name;
          st.className = "st-" + end.state;
        }
      });
      return es;
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  followOverview();
  followOutput();
});
