// The reviewer's inbox: a compact, sortable, filterable list of pending batches beside the
// selected batch; an explicit decision per statement (nothing is pre-selected), edits checked by
// the server as they are typed, keyboard shortcuts for all of it, decided batches in a history
// with their audit trail. New batches and status changes are announced in a live region.
"use strict";

(() => {
  const { api, escape, visible, highlight, follow, signIn, setLive, ago, countdown, when } = sqlgate;
  const cards = new Map(); // batch_id -> section element
  const records = new Map(); // batch_id -> the batch as last loaded
  const PAGE = 10;
  const RISK_ORDER = { low: 1, medium: 2, high: 3 };
  let me = null;
  let historyOffset = 0;
  let selected = null; // the batch shown in the detail pane
  let selectedIndex = 0; // its row's position, kept when the row leaves the list
  let sortKey = "age", sortDir = 1;

  const container = () => document.getElementById("batches");
  const PAGE_OF_BATCHES = 200;
  const isOpen = (id) => cards.has(id) && !cards.get(id).classList.contains("closed");

  // A polite announcement for screen readers (new batches, decisions, expiries).
  function announce(text) {
    const box = document.getElementById("announcer");
    box.textContent = "";
    setTimeout(() => { box.textContent = visible(text); }, 50);
  }

  // -- the inbox count: in the page and in the tab's title ------------------------------------
  function updateCount() {
    const open = [...cards.keys()].filter(isOpen).length;
    document.getElementById("pending-count").textContent = String(open);
    document.title = `${open ? `(${open}) ` : ""}sqlgate · reviewer`;
    document.getElementById("no-batches").hidden = open > 0;
    renderInbox();
  }

  // -- the list: one row per pending batch --------------------------------------------------
  function highestRisk(record) {
    const levels = record.batch.items.filter((i) => record.pending_ids.includes(i.call_id) && i.risk).map((i) => i.risk.level);
    return levels.sort((a, b) => RISK_ORDER[b] - RISK_ORDER[a])[0] || "";
  }

  function rowFacts(record) {
    const batch = record.batch;
    const first = batch.items.find((i) => record.pending_ids.includes(i.call_id)) || batch.items[0];
    return {
      question: first ? first.question : "",
      asker: record.asked_by || "?",
      age: record.asked_at || batch.created_at,
      deadline: batch.deadline || "",
      statements: record.pending_ids.length,
      risk: highestRisk(record),
    };
  }

  function sortedOpen() {
    const rows = [...records.values()].filter((r) => isOpen(r.batch.batch_id)).map((r) => [r, rowFacts(r)]);
    const value = (facts) => {
      if (sortKey === "risk") return RISK_ORDER[facts.risk] || 0;
      if (sortKey === "statements") return facts.statements;
      if (sortKey === "age") return facts.age;
      if (sortKey === "deadline") return facts.deadline || "9999";
      return String(facts[sortKey]).toLowerCase();
    };
    rows.sort((a, b) => (value(a[1]) < value(b[1]) ? -sortDir : value(a[1]) > value(b[1]) ? sortDir : 0));
    const needle = document.getElementById("inbox-filter").value.trim().toLowerCase();
    return rows.filter(([record, facts]) => !needle || [facts.asker, facts.risk, batchText(record)].join(" ").toLowerCase().includes(needle));
  }

  const batchText = (record) => record.batch.items.map((i) => i.question).join(" ");

  function renderInbox() {
    const body = document.getElementById("inbox-rows");
    const rows = sortedOpen();
    body.innerHTML = rows.map(([record, f]) => {
      const id = record.batch.batch_id;
      const more = f.statements > 1 ? ` (+${f.statements - 1})` : "";
      return `<tr data-batch-id="${escape(id)}" data-testid="inbox-row" aria-selected="${id === selected}" class="${id === selected ? "selected" : ""}">
        <td class="q"><button type="button" class="row-link">${escape(f.question)}${escape(more)}</button></td>
        <td>${escape(f.asker)}</td>
        <td title="${escape(when(f.age))}">${escape(ago(f.age))}</td>
        <td>${f.deadline ? escape(countdown(f.deadline)) : "—"}</td>
        <td class="n">${escape(f.statements)}</td>
        <td>${f.risk ? `<span class="risk-badge risk-${escape(f.risk)}" data-testid="row-risk">${escape(f.risk)}</span>` : "—"}</td>
      </tr>`;
    }).join("");
    body.querySelectorAll("tr").forEach((tr) => tr.querySelector(".row-link").addEventListener("click", () => select(tr.dataset.batchId)));
    document.querySelectorAll(".inbox-list th").forEach((th) => {
      const key = th.querySelector("button").dataset.sort;
      th.setAttribute("aria-sort", key === sortKey ? (sortDir > 0 ? "ascending" : "descending") : "none");
    });
  }

  // Show one batch in the detail pane; the others wait in the list.
  function select(batchId, focus = false) {
    if (!cards.has(batchId)) return;
    selected = batchId;
    const open = sortedOpen().map(([r]) => r.batch.batch_id);
    if (open.includes(batchId)) selectedIndex = open.indexOf(batchId);
    cards.forEach((card, id) => { card.hidden = id !== batchId; });
    const card = cards.get(batchId);
    if (!card.dataset.memoryLoaded) { card.dataset.memoryLoaded = "1"; loadMemory(card, batchId); }
    if (!card.querySelector(".item.current")) setCurrent(card, firstUndecided(card));
    renderInbox();
    if (focus) card.querySelector(".batch-title").focus();
  }

  // j / k: the next or previous pending batch (from where the decided one was, once it left).
  function move(delta) {
    const open = sortedOpen().map(([r]) => r.batch.batch_id);
    if (!open.length) return;
    const at = open.indexOf(selected);
    let target;
    if (at >= 0) target = Math.min(open.length - 1, Math.max(0, at + delta));
    else target = delta > 0 ? Math.min(selectedIndex, open.length - 1) : Math.max(0, Math.min(selectedIndex, open.length) - 1);
    select(open[target], true);
  }

  function findingsHtml(findings) {
    if (!findings || !findings.length) return `<div class="meta">no findings</div>`;
    return `<ul class="findings">${findings.map((f) =>
      `<li class="sev-${escape(f.severity)}"><b>${escape(f.code)}</b> (${escape(f.severity)}): ${escape(f.message)}</li>`).join("")}</ul>`;
  }

  // The risk taken before review: level and reasons, the planner's estimate, what it reads.
  function riskHtml(risk, testid = "risk") {
    if (!risk) return "";
    const cut = risk.row_cap_cuts === true ? "will cut" : risk.row_cap_cuts === false ? "will not cut" : "may cut";
    const facts = [
      risk.estimate_error ? `no estimate (${escape(risk.estimate_error)})`
        : `estimate (${escape(risk.engine || "?")}): ${escape(risk.estimate || "-")}`,
      `rows expected: ${risk.rows_expected === null || risk.rows_expected === undefined ? "unknown" : "~" + escape(risk.rows_expected)}`,
      risk.row_cap ? `row cap ${escape(risk.row_cap)} ${cut}` : "",
      risk.tables && risk.tables.length ? `reads ${escape(risk.tables.join(", "))}` : "",
      risk.sensitive_columns && risk.sensitive_columns.length ? `<b>sensitive: ${escape(risk.sensitive_columns.join(", "))}</b>` : "",
    ].filter(Boolean);
    return `<div class="risk risk-${escape(risk.level)}" data-testid="${testid}">
        <span class="risk-level" data-testid="risk-level">${escape(risk.level)} risk</span>${risk.reasons.length ? ": " + escape(risk.reasons.join("; ")) : ""}
        <div class="meta" data-testid="risk-estimate">${facts.join(" · ")}</div>
      </div>`;
  }

  function diffHtml(lines) {
    return lines.map((l) => {
      const kind = l.op === "+" ? "add" : l.op === "-" ? "del" : "same";
      return `<span class="${kind}">${escape(l.op)} ${escape(l.text)}</span>`;
    }).join(""); // each line is a block: no newline between them
  }

  // A correction cycle: what failed in the previous cycle, and what the model changed since.
  function correctionHtml(correction) {
    if (!correction) return "";
    return `<div class="correction" data-testid="correction">
        <b>Correction.</b> The SQL of cycle ${escape(correction.previous_cycle)} failed${correction.error ? `: <span class="error-text">${escape(correction.error)}</span>` : ""}.
        Changes the model made since:
        <pre class="diff" data-testid="correction-diff">${diffHtml(correction.diff)}</pre>
      </div>`;
  }

  function assumptionsHtml(assumptions) {
    if (!assumptions || !assumptions.length) return "";
    return `<div class="assumptions" data-testid="assumptions"><b>The model assumed:</b><ul>${
      assumptions.map((a) => `<li>${escape(a)}</li>`).join("")}</ul></div>`;
  }

  function itemHtml(item, category, note, correction, assumptions, index) {
    const decidable = category === "needs_approval";
    const name = `d-${item.call_id}`;
    const label = `statement ${index + 1}`;
    return `
      <div class="item" data-call-id="${escape(item.call_id)}" data-testid="item" tabindex="-1" aria-label="${escape(label)}">
        <div class="question">${escape(item.question)}</div>
        <div class="meta">${escape(category.replace(/_/g, " "))}${note ? " · " + escape(note) : ""}</div>
        ${correctionHtml(correction)}
        ${item.edited_by ? `<div class="meta" data-testid="edited-by">edited by ${escape(item.edited_by)}: this SQL replaced the one first shown, and its risk is its own</div>` : ""}
        <pre class="sql" data-testid="item-sql">${highlight(item.sql_pretty || item.sql)}</pre>
        ${riskHtml(item.risk)}
        ${assumptionsHtml(assumptions)}
        <div class="memory" data-testid="memory" hidden></div>
        ${findingsHtml(item.findings)}
        ${decidable ? `
        <fieldset class="choices" data-testid="choices">
          <legend class="meta">Your decision</legend>
          <label><input type="radio" name="${name}" value="approve" data-testid="approve"> approve</label>
          <label><input type="radio" name="${name}" value="reject" data-testid="reject"> reject</label>
          <label><input type="radio" name="${name}" value="edit" data-testid="edit"> edit</label>
        </fieldset>
        <textarea class="reason" rows="2" placeholder="why it must not run (the analyst sees this)" hidden data-testid="reason" aria-label="reason for rejecting ${escape(label)}"></textarea>
        <div class="edit-box" hidden>
          <textarea class="edit-sql" rows="8" spellcheck="false" data-testid="edit-sql" aria-label="edited SQL of ${escape(label)}">${escape(item.sql_pretty || item.sql)}</textarea>
          <div class="verdict meta" data-testid="verdict" role="status"></div>
          <div class="edit-risk"></div>
          <pre class="diff" data-testid="diff" hidden></pre>
        </div>` : ""}
      </div>`;
  }

  // -- memory: what earlier reviews say about each statement -----------------------------------
  function pastHtml(e, applicable) {
    const apply = applicable && e.sql
      ? ` <button type="button" class="quiet small use-edit" data-testid="use-edit" data-sql="${escape(e.sql)}">Propose this SQL as my edit</button>` : "";
    const where = e.batch_id
      ? ` in <a href="#" class="memory-link" data-batch-id="${escape(e.batch_id)}" data-testid="memory-link">${escape(e.batch_id)}</a>`
      : "";
    return `<li><span class="status ${escape(e.status)}">${escape(e.status)}</span> ${escape(e.question)}
      <span class="meta">by ${escape(e.reviewers.join(", ") || "?")} ${escape(when(e.at))}${where}${e.reason ? ` — ${escape(e.reason)}` : ""}</span>
      <details><summary class="meta">SQL</summary><pre class="sql">${highlight(e.sql)}</pre></details>${apply}</li>`;
  }

  function memoryHtml(m, applicable) {
    const past = (e) => pastHtml(e, applicable && e.status !== "rejected" && e.offerable === true);
    const parts = [];
    const n = m.similar.length;
    if (n) {
      parts.push(`<details data-testid="memory-similar"><summary><b>${n} similar question${n === 1 ? " was" : "s were"} approved before</b></summary>
        <ul>${m.similar.map(past).join("")}</ul></details>`);
    }
    const approved = m.template_approvals.length, rejected = m.template_rejections.length;
    if (approved || rejected) {
      parts.push(`<details data-testid="memory-template"><summary>This statement's template (${escape(m.template_id.slice(0, 10))}) was approved ${approved} time(s)${rejected ? `, rejected ${rejected} time(s)` : ""}</summary>
        <ul>${m.template_approvals.concat(m.template_rejections).map(past).join("")}</ul></details>`);
    }
    if (m.notes.length) {
      parts.push(`<div data-testid="memory-notes"><b>Business notes given to the model for this question:</b><ul>${
        m.notes.map((note) => `<li>${escape(note.text)}${note.tables.length ? ` <span class="meta">(tables: ${escape(note.tables.join(", "))}; by ${escape(note.author)})</span>` : ` <span class="meta">(by ${escape(note.author)})</span>`}</li>`).join("")}</ul></div>`);
    }
    return parts.join("");
  }

  async function loadMemory(card, batchId) {
    const response = await api("GET", `/approvals/${encodeURIComponent(batchId)}/memory`);
    if (!response.ok || !response.data.enabled) return;
    card.querySelectorAll(".item").forEach((el) => {
      const m = response.data.items[el.dataset.callId];
      const box = el.querySelector(".memory");
      if (!m || !box) return;
      const record = records.get(batchId);
      box.innerHTML = memoryHtml(m, Boolean(el.querySelector(".edit-sql")));
      box.hidden = !box.innerHTML;
      box.querySelectorAll(".use-edit").forEach((button) => {
        button.addEventListener("click", () => proposeEdit(card, record, el, button.dataset.sql));
      });
      box.querySelectorAll(".memory-link").forEach((a) => a.addEventListener("click", (event) => {
        event.preventDefault();
        showPast(a);
      }));
    });
  }

  // A link to the batch an example was reviewed in: that batch, as the history shows it, inline.
  async function showPast(link) {
    const shown = link.parentElement.querySelector(".past");
    if (shown) { shown.remove(); return; }
    const response = await api("GET", `/approvals/${encodeURIComponent(link.dataset.batchId)}`);
    if (!response.ok) return;
    link.parentElement.insertAdjacentHTML("beforeend", historyHtml(response.data));
    link.parentElement.querySelector(".past").open = true;
  }

  // -- a pending batch ------------------------------------------------------------------------
  function headerOf(card, record) {
    const batch = record.batch;
    card.querySelector(".asked").textContent = visible(
      `asked by ${record.asked_by || "?"} ${record.asked_at ? `${ago(record.asked_at)} (${when(record.asked_at)})` : ""} · run ${batch.run_id} · cycle ${batch.cycle}` +
      (record.runs_as ? ` · runs as ${record.runs_as}` : ""));
    const deadline = card.querySelector(".deadline");
    if (batch.deadline) { deadline.dataset.at = batch.deadline; deadline.textContent = countdown(batch.deadline); }
    else { deadline.textContent = "no deadline"; deadline.classList.add("none"); }
    const voters = record.voters || [];
    card.querySelector(".quorum").textContent =
      `votes ${voters.length} of ${batch.quorum}${voters.length ? ` (${voters.join(", ")})` : ""}`;
  }

  function render(record) {
    const batch = record.batch;
    records.set(batch.batch_id, record);
    if (cards.has(batch.batch_id)) { refreshNotes(cards.get(batch.batch_id), record); return; }
    const card = document.getElementById("batch-template").content.firstElementChild.cloneNode(true);
    card.dataset.batchId = batch.batch_id;
    card.dataset.testid = "batch";
    card.hidden = true;
    const title = card.querySelector(".batch-title");
    title.textContent = visible(batch.items.length === 1 ? batch.items[0].question : `${batch.items.length} statements: ${batch.items[0].question} …`);
    title.tabIndex = -1;
    card.querySelector(".batch-id").textContent = batch.batch_id;
    headerOf(card, record);
    card.querySelector(".items").innerHTML =
      batch.items.map((item, n) => itemHtml(item, batch.categories[item.call_id], (batch.notes || {})[item.call_id],
        (record.corrections || {})[item.call_id], (record.assumptions || {})[item.call_id], n)).join("");
    card.querySelectorAll(".item").forEach((el) => wireItem(card, record, el));
    card.querySelector("[data-testid=approve-all]").addEventListener("click", () => chooseAll(card, record, "approve"));
    card.querySelector("[data-testid=reject-all]").addEventListener("click", () => chooseAll(card, record, "reject"));
    card.querySelector(".submit").addEventListener("click", () => submit(card, record));
    cards.set(batch.batch_id, card);
    container().appendChild(card);  // memory is read when the batch is first shown (select)
    if (me && me.actor && (record.voters || []).includes(me.actor)) {
      close(card, "ok", `You voted on this batch; it waits for ${batch.quorum - record.voters.length} more reviewer(s).`);
    }
    refreshSubmit(card, record);
    if (selected === null || !cards.has(selected)) select(batch.batch_id);
    updateCount();
  }

  // A batch loaded again (the run moved on): the correction's error and the model's assumptions
  // may have arrived since it was first shown.
  function refreshNotes(card, record) {
    headerOf(card, record);
    card.querySelectorAll(".item").forEach((el, n) => {
      const callId = el.dataset.callId;
      const correction = (record.corrections || {})[callId];
      const assumptions = (record.assumptions || {})[callId];
      const oldCorrection = el.querySelector(".correction");
      if (correction && (!oldCorrection || (correction.error && !oldCorrection.querySelector(".error-text")))) {
        if (oldCorrection) oldCorrection.remove();
        el.querySelector(".meta").insertAdjacentHTML("afterend", correctionHtml(correction));
      }
      if (assumptions && assumptions.length && !el.querySelector(".assumptions")) {
        el.querySelector(".sql").insertAdjacentHTML("afterend", assumptionsHtml(assumptions));
      }
    });
    updateCount();
  }

  // -- the statement the keys act on ----------------------------------------------------------
  function firstUndecided(card) {
    const items = [...card.querySelectorAll(".item")];
    return items.find((el) => el.querySelector("input[type=radio]") && !el.querySelector("input[type=radio]:checked")) || items[0];
  }

  function setCurrent(card, el) {
    card.querySelectorAll(".item.current").forEach((x) => x.classList.remove("current"));
    if (el) el.classList.add("current");
  }

  function currentItem() {
    const card = selected && cards.get(selected);
    return card ? [card, card.querySelector(".item.current") || firstUndecided(card)] : [null, null];
  }

  function step(delta) {
    const [card, el] = currentItem();
    if (!card || !el) return;
    const items = [...card.querySelectorAll(".item")];
    const next = items[Math.min(items.length - 1, Math.max(0, items.indexOf(el) + delta))];
    setCurrent(card, next);
    next.focus();
  }

  function choose(value) {
    const [card, el] = currentItem();
    if (!card || !el || card.classList.contains("closed")) return;
    const radio = el.querySelector(`input[type=radio][value=${value}]`);
    if (!radio) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change"));
    if (value === "approve") {
      const next = firstUndecided(card);
      if (next && next !== el && !next.querySelector("input[type=radio]:checked")) { setCurrent(card, next); next.focus(); }
    } else if (value === "reject") el.querySelector(".reason").focus();
    else el.querySelector(".edit-sql").focus();
  }

  // An earlier reviewer's SQL from the memory panel, proposed as this statement's edit: checked
  // by the validator at once and shown as a diff, submitted only if the reviewer submits.
  function proposeEdit(card, record, el, sql) {
    const radio = el.querySelector("input[type=radio][value=edit]");
    if (!radio || card.classList.contains("closed")) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change"));
    el.querySelector(".edit-sql").value = sql;
    check(card, record, el);
    setCurrent(card, el);
  }

  function toggleHelp(show) {
    const help = document.getElementById("help");
    const open = show === undefined ? help.hidden : show;
    help.hidden = !open;
    if (open) document.getElementById("help-close").focus();
    else document.getElementById("help-button").focus();
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const help = document.getElementById("help");
    if (event.key === "Escape") {
      if (!help.hidden) { toggleHelp(false); event.preventDefault(); return; }
      const typing = event.target.closest && event.target.closest("textarea, input");
      if (typing) { typing.blur(); const [card, el] = currentItem(); if (el) el.focus(); event.preventDefault(); }
      return;
    }
    if (event.target.closest && event.target.closest("textarea, input, select")) return;
    if (!help.hidden) return;
    const actions = {
      j: () => move(1), k: () => move(-1), n: () => step(1), p: () => step(-1),
      a: () => choose("approve"), r: () => choose("reject"), e: () => choose("edit"),
      s: () => { const card = selected && cards.get(selected); if (card && !card.querySelector(".submit").disabled) submit(card, records.get(selected)); },
      "?": () => toggleHelp(),
    };
    const action = actions[event.key];
    if (action) { event.preventDefault(); action(); }
  });

  function wireItem(card, record, el) {
    el.addEventListener("focusin", () => setCurrent(card, el));
    el.addEventListener("click", () => setCurrent(card, el));
    const radios = el.querySelectorAll("input[type=radio]");
    if (!radios.length) return;
    radios.forEach((radio) => radio.addEventListener("change", () => {
      const choice = el.querySelector("input[type=radio]:checked").value;
      el.querySelector(".reason").hidden = choice !== "reject";
      el.querySelector(".edit-box").hidden = choice !== "edit";
      if (choice === "edit") check(card, record, el);
      refreshSubmit(card, record);
    }));
    el.querySelector(".reason").addEventListener("input", () => refreshSubmit(card, record));
    let timer = null;
    el.querySelector(".edit-sql").addEventListener("input", () => {
      el.dataset.seq = String(Number(el.dataset.seq || 0) + 1); // a check still in flight is stale
      el.dataset.verdict = "checking";
      el.querySelector(".verdict").textContent = "checking…";
      refreshSubmit(card, record);
      clearTimeout(timer);
      timer = setTimeout(() => check(card, record, el), 300);
    });
  }

  function chooseAll(card, record, choice) {
    const reason = card.querySelector(".bulk-reason").value.trim();
    card.querySelectorAll(".item").forEach((el) => {
      const radio = el.querySelector(`input[value=${choice}]`);
      if (!radio || radio.disabled) return;
      radio.checked = true;
      radio.dispatchEvent(new Event("change"));
      const box = el.querySelector(".reason");
      if (choice === "reject" && reason && !box.value.trim()) box.value = reason;
    });
    refreshSubmit(card, record);
  }

  // The server checks the edit with the validator the decision uses; the answer decides whether
  // the batch can be submitted. Only the latest check of an item counts.
  async function check(card, record, el) {
    const seq = (Number(el.dataset.seq || 0) + 1).toString();
    el.dataset.seq = seq;
    el.dataset.verdict = "checking";
    const sql = el.querySelector(".edit-sql").value;
    const response = await api("POST",
      `/approvals/${encodeURIComponent(record.batch.batch_id)}/items/${encodeURIComponent(el.dataset.callId)}/validate`, { sql });
    if (el.dataset.seq !== seq) return;
    const verdict = el.querySelector(".verdict");
    const diff = el.querySelector(".diff");
    if (!response.ok) {
      el.dataset.verdict = "refused";
      verdict.className = "verdict refused";
      verdict.textContent = `Cannot check this edit: ${response.data && response.data.error ? response.data.error.message : response.status}`;
      diff.hidden = true;
    } else if (response.data.ok) {
      el.dataset.verdict = "ok";
      verdict.className = "verdict accepted";
      verdict.textContent = "Accepted by the validator. Changes from the model's SQL, as it would run:";
      diff.innerHTML = diffHtml(response.data.diff);
      diff.hidden = false;
      el.querySelector(".edit-risk").innerHTML = riskHtml(response.data.risk, "edit-risk");
    } else {
      el.dataset.verdict = "refused";
      verdict.className = "verdict refused";
      verdict.textContent = `Refused by the validator: ${response.data.refusal.replace(/\.+$/, "")}. This edit cannot be submitted.`;
      el.querySelector(".edit-risk").innerHTML = "";
      diff.innerHTML = diffHtml(response.data.diff);
      diff.hidden = false;
    }
    refreshSubmit(card, record);
  }

  // Submit only when every pending statement has an explicit, complete decision.
  function refreshSubmit(card, record) {
    if (card.classList.contains("closed")) return;
    const missing = [], reasons = [], refused = [], checking = [];
    for (const callId of record.pending_ids) {
      const el = card.querySelector(`.item[data-call-id="${CSS.escape(callId)}"]`);
      const chosen = el.querySelector("input[type=radio]:checked");
      if (!chosen) missing.push(callId);
      else if (chosen.value === "reject" && !el.querySelector(".reason").value.trim()) reasons.push(callId);
      else if (chosen.value === "edit" && el.dataset.verdict === "refused") refused.push(callId);
      else if (chosen.value === "edit" && el.dataset.verdict !== "ok") checking.push(callId);
    }
    const hint = [];
    if (missing.length) hint.push(`${missing.length} statement(s) without a decision`);
    if (reasons.length) hint.push(`${reasons.length} rejection(s) without a reason`);
    if (refused.length) hint.push(`${refused.length} edit(s) refused by the validator`);
    if (checking.length) hint.push(`${checking.length} edit(s) being checked`);
    card.querySelector(".hint").textContent = hint.length ? `To submit: ${hint.join(", ")}.` : "Ready to submit.";
    card.querySelector(".submit").disabled = hint.length > 0 || card.dataset.submitted === "1";
  }

  function say(card, kind, text) {
    const box = card.querySelector(".message");
    box.className = `message show ${kind}`;
    box.textContent = visible(text);
  }

  // A decided card stays where it was, collapsed, with what happened; the history gets it too.
  // A decided batch leaves the list for the history; its card keeps what happened until the
  // reviewer moves on.
  function close(card, kind, text) {
    card.classList.add("closed");
    card.querySelectorAll("input, textarea, button").forEach((el) => { el.disabled = true; });
    card.querySelector(".hint").textContent = "";
    say(card, kind, text);
    announce(text);
    updateCount();
    loadHistory(true);
  }

  function decisionsOf(card, record) {
    const decisions = {};
    for (const callId of record.pending_ids) {
      const el = card.querySelector(`.item[data-call-id="${CSS.escape(callId)}"]`);
      const choice = el.querySelector("input[type=radio]:checked").value;
      if (choice === "approve") decisions[callId] = "approve";
      else if (choice === "reject") decisions[callId] = { action: "reject", reason: el.querySelector(".reason").value };
      else decisions[callId] = { action: "edit", sql: el.querySelector(".edit-sql").value };
    }
    return decisions;
  }

  async function submit(card, record) {
    const button = card.querySelector(".submit");
    button.disabled = true;
    card.dataset.submitted = "1";
    const key = card.dataset.key || (card.dataset.key = crypto.randomUUID ? crypto.randomUUID() : String(Math.random()));
    const response = await api("POST", `/approvals/${encodeURIComponent(record.batch.batch_id)}/decision`,
      { decisions: decisionsOf(card, record) }, { "Idempotency-Key": key });
    const error = response.data && response.data.error;
    if (response.ok && response.data.status === "pending" && response.data.quorum > record.batch.quorum) {
      const more = response.data.quorum - response.data.votes;
      close(card, "ok", `Your edit raised the risk: the batch now needs ${response.data.quorum} reviewers and waits for ${more} more. Nothing runs until then.`);
    } else if (response.ok && response.data.status === "pending") {
      close(card, "ok", "Your vote is recorded; the batch waits for more reviewers (quorum).");
    } else if (response.ok) {
      const counts = {};
      Object.values(response.data.resolutions).forEach((r) => { counts[r.status] = (counts[r.status] || 0) + 1; });
      const summary = Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
      close(card, "ok", `Decided: ${summary}. The run carries on.`);
    } else if (response.status === 409) {
      conflict(card, error && error.decided_by, error && error.code);
    } else {
      delete card.dataset.submitted;
      card.dataset.key = "";
      const problems = (error && error.problems || []).map((p) => `${p.call_id}: ${p.message}`).join("; ");
      say(card, "error", `Refused (${error ? error.code : response.status}): ${problems || (error && error.message) || ""}`);
      refreshSubmit(card, record);
    }
  }

  function conflict(card, decidedBy, code) {
    const who = decidedBy ? decidedBy : "another reviewer";
    const text = code === "batch_expired"
      ? "This batch expired before your decision; its expiry action was applied."
      : `Another reviewer (${who}) decided this batch first. Your decision was not applied.`;
    close(card, "conflict", text);
  }

  async function load(batchId, announced = false) {
    const response = await api("GET", `/approvals/${encodeURIComponent(batchId)}`);
    if (!response.ok || response.data.status !== "pending") return;
    const fresh = !cards.has(batchId);
    render(response.data);
    if (fresh && announced) {
      const f = rowFacts(response.data);
      announce(`New batch from ${f.asker}: ${f.statements} statement(s) waiting${f.risk ? `, ${f.risk} risk` : ""}.`);
    }
  }

  // -- history: decided batches, newest first, each with its audit trail -----------------------
  const EVENT_WORDS = {
    batch_opened: "opened the batch", vote_cast: "voted", item_resolved: "resolved a statement",
    batch_resolved: "resolved the batch", batch_expired: "expired the batch", execution_started: "started running",
    execution_done: "ran it", execution_failed: "ran it and it failed",
  };

  function auditHtml(audit) {
    return `<table class="audit" data-testid="audit"><thead><tr><th>when</th><th>who</th><th>what</th></tr></thead><tbody>${
      audit.map((e) => {
        const detail = e.event === "item_resolved"
          ? `${e.detail.status || ""}${e.detail.reason ? `: ${e.detail.reason}` : ""} (${e.call_id || ""})` : "";
        return `<tr><td>${escape(when(e.at))}</td><td>${escape(e.actor)}</td><td>${escape(EVENT_WORDS[e.event] || e.event)} ${escape(detail)}</td></tr>`;
      }).join("")}</tbody></table>`;
  }

  function historyHtml(record) {
    const batch = record.batch;
    const outcome = record.outcome || {};
    const counts = {};
    Object.values(outcome.resolutions || {}).forEach((r) => { counts[r.status] = (counts[r.status] || 0) + 1; });
    const summary = Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
    const by = record.status === "expired" ? "expired (deadline)" : `decided by ${outcome.decided_by || "?"}`;
    const items = batch.items.map((item) => {
      const r = (outcome.resolutions || {})[item.call_id] || {};
      return `<li><span class="status ${escape(r.status || "")}">${escape((r.status || "").replace(/_/g, " "))}</span> ${escape(item.question)}${
        r.reason ? ` <span class="meta">— ${escape(r.reason)}</span>` : ""}${
        r.status === "edited" ? `<pre class="sql">${highlight(r.sql || "")}</pre>` : ""}</li>`;
    }).join("");
    const text = [outcome.decided_by, record.asked_by, batch.run_id, ...batch.items.map((i) => i.question)].join(" ").toLowerCase();
    const named = batch.items.length ? batch.items[0].question + (batch.items.length > 1 ? ` (+${batch.items.length - 1} more)` : "") : "";
    return `<details class="past" data-testid="history-item" data-batch-id="${escape(batch.batch_id)}" data-text="${escape(text)}">
      <summary><span class="past-question" data-testid="history-question">${escape(named)}</span> · <b data-testid="decided-by">${escape(by)}</b> · ${escape(summary)} · ${escape(when(outcome.decided_at || batch.created_at))}
        <span class="meta">· asked by ${escape(record.asked_by || "?")}</span></summary>
      <ul class="past-items">${items}</ul>
      ${auditHtml(record.audit || [])}
    </details>`;
  }

  let historySeq = 0;

  async function loadHistory(fromStart) {
    if (!me) return;
    const seq = ++historySeq; // only the latest load renders
    if (fromStart) historyOffset = 0;
    const status = document.getElementById("history-status").value;
    const listed = await api("GET", `/approvals?status=${status}&order=newest&limit=${PAGE + 1}&offset=${historyOffset}`);
    if (!listed.ok) return;
    const page = listed.data.slice(0, PAGE);
    const loaded = await Promise.all(page.map((s) => api("GET", `/approvals/${encodeURIComponent(s.batch_id)}`)));
    if (seq !== historySeq) return;
    const html = loaded.filter((r) => r.ok).map((r) => historyHtml(r.data)).join("");
    const list = document.getElementById("history-list");
    const open = new Set([...list.querySelectorAll("details.past[open]")].map((el) => el.dataset.batchId));
    if (fromStart) list.innerHTML = html || `<p class="empty">Nothing ${status === "expired" ? "expired" : "decided"} yet.</p>`;
    else list.insertAdjacentHTML("beforeend", html);
    list.querySelectorAll("details.past").forEach((el) => { if (open.has(el.dataset.batchId)) el.open = true; });
    historyOffset += page.length;
    document.getElementById("history-more").hidden = listed.data.length <= PAGE;
    filterHistory();
  }

  function filterHistory() {
    const needle = document.getElementById("history-filter").value.trim().toLowerCase();
    document.querySelectorAll("#history-list .past").forEach((el) => {
      el.hidden = Boolean(needle) && !el.dataset.text.includes(needle);
    });
  }

  // -- live --------------------------------------------------------------------------------------
  function onEvent(type, event) {
    const card = cards.get(event.batch_id);
    if (type === "approval_requested") load(event.batch_id, true);
    else if (type === "run_progress" || type === "run_finished") {
      // the run behind a shown batch moved: its error or assumptions may be new
      for (const [id, record] of records) if (record.batch.run_id === event.run_id && isOpen(id)) load(id);
    }
    else if (type === "approval_decided" && card && !card.classList.contains("closed")) {
      if (event.decided_by !== me.actor || !card.dataset.submitted) conflict(card, event.decided_by);
    } else if (type === "approval_expired" && card && !card.classList.contains("closed")) {
      conflict(card, null, "batch_expired");
    } else if (type === "approval_decided" || type === "approval_expired") {
      loadHistory(true);
    }
  }

  setInterval(() => {
    document.querySelectorAll(".batch:not(.closed) .deadline[data-at]").forEach((el) => { el.textContent = countdown(el.dataset.at); });
  }, 1000);
  setInterval(() => { if (!document.querySelector(".inbox-list :focus")) renderInbox(); }, 15000);

  document.getElementById("inbox-filter").addEventListener("input", renderInbox);
  document.querySelectorAll(".inbox-list .sort").forEach((button) => button.addEventListener("click", () => {
    if (sortKey === button.dataset.sort) sortDir = -sortDir; else { sortKey = button.dataset.sort; sortDir = 1; }
    renderInbox();
  }));
  document.getElementById("help-button").addEventListener("click", () => toggleHelp(true));
  document.getElementById("help-close").addEventListener("click", () => toggleHelp(false));
  document.getElementById("history-status").addEventListener("change", () => loadHistory(true));
  document.getElementById("history-filter").addEventListener("input", filterHistory);
  document.getElementById("history-more").addEventListener("click", () => loadHistory(false));

  // Webhook or e-mail deliveries that failed: reviewers should know nobody was pinged.
  async function loadNotificationFailures() {
    const response = await api("GET", "/notifications?status=failed&limit=5");
    const box = document.getElementById("notify-failures");
    if (!response.ok || !response.data.failed) { box.hidden = true; return; }
    const last = response.data.deliveries[0];
    box.textContent = `${response.data.failed} notification(s) could not be delivered after ` +
      "every retry (dead letters)" +
      (last ? ` (latest: ${last.event} to ${last.channel}: ${last.last_error || "failed"})` : "") +
      "; `sqlgate runs notifications --resend` sends them again.";
    box.hidden = false;
  }

  signIn(async (who) => {
    me = who;
    follow(onEvent, setLive);
    // every waiting batch, a page of whole batches per request (no cap, no request per batch)
    let pending = await api("GET", `/approvals/records?status=pending&limit=${PAGE_OF_BATCHES}`);
    for (let offset = 0; pending.ok; ) {
      for (const record of pending.data) if (record.status === "pending") render(record);
      if (pending.data.length < PAGE_OF_BATCHES) break;
      offset += pending.data.length;
      pending = await api("GET", `/approvals/records?status=pending&limit=${PAGE_OF_BATCHES}&offset=${offset}`);
    }
    if (!pending.ok) {
      // not "0 waiting": this token may not review (or the list failed); say which
      const why = pending.status === 403
        ? `This token (${who.actor}, role ${who.role}) may not review batches; ask an admin for a reviewer token.`
        : `Cannot list batches: ${pending.data && pending.data.error ? pending.data.error.message : `HTTP ${pending.status}`}`;
      const notice = document.getElementById("signin-message");
      notice.textContent = why;
      notice.hidden = false;
      document.getElementById("pending-count").textContent = "–";
      document.getElementById("pending-words").textContent = "batches: not available to this token";
      document.getElementById("no-batches").hidden = true;
      return;
    }
    updateCount();
    loadHistory(true);
    loadNotificationFailures();
    await openLinked();
    window.addEventListener("hashchange", openLinked);
  });

  // A notification's link (/reviewer#batch=<id>) opens that batch, not the oldest one.
  async function openLinked() {
    const wanted = new URLSearchParams(location.hash.slice(1)).get("batch");
    if (!wanted) return;
    if (!cards.has(wanted)) await load(wanted);
    if (cards.has(wanted)) { select(wanted, true); return; }
    const response = await api("GET", `/approvals/${encodeURIComponent(wanted)}`);
    const notice = document.getElementById("signin-message");
    notice.textContent = visible(response.ok
      ? `Batch ${wanted} is already ${response.data.status}: see the history.`
      : `Batch ${wanted} cannot be shown (${response.data && response.data.error ? response.data.error.message : `HTTP ${response.status}`}).`);
    notice.hidden = false;
  }
})();
