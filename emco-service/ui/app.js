// The EMCO dashboard: one page, routed on the URL's hash. It reads EMCO's REST API (and the
// server's /ui/api routes for the fleet, the deployment overview and live status), and acts
// through the same REST calls emcoctl makes. No framework, nothing fetched from elsewhere.
"use strict";

const view = document.getElementById("view");
const live = document.getElementById("live");
const who = document.getElementById("who");
// Closed when the page changes: the live status streams of the page shown.
let closers = [];

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const seg = encodeURIComponent;

// A REST call; answers {ok, status, text, json}. Network errors become status 0.
async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(path, init);
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    return { ok: res.ok, status: res.status, text, json };
  } catch (e) {
    return { ok: false, status: 0, text: String(e), json: null };
  }
}

async function getJson(path) {
  const r = await api("GET", path);
  if (r.status === 401) throw Object.assign(new Error(r.text.trim()), { unauthenticated: true });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${r.text.trim()}`);
  return r.json;
}

// A list; EMCO answers an empty one as null.
async function getList(path) {
  return (await getJson(path)) || [];
}

// ---- Session: the server's login keeps the token in an HTTP-only cookie --------------------

// Shows who is logged in (or that the server is open); false when nobody is.
async function session() {
  const r = await api("GET", "/ui/api/me");
  if (r.status === 401) {
    who.textContent = "";
    return false;
  }
  if (!r.ok || !r.json) return true;
  if (r.json.open) {
    who.innerHTML = '<span class="warn" title="The server requires no credentials: anyone may do anything">open server</span>';
    return true;
  }
  who.innerHTML = `<span title="${esc(r.json.roles.join(", "))}">${esc(r.json.subject)}</span> `
    + '<button type="button" id="logout">Log out</button>';
  document.getElementById("logout").addEventListener("click", async () => {
    await api("POST", "/ui/logout");
    who.textContent = "";
    login("");
  });
  return true;
}

function login(message) {
  closers.forEach((close) => close());
  closers = [];
  view.innerHTML = '<h1>Log in</h1>'
    + '<form id="login"><label>Token <input type="password" id="token" autocomplete="current-password" required></label> '
    + '<button type="submit">Log in</button></form>'
    + `<p id="login-message" class="message" role="alert">${esc(message)}</p>`;
  document.getElementById("login").addEventListener("submit", async (e) => {
    e.preventDefault();
    const r = await api("POST", "/ui/login", { token: document.getElementById("token").value });
    if (r.ok) {
      await session();
      route();
    } else {
      document.getElementById("login-message").textContent = r.text.trim() || `refused (${r.status})`;
    }
  });
  document.getElementById("token").focus();
}

// How a status word looks: a class for the colour and an icon, so it reads without colour too.
const LOOK = {
  ok: { icon: "✔", cls: "ok" },
  warn: { icon: "⟳", cls: "warn" },
  bad: { icon: "✖", cls: "bad" },
  idle: { icon: "○", cls: "idle" },
};

function classOf(word) {
  switch (word) {
    case "Applied": case "Ready": case "Instantiated": case "Available": case "Reachable":
    case "reachable": case "Created": case "Approved": case "Updated": case "Succeeded":
    case "Completed":
      return "ok";
    case "Failed": case "InstantiateFailed": case "TerminateFailed": case "UpdateFailed":
    case "unreachable": case "RolledBack": case "Terminated": case "TimedOut":
      return "bad";
    case "Progressing": case "Baking": case "WaitingForApproval": case "Paused":
      return "warn";
    case "Retrying": case "Pending": case "NotReady": case "Unknown": case "Instantiating": case "Terminating":
    case "Updating": case "Applying": case "Stopping":
      return "warn";
    default:
      return "idle";
  }
}

function badge(word, cls) {
  const look = LOOK[cls || classOf(word)];
  return `<span class="badge ${look.cls}">${look.icon} ${esc(word || "—")}</span>`;
}

function tile(label, value, cls) {
  const look = LOOK[cls];
  return `<div class="tile ${look.cls}" data-tile="${esc(label)}"><b>${esc(value)}</b>${look.icon} ${esc(label)}</div>`;
}

function counts(map) {
  const entries = Object.entries(map || {});
  if (!entries.length) return '<span class="muted">—</span>';
  return entries.map(([k, n]) => `${badge(k)} ${esc(n)}`).join(" ");
}

function digPath(d) {
  return `/projects/${seg(d.project)}/composite-apps/${seg(d.compositeApp)}/${seg(d.compositeAppVersion)}/deployment-intent-groups/${seg(d.name)}`;
}

function digLink(d) {
  const hash = `#/dig/${seg(d.project)}/${seg(d.compositeApp)}/${seg(d.compositeAppVersion)}/${seg(d.name)}`;
  return `<a href="${hash}">${esc(d.name)}</a>`;
}

// ---- Overview ------------------------------------------------------------------------------

