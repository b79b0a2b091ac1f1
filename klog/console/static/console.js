// klog console: auto-refresh and the message browser's live tail. No dependencies.
"use strict";

(function autoRefresh() {
  const box = document.getElementById("auto-refresh");
  if (!box) return;
  const seconds = parseFloat(box.dataset.seconds) || 5;
  // remembered in the address (#auto-refresh), never in the browser's storage
  box.checked = location.hash === "#auto-refresh";
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    // not on a confirmation page (a reload would post again), nor while the user fills an action's form
    if (box.checked && !document.getElementById("tail-button") && !document.querySelector("form.confirm"))
      timer = setTimeout(() => document.activeElement.closest("form.action") ? arm() : location.reload(), seconds * 1000);
  };
  box.addEventListener("change", () => {
    history.replaceState(null, "", box.checked ? "#auto-refresh" : location.pathname + location.search);
    arm();
  });
  arm();
})();

(function liveTail() {
  const button = document.getElementById("tail-button");
  if (!button) return;
  const body = document.querySelector("#messages tbody");
  const status = document.getElementById("tail-status");
  let next = parseInt(button.dataset.next, 10);
  let running = false;

  const cell = (text, cls) => {
    const td = document.createElement("td");
    if (cls === "key" || cls === "value") {
      const pre = document.createElement("pre"); pre.className = cls; pre.textContent = text; td.appendChild(pre);
    }
    else { td.textContent = text; if (cls) td.className = cls; }
    return td;
  };
  const addRow = (r) => {
    const tr = document.createElement("tr");
    tr.dataset.offset = r.offset;
    tr.className = "fresh";
    tr.appendChild(cell(String(r.offset), "num"));
    tr.appendChild(cell(r.time, "ts"));
    tr.appendChild(cell(r.key, "key"));
    tr.appendChild(cell(r.value, "value"));
    const headers = document.createElement("td");
    for (const [name, value] of r.headers) {
      const div = document.createElement("div");
      div.className = "header";
      const b = document.createElement("b"); b.textContent = name;
      div.appendChild(b); div.appendChild(document.createTextNode(": " + value));
      headers.appendChild(div);
    }
    tr.appendChild(headers);
    body.appendChild(tr);
    const empty = document.getElementById("no-records");
    if (empty) empty.remove();
  };
  const poll = async () => {
    if (!running) return;
    const url = `/api/topics/${encodeURIComponent(button.dataset.topic)}/messages?partition=${button.dataset.partition}` +
                `&offset=${next}&limit=100&wait_ms=1000&format=${encodeURIComponent(button.dataset.format)}`;
    try {
      const response = await fetch(url);
      const data = await response.json();
      if (data.error) throw new Error(data.error);
      for (const r of data.records) addRow(r);
      next = data.next;
      status.textContent = ` · live: next offset ${next}`;
    } catch (err) {
      status.textContent = ` · live tail error: ${err.message}`;
    }
    if (running) setTimeout(poll, 500);
  };
  button.addEventListener("click", () => {
    running = !running;
    button.classList.toggle("on", running);
    button.textContent = running ? "Stop tail" : "Live tail";
    if (running) poll(); else status.textContent = "";
  });
})();
