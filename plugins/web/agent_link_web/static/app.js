// agent-link web: live sections. The server sends "change" when any agent-link process
// commits a mail change, and "tick" now and then; each section marked data-live is
// re-fetched from the server, which renders it with every value escaped. No markup is
// ever built here from data.
"use strict";
(function () {
  const indicator = document.getElementById("live");
  let running = false;
  let again = false;
  let lastTick = 0;

  async function refresh() {
    if (running) { again = true; return; }
    running = true;
    try {
      for (const el of document.querySelectorAll("[data-live]")) {
        const response = await fetch(el.dataset.live, { credentials: "same-origin", cache: "no-store" });
        if (!response.ok) continue;
        const html = await response.text();
        if (el.dataset.html !== html) {
          el.innerHTML = html;  // server-rendered, escaped by the server's templates
          el.dataset.html = html;
        }
      }
    } finally {
      running = false;
      if (again) { again = false; refresh(); }
    }
  }

  function connect() {
    const source = new EventSource("/events");
    source.addEventListener("hello", async () => {
      // the page says it is live once its sections are current: a click a moment later must
      // not land on a section the first refresh is replacing
      await refresh();
      if (indicator) { indicator.classList.remove("off"); indicator.classList.add("on"); }
    });
    source.addEventListener("change", () => refresh());
    source.addEventListener("tick", () => {
      const now = Date.now();
      if (now - lastTick > 5000) { lastTick = now; refresh(); }
    });
    source.onerror = () => {
      if (indicator) { indicator.classList.remove("on"); indicator.classList.add("off"); }
    };
  }

  if (document.querySelector("[data-live]")) connect();
  else if (indicator) indicator.hidden = true;
})();
