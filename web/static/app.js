// megasolve web page: plain JavaScript, no library, no request outside this server.
// Views (the URL's ?view=): plan (solve), layout (one layout's detail), compare (two layouts), whatif.
// The URL holds every input, so a link reproduces the page. Forms are built from /api/openapi.json,
// i.e. from the CLI's own options.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const SVG_NS = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, v);
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const fmt = {
  gb: (v) => v.toFixed(1),
  s: (v) => v.toFixed(3),
  pct: (v) => (100 * v).toFixed(1) + "%",
  int: (v) => Math.round(v).toLocaleString("en-US"),
  si: (v) => {
    for (const [scale, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (Math.abs(v) >= scale) return (v / scale).toFixed(Math.abs(v) < 10 * scale ? 2 : 1) + suffix;
    }
    return v.toFixed(0);
  },
};

// ------------------------------------------------------------------------------------------ API
let SCHEMA = null;
let MODELS = null;
let GPUS = null;

async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

async function loadCatalogs() {
  if (SCHEMA) return;
  const [api, models, gpus] = await Promise.all([getJSON("/api/openapi.json"), getJSON("/api/models"),
    getJSON("/api/gpus")]);
  SCHEMA = api.components.schemas;
  MODELS = models;
  GPUS = gpus;
}

// The job this page waits for; a new submit or a page change cancels it, so the server's workers
// only run what someone still looks at.
let CURRENT_JOB = null;

function cancelCurrentJob() {
  if (CURRENT_JOB) fetch(`/api/jobs/${CURRENT_JOB}`, {method: "DELETE"});
  CURRENT_JOB = null;
}

// Runs a command as a job (queue position, progress, cancel); resolves with the job's runs.
async function runJob(command, options, formats, statusBox) {
  cancelCurrentJob();
  const r = await fetch("/api/jobs", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({command, options, formats})});
  let job = await r.json();
  if (!r.ok) return {error: job.error, field: job.field};
  CURRENT_JOB = job.id;
  const cancel = el("button", {type: "button", class: "cancel", text: "Cancel",
    onclick: () => fetch(`/api/jobs/${job.id}`, {method: "DELETE"})});
  const line = el("span", {class: "status-line"});
  const bar = el("progress", {max: 1, value: 0});
  statusBox.replaceChildren(line, bar, cancel);
  statusBox.hidden = false;
  while (!["done", "failed", "timeout", "cancelled"].includes(job.state)) {
    if (job.state === "queued") {
      line.textContent = `queued: position ${job.position}`;
      bar.removeAttribute("value");
    } else if (job.progress) {
      const [done, total] = job.progress;
      line.textContent = `running: ${done} of ${total} points, ${job.elapsed_s.toFixed(1)} s`;
      bar.max = total; bar.value = done;
    } else {
      line.textContent = `running: ${job.elapsed_s.toFixed(1)} s (stopped at ${job.limit_s} s)`;
      bar.max = job.limit_s; bar.value = job.elapsed_s;
    }
    await new Promise((ok) => setTimeout(ok, 250));
    if (CURRENT_JOB !== job.id) return {superseded: true};
    job = await getJSON(`/api/jobs/${job.id}`);
  }
  if (CURRENT_JOB !== job.id) return {superseded: true};
  CURRENT_JOB = null;
  statusBox.hidden = true;
  if (job.state !== "done") return {error: job.error || job.state, field: null};
  const first = job.runs[0];
  if (first.error) return {error: first.error, field: first.field};
  return {runs: job.runs};
}

// ------------------------------------------------------------------------------------------ forms
const GROUPS = [
  ["Model", ["model", "model_text"]],
  ["Cluster", ["gpus", "gpu", "gpus_per_node", "nvlink_domain", "nic_gbps", "cluster_text"]],
  ["Workload", ["seq_len", "gbs", "precision", "attention", "tokens", "gpu_hour_price"]],
  ["Recipe", ["fp8_recipe", "fp8_output_proj", "moe_dispatcher", "cross_entropy", "grad_reduce_in_bf16",
    "fsdp_main_grads_dtype", "fsdp_grad_comm_dtype", "no_activation_fusion", "activation_func_fp8_input_store",
    "use_precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype",
    "offload_modules"]],
  ["Overlap", ["tp_comm_overlap", "no_overlap_p2p_communication", "moe_ep_overlap", "moe_shared_expert_overlap",
    "no_dp_comm_overlap", "no_overlap_param_gather", "cp_comm_type"]],
  ["Search", ["top_k", "fix", "require", "min_headroom", "time_limit", "engine", "allow_cross_domain_tp", "jobs",
    "min_gpus"]],
  ["Calibration", ["profile_text"]],
];
const HIDDEN_FIELDS = new Set(["format"]);