const HEALTH = ["bad", "warn", "ok"];
const HEALTH_WORD = ["Failing", "In progress", "Healthy"];

async function overview() {
  const [fleetAnswer, deps] = await Promise.all([api("GET", "/ui/api/fleet?limit=1"), getJson("/ui/api/deployments")]);
  // The fleet is for platform and cluster admins; a project's people see their deployments.
  const fleet = fleetAnswer.ok ? fleetAnswer.json : null;
  const byHealth = [0, 0, 0];
  deps.forEach((d) => { byHealth[d.health] += 1; });
  let html = "<h1>Overview</h1><div class=\"bar\" aria-label=\"Summary\">";
  html += tile("deployments failing", byHealth[0], byHealth[0] ? "bad" : "idle");
  html += tile("deployments in progress", byHealth[1], byHealth[1] ? "warn" : "idle");
  html += tile("deployments healthy", byHealth[2], "ok");
  if (fleet) {
    html += tile("clusters unreachable", fleet.unreachable, fleet.unreachable ? "bad" : "idle");
    html += tile("clusters reachable", fleet.reachable, "ok");
    html += tile("clusters not contacted yet", fleet.unknown, "idle");
  }
  html += "</div><h2>Deployment intent groups, the worst first</h2>";
  if (!deps.length) {
    html += '<p class="muted">No deployment intent group yet.</p>';
  } else {
    html += "<table id=\"deployments\"><thead><tr><th>Health</th><th>Project</th><th>Composite app</th><th>Group</th><th>State</th><th>Deployed</th><th>Ready</th></tr></thead><tbody>";
    for (const d of deps) {
      html += `<tr><td>${badge(HEALTH_WORD[d.health], HEALTH[d.health])}</td><td>${esc(d.project)}</td>`
        + `<td>${esc(d.compositeApp)} ${esc(d.compositeAppVersion)}</td><td>${digLink(d)}</td>`
        + `<td>${badge(d.state)} ${d.status ? badge(d.status) : ""}</td><td>${counts(d.deployedCounts)}</td>`
        + `<td>${counts(d.readyCounts)}</td></tr>`;
    }
    html += "</tbody></table>";
  }
  view.innerHTML = html;
}

// ---- Fleet ---------------------------------------------------------------------------------

async function fleet(params) {
  const q = new URLSearchParams(params);
  const page = await getJson(`/ui/api/fleet?${q}`);
  const offset = Number(q.get("offset") || 0);
  const limit = Number(q.get("limit") || 50);
  const option = (value, current, text) =>
    `<option value="${esc(value)}"${value === current ? " selected" : ""}>${esc(text ?? value)}</option>`;
  let html = "<h1>Fleet</h1><div class=\"bar\">";
  html += tile("clusters", page.total, "idle");
  html += tile("reachable", page.reachable, "ok");
  html += tile("unreachable", page.unreachable, page.unreachable ? "bad" : "idle");
  html += tile("not contacted yet", page.unknown, "idle");
  html += "</div><form class=\"controls\" id=\"fleet-filter\" role=\"search\">";
  html += `<label>Search<input name="q" value="${esc(q.get("q") || "")}" placeholder="cluster or provider"></label>`;
  html += `<label>Provider<select name="provider">${option("", q.get("provider") || "", "any")}${page.providers.map((p) => option(p, q.get("provider") || "")).join("")}</select></label>`;
  html += `<label>Label<select name="label">${option("", q.get("label") || "", "any")}${page.labels.map((l) => option(l, q.get("label") || "")).join("")}</select></label>`;
  html += `<label>Reachability<select name="reach">${["", "reachable", "unreachable", "unknown"].map((r) => option(r, q.get("reach") || "", r || "any")).join("")}</select></label>`;
  html += "<button type=\"submit\">Filter</button></form>";
  html += `<p id="fleet-count">${esc(page.matched)} of ${esc(page.total)} clusters match.</p>`;
  html += "<table id=\"clusters\"><thead><tr><th>Provider</th><th>Cluster</th><th>Labels</th><th>Reachability</th></tr></thead><tbody>";
  for (const c of page.items) {
    const word = c.reach === "unknown" ? "not contacted yet" : c.reach;
    html += `<tr><td>${esc(c.provider)}</td><td><a href="#/cluster/${seg(c.provider)}/${seg(c.name)}">${esc(c.name)}</a></td>`
      + `<td>${c.labels.map((l) => `<span class="label">${esc(l)}</span>`).join("")}</td>`
      + `<td>${badge(word, c.reach === "unknown" ? "idle" : classOf(c.reach))}</td></tr>`;
  }
  html += "</tbody></table><div class=\"pager\">";
  html += `<button type="button" id="prev" ${offset > 0 ? "" : "disabled"}>← Previous</button>`;
  html += `<span>${page.matched ? offset + 1 : 0}–${Math.min(offset + limit, page.matched)}</span>`;
  html += `<button type="button" id="next" ${offset + limit < page.matched ? "" : "disabled"}>Next →</button></div>`;
  view.innerHTML = html;
  const go = (changes) => {
    const next = new URLSearchParams(q);
    for (const [k, v] of Object.entries(changes)) {
      if (v === "" || v === null) next.delete(k); else next.set(k, v);
    }
    location.hash = `#/fleet?${next}`;
  };
  const form = document.getElementById("fleet-filter");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const data = new FormData(form);
    go({ q: data.get("q"), provider: data.get("provider"), label: data.get("label"), reach: data.get("reach"), offset: "" });
  });
  form.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => form.requestSubmit()));
  document.getElementById("prev").addEventListener("click", () => go({ offset: String(Math.max(0, offset - limit)) }));
  document.getElementById("next").addEventListener("click", () => go({ offset: String(offset + limit) }));
}

