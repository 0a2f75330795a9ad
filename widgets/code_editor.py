"""CodeEditor: a Python code area with line numbers and syntax highlighting that works offline.

ipywidgets has no code editor, and CodeMirror from a CDN needs the network. This is the classic overlay: a
transparent <textarea> (so typing, selection, undo and copy are the browser's own) over a highlighted <pre>,
beside a line-number gutter, all scrolled together; a small tokenizer colours keywords, strings, comments,
numbers and decorators. Lines named in `error_lines` are marked in the gutter and the text, so the line a
finding or traceback points at is visible where the code is. Tab indents, Enter keeps the indentation.

For the full JupyterLab editor (completion, search, multiple cursors), write the kernel in a cell with the
`%%kwb` cell magic (`%load_ext widgets`).
"""

from __future__ import annotations

import traitlets as t

from workbench.errors import require

anywidget = require("anywidget", "lab", "the code editor")

_ESM = r"""
const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except " +
  "finally for from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "));
const BUILTINS = new Set(("self cls int float str bool len range min max abs sum print isinstance tuple list dict " +
  "super object").split(" "));
const TOKEN = /(#[^\n]*)|("{3}[\s\S]*?(?:"{3}|$)|'{3}[\s\S]*?(?:'{3}|$)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)|(@[\w.]+)|(\b\d[\w.]*\b)|([A-Za-z_]\w*)/g;

function esc(s) { return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

function highlight(code) {
  let out = "", last = 0, m, afterDef = false;
  TOKEN.lastIndex = 0;
  while ((m = TOKEN.exec(code)) !== null) {
    out += esc(code.slice(last, m.index));
    const text = m[0];
    let cls = null;
    if (m[1]) cls = "c"; else if (m[2]) cls = "s"; else if (m[3]) cls = "d"; else if (m[4]) cls = "n";
    else if (KEYWORDS.has(text)) cls = "k"; else if (afterDef) cls = "f"; else if (BUILTINS.has(text)) cls = "b";
    afterDef = m[5] !== undefined && (text === "def" || text === "class");
    out += cls ? `<span class="kwb-tok-${cls}">${esc(text)}</span>` : esc(text);
    last = m.index + text.length;
  }
  return out + esc(code.slice(last));
}

function render({ model, el }) {
  el.classList.add("kwb-code");
  el.innerHTML = `<pre class="kwb-code-gutter" aria-hidden="true"></pre>
    <div class="kwb-code-area"><pre class="kwb-code-hl" aria-hidden="true"></pre>
    <div class="kwb-code-marks" aria-hidden="true"></div>
    <textarea class="kwb-code-input" spellcheck="false" autocomplete="off" autocapitalize="off" wrap="off"></textarea></div>`;
  const gutter = el.querySelector(".kwb-code-gutter");
  const hl = el.querySelector(".kwb-code-hl");
  const marks = el.querySelector(".kwb-code-marks");
  const ta = el.querySelector("textarea");

  function paint() {
    const code = ta.value;
    const n = code.split("\n").length;
    const bad = new Set(model.get("error_lines") || []);
    let g = "";
    for (let i = 1; i <= n; i++) g += bad.has(i) ? `<span class="kwb-code-bad">${i}</span>\n` : `${i}\n`;
    gutter.innerHTML = g;
    hl.innerHTML = highlight(code) + "\n ";
    marks.innerHTML = [...bad].filter((i) => i <= n)
      .map((i) => `<div class="kwb-code-mark" style="top:calc(${i - 1} * var(--kwb-line) + 4px)"></div>`).join("");
    sync();
  }
  function sync() {
    hl.scrollTop = ta.scrollTop; hl.scrollLeft = ta.scrollLeft;
    gutter.scrollTop = ta.scrollTop;
    marks.style.transform = `translateY(${-ta.scrollTop}px)`;
  }
  function setHeight() { el.style.setProperty("--kwb-rows", String(model.get("rows") || 22)); }
  function push() { model.set("value", ta.value); model.save_changes(); }

  ta.value = model.get("value") || "";
  ta.addEventListener("input", () => { paint(); push(); });
  ta.addEventListener("scroll", sync);
  ta.addEventListener("keydown", (e) => {
    const s = ta.selectionStart, v = ta.value;
    if (e.key === "Tab" && !e.shiftKey) {
      e.preventDefault();
      ta.setRangeText("    ", s, ta.selectionEnd, "end");
    } else if (e.key === "Enter" && !e.shiftKey && !e.ctrlKey && !e.metaKey) {
      const line = v.slice(v.lastIndexOf("\n", s - 1) + 1, s);
      let indent = line.match(/^\s*/)[0];
      if (/:\s*(#.*)?$/.test(line)) indent += "    ";
      e.preventDefault();
      ta.setRangeText("\n" + indent, s, ta.selectionEnd, "end");
    } else {
      return;
    }
    paint(); push();
  });
  model.on("change:value", () => {
    if (ta.value !== model.get("value")) { ta.value = model.get("value") || ""; paint(); }
  });
  model.on("change:error_lines", paint);
  model.on("change:rows", setHeight);
  setHeight();
  paint();
}
export default { render };
"""