function fieldInput(name, prop, value) {
  const id = `f-${name}`;
  let input;
  if (name === "model") {
    input = el("input", {id, name, list: "model-list", autocomplete: "off", placeholder: "preset, e.g. llama-3.1-8b"});
  } else if (name === "gpu") {
    input = el("input", {id, name, list: "gpu-list", autocomplete: "off", placeholder: "e.g. h100"});
  } else if (name.endsWith("_text")) {
    const hints = {model_text: "paste a config.json or a Megatron YAML (or load a file below)",
      cluster_text: "paste a cluster YAML (instead of the GPU flags)",
      profile_text: "paste a profile YAML written by megasolve calibrate --out"};
    input = el("textarea", {id, name, rows: 4, spellcheck: "false", placeholder: hints[name] || ""});
  } else if (prop.type === "boolean") {
    input = el("input", {id, name, type: "checkbox"});
  } else if (prop.enum) {
    input = el("select", {id, name}, prop.enum.map((v) => el("option", {value: v, text: v})));
  } else {
    input = el("input", {id, name, autocomplete: "off",
      placeholder: prop.type === "array" ? "e.g. tp=2, pp=1" : (prop.default !== undefined ? String(prop.default) : "")});
  }
  setInput(input, prop, value);
  return input;
}

function setInput(input, prop, value) {
  if (prop.type === "boolean") input.checked = value === undefined ? !!prop.default : value === true || value === "1" || value === "true";
  else if (input.tagName === "SELECT") input.value = value !== undefined ? value : prop.default;
  else if (prop.type === "array") input.value = value === undefined ? "" : [].concat(value).join(", ");
  else input.value = value === undefined ? "" : value;
}

function buildForm(command, params, submitText, onSubmit) {
  const schema = SCHEMA[command].properties;
  const form = el("form", {class: "options", id: `form-${command}`, novalidate: true});
  const placed = new Set();
  const groups = GROUPS.map(([title, names]) => [title, names.filter((n) => n in schema)]);
  const rest = Object.keys(schema).filter((n) => !HIDDEN_FIELDS.has(n) && !GROUPS.some(([, g]) => g.includes(n)));
  if (rest.length) groups.push(["More options", rest]);
  for (const [title, names] of groups) {
    if (!names.length) continue;
    const fs = el("fieldset", {}, el("legend", {text: title}));
    for (const name of names) {
      placed.add(name);
      const prop = schema[name];
      const input = fieldInput(name, prop, params[name]);
      const label = el("label", {for: input.id, text: name.replaceAll("_", " "), title: prop.description || ""});
      const row = el("div", {class: `field field-${name}` + (prop.type === "boolean" ? " check" : "")},
        label, input, el("div", {class: "error", id: `err-${name}`, role: "alert"}));
      if (name === "model_text") {
        const file = el("input", {type: "file", id: "model-file", accept: ".json,.yaml,.yml,application/json"});
        file.addEventListener("change", async () => {
          const f = file.files[0];
          if (!f) return;
          if (f.size > 256 * 1024) { showErrors(form, {error: `model_text: ${f.name} is larger than 256 KiB; fix: upload the model's config.json`, field: "model_text"}); return; }
          input.value = await f.text();
          $("#f-model", form).value = "";
        });
        row.append(el("label", {class: "file", for: "model-file", text: "or load a file:"}), file);
      }
      fs.append(row);
    }
    form.append(fs);
  }
  form.append(el("datalist", {id: "model-list"}, MODELS.models.map((m) => el("option", {value: m.name})),
    MODELS.aliases.map((a) => el("option", {value: a.alias}))));
  form.append(el("datalist", {id: "gpu-list"}, GPUS.gpus.map((g) => el("option", {value: g.name}))));
  form.append(el("div", {class: "actions"}, el("button", {type: "submit", id: "submit", text: submitText}),
    el("div", {class: "error", id: "err-form", role: "alert"})));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); onSubmit(readForm(form, command)); });
  return form;
}

// The form as request options: empty fields are left out (the CLI's default), defaults too.
function readForm(form, command) {
  const schema = SCHEMA[command].properties;
  const out = {};
  for (const [name, prop] of Object.entries(schema)) {
    const input = form.elements[name];
    if (!input) continue;
    if (prop.type === "boolean") {
      if (input.checked !== !!prop.default) out[name] = input.checked;
      continue;
    }
    const raw = input.value.trim();
    if (raw === "" || (prop.default !== undefined && raw === String(prop.default))) continue;
    if (prop.type === "array") out[name] = raw.split(/[\s,]+/).filter(Boolean);
    else if ((prop.type === "integer" || prop.type === "number") && /^-?[0-9.eE+]+$/.test(raw) && !isNaN(Number(raw))) out[name] = Number(raw);
    else out[name] = name.endsWith("_text") ? input.value : raw;
  }
  return out;
}

function showErrors(form, result) {
  for (const box of form.querySelectorAll(".error")) box.textContent = "";
  for (const input of form.querySelectorAll(".invalid")) input.classList.remove("invalid");
  if (!result || !result.error) return;
  const box = result.field && $(`#err-${result.field}`, form);
  const target = box || $("#err-form", form);
  target.textContent = result.error;
  if (box) {
    const input = form.elements[result.field];
    if (input) { input.classList.add("invalid"); input.focus(); }
  }
}

// ------------------------------------------------------------------------------------------ URL state
function paramsFromURL() {
  const q = new URLSearchParams(location.search);
  const out = {};
  for (const [k, v] of q) {
    if (k in out) out[k] = [].concat(out[k], v);
    else out[k] = v;
  }
  return out;
}

