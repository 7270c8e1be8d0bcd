// The dashboard's page: polls /api/state every second and renders it with textContent only
// (never innerHTML), so nothing a log or a request holds can become markup.
"use strict";

const $ = (id) => document.getElementById(id);
let last = {};
let readOnly = true;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined || c === "" ? "-" : String(c);
    tr.appendChild(td);
  }
  return tr;
}

function time(t) { return new Date(t).toLocaleString(); }

// changed renders a part only when its data changed, so a button is not replaced under a click.
function changed(name, data) {
  const j = JSON.stringify(data);
  if (last[name] === j) return false;
  last[name] = j;
  return true;
}

function button(label, id, decision, scope) {
  const b = el("button", label);
  b.dataset.id = id;
  b.dataset.decision = decision;
  b.dataset.scope = scope;
  b.disabled = readOnly;
  if (readOnly) b.title = "read-only: the dashboard has no operator key";
  b.addEventListener("click", () => decide(b));
  return b;
}

function renderPending(reqs) {
  const body = $("pending");
  body.replaceChildren();
  if (reqs.length === 0) { body.appendChild(row(["no pending requests"])); return; }
  for (const r of reqs) {
    const acts = el("span");
    acts.appendChild(button("Approve", r.id, "approve", "once"));
    if (r.session) acts.appendChild(button("Approve for session", r.id, "approve", "session"));
    acts.appendChild(button("Deny", r.id, "deny", "once"));
    const tr = row([time(r.created), time(r.expires), r.component, r.action, r.tier, r.summary, el("code", r.id), acts]);
    tr.dataset.id = r.id;
    body.appendChild(tr);
  }
}

function renderChains(logs) {
  const body = $("chains");
  body.replaceChildren();
  for (const c of logs) {
    const tr = row([c.component, el("span", c.status, c.status), c.detail, el("code", c.file)]);
    tr.dataset.component = c.component;
    body.appendChild(tr);
    for (const f of c.failures.slice(1)) body.appendChild(row([c.component, "failure", "line " + f.line + ": " + f.reason, ""], "muted"));
    for (const f of c.notices) body.appendChild(row([c.component, "note", "line " + f.line + ": " + f.reason, ""], "muted"));
  }
}

function renderDecisions(logs) {
  const box = $("decisions");
  box.replaceChildren();
  for (const c of logs) {
    box.appendChild(el("h3", c.component || c.file));
    const t = el("table");
    t.dataset.component = c.component;
    t.appendChild(row(["Time", "Line", "Action", "Decision", "Reason", "Caller", "Destination", "Details"], "muted"));
    for (const e of c.events) {
      const details = Object.keys(e.fields || {}).sort().map((k) => k + "=" + e.fields[k]).join(" ");
      const tr = row([time(e.time), e.line, e.action, el("span", e.decision, e.decision), e.reason, e.caller, e.destination, details], e.signed ? "" : "unsigned");
      tr.dataset.decision = e.decision;
      t.appendChild(tr);
    }
    if (c.events.length === 0) t.appendChild(row(["no decisions yet"]));
    box.appendChild(t);
  }
}

function render(s) {
  readOnly = !!s.read_only;
  $("session").textContent = s.session_ca ? "Session CA sha256 " + s.session_ca + ", from " + s.session_ca_from : "";
  if (changed("pending", s.pending)) renderPending(s.pending);
  if (changed("chains", s.logs.map((c) => [c.component, c.file, c.status, c.detail, c.failures, c.notices]))) renderChains(s.logs);
  if (changed("decisions", s.logs.map((c) => c.events))) renderDecisions(s.logs);
  if (changed("problems", s.problems)) {
    $("problems").replaceChildren(...s.problems.map((p) => el("li", p)));
  }
}

async function refresh() {
  const st = $("status");
  try {
    const r = await fetch("/api/state", { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error(r.status + ": " + (await r.text()));
    render(await r.json());
    st.textContent = "updated " + new Date().toLocaleTimeString();
    st.className = "muted";
  } catch (e) {
    st.textContent = "cannot read the dashboard's state: " + e.message;
    st.className = "bad";
  }
}

async function decide(b) {
  b.disabled = true;
  const msg = $("message");
  try {
    const r = await fetch("/api/decide", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ id: b.dataset.id, decision: b.dataset.decision, scope: b.dataset.scope }),
    });
    const v = await r.json();
    msg.textContent = r.ok ? v.message : "refused: " + v.error;
    msg.className = r.ok ? "ok" : "bad";
  } catch (e) {
    msg.textContent = "refused: " + e.message;
    msg.className = "bad";
  }
  last.pending = undefined;
  refresh();
}

refresh();
setInterval(refresh, 1000);
