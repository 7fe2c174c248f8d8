// gendex web: the run page's live part is asked for again every few
// seconds (data-every, in ms) while the page is visible, and swapped in
// whole; one request at a time, none while the tab is hidden. The part is
// HTML made by the server's templates, every text escaped there.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live) return;
  var every = parseInt(live.getAttribute("data-every"), 10) || 5000;
  var busy = false;
  var asof = document.getElementById("asof");
  function tick() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(live.getAttribute("data-live"), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        live.removeAttribute("data-stale");
        if (asof) asof.textContent = new Date().toLocaleString();
        document.body.setAttribute("data-updates", String((parseInt(document.body.getAttribute("data-updates"), 10) || 0) + 1));
      })
      .catch(function (e) {
        live.setAttribute("data-stale", "not updated: " + e.message);
      })
      .finally(function () { busy = false; });
  }
  setInterval(tick, every);
})();
