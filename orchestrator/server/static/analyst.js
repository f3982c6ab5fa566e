// The analyst page: ask one question or many, follow each run live, read answers, SQL, rows and a chart.
"use strict";

(() => {
  const { api, escape, highlight, follow, signIn, setLive } = sqlgate;
  const runs = new Map(); // run_id -> section element

  const STAGE_TEXT = { queued: "queued", awaiting_approval: "waiting for a reviewer" };

  function card(runId, questions) {
    if (runs.has(runId)) return runs.get(runId);
    const el = document.createElement("section");
    el.className = "card run";
    el.dataset.runId = runId;
    el.dataset.testid = "run";
    el.innerHTML = `
      <h3>Run <span class="meta">${escape(runId)}</span> <span class="status" data-testid="run-status">queued</span></h3>
      <div class="meta stage" data-testid="stage"></div>
      <div class="progress"><div></div></div>
      <ol class="questions">${questions.map((q) => `<li>${escape(q)}</li>`).join("")}</ol>
      <div class="results" data-testid="results"></div>`;
    document.getElementById("runs").prepend(el);
    runs.set(runId, el);
    return el;
  }

  function setStatus(el, status) {
    const badge = el.querySelector(".status");
    badge.className = `status ${status}`;
    badge.textContent = status.replace(/_/g, " ");
    el.dataset.status = status;
  }

  function progress(el, stage, done, total) {
    el.querySelector(".stage").textContent = `${STAGE_TEXT[stage] || stage}${total ? ` · ${done}/${total}` : ""}`;
    el.querySelector(".progress > div").style.width = `${total ? Math.round((100 * done) / total) : 0}%`;
  }

  const isNumber = (v) => typeof v === "number" || (typeof v === "string" && v.trim() !== "" && !isNaN(Number(v)));

  // A bar chart when the result is a simple grouping (a label column and a number column) or a series.
  function chart(columns, rows) {
    if (columns.length !== 2 || rows.length < 2 || rows.length > 40) return "";
    if (!rows.every((r) => isNumber(r[1])) || rows.every((r) => isNumber(r[0]) && !/^\d{4}/.test(String(r[0])))) return "";
    const values = rows.map((r) => Number(r[1]));
    const max = Math.max(...values, 0) || 1;
    const bar = 18, gap = 6, label = 150, width = 560;
    const height = rows.length * (bar + gap) + 24;
    const bars = rows.map((r, i) => {
      const y = i * (bar + gap);
      const w = Math.max(1, ((width - label - 70) * Math.max(values[i], 0)) / max);
      return `<text x="${label - 6}" y="${y + bar - 5}" text-anchor="end">${escape(String(r[0]).slice(0, 24))}</text>
              <rect x="${label}" y="${y}" width="${w.toFixed(1)}" height="${bar}" rx="2"></rect>
              <text x="${(label + w + 4).toFixed(1)}" y="${y + bar - 5}">${escape(values[i].toLocaleString())}</text>`;
    }).join("");
    return `<svg class="chart" data-testid="chart" role="img" aria-label="${escape(columns[1])} by ${escape(columns[0])}"
              width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${bars}
              <text x="${label}" y="${height - 4}">${escape(columns[1])} by ${escape(columns[0])}</text></svg>`;
  }

  function table(columns, rows) {
    if (!columns.length) return "";
    const head = columns.map((c) => `<th>${escape(c)}</th>`).join("");
    const body = rows.map((r) => `<tr>${r.map((v) => `<td class="${isNumber(v) ? "n" : ""}">${escape(v)}</td>`).join("")}</tr>`).join("");
    return `<table class="result" data-testid="table"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
  }

  function renderResults(el, run) {
    const results = run.results || [];
    el.querySelector(".results").innerHTML = results.map((r) => `
      <div class="item result-item" data-testid="result">
        <div class="question">${escape(r.question)} <span class="status ${escape(r.status)}">${escape(r.status.replace(/_/g, " "))}</span></div>
        ${r.answer ? `<p class="answer" data-testid="answer">${escape(r.answer)}</p>` : ""}
        ${r.error && r.status !== "awaiting_approval" ? `<p class="meta">${escape(r.error.code)}: ${escape(r.error.message)}</p>` : ""}
        ${r.sql ? `<pre class="sql" data-testid="sql">${highlight(r.sql)}</pre>` : ""}
        ${r.row_count !== null && r.row_count !== undefined ? `<div class="meta">${r.row_count} row(s)${r.truncated ? " (capped)" : ""}</div>` : ""}
        ${chart(r.columns || [], r.rows_preview || [])}
        ${table(r.columns || [], r.rows_preview || [])}
      </div>`).join("");
    if (run.error) el.querySelector(".results").innerHTML += `<p class="meta">${escape(run.error.code)}: ${escape(run.error.message)}</p>`;
  }

  async function refresh(runId) {
    const response = await api("GET", `/runs/${encodeURIComponent(runId)}`);
    if (!response.ok) return;
    const run = response.data;
    const el = card(run.run_id, run.questions);
    setStatus(el, run.status);
    if (run.status === "finished" || run.status === "failed") {
      progress(el, run.status, run.questions.length, run.questions.length);
      renderResults(el, run);
    } else if (run.status === "awaiting_approval") {
      progress(el, "awaiting_approval", 0, 0);
    }
  }

  function onEvent(type, event) {
    const el = runs.get(event.run_id);
    if (!el) { if (type === "run_progress") refresh(event.run_id); return; }
    if (type === "run_progress") {
      if (el.dataset.status === "queued" || event.stage === "awaiting_approval") setStatus(el, event.stage === "awaiting_approval" ? "awaiting_approval" : "running");
      else if (el.dataset.status === "awaiting_approval") setStatus(el, "running");
      progress(el, event.stage, event.done, event.total);
    } else if (type === "approval_requested") {
      setStatus(el, "awaiting_approval");
      progress(el, "awaiting_approval", 0, 0);
      el.querySelector(".stage").textContent = `waiting for a reviewer · ${event.items.filter((i) => i.category === "needs_approval").length} statement(s) in ${event.batch_id}`;
    } else if (type === "approval_decided") {
      const counts = {};
      event.items.forEach((i) => { counts[i.status] = (counts[i.status] || 0) + 1; });
      setStatus(el, "running");
      el.querySelector(".stage").textContent = `decided by ${event.decided_by}: ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ")}`;
    } else if (type === "approval_expired") {
      el.querySelector(".stage").textContent = `the approval expired (${event.action})`;
    } else if (type === "run_finished") {
      refresh(event.run_id);
    }
  }

  async function ask() {
    const lines = document.getElementById("questions").value.split("\n").map((l) => l.trim()).filter(Boolean);
    const message = document.getElementById("ask-message");
    if (!lines.length) { message.textContent = "Type a question first."; return; }
    const body = lines.length === 1 ? { question: lines[0] } : { questions: lines };
    const response = await api("POST", "/runs", body);
    if (!response.ok) { message.textContent = `Refused: ${response.data.error.message}`; return; }
    message.textContent = `Asked: ${response.data.run_id}`;
    document.getElementById("questions").value = "";
    card(response.data.run_id, response.data.questions);
  }

  signIn(async () => {
    document.getElementById("ask").addEventListener("click", ask);
    follow(onEvent, setLive);
    const listed = await api("GET", "/runs?limit=20");
    if (listed.ok) for (const run of listed.data.reverse()) await refresh(run.run_id);
  });
})();
