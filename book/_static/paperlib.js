// Sidebar buttons that work: pydata-sphinx-theme 0.17 renders a second primary (and secondary) toggle in
// its header and attaches its click handler to the first one in the page only, so the button a reader sees
// in sphinx-book-theme's article header does nothing (pydata-sphinx-theme issue #2451). Each visible toggle
// here passes its click on to the one that has the handler.
(function () {
  function relay(selector) {
    const all = Array.from(document.querySelectorAll(selector));
    if (all.length < 2) return;
    const handled = all[0];
    all.slice(1).forEach(function (button) {
      button.addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        handled.click();
      });
    });
  }
  function setup() { relay(".primary-toggle"); relay(".secondary-toggle"); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup); else setup();
})();

// A cue above a table that scrolls sideways: on a phone a wide table shows its first columns only, and
// nothing else tells the reader that more are to the right. The cue follows the width (added or removed
// when the window is resized).
(function () {
  const SELECTOR = "div.paperlib-table-wrap, .bd-article .pst-scrollable-table-container";
  function mark() {
    document.querySelectorAll(SELECTOR).forEach(function (box) {
      const over = box.scrollWidth > box.clientWidth + 1;
      const prev = box.previousElementSibling;
      const has = prev && prev.classList.contains("paperlib-scroll-cue");
      if (over && !has) {
        const cue = document.createElement("p");
        cue.className = "paperlib-scroll-cue";
        cue.textContent = "Scroll the table sideways for more columns \u2192";
        box.parentNode.insertBefore(cue, box);
      } else if (!over && has) {
        prev.remove();
      }
    });
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
})();