// ---- One cluster -------------------------------------------------------------------------

async function clusterPage(provider, name) {
  const c = await getJson(`/ui/api/cluster-providers/${seg(provider)}/clusters/${seg(name)}`);
  const word = c.reach === "unknown" ? "not contacted yet" : c.reach;
  let html = `<h1>${esc(c.name)} <span class="muted">${esc(c.provider)}</span></h1>`
    + `<p>Reachability ${badge(word, c.reach === "unknown" ? "idle" : classOf(c.reach))} `
    + `Labels ${c.labels.map((l) => `<span class="label">${esc(l)}</span>`).join("") || '<span class="muted">none</span>'}</p>`
    + "<h2>What runs here</h2>";
  if (!c.deployments.length) {
    html += '<p class="muted">No deployment intent group has resources on this cluster.</p>';
  } else {
    html += "<table id=\"cluster-deployments\"><thead><tr><th>Group</th><th>State</th><th>App</th><th>Resources</th></tr></thead><tbody>";
    for (const d of c.deployments) {
      const actions = (d.states && d.states.actions) || [];
      const state = actions.length ? actions[actions.length - 1].state : "";
      const ref = { project: d.project, compositeApp: d.compositeApp, compositeAppVersion: d.compositeAppVersion, name: d.name };
      for (const app of d.apps) {
        const tally = {};
        for (const cl of app.clusters) for (const r of cl.resources) tally[r.deployedStatus] = (tally[r.deployedStatus] || 0) + 1;
        html += `<tr><td>${digLink(ref)} <span class="muted">${esc(d.project)} / ${esc(d.compositeApp)} ${esc(d.compositeAppVersion)}</span></td>`
          + `<td>${badge(state)}</td><td>${esc(app.name)}</td><td>${counts(tally)}</td></tr>`;
      }
    }
    html += "</tbody></table>";
  }
  view.innerHTML = html;
}

// ---- Projects ------------------------------------------------------------------------------

async function projects() {
  const list = await getList("/v2/projects");
  let html = "<h1>Projects</h1>";
  if (!list.length) html += '<p class="muted">No project yet.</p>';
  for (const p of list) {
    const name = p.metadata.name;
    const base = `/v2/projects/${seg(name)}`;
    const [cas, clouds] = await Promise.all([getList(`${base}/composite-apps`), getList(`${base}/logical-clouds`)]);
    html += `<section data-project="${esc(name)}"><h2>${esc(name)}</h2>`;
    html += "<table><thead><tr><th>Composite app</th><th>Apps</th><th>Deployment intent groups</th></tr></thead><tbody>";
    for (const ca of cas) {
      const caName = ca.metadata.name;
      const version = ca.spec.compositeAppVersion;
      const caBase = `${base}/composite-apps/${seg(caName)}/${seg(version)}`;
      const [apps, digs] = await Promise.all([getList(`${caBase}/apps`), getList(`${caBase}/deployment-intent-groups`)]);
      const digLinks = digs.map((g) => digLink({ project: name, compositeApp: caName, compositeAppVersion: version, name: g.metadata.name }));
      html += `<tr><td>${esc(caName)} <span class="muted">${esc(version)}</span></td>`
        + `<td>${apps.map((a) => esc(a.metadata.name)).join(", ") || '<span class="muted">none</span>'}</td>`
        + `<td>${digLinks.join(", ") || '<span class="muted">none</span>'}</td></tr>`;
    }
    html += "</tbody></table>";
    if (clouds.length) {
      html += "<table><thead><tr><th>Logical cloud</th><th>Level</th><th>Namespace</th><th>Clusters</th><th>State</th></tr></thead><tbody>";
      for (const lc of clouds) {
        const lcBase = `${base}/logical-clouds/${seg(lc.metadata.name)}`;
        const [refs, status] = await Promise.all([
          getList(`${lcBase}/cluster-references`),
          api("GET", `${lcBase}/status?output=summary`),
        ]);
        const actions = status.ok && status.json && status.json.states ? status.json.states.actions || [] : [];
        const state = actions.length ? actions[actions.length - 1].state : "";
        html += `<tr><td>${esc(lc.metadata.name)}</td><td>${esc(lc.spec.level)}</td><td>${esc(lc.spec.namespace)}</td>`
          + `<td>${refs.map((r) => esc(`${r.spec.clusterProvider}+${r.spec.cluster}`)).join(", ")}</td>`
          + `<td>${badge(state)}</td></tr>`;
      }
      html += "</tbody></table>";
    }
    html += "</section>";
  }
  view.innerHTML = html;
}