function urlFor(view, options, extra = {}) {
  const q = new URLSearchParams();
  q.set("view", view);
  for (const [k, v] of Object.entries({...options, ...extra})) {
    if (v === undefined || v === null) continue;
    for (const item of [].concat(v)) q.append(k, typeof item === "boolean" ? (item ? "1" : "0") : String(item));
  }
  return "/?" + q.toString();
}

// URL values are strings: give them the schema's types.
function typed(command, params) {
  const schema = SCHEMA[command].properties;
  const out = {};
  for (const [k, v] of Object.entries(params)) {
    const prop = schema[k];
    if (!prop) continue;
    if (prop.type === "boolean") out[k] = v === "1" || v === "true";
    else if (prop.type === "array") out[k] = [].concat(v);
    else out[k] = v;  // numbers stay as typed ("1e12"); the CLI's option types parse them
  }
  return out;
}

// A layout (the JSON's "layout" object) as estimate options, and back through the URL as "tp=2,pp=1,...".
// Every layout key that is an estimate option travels (so knobs added to the search later do too),
// except values equal to the option's default and gbs (a workload input, already in the plan's).
function layoutOptions(layout) {
  const props = SCHEMA.estimate.properties;
  const out = {};
  for (const [k, v] of Object.entries(layout)) {
    if (!(k in props) || k === "gbs" || v === null || v === undefined) continue;
    if (props[k].default !== undefined && v === props[k].default) continue;
    out[k] = v;
  }
  return out;
}
const encodeLayout = (layout) => Object.entries(layoutOptions(layout)).map(([k, v]) => `${k}=${typeof v === "boolean" ? (v ? 1 : 0) : v}`).join(",");
function decodeLayout(text) {
  const raw = {};
  for (const part of String(text || "").split(",")) {
    const [k, v] = part.split("=");
    if (k && v !== undefined) raw[k] = v;
  }
  return typed("estimate", raw);
}

// Plan inputs that the estimate command also takes (model, cluster, workload, recipe).
function sharedOptions(params) {
  const solve = SCHEMA.solve.properties, estimate = SCHEMA.estimate.properties;
  const out = {};
  for (const [k, v] of Object.entries(typed("solve", params))) if (k in solve && k in estimate) out[k] = v;
  return out;
}

// ------------------------------------------------------------------------------------------ charts
const PARTS = [["weights_gb", "weights", "#4C72B0"], ["grads_gb", "gradients", "#55A868"],
  ["optimizer_gb", "optimizer state", "#C44E52"], ["activations_gb", "activations", "#DD8452"],
  ["other_gb", "other (CUDA ctx, NCCL, reserve)", "#8C8C8C"]];
const TERM_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
  "#CCB974", "#64B5CD"];

function niceTicks(max, count = 5) {
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = 0; t <= max + 1e-9; t += step) ticks.push(t);
  return ticks;
}

