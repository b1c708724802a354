// The page "Try the model": the form, the live attention chart, the gallery, and the hooks for automation
// (?text=SENTENCE translates on load; ?selftest=N writes a JSON report for the book's browser tests).
// The model itself is in translator.js.
(function () {
  "use strict";
  const $ = id => document.getElementById(id);
  const book = window.transformerBook;
  const params = new URLSearchParams(location.search);
  // the searches' outputs and attention; `live` names the search being drawn as it runs
  const state = {beam: null, greedy: null, source: [], live: null};

  // --- the page's words, in the language of the book around it ----------------------------------------

  // The Chinese edition's pages say lang="zh-CN"; the HTML of the form is written in English, and
  // in another language each of its elements marked data-say="KEY" takes WORDS[lang][KEY]. The
  // Chinese build writes the plain-string words into the page too (_ext/editions.py), for a reader
  // without JavaScript.
  const WORDS = {
    en: {
      waiting: "the next sentence waits for this one to finish",
      beam_label: (k, alpha) => k === 1 ? "Beam search (k = 1, that is greedy)"
        : `Beam search (k = ${k}, \u03b1 = ${alpha})`,
      sentence_of: (i, n) => `, sentence ${i} of ${n}`,
      pieces_so_far: (name, which, n) => `${name} search${which}: ${n} pieces`,
      done: (k, beam, greedy, n) => `beam search (k = ${k}): ${beam} s; greedy search: ${greedy} s` +
        (n > 1 ? `; ${n} sentences, translated one by one (the chart shows the last)` : ""),
      unseen: pieces => `Never seen in training, so passed to the model as raw bytes: ${pieces}. ` +
        "Expect a poor translation around them.",
      try: "try",
      try_label: i => `Translate sentence ${i} here`,
      shown: (n, all) => `${n} of ${all}`,
      gallery_about: (n, task, results) => `The first ${n} sentences of ${task}, in corpus order, ` +
        `with the translations of the run's test evaluation (results/${results}, its chosen search), ` +
        "not of this page.",
      no_gallery: "No results record describes this model, so there are no test translations to show.",
      no_files: "The model's files did not load (translator/model.js and translator/translator.js " +
        "must sit beside the book's pages).",
      unreadable: message => `The model could not be read: ${message}`,
      of: (i, n) => `${i} of ${n}`,
      mean: "mean",
      origin: s => `of results/${s.results} (${s.task}; profile ${s.profile}, ${s.steps} steps, the last ` +
        `${s.average_last} checkpoints averaged; test BLEU ${s.test_bleu} with beam 4 in PyTorch)`,
      no_origin: "(no results record describes it: no scores)",
      about: (model, origin, quantization, pieces, characters) => `Model: ${model} ${origin}, ` +
        `${quantization} weights. Limits: ${pieces} word pieces, ${characters} characters.`,
      ready: seconds => `model ready in ${seconds} s`,
      keys: "English pieces (keys)", queries: "German pieces (queries)", weight: "weight",
      chart: (layer, head, pairs) => `Encoder-decoder attention, layer ${layer}, head ${head}: ${pairs}`,
      no_script: "The translator needs JavaScript, which is off in this browser.",
      no_chart: "Encoder-decoder attention: no translation yet",
    },
    zh: {
      english: "英文", translate: "翻译", beam_size: "束宽", greedy_search: "贪心解码",
      beam_search: "束搜索", attention: "编码器-解码器注意力", layer: "层", head: "头", which: "显示",
      loading: "正在加载模型……", gallery: "示例集：模型在测试集上的译文", search: "搜索",
      search_hint: "英文原句、参考译文或模型输出", reference: "参考译文", ours: "本书模型（测试运行）",
      waiting: "下一句等这一句译完再开始",
      beam_label: (k, alpha) => k === 1 ? "束搜索（k = 1，即贪心解码）" : `束搜索（k = ${k}，\u03b1 = ${alpha}）`,
      sentence_of: (i, n) => `，第 ${i} 句（共 ${n} 句）`,
      pieces_so_far: (name, which, n) => `${name === "beam" ? "束搜索" : "贪心解码"}${which}：${n} 个子词`,
      done: (k, beam, greedy, n) => `束搜索（k = ${k}）：${beam} 秒；贪心解码：${greedy} 秒` +
        (n > 1 ? `；共 ${n} 句，逐句翻译（图中显示最后一句）` : ""),
      unseen: pieces => `这些字符训练中从未出现，只能以原始字节交给模型：${pieces}。它们附近的译文可能较差。`,
      try: "试试",
      try_label: i => `在上方翻译第 ${i} 句`,
      shown: (n, all) => `${n} / ${all}`,
      gallery_about: (n, task, results) => `${task} 的前 ${n} 个句子，按语料顺序排列；译文来自该训练运行的` +
        `测试评估（results/${results}，用它选定的搜索设置），而不是本页。`,
      no_gallery: "没有结果记录描述这个模型，因此没有测试译文可以展示。",
      no_files: "模型文件没有加载（translator/model.js 和 translator/translator.js 必须与本书的页面放在一起）。",
      unreadable: message => `无法读取模型：${message}`,
      of: (i, n) => `${i} / ${n}`,
      mean: "平均",
      origin: s => `，来自 results/${s.results}（${s.task}；配置 ${s.profile}，${s.steps} 步，对最后 ` +
        `${s.average_last} 个检查点取平均；在 PyTorch 中用束宽 4 测得测试 BLEU ${s.test_bleu}）`,
      no_origin: "（没有结果记录描述它：没有分数）",
      about: (model, origin, quantization, pieces, characters) => `模型：${model}${origin}，` +
        `${quantization} 权重。上限：${pieces} 个子词，${characters} 个字符。`,
      ready: seconds => `模型已就绪，用时 ${seconds} 秒`,
      keys: "英语子词（键）", queries: "德语子词（查询）", weight: "权重",
      chart: (layer, head, pairs) => `编码器-解码器注意力，第 ${layer} 层，头 ${head}：${pairs}`,
      no_script: "翻译器需要 JavaScript，而这个浏览器关闭了它。",
      no_chart: "编码器-解码器注意力：还没有译文",
      empty: "请先输入一个英语句子。",
      too_long: (n, most) => `这段文字有 ${n} 个字符；本页一次最多翻译 ${most} 个。请试试一个句子。`,
      too_many_pieces: (n, most) => `这个句子有 ${n} 个子词；模型训练时的句子最多 ${most} 个。请试试短一些的句子。`,
    },
  };
  const lang = (document.documentElement.lang || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
  function say(key, ...args) {
    const words = key in WORDS[lang] ? WORDS[lang][key] : WORDS.en[key];
    return typeof words === "function" ? words(...args) : words;
  }
  // a refusal from translator.js in the page's language (its English message otherwise)
  const refused = err => err.words && WORDS[lang][err.words] ? say(err.words, ...err.args) : err.message;

  function setMessage(text, kind) {
    const el = $("translator-message");
    el.textContent = text || "";
    el.className = kind ? "translator-" + kind : "";
  }

  // --- the attention chart: output pieces (rows) against source pieces (columns) ---------------------

  function draw() {
    const canvas = $("translator-attention");
    if (!canvas) return;
    const which = state[state.live || $("translator-which").value];
    const ctx = canvas.getContext("2d");
    if (!which || !which.attention.length) {
      canvas.height = 40;
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      return;
    }
    const layer = +$("translator-layer").value, head = $("translator-head").value;
    const src = state.source, out = which.tokens, S = src.length;
    const width = Math.max(320, canvas.parentElement.clientWidth || 700);
    ctx.font = "12px sans-serif";
    const label = t => t.replace(/\u2581/g, "_");
    // room for the axis titles (20 px), the piece labels, and the colour scale on the right (56 px)
    const left = 20 + 12 + Math.max(...out.map(t => ctx.measureText(label(t)).width), 30);
    const top = 20 + 12 + Math.max(...src.map(t => ctx.measureText(label(t)).width), 30);
    const scale = 56;
    const cell = Math.max(8, Math.min(26, (width - left - scale - 8) / S));
    const right = left + cell * S, bottom = top + cell * out.length;
    canvas.width = Math.ceil(right + scale + 8);
    canvas.height = Math.ceil(Math.max(bottom, top + 120) + 8);
    ctx.font = "12px sans-serif";
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    describe(which, layer, head);
    const colour = p => { const v = Math.round(255 * (1 - p)); return `rgb(${v},${v},255)`; };
    which.attention.forEach((step, t) => {
      const heads = step[layer];
      for (let s = 0; s < S; s++) {
        const p = head === "mean" ? heads.reduce((a, w) => a + w[s], 0) / heads.length : heads[+head][s];
        ctx.fillStyle = colour(p);
        ctx.fillRect(left + s * cell, top + t * cell, cell - 1, cell - 1);
      }
    });
    ctx.fillStyle = "#222";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    out.forEach((t, i) => ctx.fillText(label(t), left - 4, top + (i + 0.5) * cell));
    src.forEach((t, j) => {
      ctx.save();
      ctx.translate(left + (j + 0.5) * cell, top - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      ctx.fillText(label(t), 0, 0);
      ctx.restore();
    });
    // axis titles
    ctx.font = "bold 12px sans-serif";
    ctx.textAlign = "center";
    ctx.fillText(say("keys"), (left + right) / 2, 10);
    ctx.save();
    ctx.translate(10, top + Math.max(bottom - top, 120) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(say("queries"), 0, 0);
    ctx.restore();
    // the colour scale: attention weight from 0 (white) to 1 (blue)
    const barX = right + 14, barH = Math.max(60, Math.min(bottom - top, 160));
    for (let y = 0; y < barH; y++) {
      ctx.fillStyle = colour(1 - y / (barH - 1));
      ctx.fillRect(barX, top + y, 12, 1);
    }
    ctx.strokeStyle = "#888";
    ctx.strokeRect(barX - 0.5, top - 0.5, 13, barH + 1);
    ctx.fillStyle = "#222";
    ctx.font = "12px sans-serif";
    ctx.textAlign = "left";
    ctx.fillText("1", barX + 16, top + 4);
    ctx.fillText("0", barX + 16, top + barH - 4);
    ctx.fillText(say("weight"), barX - 6, top - 10);
  }

  // The chart in words, for screen readers: each output piece and the source piece it
  // attends to most.
  function describe(which, layer, head) {
    const strongest = which.attention.map((step, t) => {
      const heads = step[layer];
      const p = s => head === "mean" ? heads.reduce((a, w) => a + w[s], 0) : heads[+head][s];
      let best = 0;
      for (let s = 1; s < state.source.length; s++) if (p(s) > p(best)) best = s;
      return `${which.tokens[t]} \u2192 ${state.source[best]}`;
    });
    $("translator-attention").setAttribute("aria-label", say("chart", layer + 1, head, strongest.join(", ")));
  }

  // --- translating from the form ----------------------------------------------------------------------

  // The model learned from single captions, so several sentences typed at once are translated one
  // by one: a line break ends a sentence, and so does a full stop, question or exclamation mark
  // followed by a space and more text.
  function sentences(text) {
    const parts = text.split(/\n+|(?<=[.!?])\s+(?=\S)/).map(s => s.trim()).filter(Boolean);
    return parts.length ? parts : [text];
  }

  // A request made while a translation runs waits for it; only the latest one is kept.
  let busy = false, pending = null;
  async function run(text) {
    if (busy) {
      pending = text;
      $("translator-status").textContent = say("waiting");
      return;
    }
    busy = true;
    setMessage("");
    $("translator-output").textContent = "";
    $("translator-greedy").textContent = "";
    state.beam = state.greedy = null;
    const k = +$("translator-beam").value;
    $("translator-beam-label").textContent = say("beam_label", k, book.load().payload.search.alpha);
    try {
      const {vocab, payload} = book.load();
      book.check(text, payload.limits);      // the whole input, before it is cut into sentences
      const parts = sentences(text), seconds = {}, unseen = [];
      for (const [name, beam, el] of [["beam", k, "translator-output"], ["greedy", 1, "translator-greedy"]]) {
        state.live = name;
        const started = performance.now(), outputs = [];
        for (const [i, part] of parts.entries()) {
          const which = parts.length > 1 ? say("sentence_of", i + 1, parts.length) : "";
          state.source = vocab.encode(part.trim() ? part : "").ids.map(j => vocab.pieces[j]).concat("</s>");
          const result = await book.translate(part, {
            beam,
            onStep: (ids, attention) => {
              state[name] = {tokens: ids.map(j => vocab.pieces[j]), attention};
              $("translator-status").textContent = say("pieces_so_far", name, which, ids.length);
              draw();
            },
          });
          state[name] = {tokens: result.tokens, attention: result.attention};
          outputs.push(result.text);
          unseen.push(...result.unseen);
          $(el).textContent = outputs.join(" ");
        }
        seconds[name] = (performance.now() - started) / 1000;
      }
      // both searches, each with its time: the line names what produced each output
      $("translator-status").textContent = say("done", k, seconds.beam.toFixed(2), seconds.greedy.toFixed(2),
                                               parts.length);
      if (unseen.length) setMessage(say("unseen", [...new Set(unseen)].join(" ")), "warning");
      state.live = null;
      draw();
    } catch (err) {
      $("translator-output").textContent = "";
      $("translator-greedy").textContent = "";
      state.beam = state.greedy = null;
      state.live = null;
      draw();
      setMessage(refused(err), "error");
      $("translator-status").textContent = "";
    } finally {
      busy = false;
    }
    if (pending !== null) {
      const next = pending;
      pending = null;
      await run(next);
    }
  }

  // --- the gallery: the run's own test translations ---------------------------------------------------

  function gallery(payload) {
    const body = document.querySelector("#gallery tbody");
    const rows = payload.gallery.map((g, i) => {
      const tr = document.createElement("tr");
      for (const text of [String(i + 1), g.src, g.ref, g.ours]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.appendChild(td);
      }
      const td = document.createElement("td"), button = document.createElement("button");
      button.type = "button";
      button.textContent = say("try");
      button.setAttribute("aria-label", say("try_label", i + 1));
      button.addEventListener("click", () => {
        $("translator-input").value = g.src;
        $("translator-input").scrollIntoView({behavior: "smooth", block: "center"});
        run(g.src);
      });
      td.appendChild(button);
      tr.appendChild(td);
      body.appendChild(tr);
      return {tr, text: (g.src + "\n" + g.ref + "\n" + g.ours).toLowerCase()};
    });
    const filter = () => {
      const q = $("gallery-search").value.trim().toLowerCase();
      let shown = 0;
      for (const r of rows) {
        const show = !q || r.text.includes(q);
        r.tr.style.display = show ? "" : "none";
        shown += show;
      }
      $("gallery-count").textContent = say("shown", shown, rows.length);
    };
    $("gallery-search").addEventListener("input", filter);
    filter();
    const s = payload.source;
    $("gallery-about").textContent = s.results ? say("gallery_about", rows.length, s.task, s.results)
      : say("no_gallery");
  }

  // --- ?selftest=N: the report the book's tests read ----------------------------------------------------

  async function selftest(n) {
    const {payload, vocab, loadSeconds} = book.load();
    const sentences = (window.SELFTEST_SENTENCES || payload.gallery.map(g => g.src)).slice(0, n);
    const report = {ready_seconds: performance.now() / 1000, build_seconds: loadSeconds, results: [],
                    tokenized: []};
    const texts = payload.gallery.flatMap(g => [g.src, g.ref]).concat(window.SELFTEST_SENTENCES || [],
      ["  Two  dogs ", "a\tb", "caf\u00e9 \ud83d\ude00 \u2603", "\u2581a \u2581", "x<0x41>y", "\u00c4\u00d6\u00dc\u00df"]);
    for (const t of texts) report.tokenized.push(vocab.encode(t).ids);
    report.texts = texts;
    for (const [name, beam] of [["greedy", 1], ["beam", payload.search.beam_size]]) {
      const started = performance.now();
      let words = 0;
      for (let i = 0; i < sentences.length; i++) {
        const r = await book.translate(sentences[i], {beam});
        (report.results[i] = report.results[i] || {src: sentences[i]})[name] = r.ids;
        report.results[i][name + "_text"] = r.text;
        words += r.text.split(/\s+/).filter(Boolean).length;
      }
      const seconds = (performance.now() - started) / 1000;
      report[name] = {seconds, words, words_per_second: words / seconds};
    }
    const errors = {};
    for (const [name, text] of [["empty", "   "], ["long", "a ".repeat(payload.limits.max_characters)],
                                ["pieces", "dog ".repeat(payload.limits.max_source_pieces + 1)]]) {
      try { await book.translate(text); errors[name] = null; } catch (e) { errors[name] = e.message; }
    }
    report.errors = errors;
    report.user_agent = navigator.userAgent;
    const pre = document.createElement("pre");
    pre.id = "translator-selftest";
    pre.textContent = JSON.stringify(report);
    document.body.appendChild(pre);
  }

  // --- start ------------------------------------------------------------------------------------------

  function sayForm() {
    if (lang === "en") return;  // the form's HTML is the English
    for (const el of document.querySelectorAll("#translator [data-say]")) el.textContent = say(el.dataset.say);
    for (const el of document.querySelectorAll("#translator [data-say-placeholder]"))
      el.placeholder = say(el.dataset.sayPlaceholder);
    for (const el of document.querySelectorAll("#translator [data-say-label]"))
      el.setAttribute("aria-label", say(el.dataset.sayLabel));
  }

  async function start() {
    sayForm();
    if (!book || !window.TRANSFORMER_MODEL) {
      setMessage(say("no_files"), "error");
      return;
    }
    await new Promise(r => setTimeout(r, 0));  // let "loading" paint first
    let loaded;
    try {
      loaded = book.load();
    } catch (err) {
      setMessage(say("unreadable", err.message), "error");
      $("translator-status").textContent = "";
      return;
    }
    const {payload, model, loadSeconds} = loaded;
    const c = model.cfg;
    for (let l = 0; l < c.N; l++) $("translator-layer").add(new Option(say("of", l + 1, c.N), l));
    $("translator-layer").value = c.N - 1;
    $("translator-head").add(new Option(say("mean"), "mean"));
    for (let h = 0; h < c.h; h++) $("translator-head").add(new Option(say("of", h + 1, c.h), h));
    for (const id of ["translator-layer", "translator-head", "translator-which"])
      $(id).addEventListener("change", draw);
    window.addEventListener("resize", draw);
    $("translator-go").addEventListener("click", () => run($("translator-input").value));
    $("translator-input").addEventListener("keydown", e => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); run($("translator-input").value); }
    });
    const s = payload.source;
    const origin = s.results ? say("origin", s) : say("no_origin");
    $("translator-about").textContent = say("about", s.model, origin, payload.quantization,
                                            payload.limits.max_source_pieces, payload.limits.max_characters);
    $("translator-status").textContent = say("ready", loadSeconds.toFixed(2));
    gallery(payload);
    if (params.has("selftest")) return selftest(params.get("selftest") ? +params.get("selftest") : 100);
    const text = params.get("text");
    if (text !== null) $("translator-input").value = text;
    await run($("translator-input").value);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