// ---- Controllers ---------------------------------------------------------------------------

async function controllers() {
  const [ctrls, clm] = await Promise.all([getList("/v2/controllers"), getList("/v2/clm-controllers")]);
  const rows = (list) => list.map((c) => `<tr><td>${esc(c.metadata.name)}</td><td>${esc(c.spec.type)}</td>`
    + `<td>${esc(c.spec.host)}:${esc(c.spec.port)}</td><td>${esc(c.spec.priority)}</td></tr>`).join("");
  const table = (list) => (list.length
    ? `<table><thead><tr><th>Name</th><th>Type</th><th>Address</th><th>Priority</th></tr></thead><tbody>${rows(list)}</tbody></table>`
    : '<p class="muted">None registered.</p>');
  view.innerHTML = `<h1>Controllers</h1><h2>Orchestrator controllers</h2>${table(ctrls)}<h2>Cluster lifecycle controllers</h2>${table(clm)}`;
}

// ---- A deployment intent group -------------------------------------------------------------

// One cell of the matrix: what the deployed and ready statuses say of an app on a cluster.
function cellState(deployed, ready) {
  const s = cellLook(deployed, ready);
  // Changed on the cluster behind emco-rs's back: said beside the state, whatever it is.
  const drifted = ready ? ready.resources.filter((x) => (x.drift || []).length).length : 0;
  if (drifted) s.word += ` · ⚠ ${drifted} drifted`;
  s.drifted = drifted;
  return s;
}

function cellLook(deployed, ready) {
  const d = deployed ? deployed.resources.map((r) => r.deployedStatus) : [];
  const r = ready ? ready.resources.map((x) => x.readyStatus) : [];
  if (!d.length && !r.length) return { cls: "idle", word: "—" };
  if (d.includes("Failed")) return { cls: "bad", word: "Failed" };
  // A silent cluster: what it ran last is no longer known.
  if (r.includes("Unknown")) return { cls: "warn", word: "Unknown" };
  if (d.includes("Retrying") || (deployed && deployed.connectivity === "Retrying")) return { cls: "warn", word: "Retrying" };
  if (d.includes("Pending")) return { cls: "warn", word: "Pending" };
  if (d.length && d.every((s) => s === "Deleted")) return { cls: "idle", word: "Deleted" };
  const readyN = r.filter((s) => s === "Ready").length;
  if (r.length && readyN === r.length && d.every((s) => s === "Applied")) return { cls: "ok", word: "Ready" };
  if (d.length && d.every((s) => s === "Applied")) return { cls: "warn", word: `Applied, ${readyN}/${r.length || d.length} ready` };
  return { cls: "warn", word: d[0] || r[0] };
}

function index(status) {
  const out = new Map();
  for (const app of (status && status.apps) || []) {
    for (const c of app.clusters) out.set(`${app.name}\u0000${c.clusterProvider}+${c.cluster}`, c);
  }
  return out;
}