// Per-stage memory stacked against the usable capacity; the band between the peak stage and the
// capacity is the headroom (green), or the shortfall (red) when the peak is above it.
function memoryChart(report) {
  const mem = report.memory, stages = mem.stages;
  const W = 620, H = 320, L = 52, R = 130, T = 24, B = 56;
  const top = Math.max(mem.capacity_gb, mem.peak_gb) * 1.1;
  const y = (gb) => T + (H - T - B) * (1 - gb / top);
  const slot = (W - L - R) / stages.length, bw = Math.min(56, slot * 0.7);
  const chart = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart memory-chart", role: "img",
    "aria-label": `memory per pipeline stage: peak ${mem.peak_gb.toFixed(1)} GB of ${mem.capacity_gb.toFixed(1)} GB`});
  for (const t of niceTicks(top)) {
    chart.append(svg("line", {x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid"}),
      svg("text", {x: L - 6, y: y(t) + 4, class: "tick", "text-anchor": "end"}, String(+t.toFixed(1))));
  }
  const over = mem.peak_gb > mem.capacity_gb;
  const lo = Math.min(mem.peak_gb, mem.capacity_gb), hi = Math.max(mem.peak_gb, mem.capacity_gb);
  chart.append(svg("rect", {x: L, width: W - L - R, y: y(hi), height: Math.max(1, y(lo) - y(hi)),
    class: over ? "band-over" : "band-headroom"}));
  stages.forEach((s, i) => {
    const x = L + slot * i + (slot - bw) / 2;
    let acc = 0;
    for (const [key, name, color] of PARTS) {
      const v = s[key] || 0;
      if (v <= 0) continue;
      chart.append(svg("rect", {x, width: bw, y: y(acc + v), height: y(acc) - y(acc + v), fill: color},
        svg("title", {}, `stage ${s.stage} ${name}: ${v.toFixed(2)} GB`)));
      acc += v;
    }
    chart.append(svg("text", {x: x + bw / 2, y: y(s.total_gb) - 4, class: "value", "text-anchor": "middle"}, s.total_gb.toFixed(1)),
      svg("text", {x: x + bw / 2, y: H - B + 14, class: "tick", "text-anchor": "middle"}, `stage ${s.stage}`),
      svg("text", {x: x + bw / 2, y: H - B + 27, class: "tick small", "text-anchor": "middle"}, `${s.layers} layers`));
  });
  chart.append(svg("line", {x1: L, x2: W - R, y1: y(mem.capacity_gb), y2: y(mem.capacity_gb), class: "capacity"}),
    svg("text", {x: W - R + 4, y: y(mem.capacity_gb) - 4, class: "capacity-label"}, `usable ${mem.capacity_gb.toFixed(1)} GB`),
    svg("text", {x: 4, y: 14, class: "axis-title"}, "GB per GPU"));
  const headroom = mem.capacity_gb - mem.peak_gb;
  chart.append(svg("text", {x: W - R + 4, y: Math.max(y(mem.capacity_gb) + 14, y((lo + hi) / 2) + 4), class: over ? "over-label" : "headroom-label"},
    over ? `${(-headroom).toFixed(1)} GB short` : `headroom ${headroom.toFixed(1)} GB`));
  let lx = L;
  for (const [, name, color] of PARTS) {  // legend under the stage labels
    const text = name.replace(" (CUDA ctx, NCCL, reserve)", " (CUDA, NCCL, reserve)");
    chart.append(svg("rect", {x: lx, y: H - 11, width: 10, height: 10, fill: color}),
      svg("text", {x: lx + 14, y: H - 2, class: "legend"}, text));
    lx += 22 + 6.2 * text.length;
  }
  return chart;
}

// The step's time terms as one stacked bar plus a table.
function timeBreakdown(report) {
  const t = report.time;
  const terms = Object.entries(t.breakdown_s).filter(([, v]) => v > 0);
  const total = terms.reduce((a, [, v]) => a + v, 0) || 1;
  const W = 560, H = 34;
  const bar = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart time-chart", role: "img", "aria-label": "step time breakdown"});
  let x = 0;
  terms.forEach(([name, v], i) => {
    const w = (W * v) / total;
    bar.append(svg("rect", {x, y: 4, width: w, height: H - 8, fill: TERM_COLORS[i % TERM_COLORS.length]},
      svg("title", {}, `${name.replaceAll("_", " ")}: ${v.toFixed(3)} s`)));
    if (w > 60) bar.append(svg("text", {x: x + 4, y: H / 2 + 4, class: "bar-label"}, name.replaceAll("_", " ")));
    x += w;
  });
  const table = el("table", {class: "time-table"}, el("thead", {}, el("tr", {}, el("th", {text: "term"}),
    el("th", {text: "seconds"}), el("th", {text: "share of step"}))),
    el("tbody", {}, Object.entries(t.breakdown_s).map(([name, v]) => {
      const i = terms.findIndex(([n]) => n === name);
      return el("tr", {}, el("td", {}, i >= 0 ? el("span", {class: "swatch", "data-color": i}) : null, name.replaceAll("_", " ")),
        el("td", {text: v.toFixed(3)}), el("td", {text: fmt.pct(v / (t.step_s || 1))}));
    }), el("tr", {class: "total"}, el("td", {text: "step"}), el("td", {text: t.step_s.toFixed(3)}), el("td", {text: "100%"}))));
  for (const sw of table.querySelectorAll(".swatch")) sw.style.background = TERM_COLORS[sw.dataset.color % TERM_COLORS.length];
  return el("div", {}, bar, table);
}

// One line chart over cluster sizes (log2 x), a line per series.
function lineChart(title, series, valueOf, format) {
  const W = 420, H = 240, L = 56, R = 12, T = 28, B = 34;
  const pts = series.flatMap((s) => s.points.filter((p) => valueOf(p) !== null && valueOf(p) !== undefined));
  const chart = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "chart line-chart", role: "img", "aria-label": title});
  chart.append(svg("text", {x: L, y: 16, class: "chart-title"}, title));
  if (!pts.length) {
    chart.append(svg("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "tick"}, "no fitting point"));
    return chart;
  }
  const xs = pts.map((p) => Math.log2(p.cluster.num_gpus));
  const x0 = Math.min(...xs), x1 = Math.max(...xs) === x0 ? x0 + 1 : Math.max(...xs);
  const top = Math.max(...pts.map(valueOf)) * 1.12 || 1;
  const x = (n) => L + (W - L - R) * (Math.log2(n) - x0) / (x1 - x0);
  const y = (v) => T + (H - T - B) * (1 - v / top);
  for (const t of niceTicks(top, 4)) {
    chart.append(svg("line", {x1: L, x2: W - R, y1: y(t), y2: y(t), class: "grid"}),
      svg("text", {x: L - 6, y: y(t) + 4, class: "tick", "text-anchor": "end"}, format(t)));
  }
  for (const n of [...new Set(pts.map((p) => p.cluster.num_gpus))]) {
    chart.append(svg("text", {x: x(n), y: H - B + 15, class: "tick", "text-anchor": "middle"}, String(n)));
  }
  chart.append(svg("text", {x: (L + W - R) / 2, y: H - 4, class: "tick", "text-anchor": "middle"}, "GPUs"));
  series.forEach((s, i) => {
    const color = TERM_COLORS[i % TERM_COLORS.length];
    const good = s.points.filter((p) => valueOf(p) !== null && valueOf(p) !== undefined);
    if (good.length > 1) {
      chart.append(svg("polyline", {points: good.map((p) => `${x(p.cluster.num_gpus)},${y(valueOf(p))}`).join(" "),
        fill: "none", stroke: color, "stroke-width": 2}));
    }
    for (const p of good) {
      chart.append(svg("circle", {cx: x(p.cluster.num_gpus), cy: y(valueOf(p)), r: 3.5, fill: color},
        svg("title", {}, `${s.key}, ${p.cluster.num_gpus} GPUs: ${format(valueOf(p))}`)));
    }
    if (series.length > 1) {
      chart.append(svg("line", {x1: W - R - 18, x2: W - R - 4, y1: T + 13 * i, y2: T + 13 * i, stroke: color, "stroke-width": 3}),
        svg("text", {x: W - R - 22, y: T + 4 + 13 * i, "text-anchor": "end", class: "legend"}, s.key));
    }
  });
  return chart;
}

// ------------------------------------------------------------------------------------------ copy
async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (e) {
    const area = el("textarea", {class: "offscreen"});
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1200);
}

