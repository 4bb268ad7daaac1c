// attn-book: fit display equations wider than the text column by shrinking them, down to
// MIN_SCALE of their size; wider ones keep that size and scroll in their own box (math.css).
// MathJax 3 cannot break a display equation over lines. Runs after MathJax's first typesetting
// and again when the window is resized.
(function () {
  "use strict";
  var MIN_SCALE = 0.7;
  function fit() {
    var eqs = document.querySelectorAll('div.math mjx-container[jax="CHTML"][display="true"]');
    eqs.forEach(function (m) {
      m.style.fontSize = "";
      var need = m.clientWidth / m.scrollWidth;
      if (need < 1) {
        var size = parseFloat(window.getComputedStyle(m).fontSize);
        m.style.fontSize = (size * Math.max(MIN_SCALE, need * 0.99)).toFixed(2) + "px";
      }
    });
    document.documentElement.setAttribute("data-math-fitted", String(eqs.length));
  }
  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(fit, 100);
  });
  window.addEventListener("load", function () {
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(fit); }
  });
})();