_CSS = """
.kwb-code { --kwb-line: 17px; display: flex; width: 100%; box-sizing: border-box;
  height: calc(var(--kwb-rows) * var(--kwb-line) + 10px); border: 1px solid #c8c8c8; border-radius: 3px;
  background: #fff; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  font-size: 12.5px; line-height: var(--kwb-line); overflow: hidden; }
.kwb-code:focus-within { border-color: #1976d2; box-shadow: 0 0 0 1px #1976d2; }
/* JupyterLab styles output <pre> (wrapping, padding): the overlay must not wrap or lines drift apart. */
.kwb-code pre, .kwb-code textarea { font: inherit !important; line-height: inherit !important; tab-size: 4;
  margin: 0 !important; white-space: pre !important; overflow-wrap: normal !important; word-break: normal !important; }
.kwb-code .kwb-code-gutter { flex: none; min-width: 3.2em; padding: 4px 8px 4px 4px !important; text-align: right; color: #9e9e9e;
  background: #f5f5f5; border-right: 1px solid #e0e0e0; overflow: hidden; user-select: none; box-sizing: border-box; }
.kwb-code-bad { color: #fff; background: #c62828; border-radius: 2px; padding: 0 2px; }
.kwb-code-area { position: relative; flex: 1 1 auto; min-width: 0; }
.kwb-code .kwb-code-hl, .kwb-code .kwb-code-input { position: absolute; inset: 0; padding: 4px 8px !important;
  box-sizing: border-box; border: 0 !important; background: transparent; }
.kwb-code-hl { overflow: hidden; pointer-events: none; color: #1f1f1f; }
.kwb-code-input { color: transparent; caret-color: #111; background: transparent; resize: none; outline: none;
  overflow: auto; }
.kwb-code-input::selection { background: rgba(25, 118, 210, 0.25); color: transparent; }
.kwb-code-marks { position: absolute; left: 0; right: 0; top: 0; pointer-events: none; }
.kwb-code-mark { position: absolute; left: 0; right: 0; height: var(--kwb-line); background: rgba(198, 40, 40, 0.12); }
.kwb-tok-k { color: #7b1fa2; font-weight: 600; } .kwb-tok-s { color: #2e7d32; } .kwb-tok-c { color: #8a8a8a; font-style: italic; }
.kwb-tok-n { color: #d84315; } .kwb-tok-d { color: #0277bd; } .kwb-tok-f { color: #1565c0; font-weight: 600; }
.kwb-tok-b { color: #00838f; }
"""


class CodeEditor(anywidget.AnyWidget):
    """A code area with line numbers and Python highlighting; `value` is the text, `error_lines` marks lines."""

    _esm = _ESM
    _css = _CSS
    value = t.Unicode("", help="The code.").tag(sync=True)
    error_lines = t.List(t.Int(), help="1-based line numbers to mark as failing (gutter and text).").tag(sync=True)
    rows = t.Int(22, help="Visible lines (the area scrolls beyond them).").tag(sync=True)

    @t.validate("rows")
    def _rows(self, proposal: t.Bunch) -> int:
        if proposal["value"] < 1:
            raise t.TraitError(f"rows must be at least 1, got {proposal['value']}")
        return proposal["value"]