// ------------------------------------------------------------------------------------------ views
const main = () => $("#main");

function setView(name) {
  for (const a of document.querySelectorAll("nav a[data-view]")) a.classList.toggle("active", a.dataset.view === name);
}

function summary(report, label) {
  const mem = report.memory, t = report.time;
  const headroom = mem.capacity_gb - mem.peak_gb;
  return el("dl", {class: "summary"},
    el("dt", {text: "layout"}), el("dd", {class: "layout-label", text: label}),
    el("dt", {text: "peak memory"}), el("dd", {text: `${fmt.gb(mem.peak_gb)} of ${fmt.gb(mem.capacity_gb)} GB usable (${headroom >= 0 ? "fits" : "DOES NOT FIT"}, ${headroom >= 0 ? "+" : ""}${headroom.toFixed(1)} GB)`}),
    el("dt", {text: "step"}), el("dd", {text: `${fmt.s(t.step_s)} s`}),
    el("dt", {text: "tokens/s/GPU"}), el("dd", {text: fmt.int(t.tokens_per_s_per_gpu)}),
    el("dt", {text: "MFU"}), el("dd", {text: fmt.pct(t.mfu)}),
    el("dt", {text: "bubble"}), el("dd", {text: fmt.pct(t.bubble_fraction)}));
}

// A plan's MFU this far above the best measured run behind its speed is an extrapolation (cli/render.py
// MFU_BEYOND_MEASURED; a test holds the two equal)
const MFU_BEYOND_MEASURED = 1.25;

// what the step time rests on (the JSON's speed_basis): a warning where no fitted run stands behind it, or where the
// plan's MFU (estimate's, or the ranking's #1) is far above the highest MFU measured among those runs -- the CLI's
// speed line (cli/render.py speed_basis_line), word for word
function speedBasis(data) {
  const b = data.speed_basis;
  if (!b) return document.createTextNode("");
  let borrowed = !b.published_runs && !b.profile_runs;
  let note = b.note;
  const timed = data.time || ((data.layouts || [])[0] || {}).time || {};
  const ceiling = b.measured_mfu_max_pct;
  if (ceiling !== null && ceiling !== undefined && timed.mfu !== null && timed.mfu !== undefined &&
      100 * timed.mfu > ceiling * MFU_BEYOND_MEASURED) {
    const which = data.layouts ? "#1's" : "its";
    note += `; ${which} predicted MFU ${(100 * timed.mfu).toFixed(1)} % is far above the highest measured among ` +
      `them (${ceiling.toFixed(1)} %): treat that speed with suspicion`;
    borrowed = true;
  }
  return el("p", {class: borrowed ? "speed-basis warning" : "speed-basis", text: `speed: ${note}`});
}

function topComm(t) {
  const comm = Object.entries(t.breakdown_s).filter(([k]) => k.endsWith("_comm"));
  if (!comm.length) return "-";
  const [k, v] = comm.reduce((a, b) => (b[1] > a[1] ? b : a));
  return `${k.replace("_comm", "")} ${Math.round((100 * v) / t.step_s)}%`;
}

// --- plan
async function planView(params) {
  setView("plan");
  const root = el("section", {class: "plan"});
  const status = el("div", {class: "job-status", id: "job-status", hidden: true});
  const results = el("div", {id: "results"});
  const form = buildForm("solve", typed("solve", params), "Solve", async (options) => {
    history.pushState(null, "", urlFor("plan", options));
    await solveAndShow(form, options, status, results);
  });
  root.append(el("h1", {text: "Plan a layout"}), form, status, results);
  main().replaceChildren(root);
  const options = typed("solve", params);
  if (options.model || options.model_text) await solveAndShow(form, options, status, results);
}

