// The page of nmt.serve: POST /translate with attention, then heatmaps of the chosen target piece.
"use strict";

const $ = (id) => document.getElementById(id);
let current = null;  // the translations of the last request

function heat(w, max) {  // weight in [0, max] -> a white-to-blue background (the row's largest is darkest)
  const a = Math.max(0, Math.min(1, w / (max || 1)));
  return `rgba(31, 119, 180, ${a.toFixed(3)})`;
}

function show(word) {  // the name of a piece without sentencepiece's word-start mark (a lone mark stays)
  return word.replace(/\u2581/g, " ").trim() || "\u2423";
}

async function loadModels() {
  const res = await fetch("/models");
  const models = await res.json();
  for (const m of models) {
    const opt = document.createElement("option");
    opt.value = m.id;
    opt.textContent = `${m.id}: ${m.attention.score}, ${m.attention.mode} (${m.backend})`;
    $("model").appendChild(opt);
  }
}

async function translate(event) {
  event.preventDefault();
  const lines = $("src").value.split("\n").filter((l) => l.trim() !== "");
  if (!lines.length) return;
  $("status").textContent = "translating…";
  $("status").className = "";
  const body = {text: lines, model: Number($("model").value || 0), beam: Number($("beam").value || 5), attention: true};
  try {
    const res = await fetch("/translate", {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify(body)});
    const data = await res.json();
    if (!res.ok) throw new Error(data.error || res.statusText);
    current = data.translations;
    render();
    $("status").textContent = "";
  } catch (e) {
    $("status").textContent = e.message;
    $("status").className = "error";
  }
}

function render() {
  const out = $("out");
  out.innerHTML = "";
  current.forEach((t, i) => {
    const div = document.createElement("div");
    div.className = "line";
    div.dataset.tgt = t.tgt;
    const src = document.createElement("span");
    src.className = "src";
    src.textContent = t.src;
    div.appendChild(src);
    t.attention.tgt_pieces.forEach((piece, j) => {
      const span = document.createElement("span");
      span.className = "tok";
      span.textContent = (piece.startsWith("\u2581") && j > 0 ? " " : "") + show(piece);
      span.dataset.line = i;
      span.dataset.piece = j;
      span.addEventListener("mouseenter", () => select(i, j));
      span.addEventListener("click", () => select(i, j));
      div.appendChild(span);
    });
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = t.score.toFixed(2);
    div.appendChild(score);
    out.appendChild(div);
  });
  if (current.length) select(0, 0);
}

function select(i, j) {
  const att = current[i].attention;
  document.querySelectorAll(".tok.selected").forEach((s) => s.classList.remove("selected"));
  const span = document.querySelector(`.tok[data-line="${i}"][data-piece="${j}"]`);
  if (span) span.classList.add("selected");
  $("detail").hidden = false;
  $("detail-title").textContent = `“${show(att.tgt_pieces[j])}” looked at`;
  const pt = att.p_t ? att.p_t[j] : null;
  const D = att.window;
  $("detail-note").textContent = pt === null ? "global attention: every source piece"
    : `local attention: centre p_t = ${pt.toFixed(2)}, window ±${D} (red: centre, blue line: window)`;
  const srcRow = $("strip-src"), heatRow = $("strip-heat");
  const max = Math.max(...att.weights[j]);
  srcRow.innerHTML = "";
  heatRow.innerHTML = "";
  att.src_pieces.forEach((piece, s) => {
    const a = document.createElement("td");
    a.textContent = show(piece);
    const w = att.weights[j][s];
    const b = document.createElement("td");
    b.className = "cell";
    b.style.background = heat(w, max);
    b.title = w.toFixed(3);
    b.textContent = w >= 0.05 ? w.toFixed(2) : "";
    if (pt !== null && Math.abs(s - pt) <= D) a.classList.add("in-window");
    if (pt !== null && Math.round(pt) === s) b.classList.add("centre");
    srcRow.appendChild(a);
    heatRow.appendChild(b);
  });
  renderMatrix(att, j);
}

function renderMatrix(att, selected) {
  const table = $("matrix");
  table.innerHTML = "";
  const head = document.createElement("tr");
  head.appendChild(document.createElement("th"));
  att.src_pieces.forEach((p) => {
    const th = document.createElement("th");
    th.textContent = show(p);
    head.appendChild(th);
  });
  table.appendChild(head);
  att.weights.forEach((row, j) => {
    const tr = document.createElement("tr");
    if (j === selected) tr.className = "selected";
    const th = document.createElement("th");
    th.textContent = show(att.tgt_pieces[j]);
    tr.appendChild(th);
    const max = Math.max(...row);
    row.forEach((w) => {
      const td = document.createElement("td");
      td.className = "cell";
      td.style.background = heat(w, max);
      td.title = w.toFixed(3);
      tr.appendChild(td);
    });
    table.appendChild(tr);
  });
}

$("form").addEventListener("submit", translate);
loadModels().catch((e) => { $("status").textContent = `cannot list models: ${e.message}`; });
