// The book's Transformer, a third time: after PyTorch (chapters 3.1-3.6) and
// CTranslate2 (chapter 6.1), here in plain JavaScript, so that the trained model
// translates inside the page, with no server and no network. It reads the weights that
// `python -m transformer.web` exported into model.js (window.TRANSFORMER_MODEL) and
// follows transformer/decode.py step for step, so that its greedy output equals
// PyTorch's token for token. Nothing here is a library: every operation is written
// out.
(function () {
  "use strict";

  // --- weights: base64 text -> typed arrays ------------------------------------------

  function bytesOf(base64) {
    const text = atob(base64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }

  function halfToFloat(h) {
    const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
    if (exp === 0) return sign * frac * Math.pow(2, -24);
    if (exp === 31) return frac ? NaN : sign * Infinity;
    return sign * (1 + frac / 1024) * Math.pow(2, exp - 15);
  }

  // One exported tensor as a Float32Array. int8 rows are multiplied back by their row's
  // scale, exactly as transformer/web.py's dequantize does it (one float32 product per
  // weight).
  function tensor(spec) {
    const raw = bytesOf(spec.data);
    const n = spec.shape.reduce((a, b) => a * b, 1);
    const out = new Float32Array(n);
    if (spec.dtype === "float32") {
      out.set(new Float32Array(raw.buffer, 0, n));
    } else if (spec.dtype === "float16") {
      const half = new Uint16Array(raw.buffer, 0, n);
      for (let i = 0; i < n; i++) out[i] = halfToFloat(half[i]);
    } else if (spec.dtype === "int8") {
      const q = new Int8Array(raw.buffer, 0, n);
      const scale = new Float32Array(bytesOf(spec.scale).buffer);
      const cols = n / spec.shape[0];
      for (let r = 0; r < spec.shape[0]; r++)
        for (let c = 0; c < cols; c++)
          out[r * cols + c] = Math.fround(q[r * cols + c] * scale[r]);
    } else {
      throw new Error("unknown tensor type " + spec.dtype);
    }
    return out;
  }

  // --- sentencepiece: text <-> ids, as the Python library does it for our BPE model --

  // sentencepiece's mark of a word start (it stands for the space)
  const WORD_START = "\u2581";
  const NORMAL = 0, UNKNOWN = 1, CONTROL = 2, BYTE = 3;

  // The normalisation rule as sentencepiece compiles it ("precompiled charsmap"): a
  // 4-byte length, a double-array trie over UTF-8 byte strings, then the replacement
  // strings, each ending in a zero byte. At every position the longest byte string the
  // trie holds is replaced by its string; where none starts, one character is kept.
  function charsmapRewriter(bytes) {
    const trieLength = new DataView(bytes.buffer).getUint32(0, true);
    const units = new Uint32Array(bytes.slice(4, 4 + trieLength).buffer);
    const strings = bytes.subarray(4 + trieLength);
    // a trie unit packs the offset to its children, a has-value bit and its label byte
    const offset = u => (u >>> 10) << ((u & 0x200) >>> 6);
    const hasValue = u => (u & 0x100) !== 0;
    const label = u => u & 0x800000ff;
    // -> [bytes matched, where the replacement starts] for the longest match, or null
    function longest(key, start) {
      let node = offset(units[0]), found = null;
      for (let i = start; i < key.length; i++) {
        node ^= key[i];
        const unit = units[node];
        if (label(unit) !== key[i]) break;
        node ^= offset(unit);
        if (hasValue(unit)) found = [i + 1 - start, units[node] & 0x7fffffff];
      }
      return found;
    }
    const utf8 = new TextEncoder(), fromUtf8 = new TextDecoder();
    return text => {
      const key = utf8.encode(text), out = [];
      for (let i = 0; i < key.length;) {
        const match = longest(key, i);
        if (match) {
          const end = strings.indexOf(0, match[1]);
          out.push(...strings.subarray(match[1], end));
          i += match[0];
        } else {
          const first = key[i];
          const n = first < 0x80 ? 1 : first < 0xe0 ? 2 : first < 0xf0 ? 3 : 4;
          out.push(...key.subarray(i, i + n));
          i += n;
        }
      }
      return fromUtf8.decode(new Uint8Array(out));
    };
  }

  class SentencePieceBPE {
    constructor(vocab) {
      this.pieces = vocab.pieces;
      this.scores = vocab.scores;
      this.kinds = vocab.kinds;
      this.ids = new Map();     // pieces that BPE may form
      this.byteIds = new Map();  // byte value -> id of <0xHH>
      this.pieces.forEach((p, i) => {
        const kind = this.kinds[i];
        if (kind === NORMAL) this.ids.set(p, i);
        else if (kind === BYTE) this.byteIds.set(parseInt(p.slice(3, 5), 16), i);
      });
      this.unkId = this.kinds.indexOf(UNKNOWN);
      this.rewrite = vocab.normalizer ? charsmapRewriter(bytesOf(vocab.normalizer))
                                      : text => text;
      // characters of pasted text the corpora do not type (soft hyphen, curly quotes...)
      // and what every engine reads instead (decode.TYPED in Python)
      this.typed = new Map(Object.entries(vocab.typed || {}));
    }

    // TYPED's characters are replaced and the vocabulary's rule rewrites the text
    // (chapter 5.1); then runs of spaces shrink to one and leading spaces go; every space
    // becomes WORD_START, one more marks the first word, and trailing marks are dropped
    // (also those typed as WORD_START, as sentencepiece does).
    normalize(text) {
      const typed = Array.from(text, c => this.typed.has(c) ? this.typed.get(c) : c).join("");
      const squeezed = this.rewrite(typed).replace(/ +/g, " ").replace(/^ /, "");
      return (WORD_START + squeezed.replace(/ /g, WORD_START)).replace(/\u2581+$/, "");
    }

    // BPE: start from single characters and keep merging the adjacent pair whose union
    // is the highest-scoring piece of the vocabulary (the leftmost such pair on a tie),
    // until none is left.
    segment(text) {
      const symbols = Array.from(this.normalize(text));
      for (;;) {
        let best = -1, bestScore = -Infinity;
        for (let i = 0; i + 1 < symbols.length; i++) {
          const id = this.ids.get(symbols[i] + symbols[i + 1]);
          if (id !== undefined && this.scores[id] > bestScore) {
            best = i;
            bestScore = this.scores[id];
          }
        }
        if (best < 0) return symbols;
        symbols.splice(best, 2, symbols[best] + symbols[best + 1]);
      }
    }

    // -> {ids, unseen}: a symbol that is no piece is spelled as its UTF-8 bytes (byte
    // fallback); `unseen` lists those characters, which the model never met in
    // training.
    encode(text) {
      const ids = [], unseen = [];
      const utf8 = new TextEncoder();
      for (const symbol of this.segment(text)) {
        const id = this.ids.get(symbol);
        if (id !== undefined) { ids.push(id); continue; }
        unseen.push(symbol);
        for (const b of utf8.encode(symbol))
          ids.push(this.byteIds.has(b) ? this.byteIds.get(b) : this.unkId);
      }
      return {ids, unseen};
    }

    // ids -> text, as Vocab.decode in Python: special ids (padding, unknown, <s>, </s>)
    // are dropped; a run of byte pieces is read as UTF-8, each invalid byte becoming
    // U+FFFD; in the other pieces WORD_START becomes a space, and the one that starts
    // the text (while only spaces came before) is dropped.
    decode(ids) {
      let text = "", bytes = [], start = true;
      const flush = () => {
        text += utf8(bytes);
        if (bytes.length) start = false;
        bytes = [];
      };
      for (const id of ids) {
        const kind = this.kinds[id];
        if (kind === CONTROL || kind === UNKNOWN) continue;
        if (kind === BYTE) {
          bytes.push(parseInt(this.pieces[id].slice(3, 5), 16));
          continue;
        }
        flush();
        let piece = this.pieces[id];
        if (start && piece.startsWith(WORD_START)) piece = piece.slice(1);
        piece = piece.replace(/\u2581/g, " ");
        if (piece.trim()) start = false;
        text += piece;
      }
      flush();
      return text;
    }
  }

  // UTF-8 bytes -> text; a byte that does not begin a valid character becomes U+FFFD
  // and decoding goes on from the next byte (as sentencepiece does).
  function utf8(bytes) {
    const strict = new TextDecoder("utf-8", {fatal: true});
    let text = "";
    for (let i = 0; i < bytes.length;) {
      const b = bytes[i];
      // the character's length in bytes, read from its first byte (0: not a first byte)
      const n = b < 0x80 ? 1 : b >> 5 === 6 ? 2 : b >> 4 === 14 ? 3
        : b >> 3 === 30 ? 4 : 0;
      try {
        if (!n || i + n > bytes.length) throw new Error("invalid");
        text += strict.decode(new Uint8Array(bytes.slice(i, i + n)));
        i += n;
      } catch (err) {
        text += "\ufffd";
        i += 1;
      }
    }
    return text;
  }

  // --- the forward pass (chapters 3.1-3.5) -------------------------------------------

  // y[t] = x[t] W^T + b for the rows t of x [rows, n_in]; W is [n_out, n_in] as PyTorch
  // stores it.
  function linear(x, rows, W, b, nOut, nIn, wOffset = 0, bOffset = 0) {
    const y = new Float32Array(rows * nOut);
    for (let o = 0; o < nOut; o++) {
      const w = wOffset + o * nIn;
      const bias = b ? b[bOffset + o] : 0;
      for (let t = 0; t < rows; t++) {
        const xi = t * nIn;
        let s0 = 0, s1 = 0, s2 = 0, s3 = 0, i = 0;
        for (; i + 3 < nIn; i += 4) {
          s0 += x[xi + i] * W[w + i]; s1 += x[xi + i + 1] * W[w + i + 1];
          s2 += x[xi + i + 2] * W[w + i + 2]; s3 += x[xi + i + 3] * W[w + i + 3];
        }
        for (; i < nIn; i++) s0 += x[xi + i] * W[w + i];
        y[t * nOut + o] = bias + (s0 + s1) + (s2 + s3);
      }
    }
    return y;
  }

  // Post-norm residual connection, the paper's: LayerNorm(x + sublayer(x)), in place
  // on x.
  function addAndNorm(x, sub, rows, d, g, b, eps) {
    for (let t = 0; t < rows; t++) {
      const o = t * d;
      let mean = 0;
      for (let i = 0; i < d; i++) { x[o + i] += sub[o + i]; mean += x[o + i]; }
      mean /= d;
      let variance = 0;
      for (let i = 0; i < d; i++) variance += (x[o + i] - mean) ** 2;
      const inv = 1 / Math.sqrt(variance / d + eps);
      for (let i = 0; i < d; i++) x[o + i] = (x[o + i] - mean) * inv * g[i] + b[i];
    }
  }

  // softmax(q K^T / sqrt(d_k)) V for one query and one head; keys(j) and values(j)
  // give position j's vectors and their offset. Returns the weights, which the page
  // draws for encoder-decoder attention.
  function attendOne(q, qo, n, key, value, dk, dv, out, outOffset) {
    const p = new Float64Array(n);
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      const [K, ko] = key(j);
      let s = 0;
      for (let i = 0; i < dk; i++) s += q[qo + i] * K[ko + i];
      p[j] = s / Math.sqrt(dk);
      if (p[j] > max) max = p[j];
    }
    let sum = 0;
    for (let j = 0; j < n; j++) { p[j] = Math.exp(p[j] - max); sum += p[j]; }
    for (let j = 0; j < n; j++) {
      p[j] /= sum;
      const [V, vo] = value(j);
      for (let i = 0; i < dv; i++) out[outOffset + i] += p[j] * V[vo + i];
    }
    return p;
  }

  class Transformer {
    constructor(payload) {
      const c = payload.config;
      this.cfg = c;
      this.w = {};
      for (const [name, spec] of Object.entries(payload.tensors))
        this.w[name] = tensor(spec);
      this.embedding = this.w[payload.embedding];
      // the paper's sinusoids, computed in double precision and stored as float32 as
      // PyTorch does
      this.pe = new Float32Array(c.max_len * c.d_model);
      for (let pos = 0; pos < c.max_len; pos++)
        for (let i = 0; i < c.d_model; i += 2) {
          const angle = pos * Math.exp(-Math.log(10000) * i / c.d_model);
          this.pe[pos * c.d_model + i] = Math.sin(angle);
          this.pe[pos * c.d_model + i + 1] = Math.cos(angle);
        }
    }

    // token embeddings times sqrt(d_model), plus the positions' sinusoids
    embed(ids, positions) {
      const d = this.cfg.d_model, scale = Math.sqrt(d);
      const x = new Float32Array(ids.length * d);
      ids.forEach((id, t) => {
        for (let i = 0; i < d; i++)
          x[t * d + i] = Math.fround(this.embedding[id * d + i] * scale)
                         + this.pe[positions[t] * d + i];
      });
      return x;
    }

    // W^O of one attention sublayer, applied to its heads' outputs side by side
    outProjection(prefix, heads, rows) {
      const {d_model: d, h, d_v: dv} = this.cfg, w = this.w;
      const W = w[prefix + "out_proj.weight"], b = w[prefix + "out_proj.bias"];
      return linear(heads, rows, W, b, d, h * dv);
    }

    // sublayer i's residual connection and layer norm, in place on x (post-norm)
    residual(prefix, i, x, sub, rows) {
      const n = `${prefix}sublayers.${i}.norm.`;
      const g = this.w[n + "weight"], b = this.w[n + "bias"];
      addAndNorm(x, sub, rows, this.cfg.d_model, g, b, this.cfg.layer_norm_eps);
    }

    feedForward(prefix, x, rows) {
      const {d_model: d, d_ff: f} = this.cfg, w = this.w;
      const w1 = w[prefix + "w_1.weight"], b1 = w[prefix + "w_1.bias"];
      const hidden = linear(x, rows, w1, b1, f, d);
      for (let i = 0; i < hidden.length; i++) if (hidden[i] < 0) hidden[i] = 0;
      const w2 = w[prefix + "w_2.weight"], b2 = w[prefix + "w_2.bias"];
      return linear(hidden, rows, w2, b2, d, f);
    }

    // The encoder: source ids -> memory [S, d_model]; then every decoder layer's keys
    // and values of that memory, computed once (the cache of chapter 6.1).
    encode(src) {
      const {N, d_model: d, h, d_k: dk, d_v: dv} = this.cfg;
      const w = this.w, S = src.length, hk = h * dk, width = 2 * hk + h * dv;
      let x = this.embed(src, src.map((_, i) => i));
      for (let l = 0; l < N; l++) {
        const p = `encoder.layers.${l}.`;
        const qkv = linear(x, S, w[p + "self_attn.in_proj.weight"],
                           w[p + "self_attn.in_proj.bias"], width, d);
        const heads = new Float32Array(S * h * dv);
        for (let t = 0; t < S; t++)
          for (let head = 0; head < h; head++)
            attendOne(qkv, t * width + head * dk, S,
                      j => [qkv, j * width + hk + head * dk],
                      j => [qkv, j * width + 2 * hk + head * dv],
                      dk, dv, heads, t * h * dv + head * dv);
        this.residual(p, 0, x, this.outProjection(p + "self_attn.", heads, S), S);
        this.residual(p, 1, x, this.feedForward(p + "feed_forward.", x, S), S);
      }
      const memory = [];
      for (let l = 0; l < N; l++) {
        const p = `decoder.layers.${l}.cross_attn.in_proj.`;
        // rows [h*d_k, 2*h*d_k + h*d_v) of W_in are W^K then W^V
        memory.push(linear(x, S, w[p + "weight"], w[p + "bias"], hk + h * dv, d,
                           hk * d, hk));
      }
      return {length: S, kv: memory};
    }

    // One decoding step for several hypotheses at once:
    // rows[r] = {tokens, self: [layer] {k: [], v: []}} holds a hypothesis and its
    // cached keys and values. Returns log-probabilities [rows, V] and, per row, the
    // encoder-decoder attention of the new position [layer][head][S].
    step(rows, memory) {
      const {N, d_model: d, h, d_k: dk, d_v: dv} = this.cfg;
      const w = this.w, R = rows.length, S = memory.length;
      const hk = h * dk, width = hk + h * dv;
      const y = this.embed(rows.map(r => r.tokens[r.tokens.length - 1]),
                           rows.map(r => r.tokens.length - 1));
      const attention = rows.map(() => []);
      for (let l = 0; l < N; l++) {
        const p = `decoder.layers.${l}.`;
        // masked self-attention: the new position sees every earlier one, kept in the
        // cache
        const qkv = linear(y, R, w[p + "self_attn.in_proj.weight"],
                           w[p + "self_attn.in_proj.bias"], 2 * hk + h * dv, d);
        const heads = new Float32Array(R * h * dv);
        rows.forEach((row, r) => {
          const o = r * (2 * hk + h * dv), cache = row.self[l];
          cache.k.push(qkv.slice(o + hk, o + 2 * hk));
          cache.v.push(qkv.slice(o + 2 * hk, o + 2 * hk + h * dv));
          for (let head = 0; head < h; head++)
            attendOne(qkv, o + head * dk, cache.k.length,
                      j => [cache.k[j], head * dk], j => [cache.v[j], head * dv],
                      dk, dv, heads, r * h * dv + head * dv);
        });
        this.residual(p, 0, y, this.outProjection(p + "self_attn.", heads, R), R);
        // encoder-decoder attention over the memory's cached keys and values
        const q = linear(y, R, w[p + "cross_attn.in_proj.weight"],
                         w[p + "cross_attn.in_proj.bias"], hk, d);
        const cross = new Float32Array(R * h * dv), kv = memory.kv[l];
        for (let r = 0; r < R; r++) {
          const weights = [];
          for (let head = 0; head < h; head++)
            weights.push(attendOne(q, r * hk + head * dk, S,
                                   j => [kv, j * width + head * dk],
                                   j => [kv, j * width + hk + head * dv],
                                   dk, dv, cross, r * h * dv + head * dv));
          attention[r].push(weights);
        }
        this.residual(p, 1, y, this.outProjection(p + "cross_attn.", cross, R), R);
        this.residual(p, 2, y, this.feedForward(p + "feed_forward.", y, R), R);
      }
      // the output layer shares the embedding matrix (section 3.4); then log-softmax
      const V = this.embedding.length / d;
      const logits = linear(y, R, this.embedding, null, V, d);
      const logp = [];
      for (let r = 0; r < R; r++) {
        const row = logits.subarray(r * V, (r + 1) * V);
        let max = -Infinity, sum = 0;
        for (let i = 0; i < V; i++) if (row[i] > max) max = row[i];
        for (let i = 0; i < V; i++) sum += Math.exp(row[i] - max);
        const lse = max + Math.log(sum), out = new Float32Array(V);
        for (let i = 0; i < V; i++) out[i] = row[i] - lse;
        logp.push(out);
      }
      return {logits, logp, attention};
    }

    newHypothesis(bos) {
      const self = Array.from({length: this.cfg.N}, () => ({k: [], v: []}));
      return {tokens: [bos], self, attention: []};
    }
  }

  // --- search (chapter 6.1): greedy, and beam search with the length penalty ---------

  // as transformer/decode.py: at most the source length + 50 output tokens, within the
  // positions
  function outputLimit(model, srcLength) {
    return Math.min(srcLength + model.cfg.max_extra, model.cfg.max_len - 1);
  }

  function lengthPenalty(length, alpha) {
    return Math.pow((5 + length) / 6, alpha);
  }

  const pause = () => new Promise(resolve => {
    const channel = new MessageChannel();
    channel.port1.onmessage = resolve;
    channel.port2.postMessage(0);
  });

  // -> {ids (ending with </s>), attention [step][layer][head][S]};
  // onStep(prefix ids, attention) is called after every step (the page redraws there).
  async function greedy(model, src, onStep) {
    const {bos_id: bos, eos_id: eos} = model.cfg, memory = model.encode(src);
    const limit = outputLimit(model, src.length), hyp = model.newHypothesis(bos);
    for (let t = 1; t <= limit; t++) {
      const {logits, attention} = model.step([hyp], memory);
      // as decode.not_empty: no output of only </s> where the sentence may go on
      const noEnd = t === 1 && limit > 1;
      let token = 0;  // the first of equal maxima, as torch.argmax
      for (let i = 1; i < logits.length; i++)
        if (!(noEnd && i === eos) && logits[i] > logits[token]) token = i;
      if (t >= limit) token = eos;
      hyp.tokens.push(token);
      hyp.attention.push(attention[0]);
      if (onStep) { onStep(hyp.tokens.slice(1), hyp.attention); await pause(); }
      if (token === eos) break;
    }
    return {ids: hyp.tokens.slice(1), attention: hyp.attention};
  }

  // The k best of `values` (indices, best first; the lower index first on a tie).
  function topIndices(values, k) {
    const best = [];
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (best.length === k && !(v > values[best[k - 1]])) continue;
      let j = best.length < k ? best.length : k - 1;
      while (j > 0 && v > values[best[j - 1]]) j--;
      best.splice(j, 0, i);
      if (best.length > k) best.pop();
    }
    return best;
  }

  // Beam search as simple_beam_search in transformer/decode.py, for one sentence:
  // each step extends the k live hypotheses, sets aside those that end (if they rank
  // among the k best extensions) with their score divided by the length penalty, and
  // stops once k have ended and one of them ranked first at its step.
  async function beam(model, src, k, alpha, onStep) {
    const {bos_id: bos, eos_id: eos} = model.cfg, memory = model.encode(src);
    const limit = outputLimit(model, src.length);
    let live = Array.from({length: k}, () => model.newHypothesis(bos));
    let scores = live.map((_, j) => (j === 0 ? 0 : -Infinity));
    const finished = [];
    let topEnded = false;
    for (let t = 1; t <= limit; t++) {
      const {logp, attention} = model.step(live, memory);
      const V = logp[0].length, cand = new Float32Array(k * V);
      for (let j = 0; j < k; j++)
        for (let i = 0; i < V; i++) {
          // the limit forces </s>; the first step rules it out (decode.not_empty)
          const ruledOut = t >= limit ? i !== eos : t === 1 && i === eos;
          const lp = ruledOut ? -Infinity : logp[j][i];
          cand[j * V + i] = scores[j] + lp;
        }
      const top = topIndices(cand, 2 * k);
      // an ending that ranks first outscores every live hypothesis, for good
      if (top[0] % V === eos && Number.isFinite(cand[top[0]])) topEnded = true;
      top.slice(0, k).forEach(c => {
        if (c % V === eos && Number.isFinite(cand[c])) {
          const j = Math.floor(c / V);
          finished.push({score: cand[c] / lengthPenalty(t, alpha),
                         ids: live[j].tokens.slice(1).concat(eos),
                         attention: live[j].attention.concat([attention[j]])});
        }
      });
      const going = top.filter(c => c % V !== eos).slice(0, k);
      const copy = cache => ({k: cache.k.slice(), v: cache.v.slice()});
      live = going.map(c => {
        const j = Math.floor(c / V), from = live[j];
        return {tokens: from.tokens.concat(c % V),
                attention: from.attention.concat([attention[j]]),
                self: from.self.map(copy)};
      });
      scores = going.map(c => cand[c]);
      if (onStep) { onStep(live[0].tokens.slice(1), live[0].attention); await pause(); }
      if (topEnded && finished.length >= k) break;
    }
    let best = finished[0];
    for (const f of finished) if (f.score > best.score) best = f;
    if (!best) return {ids: [eos], attention: []};
    return {ids: best.ids, attention: best.attention};
  }

  // --- the public interface ----------------------------------------------------------

  let loaded = null;
  function load() {
    if (!loaded) {
      const payload = window.TRANSFORMER_MODEL;
      if (!payload)
        throw new Error("the model's weights (translator/model.js) did not load");
      const started = performance.now();
      loaded = {payload, model: new Transformer(payload),
                vocab: new SentencePieceBPE(payload.vocab)};
      loaded.loadSeconds = (performance.now() - started) / 1000;
    }
    return loaded;
  }

  // Bad input is refused with a message a reader can act on, before any work starts. Each refusal
  // also names itself (`words`, with its numbers in `args`), so that a page in another language can
  // say it in its own words.
  function refusal(message, words, ...args) {
    return Object.assign(new Error(message), {words, args});
  }

  function check(text, limits) {
    if (typeof text !== "string" || !text.trim())
      throw refusal("Type an English sentence first.", "empty");
    if (text.length > limits.max_characters)
      throw refusal(`That is ${text.length} characters; ` +
                    `the page translates at most ${limits.max_characters} ` +
                    `at a time. Try one sentence.`, "too_long", text.length, limits.max_characters);
  }

  // translate(text, {beam: 4, alpha, onStep}) -> {text, tokens, ids, source,
  // sourceIds, unseen, attention [output position][layer][head][source position]};
  // beam 1 is greedy search.
  async function translate(text, options = {}) {
    const {payload, model, vocab} = load();
    const limits = payload.limits;
    check(text, limits);
    const {ids: pieces, unseen} = vocab.encode(text);
    if (pieces.length > limits.max_source_pieces)
      throw refusal(`That sentence is ${pieces.length} word pieces long; ` +
                    `the model was trained on sentences of at most ` +
                    `${limits.max_source_pieces}. Try a shorter one.`,
                    "too_many_pieces", pieces.length, limits.max_source_pieces);
    // the source ends with </s>, as in training (transformer/evaluate.py)
    const src = pieces.concat(model.cfg.eos_id);
    const k = options.beam === undefined ? payload.search.beam_size : options.beam;
    if (!Number.isInteger(k) || k < 1 || k > 16)
      throw new Error(`beam must be an integer from 1 to 16, got ${k}`);
    const alpha = options.alpha === undefined ? payload.search.alpha : options.alpha;
    const out = k === 1 ? await greedy(model, src, options.onStep)
                        : await beam(model, src, k, alpha, options.onStep);
    const endsWithEos = out.ids[out.ids.length - 1] === model.cfg.eos_id;
    const ids = endsWithEos ? out.ids.slice(0, -1) : out.ids;
    // one attention row per output token (the step that produced </s> is left out)
    return {text: vocab.decode(ids), tokens: ids.map(i => vocab.pieces[i]), ids,
            source: src.map(i => vocab.pieces[i]), sourceIds: src, unseen,
            attention: out.attention.slice(0, ids.length)};
  }

  window.transformerBook = {translate, check, load, SentencePieceBPE, Transformer};
})();
