// Shared by the analyst and reviewer pages: the token, API calls, the live event stream, SQL
// highlighting, times, numbers and file downloads.
"use strict";

const sqlgate = (() => {
  const KEY = "sqlgate-token";
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  // A #token= link signs in a browser without a token; it never silently replaces a stored one
  // (a link from someone else would otherwise act as them): the page asks first.
  let offered = null;
  if (fromHash) {
    const rest = new URLSearchParams(location.hash.slice(1));  // keep e.g. #batch=<id>
    rest.delete("token");
    history.replaceState(null, "", location.pathname + (rest.toString() ? `#${rest}` : ""));
    const stored = localStorage.getItem(KEY);
    if (!stored || stored === fromHash) localStorage.setItem(KEY, fromHash); else offered = fromHash;
  }

  const token = () => localStorage.getItem(KEY) || "";
  // Without a token the browser's sign-in session (an HttpOnly cookie) speaks for the page.
  const headers = (extra = {}) => (token() ? { Authorization: `Bearer ${token()}`, ...extra } : { ...extra });

  async function api(method, path, body, extra = {}) {
    const init = { method, headers: headers(extra) };
    if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
    const response = await fetch(path, init);
    let data = null;
    try { data = await response.json(); } catch (_) { /* empty body */ }
    return { status: response.status, ok: response.ok, data };
  }

  // The one sanitiser of the pages: HTML-escaped, and every control or bidirectional formatting
  // character (U+202E RIGHT-TO-LEFT OVERRIDE, isolates, marks, C0/C1 controls but tab and line
  // breaks) shown as a visible \u{...} escape, so untrusted text cannot reorder what follows it.
  const CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
  function visible(text) {  // for textContent: the controls made visible, nothing else changed
    return String(text ?? "").replace(CONTROLS, (c) => `\\u{${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}}`);
  }
  function escape(text) {
    return visible(text)
      .replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }

  const KEYWORDS = new Set(("select from where group by order having limit offset join left right inner outer full cross on " +
    "as and or not in is null like between case when then else end distinct union all with asc desc count sum avg min max " +
    "cast coalesce exists over partition").split(" "));

  // Tokenise and colour SQL: keywords, strings, numbers, function names. Text is escaped first.
  function highlight(sql) {
    const re = /('(?:[^']|'')*')|(\b\d+(?:\.\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)(\s*\()?|([\s\S])/g;
    let out = "", m;
    while ((m = re.exec(sql)) !== null) {
      if (m[1]) out += `<span class="str">${escape(m[1])}</span>`;
      else if (m[2]) out += `<span class="num">${m[2]}</span>`;
      else if (m[3]) {
        const word = m[3];
        if (KEYWORDS.has(word.toLowerCase())) out += `<span class="kw">${escape(word)}</span>`;
        else if (m[4]) out += `<span class="fn">${escape(word)}</span>`;
        else out += escape(word);
        if (m[4]) out += escape(m[4]);
      } else out += escape(m[5]);
    }
    return out;
  }

  // Follow /events with fetch (EventSource cannot send the Authorization header); reconnect with
  // Last-Event-ID so nothing is missed or seen twice.
  function follow(onEvent, onState) {
    let lastId = null, stopped = false;
    (async () => {
      while (!stopped) {
        try {
          const extra = lastId ? { "Last-Event-ID": lastId } : {};
          const response = await fetch("/events", { headers: headers(extra) });
          if (!response.ok) { onState("off", `events: HTTP ${response.status}`); await sleep(3000); continue; }
          onState("on", "live");
          const reader = response.body.getReader();
          const decoder = new TextDecoder();
          let buffer = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            let cut;
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
              let id = null, type = "message", data = "";
              for (const line of block.split("\n")) {
                const colon = line.indexOf(":");
                if (colon === 0) continue;
                const field = colon < 0 ? line : line.slice(0, colon);
                const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
                if (field === "id") id = value; else if (field === "event") type = value; else if (field === "data") data += value;
              }
              if (data) {
                if (id) lastId = id;
                // resync: our position is unknown to the server; reload the page's state from scratch.
                if (type === "resync") { location.reload(); return; }
                try { onEvent(type, JSON.parse(data)); } catch (e) { console.error(e); }
              }
            }
          }
        } catch (e) { /* network gone: reconnect below */ }
        onState("off", "reconnecting");
        await sleep(1000);
      }
    })();
    return () => { stopped = true; };
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // The header: token box, who is signed in, the live indicator; a plain message when the token
  // is missing or refused, so nothing on the page is silently dead.
  async function signIn(onReady) {
    const input = document.getElementById("token");
    const who = document.getElementById("who");
    const notice = document.getElementById("signin-message");
    const refuse = (text) => {
      who.textContent = "not signed in";
      notice.textContent = text;
      notice.hidden = false;
      document.querySelectorAll("[data-needs-token]").forEach((el) => { el.disabled = true; });
    };
    input.value = token();
    document.getElementById("use-token").addEventListener("click", () => {
      localStorage.setItem(KEY, input.value.trim()); location.reload();
    });
    // Sign out: the token leaves this browser's storage, the sign-in session ends; the page
    // starts over without them.
    document.getElementById("sign-out").addEventListener("click", async () => {
      localStorage.removeItem(KEY); input.value = "";
      await fetch("/auth/logout", { method: "POST" });
      location.replace(location.pathname);
    });
    if (offered) {
      notice.textContent = "This link carries a different token from the one this browser is signed in with; the page still uses yours. ";
      const use = document.createElement("button");
      use.type = "button"; use.className = "quiet small"; use.dataset.testid = "use-link-token";
      use.textContent = "Sign in with the link's token instead";
      use.addEventListener("click", () => { localStorage.setItem(KEY, offered); location.reload(); });
      notice.appendChild(use);
      notice.hidden = false;
    }
    const me = await api("GET", "/me");
    if (!token() && !me.ok) {
      refuse("Paste your token above and press Use to sign in.");
      const config = await api("GET", "/auth/config");
      if (config.ok && config.data.sign_in) {
        const link = document.createElement("a");
        link.href = `/auth/login?next=${encodeURIComponent(location.pathname)}`;
        link.dataset.testid = "organisation-sign-in";
        link.textContent = "Or sign in with your organisation's account";
        notice.append(" ", link);
      }
      return;
    }
    if (!me.ok) {
      const why = me.data && me.data.error ? me.data.error.message : `HTTP ${me.status}`;
      refuse(`This token was not accepted (${why}). Paste a valid token above, or ask an admin for one.`);
      return;
    }
    who.textContent = `${me.data.actor} (${me.data.role})`;
    onReady(me.data);
  }

  function setLive(state, text) {
    const badge = document.getElementById("live");
    badge.className = `live ${state}`;
    badge.textContent = text;
  }

  // "3 min ago", "in 4m 12s": a moment relative to now, for people.
  function ago(iso) {
    const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  function countdown(iso) {
    const left = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
    if (left <= 0) return "deadline passed";
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    return `expires in ${h ? `${h}h ` : ""}${h || m ? `${m}m ` : ""}${s}s`;
  }

  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");

  const isNumber = (v) => typeof v === "number" || (typeof v === "string" && v.trim() !== "" && !isNaN(Number(v)));
  const NUMBER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
  const formatValue = (v) => (v === null || v === undefined ? "∅" : isNumber(v) && typeof v === "number" ? NUMBER.format(v) : String(v));

  // CSV lines (RFC 4180): a field with a comma, a quote or a line break is quoted, quotes doubled;
  // null is an empty field. csvRows gives the lines of a page of rows, csv a whole file.
  function csvRows(rows) {
    const cell = (v) => {
      let text = v === null || v === undefined ? "" : String(v);
      // a text cell a spreadsheet would read as a formula is neutralised with a leading quote,
      // as orchestrator/core/csv_cells.py does: = + - @ (or their full-width forms, or a tab/CR)
      // first after any blanks, or after a separator (x;=1+1), or a leading quote already;
      // numbers stay numbers, and every text cell is quoted so no separator splits it
      if (typeof v === "string" && !/^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/.test(text)
        && (/^'/.test(text) || /^[\t\r]/.test(text) || /^[ \t\r\n\u00a0\u3000]*[=+\-@\uff1d\uff0b\uff0d\uff20]/.test(text)
          || /[,;|\t][ \t\r\n\u00a0\u3000]*[=+\-@\t\r\uff1d\uff0b\uff0d\uff20]/.test(text))) text = `'${text}`;
      return typeof v === "string" || /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
    };
    return rows.map((r) => r.map(cell).join(",") + "\r\n").join("");
  }

  const csv = (columns, rows) => csvRows([columns, ...rows]);

  // Save text (or an array of text parts, joined without copying) as a file.
  function download(name, text, type) {
    const url = URL.createObjectURL(new Blob(Array.isArray(text) ? text : [text], { type }));
    const link = document.createElement("a");
    link.href = url; link.download = name; document.body.appendChild(link); link.click(); link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }

  async function copy(text) {
    try { await navigator.clipboard.writeText(text); return true; } catch (_) {
      const area = document.createElement("textarea");
      area.value = text; document.body.appendChild(area); area.select();
      const done = document.execCommand("copy"); area.remove(); return done;
    }
  }

  return { api, escape, visible, highlight, follow, signIn, setLive, ago, countdown, when, isNumber, formatValue, csv, csvRows, download, copy };
})();
