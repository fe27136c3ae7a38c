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
