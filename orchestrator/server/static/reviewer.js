// The reviewer page: pending batches live, one decision per batch (approve / reject with reason / edit per item).
"use strict";

(() => {
  const { api, escape, highlight, follow, signIn, setLive } = sqlgate;
  const cards = new Map(); // batch_id -> section element
  let me = null;

  const container = () => document.getElementById("batches");
  const updateEmpty = () => {
    document.getElementById("no-batches").style.display = container().querySelector(".batch") ? "none" : "";
  };

  function itemHtml(item, category, note) {
    const findings = (item.findings || []).map((f) =>
      `<li class="sev-${escape(f.severity)}"><b>${escape(f.code)}</b> (${escape(f.severity)}): ${escape(f.message)}</li>`).join("");
    const decidable = category === "needs_approval";
    const name = `d-${item.call_id}`;
    return `
      <div class="item" data-call-id="${escape(item.call_id)}" data-testid="item">
        <div class="question">${escape(item.question)}</div>
        <div class="meta">${escape(item.call_id)} · ${escape(item.question_id)} · ${escape(category)}${note ? " · " + escape(note) : ""}</div>
        <pre class="sql">${highlight(item.sql)}</pre>
        ${findings ? `<ul class="findings">${findings}</ul>` : `<div class="meta">no findings</div>`}
        ${decidable ? `
        <div class="choices">
          <label><input type="radio" name="${name}" value="approve" checked data-testid="approve"> approve</label>
          <label><input type="radio" name="${name}" value="reject" data-testid="reject"> reject</label>
          <label><input type="radio" name="${name}" value="edit" data-testid="edit"> edit</label>
        </div>
        <textarea class="reason" rows="2" placeholder="why it must not run" hidden data-testid="reason"></textarea>
        <textarea class="edit-sql" rows="4" hidden data-testid="edit-sql">${escape(item.sql)}</textarea>` : ""}
      </div>`;
  }

  function render(record) {
    const batch = record.batch;
    if (cards.has(batch.batch_id)) return;
    const card = document.getElementById("batch-template").content.firstElementChild.cloneNode(true);
    card.dataset.batchId = batch.batch_id;
    card.dataset.testid = "batch";
    card.querySelector(".batch-id").textContent = batch.batch_id;
    card.querySelector(".batch-meta").textContent =
      `run ${batch.run_id} · cycle ${batch.cycle} · ${record.pending_ids.length} to decide · opened ${batch.created_at}` +
      (batch.deadline ? ` · deadline ${batch.deadline}` : "");
    card.querySelector(".items").innerHTML =
      batch.items.map((item) => itemHtml(item, batch.categories[item.call_id], (batch.notes || {})[item.call_id])).join("");
    card.querySelectorAll(".item").forEach((el) => {
      el.querySelectorAll("input[type=radio]").forEach((radio) => radio.addEventListener("change", () => {
        el.querySelector(".reason").hidden = radio.value !== "reject" || !radio.checked;
        el.querySelector(".edit-sql").hidden = radio.value !== "edit" || !radio.checked;
      }));
    });
    card.querySelector(".submit").addEventListener("click", () => submit(card, record));
    cards.set(batch.batch_id, card);
    container().appendChild(card);
    updateEmpty();
  }

  function say(card, kind, text) {
    const box = card.querySelector(".message");
    box.className = `message show ${kind}`;
    box.textContent = text;
  }

  function close(card, kind, text) {
    card.classList.add("closed");
    card.querySelectorAll("input, textarea, button").forEach((el) => { el.disabled = true; });
    say(card, kind, text);
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
    if (response.ok) {
      const counts = {};
      Object.values(response.data.resolutions).forEach((r) => { counts[r.status] = (counts[r.status] || 0) + 1; });
      const summary = Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ");
      close(card, "ok", `Decided: ${summary}. The run carries on.`);
    } else if (response.status === 409) {
      conflict(card, error && error.decided_by, error && error.code);
    } else {
      delete card.dataset.submitted;
      card.dataset.key = "";
      button.disabled = false;
      const problems = (error && error.problems || []).map((p) => `${p.call_id}: ${p.message}`).join("; ");
      say(card, "error", `Refused (${error ? error.code : response.status}): ${problems || (error && error.message) || ""}`);
    }
  }

  function conflict(card, decidedBy, code) {
    const who = decidedBy ? decidedBy : "another reviewer";
    const text = code === "batch_expired"
      ? "This batch expired before your decision; its expiry action was applied."
      : `Another reviewer (${who}) decided this batch first. Your decision was not applied.`;
    close(card, "conflict", text);
  }

  async function load(batchId) {
    const response = await api("GET", `/approvals/${encodeURIComponent(batchId)}`);
    if (response.ok && response.data.status === "pending") render(response.data);
  }

  function onEvent(type, event) {
    const card = cards.get(event.batch_id);
    if (type === "approval_requested") load(event.batch_id);
    else if (type === "approval_decided" && card && !card.classList.contains("closed")) {
      if (event.decided_by !== me.actor || !card.dataset.submitted) conflict(card, event.decided_by);
    } else if (type === "approval_expired" && card && !card.classList.contains("closed")) {
      conflict(card, null, "batch_expired");
    }
  }

  signIn(async (who) => {
    me = who;
    follow(onEvent, setLive);
    const pending = await api("GET", "/approvals?status=pending");
    if (pending.ok) for (const summary of pending.data) await load(summary.batch_id);
    else document.getElementById("no-batches").textContent = `Cannot list batches: ${pending.data.error.message}`;
  });
})();