async function solveAndShow(form, options, status, results) {
  showErrors(form, null);
  results.replaceChildren();
  const answer = await runJob("solve", options, ["json"], status);
  if (answer.superseded) return;
  if (answer.error) { showErrors(form, answer); return; }
  const run = answer.runs[0];
  const data = run.data;
  const notes = run.notes.map((n) => el("p", {class: "note", text: "note: " + n}));
  if (!data.layouts.length) { results.replaceChildren(...notes, infeasible(data, run, options)); return; }
  const shared = sharedOptions(urlParamsOf(options));
  const head = ["#", "layout", "peak GB", "headroom GB", "step s", "tokens/s/GPU", "MFU", "bubble", "top comm", "", "compare"];
  const numeric = [true, false, true, true, true, true, true, true, false, false, false];
  const rows = data.layouts.map((entry, i) => {
    const mem = entry.memory, t = entry.time;
    const href = urlFor("layout", shared, {layout: encodeLayout(entry.layout)});
    const values = [entry.rank, run.labels[i] + (entry.layout.sequence_parallel ? " sp" : ""), mem.peak_gb,
      mem.capacity_gb - mem.peak_gb, t.step_s, t.tokens_per_s_per_gpu, t.mfu, t.bubble_fraction, topComm(t)];
    const shown = [String(entry.rank), values[1], fmt.gb(values[2]), fmt.gb(values[3]), fmt.s(values[4]),
      fmt.int(values[5]), fmt.pct(values[6]), fmt.pct(values[7]), values[8]];
    const tr = el("tr", {"data-rank": entry.rank},
      shown.map((s, c) => el("td", {class: numeric[c] ? "num" : "", text: s})),
      el("td", {}, el("a", {href, class: "details", text: "details"})),
      el("td", {}, el("input", {type: "checkbox", class: "pin", value: encodeLayout(entry.layout), "aria-label": `compare #${entry.rank}`})));
    tr._values = values;
    return tr;
  });
  const tbody = el("tbody", {}, rows);
  const thead = el("thead", {}, el("tr", {}, head.map((h, c) => el("th", {class: numeric[c] ? "num sortable" : (c < 9 ? "sortable" : ""),
    text: h, onclick: c < 9 ? () => sortRows(tbody, c, numeric[c]) : null}))));
  const compareLink = el("a", {class: "button disabled", id: "compare-link", text: "Compare 2 pinned", href: "#"});
  tbody.addEventListener("change", () => {
    const pins = [...tbody.querySelectorAll(".pin:checked")];
    if (pins.length > 2) pins[0].checked = false;
    const chosen = [...tbody.querySelectorAll(".pin:checked")].map((p) => p.value);
    compareLink.classList.toggle("disabled", chosen.length !== 2);
    compareLink.href = chosen.length === 2 ? urlFor("compare", shared, {a: chosen[0], b: chosen[1]}) : "#";
  });
  const s = data.search;
  results.replaceChildren(...notes,
    el("h2", {text: `${data.layouts.length} fastest layouts that fit`}),
    el("table", {class: "ranked", id: "ranked"}, thead, tbody),
    el("p", {class: "why", id: "why", text: `why #1: ${run.why}`}),
    speedBasis(data),
    el("p", {class: "search", text: `search: ${s.engine}, ${fmt.int(s.space_size)} combinations, ` +
      (s.proven_optimal ? "proven optimal under the cost model" : "NOT proven optimal (time limit): best found so far") +
      `, ${s.wall_s.toFixed(1)} s`}),
    el("p", {}, compareLink, " ", el("a", {class: "button", href: urlFor("layout", shared, {layout: encodeLayout(data.layouts[0].layout)}), text: "Details of #1"}),
      " ", el("a", {class: "button", href: location.pathname + location.search, text: "Link to this plan"})));
}

// URL-encodable copy of the options (what urlFor/typed round-trip)
function urlParamsOf(options) {
  const out = {};
  for (const [k, v] of Object.entries(options)) out[k] = typeof v === "boolean" ? (v ? "1" : "0") : v;
  return out;
}

function sortRows(tbody, column, numeric) {
  const rows = [...tbody.children];
  const dir = tbody.dataset.sortColumn === String(column) && tbody.dataset.sortDir === "asc" ? "desc" : "asc";
  rows.sort((a, b) => {
    const x = a._values[column], y = b._values[column];
    const c = numeric ? x - y : String(x).localeCompare(String(y));
    return dir === "asc" ? c : -c;
  });
  tbody.dataset.sortColumn = column;
  tbody.dataset.sortDir = dir;
  tbody.replaceChildren(...rows);
}

function infeasible(data, run, options) {
  const shared = sharedOptions(urlParamsOf(options));
  return el("section", {class: "infeasible", id: "infeasible"},
    el("h2", {text: "No layout fits"}),
    el("h3", {text: "Reasons"}), el("ul", {}, (data.reasons || []).map((r) => el("li", {text: r}))),
    (data.closest || []).length ? el("h3", {text: "Closest layouts"}) : null,
    (data.closest || []).length ? el("ul", {}, data.closest.map((c, i) => el("li", {},
      el("a", {href: urlFor("layout", shared, {layout: encodeLayout(c.layout)}), text: run.closest_labels[i]}),
      ` needs ${fmt.gb(c.peak_gb)} GB per GPU (${fmt.gb(c.lacks_gb_per_gpu)} GB short)`))) : null,
    (data.repairs || []).length ? el("h3", {text: "Repairs"}) : null,
    (data.repairs || []).length ? el("ul", {}, data.repairs.map((r) => el("li", {text: r}))) : null);
}