async function dig(project, ca, version, name) {
  const d = { project, compositeApp: ca, compositeAppVersion: version, name };
  const rest = `/v2${digPath(d)}`;
  // Missing groups answer 404 here, before any stream is opened.
  await getJson(`${rest}/status?status=deployed&output=summary`);
  const state = { deployed: null, ready: null, selected: null, problemsOnly: false, message: "", messageCls: "ok" };
  view.innerHTML = `<h1>${esc(name)} <span class="muted">${esc(project)} / ${esc(ca)} ${esc(version)}</span></h1>`
    + '<div id="dig-state"></div>'
    + '<div class="controls" id="actions" role="toolbar" aria-label="Actions">'
    + '<button type="button" data-action="approve">Approve</button>'
    + '<button type="button" data-action="instantiate">Instantiate</button>'
    + '<button type="button" data-action="update">Update</button>'
    + '<label>Revision<select id="revision"></select></label><button type="button" data-action="rollback">Rollback</button>'
    + '<button type="button" data-action="stop" class="danger">Stop</button>'
    + '<button type="button" data-action="terminate" class="danger">Terminate</button>'
    + '<button type="button" id="preview-button">Preview</button>'
    + '<label class="inline"><input type="checkbox" id="dry-run"> checked by the clusters</label></div>'
    + '<div id="message" class="message" role="status"></div>'
    + '<section id="preview" aria-live="polite"></section>'
    + '<div class="bar" id="summary" aria-label="Summary"></div>'
    + '<label><input type="checkbox" id="problems"> Only clusters with problems</label>'
    + '<div id="rollout"></div>'
    + '<div class="matrix" id="matrix"></div><div id="detail"></div>'
    + '<section id="workflows"></section>'
    + '<h2>History</h2><div id="history"></div>';

  const render = () => {
    const deployed = index(state.deployed);
    const ready = index(state.ready);
    const apps = [...new Set([...(state.deployed?.apps || []), ...(state.ready?.apps || [])].map((a) => a.name))].sort();
    const clusters = [...new Set([...deployed.keys(), ...ready.keys()].map((k) => k.split("\u0000")[1]))].sort();
    const st = state.deployed || state.ready;
    const actions = (st && st.states && st.states.actions) || [];
    const last = actions.length ? actions[actions.length - 1] : null;
    document.getElementById("dig-state").innerHTML = `<p>State ${badge(last ? last.state : "")}`
      + ` ${state.deployed && state.deployed.deployedStatus ? `Context ${badge(state.deployed.deployedStatus)}` : ""}`
      + ` ${state.ready && state.ready.readyStatus ? `Readiness ${badge(state.ready.readyStatus)}` : ""}</p>`;
    // Revisions for rollback, newest first, keeping the choice made.
    const select = document.getElementById("revision");
    const chosen = select.value;
    const revisions = [...new Set(actions.map((a) => a.revision).filter((n) => n > 0))].sort((a, b) => b - a);
    select.innerHTML = revisions.map((n) => `<option${String(n) === chosen ? " selected" : ""}>${n}</option>`).join("");
    // The summary: cells by look, the worst first.
    const tally = { bad: 0, warn: 0, ok: 0, idle: 0 };
    const cells = new Map();
    for (const c of clusters) {
      for (const a of apps) {
        const key = `${a}\u0000${c}`;
        const s = cellState(deployed.get(key), ready.get(key));
        cells.set(key, s);
        tally[s.cls] += 1;
      }
    }
    document.getElementById("summary").innerHTML = tile("failed", tally.bad, tally.bad ? "bad" : "idle")
      + tile("in progress", tally.warn, tally.warn ? "warn" : "idle") + tile("ready", tally.ok, "ok")
      + tile("not deployed", tally.idle, "idle") + tile("clusters", clusters.length, "idle");
    const rows = clusters.filter((c) => !state.problemsOnly || apps.some((a) => ["bad", "warn"].includes(cells.get(`${a}\u0000${c}`).cls)));
    const shown = rows.slice(0, 500);
    let html = "<table><thead><tr><th>Cluster</th>" + apps.map((a) => `<th>${esc(a)}</th>`).join("") + "</tr></thead><tbody>";
    for (const c of shown) {
      html += `<tr><th scope="row">${esc(c)}</th>`;
      for (const a of apps) {
        const key = `${a}\u0000${c}`;
        const s = cells.get(key);
        const look = LOOK[s.cls];
        html += `<td><button type="button" class="cell ${look.cls}" data-app="${esc(a)}" data-cluster="${esc(c)}"`
          + ` aria-pressed="${state.selected === key}" title="${esc(a)} on ${esc(c)}">${look.icon} ${esc(s.word)}</button></td>`;
      }
      html += "</tr>";
    }
    html += "</tbody></table>";
    if (rows.length > shown.length) html += `<p class="muted">${rows.length - shown.length} more clusters not shown; tick "only clusters with problems" to narrow.</p>`;
    if (!apps.length) html = '<p class="muted">Nothing deployed: instantiate to see the apps on their clusters.</p>';
    document.getElementById("matrix").innerHTML = html;
    renderDetail(deployed, ready);
    renderRollout(st && st.rollout);
    document.getElementById("history").innerHTML = actions.length
      ? "<table id=\"history-table\"><thead><tr><th>Time</th><th>State</th><th>Revision</th><th>Context</th></tr></thead><tbody>"
        + actions.slice().reverse().map((a) => `<tr><td>${esc(a.time)}</td><td>${badge(a.state)}</td><td>${esc(a.revision)}</td><td>${esc(a.instance)}</td></tr>`).join("")
        + "</tbody></table>"
      : '<p class="muted">No history.</p>';
  };

  // The rollout in waves, when the group has one: a timeline of its waves and its controls.
  const renderRollout = (run) => {
    const el = document.getElementById("rollout");
    if (!run) { el.innerHTML = ""; return; }
    const through = run.waves.filter((w) => w.state === "Succeeded").reduce((n, w) => n + w.clusters.length, 0);
    const total = run.waves.reduce((n, w) => n + w.clusters.length, 0);
    let html = `<h2>Rollout ${badge(run.state)} <span class="muted">${through}/${total} clusters through</span></h2>`;
    if (run.reason) html += `<p class="why">${esc(run.reason)}</p>`;
    html += '<ol id="waves" class="timeline">';
    run.waves.forEach((w, i) => {
      const current = i === run.current && !["Succeeded", "Failed", "RolledBack"].includes(run.state);
      html += `<li data-wave="${esc(w.name)}"${current ? ' aria-current="step"' : ""}>${badge(w.state)} <b>${esc(w.name)}</b>`
        + ` <span class="muted">${w.clusters.length} cluster${w.clusters.length === 1 ? "" : "s"}`
        + `${w.started ? ` · started ${esc(w.started)}` : ""}${w.finished ? ` · ended ${esc(w.finished)}` : ""}</span>`;
      for (const f of w.failures || []) html += `<br><span class="why bad">✖ ${esc(f.cluster)}: ${esc(f.reason)}</span>`;
      if ((w.skipped || []).length) html += `<br><span class="why">left out, not answering: ${esc(w.skipped.join(", "))}</span>`;
      if ((w.left || []).length) html += `<br><span class="why">left out, deregistered: ${esc(w.left.join(", "))}</span>`;
      html += "</li>";
    });
    html += "</ol>";
    html += '<div class="controls" id="rollout-actions" role="toolbar" aria-label="Rollout">'
      + ["approve", "pause", "resume", "abort"].map((c) => `<button type="button" data-control="${c}"${c === "abort" ? ' class="danger"' : ""}>${c[0].toUpperCase()}${c.slice(1)}</button>`).join("")
      + "</div>";
    el.innerHTML = html;
  };
  document.getElementById("rollout").addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-control]");
    if (!button) return;
    const control = button.dataset.control;
    const what = control === "abort" ? `abort the rollout of ${name} and roll every changed cluster back` : `${control} the rollout of ${name}`;
    if (!window.confirm(`Really ${what}?`)) return;
    button.disabled = true;
    const r = await api("POST", `${rest}/rollout/${control}`);
    button.disabled = false;
    if (r.ok) showMessage(`rollout ${control}: accepted (${r.status})`, "ok");
    else showMessage(`rollout ${control} refused (${r.status}): ${r.text.trim()}`, "bad");
  });

  // The preview: what instantiate or update would do now, nothing written (GET .../preview).
  const diffLines = (text) => text.split("\n").map((l) => {
    const cls = l.startsWith("--- ") || l.startsWith("+++ ") ? "head" : l.startsWith("@@") ? "hunk"
      : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "";
    return cls ? `<span class="${cls}">${esc(l)}</span>` : esc(l);
  }).join("\n");
  const some = (names) => names.length > 10 ? `${names.slice(0, 10).join(", ")} and ${names.length - 10} more` : names.join(", ");
  const renderPreview = (p) => {
    const s = p.summary;
    let html = `<h2>Preview: ${esc(p.operation)}${p.deployedRevision ? ` from revision ${esc(p.deployedRevision)}` : ""}</h2>`
      + `<p id="preview-summary">${s.clustersChanged} of ${s.clusters} clusters change: ${s.added} added, ${s.changed} changed, ${s.removed} removed, ${s.unchanged} unchanged objects</p>`;
    html += '<ul id="preview-placement">' + p.placement.map((a) => `<li><b>${esc(a.app)}</b> on ${a.clusters} cluster${a.clusters === 1 ? "" : "s"}`
      + (a.gains.length ? ` · <span class="ok">gains ${esc(some(a.gains))}</span>` : "")
      + (a.loses.length ? ` · <span class="bad">loses ${esc(some(a.loses))}</span>` : "")
      + a.pickedBy.map((b) => `<br><span class="why">${b.count} picked by ${b.reasons.length ? b.reasons.map((r) => `${esc(r.intent)} ${esc(r.path)} (${esc(r.cluster || `label ${r.clusterLabel}`)})`).join(", ") : "a controller"}</span>`).join("")
      + "</li>").join("") + "</ul>";
    if (p.dryRun) {
      const d = p.dryRun;
      html += `<p id="preview-dry-run">${d.refusals.length || d.unchecked.length ? "✖" : "✔"} checked by ${d.clusters} cluster${d.clusters === 1 ? "" : "s"}</p>`;
      for (const r of d.refusals) html += `<p class="why bad">✖ ${esc(r.app)} ${esc(r.resource)} refused on ${esc(some(r.clusters))}: ${esc(r.reason)}</p>`;
      for (const u of d.unchecked) html += `<p class="why">not checked on ${esc(some(u.clusters))}: ${esc(u.reason)}</p>`;
    }
    if (!(p.changes || []).length) html += '<p class="muted">Nothing would change.</p>';
    for (const g of p.changes || []) {
      html += `<details class="change" open><summary>${g.count} cluster${g.count === 1 ? "" : "s"}: ${esc(some(g.clusters))}</summary>`;
      for (const o of g.objects) html += `<h3>${esc(o.app)} ${esc(o.resource)} <span class="muted">${esc(o.change)}</span></h3><pre class="diff">${diffLines(o.diff)}</pre>`;
      html += "</details>";
    }
    document.getElementById("preview").innerHTML = html;
  };
  document.getElementById("preview-button").addEventListener("click", async (e) => {
    const button = e.target;
    const checked = document.getElementById("dry-run").checked;
    button.disabled = true;
    const r = await api("GET", `${rest}/preview${checked ? "?dryRun=true" : ""}`);
    button.disabled = false;
    if (r.ok && r.json) {
      renderPreview(r.json);
      showMessage("preview: nothing was changed", "ok");
    } else {
      document.getElementById("preview").innerHTML = "";
      showMessage(`preview refused (${r.status}): ${r.text.trim()}`, "bad");
    }
  });

  // A resource's drift: each field, who changed it and when; corrections and a give-up.
  const driftText = (rr) => {
    if (!rr) return "";
    let t = (rr.drift || []).map((f) => `⚠ ${esc(f.path || "the object")} ${f.removed ? "removed" : "changed"} by ${esc(f.manager)}${f.time ? ` at ${esc(f.time)}` : ""}`).join("<br>");
    if (rr.driftCorrections) t += `${t ? "<br>" : ""}corrected ${esc(rr.driftCorrections)}×`;
    if (rr.driftGaveUp) t += `${t ? "<br>" : ""}✖ ${esc(rr.driftGaveUp)}`;
    return t;
  };

  const renderDetail = (deployed, ready) => {
    const el = document.getElementById("detail");
    if (!state.selected) { el.innerHTML = ""; return; }
    const [app, cluster] = state.selected.split("\u0000");
    const dc = deployed.get(state.selected);
    const rc = ready.get(state.selected);
    const readyOf = new Map(((rc && rc.resources) || []).map((r) => [`${r.GVK.Kind}/${r.name}`, r]));
    let html = `<h2 id="detail-title">${esc(app)} on ${esc(cluster)}</h2>`;
    if (dc && dc.reason) {
      html += `<p class="why bad">✖ ${esc(dc.reason)}: ${esc(dc.message)}${dc.attempts ? ` (attempt ${esc(dc.attempts)}, next retry ${esc(dc.nextRetry)})` : ""}</p>`;
    }
    const resources = (dc && dc.resources) || (rc && rc.resources) || [];
    html += "<table id=\"resources\"><thead><tr><th>Kind</th><th>Name</th><th>Deployed</th><th>Ready</th><th>Why</th><th>Drift</th></tr></thead><tbody>";
    for (const r of resources) {
      const rr = readyOf.get(`${r.GVK.Kind}/${r.name}`);
      const silent = rr && rr.readyStatus === "Unknown" ? `${rr.message || "cluster silent"} (last ${rr.lastReadyStatus || "unknown"})` : "";
      const why = silent || (r.reason ? `${r.reason}: ${r.message || ""}${r.attempts ? ` (attempt ${r.attempts}${r.nextRetry ? `, next retry ${r.nextRetry}` : ""})` : ""}` : "");
      html += `<tr><td>${esc(r.GVK.Kind)}</td><td>${esc(r.name)}</td><td>${badge(r.deployedStatus)}</td>`
        + `<td>${badge(rr ? rr.readyStatus : "")}</td><td class="why">${esc(why)}${(r.warnings || []).map((w) => `<br>⚠ ${esc(w)}`).join("")}</td>`
        + `<td class="why drift">${driftText(rr)}</td></tr>`;
    }
    html += "</tbody></table>";
    el.innerHTML = html;
  };

  document.getElementById("matrix").addEventListener("click", (e) => {
    const cell = e.target.closest("button.cell");
    if (!cell) return;
    const key = `${cell.dataset.app}\u0000${cell.dataset.cluster}`;
    state.selected = state.selected === key ? null : key;
    render();
    document.querySelector(`button.cell[aria-pressed="true"]`)?.focus();
  });
  document.getElementById("problems").addEventListener("change", (e) => {
    state.problemsOnly = e.target.checked;
    render();
  });
  document.getElementById("actions").addEventListener("click", async (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const action = button.dataset.action;
    let body;
    let what = `${action} ${name}`;
    if (action === "rollback") {
      const revision = document.getElementById("revision").value;
      if (!revision) { showMessage("No revision to roll back to.", "bad"); return; }
      body = { metadata: { name: `rollback-${revision}` }, spec: { revision } };
      what = `roll ${name} back to revision ${revision}`;
    }
    if (!window.confirm(`Really ${what}?`)) return;
    button.disabled = true;
    const r = await api("POST", `${rest}/${action}`, body);
    button.disabled = false;
    const said = r.text.trim();
    if (r.ok) {
      showMessage(`${action}: accepted (${r.status})${said ? `: revision ${said}` : ""}`, "ok");
    } else {
      showMessage(`${action} refused (${r.status}): ${said}`, "bad");
    }
  });
  const showMessage = (text, cls) => {
    const el = document.getElementById("message");
    el.className = `message ${cls}`;
    el.textContent = text;
  };

  // The group's Temporal workflows: workflowmgr's intents and tac's hooks, each with what its
  // Temporal server says (the hook's own server, else the server's --temporal-server).
  const eventName = (e) => Object.keys(e.attributes || {})[0]?.replace(/EventAttributes$/, "") || `event ${e.event_type}`;
  const workflowRow = async (kind, w, base) => {
    const r = await api("GET", `${base}/status?runDescribeWfExec=true&getWfHistory=true`);
    const info = r.ok && r.json ? r.json.workflowExecutionDescription?.workflow_execution_info : null;
    const states = ["", "Running", "Completed", "Failed", "Canceled", "Terminated", "ContinuedAsNew", "TimedOut"];
    // Temporal answers 404 for a workflow it does not know: not started yet.
    const word = info ? states[info.status] || "Unknown" : r.status === 404 ? "Not started" : "Unknown";
    const id = w.spec.temporal?.workflowStartOptions?.ID || "";
    const when = kind === "hook" ? w.spec.hookType : "intent";
    let html = `<tr data-workflow="${esc(w.metadata.name)}"><td>${esc(w.metadata.name)}</td><td>${esc(when)}</td><td>${esc(id)}</td>`
      + `<td>${badge(word)}${info && info.start_time ? ` <span class="muted">${esc(info.start_time)}</span>` : ""}`
      + `${r.ok || r.status === 404 ? "" : `<br><span class="why">${esc(r.text.trim())}</span>`}</td><td>`;
    if (kind === "intent") html += `<button type="button" data-start="${esc(w.metadata.name)}">Start</button> `;
    const events = (r.ok && r.json && r.json.workflowHistory) || [];
    if (events.length) {
      html += `<details><summary>History (${events.length})</summary><ol class="events">`
        + events.map((e) => `<li>${esc(eventName(e))} <span class="muted">${esc(e.event_time || "")}</span></li>`).join("")
        + "</ol></details>";
    }
    return `${html}</td></tr>`;
  };
  const renderWorkflows = async () => {
    const el = document.getElementById("workflows");
    const intents = (await api("GET", `${rest}/temporal-workflow-intents`)).json || [];
    const hooks = (await api("GET", `${rest}/temporal-action-controller`)).json || [];
    if (!intents.length && !hooks.length) { el.innerHTML = ""; return; }
    const rows = await Promise.all([
      ...intents.map((w) => workflowRow("intent", w, `${rest}/temporal-workflow-intents/${encodeURIComponent(w.metadata.name)}`)),
      ...hooks.map((w) => workflowRow("hook", w, `${rest}/temporal-action-controller/${encodeURIComponent(w.metadata.name)}`)),
    ]);
    el.innerHTML = '<h2>Workflows <button type="button" id="workflows-refresh">Refresh</button></h2>'
      + '<table id="workflows-table"><thead><tr><th>Name</th><th>When</th><th>Workflow</th><th>State</th><th></th></tr></thead><tbody>'
      + rows.join("") + "</tbody></table>";
  };
  document.getElementById("workflows").addEventListener("click", async (e) => {
    if (e.target.id === "workflows-refresh") { await renderWorkflows(); return; }
    const start = e.target.closest("button[data-start]");
    if (!start) return;
    const r = await api("POST", `${rest}/temporal-workflow-intents/${encodeURIComponent(start.dataset.start)}/start`);
    if (r.ok) showMessage(`workflow ${start.dataset.start} started`, "ok");
    else showMessage(`start refused (${r.status}): ${r.text.trim()}`, "bad");
    await renderWorkflows();
  });
  renderWorkflows();

  // Live: the server pushes the full status whenever it changes, for both views.
  for (const kind of ["deployed", "ready"]) {
    const source = new EventSource(`/ui/api${digPath(d)}/stream?status=${kind}`);
    source.addEventListener("status", (e) => {
      state[kind] = JSON.parse(e.data);
      live.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
      render();
    });
    source.addEventListener("problem", (e) => showMessage(`status: ${e.data}`, "bad"));
    source.onerror = () => { live.textContent = "reconnecting…"; };
    closers.push(() => source.close());
  }
  render();
}

// ---- Routing -------------------------------------------------------------------------------

async function route() {
  closers.forEach((close) => close());
  closers = [];
  live.textContent = "";
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("header nav a").forEach((a) => {
    a.classList.toggle("current", a.getAttribute("href") === `#/${parts[0] || ""}`);
  });
  try {
    if (parts[0] === "fleet") await fleet(query || "");
    else if (parts[0] === "projects") await projects();
    else if (parts[0] === "controllers") await controllers();
    else if (parts[0] === "cluster" && parts.length === 3) await clusterPage(parts[1], parts[2]);
    else if (parts[0] === "dig" && parts.length === 5) await dig(parts[1], parts[2], parts[3], parts[4]);
    else await overview();
  } catch (e) {
    if (e.unauthenticated) {
      login("Log in to see this page.");
      return;
    }
    view.innerHTML = `<h1>Cannot show this page</h1><p class="message bad" role="alert">${esc(e.message)}</p>`;
  }
}

window.addEventListener("hashchange", route);
session().then((in_) => (in_ ? route() : login("")));
