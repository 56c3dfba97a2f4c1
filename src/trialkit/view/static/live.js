// Live progress of a running run: polls /api/runs/RUN/progress every 2 s, updates the counts
// of the #progress box and lists the trials as they finish; stops when the run does.
// Without JavaScript the box shows the counts of the moment and the page reloads itself.
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  var RETRY_MS = 5000;

  function start(box) {
    var url = box.getAttribute("data-progress");
    var after = parseInt(box.getAttribute("data-after"), 10) || 0;
    var list = box.querySelector(".live-trials");

    function set(name, value) {
      var found = box.querySelectorAll(".live-" + name);
      for (var i = 0; i < found.length; i += 1) {
        found[i].textContent = String(value);
      }
    }

    function add(trial) {
      if (!list) {
        return;
      }
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = trial.url;
      link.className = "verdict-" + trial.verdict;
      link.textContent = trial.task + " #" + trial.index;
      var verdict = document.createElement("span");
      verdict.className = "verdict verdict-" + trial.verdict;
      verdict.textContent = " " + trial.verdict;
      item.appendChild(link);
      item.appendChild(verdict);
      list.insertBefore(item, list.firstChild);
      list.hidden = false;
    }

    function show(progress) {
      set("done", progress.done);
      set("passed", progress.passed);
      set("failed", progress.failed);
      set("errors", progress.errors);
      set("unknown", progress.unknown);
      var planned = box.querySelector(".live-of");
      if (planned && progress.planned !== null) {
        set("planned", progress.planned);
        planned.hidden = false;
      }
      progress.trials.forEach(add);
      after = progress.next;
      box.setAttribute("data-after", String(after));
    }

    function finish(status) {
      box.setAttribute("data-status", status);
      var shown = box.querySelector(".live-status");
      if (shown) {
        shown.textContent = status;
        shown.className = "live-status status-" + status;
      }
      var hint = box.querySelector(".live-hint");
      if (hint) {
        hint.textContent = "The run has ended: ";
        var reload = document.createElement("a");
        reload.href = window.location.href;
        reload.textContent = "reload for the whole report";
        hint.appendChild(reload);
        hint.appendChild(document.createTextNode("."));
      }
    }

    function poll() {
      fetch(url + "?after=" + after, { headers: { Accept: "application/json" }, cache: "no-store" })
        .then(function (response) {
          if (!response.ok) {
            throw new Error("progress: HTTP " + response.status);
          }
          return response.json();
        })
        .then(function (progress) {
          show(progress);
          if (progress.status !== "running") {
            finish(progress.status);
            return;
          }
          window.setTimeout(poll, progress.next < progress.done ? 0 : INTERVAL_MS);
        })
        .catch(function () {
          window.setTimeout(poll, RETRY_MS);
        });
    }

    var hint = box.querySelector(".live-hint");
    if (hint) {
      hint.textContent = "Updates as trials finish.";
    }
    window.setTimeout(poll, INTERVAL_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("progress");
    if (box && box.getAttribute("data-status") === "running") {
      start(box);
    }
  });
})();