// --- layout detail
// The launch formats are the estimate command's --format choices beyond the data formats.
const launchFormats = () => SCHEMA.estimate.properties.format.enum.filter((f) => !["table", "json", "yaml"].includes(f));

async function estimateRuns(params, layoutText, status) {
  const options = {...sharedOptions(params), ...decodeLayout(layoutText)};
  return runJob("estimate", options, ["json", ...launchFormats()], status);
}

function backToPlan(params) {
  const plan = {};
  for (const [k, v] of Object.entries(params)) if (!["view", "layout", "a", "b"].includes(k)) plan[k] = v;
  return el("a", {href: urlFor("plan", plan), class: "back", text: "← back to the plan"});
}

async function layoutView(params) {
  setView("plan");
  const status = el("div", {class: "job-status", hidden: true});
  const body = el("div", {});
  main().replaceChildren(el("section", {class: "detail"}, backToPlan(params), el("h1", {text: "Layout detail"}), status, body));
  const answer = await estimateRuns(params, params.layout, status);
  if (answer.superseded) return;
  if (answer.error) { body.replaceChildren(el("p", {class: "error-banner", text: answer.error})); return; }
  const [json, ...launch] = answer.runs;
  const report = json.data;
  body.replaceChildren(
    el("p", {class: "context", text: `${report.model} on ${report.cluster.num_gpus} x ${report.cluster.gpu}, seq ${report.workload.seq_length}, gbs ${report.layout.gbs} (${report.layout.num_microbatches} micro-batches), ${report.workload.precision}`}),
    summary(report, json.label),
    ...report.violations.map((v) => el("p", {class: "violation", text: `violation ${v.rule}: ${v.message} -> ${v.fix}`})),
    el("h2", {text: "Memory per GPU, by pipeline stage"}), memoryChart(report),
    el("h2", {text: "Step time"}), timeBreakdown(report), speedBasis(report),
    el("h2", {text: "Launch settings"}),
    el("div", {class: "launch"}, launch.map((run) => {
      const pre = el("pre", {class: `launch-text launch-${run.format}`, text: run.text || run.error});
      const button = el("button", {type: "button", class: "copy", text: "Copy", onclick: () => copyText(run.text || "", button)});
      return el("div", {class: "launch-block"}, el("div", {class: "launch-head"}, el("h3", {text: run.format}), button), pre);
    })));
}

// --- compare
async function compareView(params) {
  setView("plan");
  const status = el("div", {class: "job-status", hidden: true});
  const body = el("div", {class: "compare"});
  main().replaceChildren(el("section", {}, backToPlan(params), el("h1", {text: "Compare two layouts"}), status, body));
  const a = await estimateRuns(params, params.a, status);
  if (a.superseded) return;
  const b = a.error ? a : await estimateRuns(params, params.b, status);
  if (b.superseded) return;
  if (a.error || b.error) { body.replaceChildren(el("p", {class: "error-banner", text: (a.error || b.error)})); return; }
  const ra = a.runs[0].data, rb = b.runs[0].data;
  const rows = [["peak GB", (r) => r.memory.peak_gb, fmt.gb, -1], ["headroom GB", (r) => r.memory.capacity_gb - r.memory.peak_gb, fmt.gb, 1],
    ["step s", (r) => r.time.step_s, fmt.s, -1], ["tokens/s/GPU", (r) => r.time.tokens_per_s_per_gpu, fmt.int, 1],
    ["MFU", (r) => r.time.mfu, fmt.pct, 1], ["bubble", (r) => r.time.bubble_fraction, fmt.pct, -1]];
  for (const term of Object.keys(ra.time.breakdown_s)) rows.push([`${term.replaceAll("_", " ")} s`, (r) => r.time.breakdown_s[term] || 0, fmt.s, -1]);
  const table = el("table", {class: "compare-table"},
    el("thead", {}, el("tr", {}, el("th", {text: ""}), el("th", {text: "A: " + a.runs[0].label}), el("th", {text: "B: " + b.runs[0].label}), el("th", {text: "B - A"}))),
    el("tbody", {}, rows.map(([name, get, f, better]) => {
      const x = get(ra), y = get(rb);
      const rel = x ? (y / x - 1) : 0;
      const cls = Math.abs(rel) < 1e-9 ? "" : ((rel > 0) === (better > 0) ? "better" : "worse");
      return el("tr", {}, el("td", {text: name}), el("td", {class: "num", text: f(x)}), el("td", {class: "num", text: f(y)}),
        el("td", {class: "num " + cls, text: x === y ? "=" : `${y >= x ? "+" : "-"}${f(Math.abs(y - x))}` + (x ? ` (${rel >= 0 ? "+" : ""}${(100 * rel).toFixed(1)}%)` : "")}));
    })));
  const side = (label, run) => el("div", {class: "side"}, el("h2", {text: label}), summary(run.data, run.label), memoryChart(run.data),
    el("a", {href: urlFor("layout", Object.fromEntries(Object.entries(params).filter(([k]) => !["view", "a", "b"].includes(k))), {layout: encodeLayout(run.data.layout)}), text: "details"}));
  body.replaceChildren(table, el("div", {class: "sides"}, side("A", a.runs[0]), side("B", b.runs[0])));
}

