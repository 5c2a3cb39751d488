// fabricd page: refresh the live sections every second from /ui/live (server-rendered HTML fragments), keeping the
// page's filters; a section holding the keyboard focus (a reason being typed) is left alone until it loses it.
"use strict";
(function () {
  const sections = Array.from(document.querySelectorAll("[data-live]"));
  async function tick() {
    try {
      // the browser's cache revalidates with the last ETag: an unchanged fabric costs a 304 without a body
      const r = await fetch("/ui/live" + window.location.search, { credentials: "same-origin", cache: "no-cache" });
      if (r.ok) {
        const parts = await r.json();
        for (const el of sections) {
          const html = parts[el.dataset.live];
          if (html === undefined || el.contains(document.activeElement)) continue;
          if (el.dataset.html !== html) { el.innerHTML = html; el.dataset.html = html; }
        }
      }
    } catch (e) { /* the service restarts: try again next tick */ }
    setTimeout(tick, 1000);
  }
  setTimeout(tick, 1000);
})();
