// The analyst page: ask one question or many, follow each run live, read answers, the SQL that ran
// and who approved it, assumptions and warnings, rows (CSV, copy SQL) and the chart the server
// chose for the result's shape; answer an ambiguous question's clarifying questions (a follow-up
// run, linked to the one that asked); search the history, a page at a time.
"use strict";

(() => {
  const { api, escape, visible, highlight, follow, signIn, setLive, when, isNumber, formatValue, csvRows, download, copy } = sqlgate;
  const runs = new Map(); // run_id -> section element
  const PAGE = 10;
  const ROWS_PAGE = 2000; // rows per GET /runs/{id}/rows request when a CSV is built
  let offset = 0;
  let search = ""; // the history search in force ("" = every run)

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
    if (!atBottom) el.dataset.status = "queued";  // a new run: what it becomes is announced
    el.innerHTML = `
      <h3>Run <span class="meta">${escape(runId)}</span> <span class="status" data-testid="run-status">queued</span></h3>
      <div class="meta link" data-testid="follow-up-of" hidden></div>
      <div class="meta stage" data-testid="stage"></div>
      <div class="progress"><div></div></div>
      <ol class="questions">${questions.map((q) => `<li>${escape(q)}</li>`).join("")}</ol>
      <div class="results" data-testid="results"></div>`;
    const list = document.getElementById("runs");
    if (atBottom) list.append(el); else list.prepend(el);
    runs.set(runId, el);
    return el;
  }

  // A polite announcement for screen readers when a run on the page moves on (not when the
  // page first lists it).
  function announce(el, status) {
    const box = document.getElementById("announcer");
    const first = el.querySelector(".questions li");
    const text = `${first ? first.textContent : el.dataset.runId}: ${status.replace(/_/g, " ")}`;
    box.textContent = "";
    setTimeout(() => { box.textContent = visible(text); }, 50);
  }

  function setStatus(el, status) {
    if (el.dataset.status && el.dataset.status !== status) announce(el, status);
    const badge = el.querySelector(".status");
    badge.className = `status ${status}`;
    badge.textContent = status.replace(/_/g, " ");
    el.dataset.status = status;
  }

  function progress(el, stage, done, total) {
    el.querySelector(".stage").textContent = `${STAGE_TEXT[stage] || stage}${total ? ` · ${done}/${total}` : ""}`;
    el.querySelector(".progress > div").style.width = `${total ? Math.round((100 * done) / total) : 0}%`;
  }

  // The drawing is as wide as the screen allows (at most 560 px), so its 11 px text is drawn at
  // 11 px on a phone too instead of being scaled down with a wider drawing.
  const chartWidth = () => Math.round(Math.min(560, Math.max(300, window.innerWidth - 48)));

  // The chart the server chose for the result's shape (orchestrator/features/chart.py): bars for a label and
  // a number, a line for a time series, none (with the reason) when a chart would mislead.
  function chart(choice, columns, rows) {
    if (!choice || !columns.length) return "";
    if (choice.kind === "none") return `<div class="meta chart-none" data-testid="chart-none">${escape(choice.reason)}</div>`;
    const labels = rows.map((r) => String(r[choice.x]));
    const values = rows.map((r) => Number(r[choice.y]));
    const title = escape(choice.reason);
    if (choice.kind === "line") return lineChart(labels, values, title);
    const max = Math.max(...values, 0) || 1;
    const bar = 18, gap = 6, label = 150, width = chartWidth();
    const height = rows.length * (bar + gap) + 24;
    const bars = rows.map((r, i) => {
      const y = i * (bar + gap);
      const w = Math.max(1, ((width - label - 70) * Math.max(values[i], 0)) / max);
      return `<text x="${label - 6}" y="${y + bar - 5}" text-anchor="end">${escape(labels[i].slice(0, 24))}</text>
              <rect x="${label}" y="${y}" width="${w.toFixed(1)}" height="${bar}" rx="2"></rect>
              <text x="${(label + w + 4).toFixed(1)}" y="${y + bar - 5}">${escape(formatValue(values[i]))}</text>`;
    }).join("");
    return `<svg class="chart" data-testid="chart" data-kind="bar" role="img" aria-label="${title}"
              viewBox="0 0 ${width} ${height}">${bars}
              <text x="${label}" y="${height - 4}">${title}</text></svg>`;
  }

  // A line through the points in time order, the lowest and highest value marked on the axis.
  function lineChart(labels, values, title) {
    const order = labels.map((_, i) => i).sort((a, b) => (labels[a] < labels[b] ? -1 : labels[a] > labels[b] ? 1 : 0));
    const width = chartWidth(), height = 220, left = 56, right = 12, top = 12, bottom = 44;
    const lo = Math.min(...values, 0), hi = Math.max(...values) || 1;
    const px = (k) => left + (order.length > 1 ? (k * (width - left - right)) / (order.length - 1) : 0);
    const py = (v) => top + (height - top - bottom) * (1 - (v - lo) / (hi - lo || 1));
    const points = order.map((i, k) => `${px(k).toFixed(1)},${py(values[i]).toFixed(1)}`).join(" ");
    const dots = order.map((i, k) => `<circle cx="${px(k).toFixed(1)}" cy="${py(values[i]).toFixed(1)}" r="3"><title>${escape(labels[i])}: ${escape(formatValue(values[i]))}</title></circle>`).join("");
    const first = labels[order[0]], last = labels[order[order.length - 1]];
    return `<svg class="chart line" data-testid="chart" data-kind="line" role="img" aria-label="${title}" viewBox="0 0 ${width} ${height}">
      <line x1="${left}" y1="${height - bottom}" x2="${width - right}" y2="${height - bottom}" class="axis"></line>
      <text x="${left - 6}" y="${py(hi) + 4}" text-anchor="end">${escape(formatValue(hi))}</text>
      <text x="${left - 6}" y="${py(lo) + 4}" text-anchor="end">${escape(formatValue(lo))}</text>
      <polyline points="${points}"></polyline>${dots}
      <text x="${left}" y="${height - bottom + 16}">${escape(first)}</text>
      <text x="${width - right}" y="${height - bottom + 16}" text-anchor="end">${escape(last)}</text>
      <text x="${left}" y="${height - 6}">${title}</text></svg>`;
  }

  // Identifiers, codes and years are labels, not quantities: never "1,024" for an order id.
  const LABEL_COLUMN = /(^|_)(id|ids|code|no|number|zip|postcode|phone|year|key)$/i;
  const cellText = (v, column) => (LABEL_COLUMN.test(column) && v !== null && v !== undefined ? String(v) : formatValue(v));

  function table(columns, rows) {
    if (!columns.length) return "";
    const head = columns.map((c) => `<th>${escape(c)}</th>`).join("");
    const body = rows.map((r) => `<tr>${r.map((v, i) => `<td class="${isNumber(v) ? "n" : ""}">${escape(cellText(v, columns[i]))}</td>`).join("")}</tr>`).join("");
    return `<div class="table-wrap"><table class="result" data-testid="table"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
  }

  // "SQL that ran" only when it ran (rows came back, or the database refused it while running).
  function sqlLabel(r) {
    if ((r.row_count !== null && r.row_count !== undefined) || ["execution_failed", "timed_out", "execution_in_doubt"].includes(r.status)) {
      return "SQL that ran";
    }
    if (r.status === "awaiting_approval") return "SQL waiting for approval";
    return "SQL (not run)";
  }

  // Who let the SQL run: "approved by rita", "edited by rita" (with the model's SQL), ...
  function provenance(r) {
    const last = (r.approvals || []).slice(-1)[0]; // the latest cycle decided what ran
    if (!last) return "";
    const voters = (last.approvers || []).filter((a) => a && a !== "sqlgate");
    const by = voters.length > 1 ? voters.join(" and ")
      : last.decided_by && last.decided_by !== "sqlgate" ? last.decided_by : null;
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

  // An ambiguous question: each clarifying question with its id and a box for the answer; the
  // answers start a follow-up run. Once answered, a link to the follow-up instead.
  function clarifyHtml(run, r, index) {
    const asked = r.clarification_questions || [];
    if (r.status !== "needs_clarification" || !asked.length) return "";
    const followUps = run.follow_ups || [];
    if (followUps.length) {
      return `<div class="clarify" data-testid="clarified"><b>Answered in a follow-up:</b> ${followUps.map((id) =>
        `<a href="#${escape(id)}" data-goto="${escape(id)}">${escape(id)}</a>`).join(", ")}</div>`;
    }
    return `<form class="clarify" data-testid="clarify" data-index="${index}">
        <b>The question is ambiguous; answer what you can and ask again:</b>
        ${asked.map((q) => `<label class="clarify-q"><span><code>${escape(q.id)}</code> ${escape(q.text)}</span>
          <input type="text" maxlength="500" data-qid="${escape(q.id)}" data-testid="clarify-answer" aria-label="${escape(q.text)}"></label>`).join("")}
        <p><button type="submit" data-testid="clarify-submit" data-needs-token>Ask again with these answers</button>
          <span class="meta" data-testid="clarify-message"></span></p>
      </form>`;
  }

  // A cut result is never presented as whole: a banner above the table, apart from the warnings.
  function truncatedHtml(r) {
    if (!r.truncated) return "";
    const kept = formatValue(r.row_count);
    return `<div class="truncated" data-testid="truncated" role="alert"><b>Not the whole result.</b>
      Showing ${escape(kept)} rows: the result was cut at the row cap; more rows exist.
      The answer and the CSV cover only these ${escape(kept)} rows.</div>`;
  }

  // The full kept result of one question, every page of GET /runs/{id}/rows, as CSV text parts;
  // the progress and any failure are written to `status`.
  async function fetchCsv(runId, questionId, status) {
    const base = `/runs/${encodeURIComponent(runId)}/rows?question=${encodeURIComponent(questionId)}&limit=${ROWS_PAGE}`;
    const parts = [];
    let offset = 0, total = null;
    while (offset !== null) {
      const page = await api("GET", `${base}&offset=${offset}`);
      if (!page.ok) {
        const why = page.data && page.data.error ? page.data.error.message : `HTTP ${page.status}`;
        throw new Error(why);
      }
      const body = page.data;
      if (!parts.length) parts.push(csvRows([body.columns]));
      parts.push(csvRows(body.rows));
      total = body.row_count;
      const got = offset + body.rows.length;
      status.textContent = `Fetching rows… ${formatValue(got)} of ${formatValue(total)}`;
      if (body.next_offset !== null && body.next_offset <= offset) throw new Error("the server's pages did not advance");
      offset = body.next_offset;
    }
    return { parts, total };
  }

  async function downloadCsv(run, index, button) {
    const item = button.closest(".result-item");
    const status = item.querySelector("[data-testid=csv-progress]");
    const questionId = `q${index + 1}`;
    button.disabled = true;
    status.className = "csv-progress";
    status.textContent = "Fetching rows…";
    try {
      const { parts, total } = await fetchCsv(run.run_id, questionId, status);
      download(`${run.run_id}-${questionId}.csv`, parts, "text/csv");
      status.textContent = `Downloaded ${formatValue(total)} row(s)${run.results[index].truncated ? " (the result was cut at the row cap)" : ""}.`;
    } catch (e) {
      status.className = "csv-progress error-text";
      status.textContent = `CSV download failed: ${e.message}. Nothing was saved; try again.`;
    } finally {
      button.disabled = false;
    }
  }

  function resultHtml(run, r, index) {
    const rows = r.rows_preview || [];
    const shown = rows.length;
    const partial = r.row_count !== null && r.row_count !== undefined && r.row_count > shown;
    const warnings = r.warnings || [];
    return `
      <div class="item result-item" data-testid="result" data-index="${index}">
        <div class="question">${escape(r.question)} <span class="status ${escape(r.status)}" data-testid="result-status">${escape(r.status.replace(/_/g, " "))}</span></div>
        ${r.answer ? `<p class="answer" data-testid="answer">${escape(r.answer)}</p>` : ""}
        ${r.error && r.status !== "awaiting_approval" ? `<p class="error-text">${escape(r.error.code)}: ${escape(r.error.message)}</p>` : ""}
        ${clarifyHtml(run, r, index)}
        ${listHtml("assumptions", "Assumptions", r.assumptions)}
        ${listHtml("warnings", "Warnings", warnings)}
        ${r.sql ? `<div class="sql-head"><span class="meta" data-testid="sql-label">${escape(sqlLabel(r))}</span>
            <button type="button" class="quiet small" data-action="copy" data-testid="copy-sql">Copy SQL</button></div>
          <pre class="sql" data-testid="sql">${highlight(r.sql)}</pre>${provenance(r)}` : provenance(r)}
        ${truncatedHtml(r)}
        ${r.row_count !== null && r.row_count !== undefined ? `<div class="meta rows-line">${escape(formatValue(r.row_count))} row(s)${partial ? `, ${shown} shown below` : ""}
          ${r.columns && r.columns.length ? `<button type="button" class="quiet small" data-action="csv" data-testid="csv"
            title="Every kept row, not only the rows shown">Download CSV</button>
            <span class="csv-progress" data-testid="csv-progress" role="status"></span>` : ""}</div>` : ""}
        ${chart(r.chart, r.columns || [], rows)}
        ${table(r.columns || [], rows)}
      </div>`;
  }

  function renderResults(el, run) {
    const results = run.results || [];
    const box = el.querySelector(".results");
    box.innerHTML = results.map((r, i) => resultHtml(run, r, i)).join("");
    if (run.error) box.innerHTML += `<p class="error-text">${escape(run.error.code)}: ${escape(run.error.message)}</p>`;
    box.querySelectorAll("form.clarify").forEach((form) => form.addEventListener("submit", (e) => {
      e.preventDefault();
      answer(run, form);
    }));
    box.querySelectorAll("[data-goto]").forEach((link) => link.addEventListener("click", (e) => {
      e.preventDefault();
      goTo(link.dataset.goto);
    }));
    box.querySelectorAll("[data-action]").forEach((button) => button.addEventListener("click", async () => {
      const index = Number(button.closest(".result-item").dataset.index);
      const r = results[index];
      if (button.dataset.action === "csv") {
        await downloadCsv(run, index, button);
      } else {
        button.textContent = (await copy(r.sql)) ? "Copied" : "Copy failed";
        setTimeout(() => { button.textContent = "Copy SQL"; }, 1500);
      }
    }));
  }

  function show(run, atBottom) {
    const el = card(run.run_id, run.questions, atBottom);
    const ended = run.status === "finished" || run.status === "failed";
    // Responses can arrive out of order (an event's refresh overtakes an earlier one): a run
    // shown as ended never goes back to an earlier state.
    if (!ended && el.dataset.ended === "true") return;
    el.querySelector(".meta").textContent = `${run.run_id} · ${when(run.created_at)}`;
    if (run.follow_up_of) linkParent(el, run.follow_up_of);
    if (ended) {
      el.dataset.ended = "true";
      setStatus(el, outcomeOf(run));
      progress(el, run.status, run.questions.length, run.questions.length);
      renderResults(el, run);
    } else {
      setStatus(el, run.status);
      if (run.status === "awaiting_approval") progress(el, "awaiting_approval", 0, 0);
    }
  }

  async function refresh(runId, atBottom = false) {
    const response = await api("GET", `/runs/${encodeURIComponent(runId)}`);
    if (response.ok) show(response.data, atBottom);
  }

  async function older() {
    const q = search ? `&q=${encodeURIComponent(search)}` : "";
    const listed = await api("GET", `/runs?limit=${PAGE + 1}&offset=${offset}${q}`);
    if (!listed.ok) return;
    const page = listed.data.slice(0, PAGE);
    for (const run of page) show(run, true);
    offset += page.length;
    document.getElementById("older").hidden = listed.data.length <= PAGE;
    const note = document.getElementById("search-message");
    note.textContent = search ? (offset ? `${offset}${listed.data.length > PAGE ? "+" : ""} run(s) match “${search}”` : `No run matches “${search}”.`) : "";
  }

  // The history search: the list starts over with the runs whose question or id contains it.
  async function find() {
    search = document.getElementById("search").value.trim();
    runs.clear();
    document.getElementById("runs").innerHTML = "";
    offset = 0;
    await older();
  }

  function linkParent(el, parentId) {
    const line = el.querySelector("[data-testid=follow-up-of]");
    line.hidden = false;
    line.innerHTML = `follow-up of <a href="#${escape(parentId)}">${escape(parentId)}</a>: the answers to its clarifying questions`;
    line.querySelector("a").addEventListener("click", (e) => { e.preventDefault(); goTo(parentId); });
  }

  async function goTo(runId) {
    if (!runs.has(runId)) await refresh(runId, true);
    const el = runs.get(runId);
    if (el) { el.scrollIntoView({ behavior: "smooth", block: "start" }); el.classList.add("flash"); setTimeout(() => el.classList.remove("flash"), 1500); }
  }

  // The analyst's answers to a question's clarifying questions: POST /runs/{id}/clarify starts a
  // follow-up run (the original question plus the answers), shown at the top and followed live.
  async function answer(run, form) {
    const answers = {};
    form.querySelectorAll("[data-qid]").forEach((input) => { if (input.value.trim()) answers[input.dataset.qid] = input.value.trim(); });
    const message = form.querySelector("[data-testid=clarify-message]");
    if (!Object.keys(answers).length) { message.textContent = "Answer at least one question first."; return; }
    const body = { answers, question_id: `q${Number(form.dataset.index) + 1}` };
    const response = await api("POST", `/runs/${encodeURIComponent(run.run_id)}/clarify`, body);
    if (!response.ok) {
      message.textContent = visible(`Refused: ${response.data && response.data.error ? response.data.error.message : `HTTP ${response.status}`}`);
      return;
    }
    const follow = response.data;
    const el = card(follow.run_id, follow.questions, false);
    linkParent(el, run.run_id);
    offset += 1;
    run.follow_ups = [...(run.follow_ups || []), follow.run_id];
    renderResults(runs.get(run.run_id), run);
  }

  function onEvent(type, event) {
    const el = runs.get(event.run_id);
    if (!el) { if (type === "run_progress" && event.stage === "queued" && !search) refresh(event.run_id); return; }
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
      message.textContent = visible(`Refused: ${response.data && response.data.error ? response.data.error.message : `HTTP ${response.status}`}`);
      return;
    }
    message.textContent = `Asked: ${response.data.run_id}`;
    document.getElementById("questions").value = "";
    card(response.data.run_id, response.data.questions, false);
    offset += 1;
  }

  document.getElementById("ask").addEventListener("click", ask);
  document.getElementById("older").addEventListener("click", older);
  document.getElementById("search-form").addEventListener("submit", (e) => { e.preventDefault(); find(); });

  signIn(async () => {
    follow(onEvent, setLive);
    await older();
  });
})();
