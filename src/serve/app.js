// orbit serve: the live parts of a page, fed by server-sent events (no framework, nothing
// from the network). What arrives is what the server made: rows of escaped HTML, and the
// agent's output as plain text, put in with textContent.
"use strict";
(function () {
  // Times as ages ("3m ago"), kept current without asking the server.
  function ages() {
    const now = Date.now() / 1000;
    for (const el of document.querySelectorAll("td.ago[data-at]")) {
      const s = Math.max(0, Math.floor(now - Number(el.dataset.at)));
      const age = s < 60 ? s + "s" : s < 3600 ? Math.floor(s / 60) + "m"
        : s < 86400 ? Math.floor(s / 3600) + "h" : Math.floor(s / 86400) + "d";
      el.title = el.title || el.textContent;
      el.textContent = age + " ago";
    }
  }
  ages();
  setInterval(ages, 5000);
  function updated() {
    ages();
    const at = document.getElementById("updated");
    if (at) at.textContent = "last update " + new Date().toLocaleTimeString();
  }
  // The rows of the overview (or of one loop), its fleet lines and its queue section:
  // each replaced whole at each change.
  const feed = document.getElementById("feed");
  if (feed && feed.dataset.src) {
    const source = new EventSource(feed.dataset.src);
    for (const id of ["rows", "fleet", "queue"]) {
      source.addEventListener(id, (e) => {
        const el = document.getElementById(id);
        if (el) el.innerHTML = e.data;
        updated();
      });
    }
  }
  // The running agent's output: text only, its last 256 KB kept.
  const KEEP = 262144;
  const live = document.getElementById("live");
  if (live && live.dataset.src) {
    const source = new EventSource(live.dataset.src);
    // A reset replaces the text with the one it carries (a new file's first text), in one
    // step: the view is never empty between a reset and what follows it.
    function show(before, more) {
      const follow = live.scrollTop + live.clientHeight >= live.scrollHeight - 4;
      let all = before + more;
      if (all.length > KEEP) all = all.slice(all.length - (KEEP * 3) / 4);
      live.textContent = all;
      if (follow) live.scrollTop = live.scrollHeight;
    }
    source.addEventListener("reset", (e) => show("", e.data));
    source.addEventListener("out", (e) => show(live.textContent, e.data));
  }
})();