// --- what-if
async function whatifView(params) {
  setView("whatif");
  const status = el("div", {class: "job-status", hidden: true});
  const results = el("div", {id: "results"});
  const form = buildForm("whatif", typed("whatif", params), "Sweep", async (options) => {
    history.pushState(null, "", urlFor("whatif", options));
    await sweepAndShow(form, options, status, results);
  });
  main().replaceChildren(el("section", {}, el("h1", {text: "What-if: scale the cluster"}), form, status, results));
  const options = typed("whatif", params);
  if (options.model || options.model_text) await sweepAndShow(form, options, status, results);
}

async function sweepAndShow(form, options, status, results) {
  showErrors(form, null);
  results.replaceChildren();
  const answer = await runJob("whatif", options, ["json"], status);
  if (answer.superseded) return;
  if (answer.error) { showErrors(form, answer); return; }
  const run = answer.runs[0], data = run.data;
  const bySeries = new Map();
  data.points.forEach((p, i) => {
    const key = `${p.cluster.gpu} seq ${p.workload.seq_length} gbs ${p.workload.global_batch_size}`;
    if (!bySeries.has(key)) bySeries.set(key, {key, points: []});
    bySeries.get(key).points.push({...p, label: run.labels[i][0], runner: run.labels[i][1]});
  });
  const series = [...bySeries.values()];
  const fits = (p) => p.layout !== null;
  const charts = [lineChart("throughput (tokens/s)", series, (p) => fits(p) ? p.tokens_per_s : null, fmt.si),
    lineChart("MFU", series, (p) => fits(p) ? p.time.mfu : null, (v) => (100 * v).toFixed(0) + "%")];
  if (data.tokens !== null) charts.push(lineChart("days to train", series, (p) => p.days_to_train, (v) => v.toFixed(v < 10 ? 1 : 0)));
  if (data.gpu_hour_price !== null) charts.push(lineChart("cost to train", series, (p) => p.cost, fmt.si));
  const rows = data.points.map((p, i) => {
    const [label, runner] = run.labels[i];
    if (!p.layout) return el("tr", {class: "nofit"}, el("td", {text: p.cluster.gpu}), el("td", {class: "num", text: p.cluster.num_gpus}),
      el("td", {text: p.status === "unknown" ? "not settled in time" : "does not fit"}), el("td", {colspan: 6, text: p.reason || ""}));
    return el("tr", {}, el("td", {text: p.cluster.gpu}), el("td", {class: "num", text: p.cluster.num_gpus}),
      el("td", {}, label, runner ? el("div", {class: "runner", text: `2nd: ${runner} (+${(100 * p.runner_up.slower_by).toFixed(1)}%)`}) : null),
      el("td", {class: "num", text: fmt.gb(p.memory.peak_gb)}), el("td", {class: "num", text: p.time.step_s.toFixed(2)}),
      el("td", {class: "num", text: fmt.int(p.time.tokens_per_s_per_gpu)}), el("td", {class: "num", text: fmt.pct(p.time.mfu)}),
      el("td", {class: "num", text: p.days_to_train !== null ? p.days_to_train.toFixed(1) : "-"}),
      el("td", {class: "num", text: p.cost !== null ? fmt.si(p.cost) : "-"}));
  });
  const mins = Object.values(data.min_gpus).map((m) => el("li", {text: m.num_gpus === null
    ? `smallest cluster that fits (${m.gpu}, seq ${m.seq_length}): none (${m.note})`
    : `smallest cluster that fits (${m.gpu}, seq ${m.seq_length}, gbs ${m.global_batch_size}): ${m.num_gpus} GPUs` + (m.exact ? "" : ` (not exact: ${m.note})`)}));
  results.replaceChildren(...run.notes.map((n) => el("p", {class: "note", text: "note: " + n})),
    el("div", {class: "charts", id: "charts"}, charts),
    el("table", {class: "ranked", id: "sweep"}, el("thead", {}, el("tr", {}, ["GPU", "GPUs", "best layout", "peak GB", "step s", "tok/s/GPU", "MFU", "days", "cost"].map((h) => el("th", {text: h})))),
      el("tbody", {}, rows)),
    el("ul", {class: "min-gpus"}, mins),
    ...Object.entries(data.speed_basis || {}).map(([gpu, basis]) => {
      const line = speedBasis({speed_basis: basis});
      line.textContent = line.textContent.replace("speed: ", `speed on ${gpu}: `);
      return line;
    }));
}

// ------------------------------------------------------------------------------------------ routing
async function route() {
  cancelCurrentJob();
  const params = paramsFromURL();
  try {
    await loadCatalogs();
  } catch (e) {
    main().replaceChildren(el("p", {class: "error-banner", text: `cannot reach the server: ${e.message}`}));
    return;
  }
  const view = params.view || "plan";
  delete params.view;
  if (view === "layout") return layoutView(params);
  if (view === "compare") return compareView(params);
  if (view === "whatif") return whatifView(params);
  return planView(params);
}

window.addEventListener("popstate", route);
document.addEventListener("DOMContentLoaded", route);
