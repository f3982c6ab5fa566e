// The analyst page: ask one question or many, follow each run live, read answers, the SQL that ran
// and who approved it, assumptions and warnings, rows (CSV, copy SQL) and a chart; older runs a
// page at a time.
"use strict";

(() => {
  const { api, escape, highlight, follow, signIn, setLive, when, isNumber, formatValue, csv, download, copy } = sqlgate;
  const runs = new Map(); // run_id -> section element
  const PAGE = 10;
  let offset = 0;

  const STAGE_TEXT = { queued: "queued", awaiting_approval: "waiting for a reviewer" };

  // What happened, not where the machinery is: a run whose only question was rejected is
  // "rejected" (red), not a green "finished".
  function outcomeOf(run) {
    if (run.status !== "finished") return run.status;
    const statuses = (run.results || []).map((r) => r.status);
    if (!statuses.length) return "finished";
    if (statuses.every((s) => s === "answered")) return "answered";
    if (statuses.some((s) => s === "answered")) return "partly_answered";
    const distinct = [...new Set(statuses)];
    return distinct.length === 1 ? distinct[0] : "not_answered";
  }

  function card(runId, questions, atBottom) {
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
    const list = document.getElementById("runs");
    if (atBottom) list.append(el); else list.prepend(el);
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

  // A bar chart when the result is a simple grouping (a label column and a number column).
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
              <text x="${(label + w + 4).toFixed(1)}" y="${y + bar - 5}">${escape(formatValue(values[i]))}</text>`;
    }).join("");
    return `<svg class="chart" data-testid="chart" role="img" aria-label="${escape(columns[1])} by ${escape(columns[0])}"
              viewBox="0 0 ${width} ${height}">${bars}
              <text x="${label}" y="${height - 4}">${escape(columns[1])} by ${escape(columns[0])}</text></svg>`;
  }

  function table(columns, rows) {
    if (!columns.length) return "";
    const head = columns.map((c) => `<th>${escape(c)}</th>`).join("");
    const body = rows.map((r) => `<tr>${r.map((v) => `<td class="${isNumber(v) ? "n" : ""}">${escape(formatValue(v))}</td>`).join("")}</tr>`).join("");
    return `<div class="table-wrap"><table class="result" data-testid="table"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
  }

  // Who let the SQL run: "approved by rita", "edited by rita" (with the model's SQL), ...
  function provenance(r) {
    const last = (r.approvals || []).slice(-1)[0]; // the latest cycle decided what ran
    if (!last) return "";
    const by = last.decided_by && last.decided_by !== "sqlgate" ? last.decided_by : null;
    const words = {
      approved: by ? `approved by ${by}` : "approved",
      edited: by ? `edited by ${by}` : "edited by a reviewer",
      auto_approved: "approved automatically by policy",
      rejected: by ? `rejected by ${by}` : "rejected",
      denied: "refused by the validator",
    }[last.status] || last.status;
    const model = last.status === "edited" && last.edited_from
      ? `<details class="model-sql"><summary>the model's SQL before the edit</summary><pre class="sql">${highlight(last.edited_from)}</pre></details>` : "";
    return `<div class="by ${escape(last.status)}" data-testid="sql-by">${escape(words)}${last.decided_at ? ` · ${escape(when(last.decided_at))}` : ""}</div>${model}`;
  }

  function listHtml(kind, title, entries) {
    if (!entries || !entries.length) return "";
    return `<div class="${kind}" data-testid="${kind}"><b>${escape(title)}</b><ul>${entries.map((e) => `<li>${escape(e)}</li>`).join("")}</ul></div>`;
  }

  function resultHtml(r, index) {
    const rows = r.rows_preview || [];
    const shown = rows.length;
    const partial = r.row_count !== null && r.row_count !== undefined && r.row_count > shown;
    const warnings = [...(r.warnings || [])];
    if (r.truncated) warnings.unshift("The result was cut at the row cap: more rows exist than were returned.");
    const clarify = (r.clarification_questions || []).map((q) => `${q.id}: ${q.text}`);
    return `
      <div class="item result-item" data-testid="result" data-index="${index}">
        <div class="question">${escape(r.question)} <span class="status ${escape(r.status)}" data-testid="result-status">${escape(r.status.replace(/_/g, " "))}</span></div>
        ${r.answer ? `<p class="answer" data-testid="answer">${escape(r.answer)}</p>` : ""}
        ${r.error && r.status !== "awaiting_approval" ? `<p class="error-text">${escape(r.error.code)}: ${escape(r.error.message)}</p>` : ""}
        ${listHtml("clarify", "The question is ambiguous; the model asks:", clarify)}
        ${listHtml("assumptions", "Assumptions", r.assumptions)}
        ${listHtml("warnings", "Warnings", warnings)}
        ${r.sql ? `<div class="sql-head"><span class="meta">SQL that ran</span>
            <button type="button" class="quiet small" data-action="copy" data-testid="copy-sql">Copy SQL</button></div>
          <pre class="sql" data-testid="sql">${highlight(r.sql)}</pre>${provenance(r)}` : provenance(r)}
        ${r.row_count !== null && r.row_count !== undefined ? `<div class="meta rows-line">${escape(formatValue(r.row_count))} row(s)${partial ? `, ${shown} shown` : ""}
          ${r.columns && r.columns.length ? `<button type="button" class="quiet small" data-action="csv" data-testid="csv">${partial ? `CSV of the ${shown} rows shown` : "Download CSV"}</button>` : ""}</div>` : ""}
        ${chart(r.columns || [], rows)}
        ${table(r.columns || [], rows)}
      </div>`;
  }

  function renderResults(el, run) {
    const results = run.results || [];
    const box = el.querySelector(".results");
    box.innerHTML = results.map(resultHtml).join("");
    if (run.error) box.innerHTML += `<p class="error-text">${escape(run.error.code)}: ${escape(run.error.message)}</p>`;
    box.querySelectorAll("[data-action]").forEach((button) => button.addEventListener("click", async () => {
      const r = results[Number(button.closest(".result-item").dataset.index)];
      if (button.dataset.action === "csv") {
        download(`${run.run_id}-q${Number(button.closest(".result-item").dataset.index) + 1}.csv`, csv(r.columns, r.rows_preview || []), "text/csv");
      } else {
        button.textContent = (await copy(r.sql)) ? "Copied" : "Copy failed";
        setTimeout(() => { button.textContent = "Copy SQL"; }, 1500);
      }
    }));
  }

  function show(run, atBottom) {
    const el = card(run.run_id, run.questions, atBottom);
    el.querySelector(".meta").textContent = `${run.run_id} · ${when(run.created_at)}`;
    if (run.status === "finished" || run.status === "failed") {
      setStatus(el, outcomeOf(run));
      progress(el, run.status, run.questions.length, run.questions.length);
      renderResults(el, run);
    } else {
      setStatus(el, run.status);
      if (run.status === "awaiting_approval") progress(el, "awaiting_approval", 0, 0);
    }
  }

  async function refresh(runId) {
    const response = await api("GET", `/runs/${encodeURIComponent(runId)}`);
    if (response.ok) show(response.data, false);
  }

  async function older() {
    const listed = await api("GET", `/runs?limit=${PAGE + 1}&offset=${offset}`);
    if (!listed.ok) return;
    const page = listed.data.slice(0, PAGE);
    for (const run of page) show(run, true);
    offset += page.length;
    document.getElementById("older").hidden = listed.data.length <= PAGE;
  }

  function onEvent(type, event) {
    const el = runs.get(event.run_id);
    if (!el) { if (type === "run_progress" && event.stage === "queued") refresh(event.run_id); return; }
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
    if (!response.ok) {
      message.textContent = `Refused: ${response.data && response.data.error ? response.data.error.message : `HTTP ${response.status}`}`;
      return;
    }
    message.textContent = `Asked: ${response.data.run_id}`;
    document.getElementById("questions").value = "";
    card(response.data.run_id, response.data.questions, false);
    offset += 1;
  }

  document.getElementById("ask").addEventListener("click", ask);
  document.getElementById("older").addEventListener("click", older);

  signIn(async () => {
    follow(onEvent, setLive);
    await older();
  });
})();
