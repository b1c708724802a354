"""The page "Try the model" (book/06_1_try_the_model): the exported weights, and the JavaScript model in
headless Chromium against PyTorch with the same weights.

The browser tests open the built book from disk (file://) with every host unresolvable, as a reader with
no network would. The page's ``?selftest=N`` mode translates the first N gallery sentences with greedy and
beam search, tokenizes every gallery sentence, tries the bad inputs, and writes a JSON report into the
page; ``--dump-dom`` prints it. Needs the book extra and Debian's ``chromium`` (see test_book_html.py).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import urllib.parse

import pytest
import sacrebleu
import torch

from tests.conftest import REPO
from tools.browser import element, open_page
from transformer.data import EOS
from transformer.decode import beam_search, greedy_decode, simple_beam_search, simple_greedy_decode
from transformer.model import Transformer, TransformerConfig
from transformer.web import (PREFIX, dequantize, main, payload_model, quantize_rows,
                             read_payload, web_payload, write_payload)

PAGE = "book/06_1_try_the_model.html"
EXPORT = REPO / "web" / "translator" / "model.js"
SENTENCES = 100


@pytest.fixture(scope="module")
def payload():
    return read_payload(EXPORT)


@pytest.fixture(scope="module")
def torch_model(payload):
    return payload_model(payload)


@pytest.fixture(scope="module")
def selftest(chromium, whole_book, tmp_path_factory):
    url = (whole_book / PAGE).as_uri() + f"?selftest={SENTENCES}"
    dom = open_page(chromium, url, tmp_path_factory.mktemp("selftest"))
    report = element(dom, "pre", "translator-selftest")
    assert report, f"the page wrote no self-test report:\n{dom[-3000:]}"
    return json.loads(report)


def torch_search(model, vocab, sentence, beam):
    src = torch.tensor([vocab.encode(sentence) + [EOS]])
    with torch.no_grad():
        out = (greedy_decode(model, src, 2, EOS) if beam == 1
               else beam_search(model, src, 2, EOS, beam_size=beam, alpha=0.6))[0].tolist()
    out = [t for t in out if t != model.cfg.pad_id]
    return out[:-1] if out and out[-1] == EOS else out


# --- the export ------------------------------------------------------------------------------------------

def test_rows_are_quantised_each_with_its_own_scale():
    w = torch.tensor([[0.001, -0.002, 0.0005], [100.0, -50.0, 3.0], [0.0, 0.0, 0.0]])
    codes, scale = quantize_rows(w)
    assert codes.dtype == torch.int8 and codes.abs().max() == 127
    back = dequantize(codes, scale)
    assert back[2].eq(0).all()
    for row in range(2):
        assert (back[row] - w[row]).abs().max() <= w[row].abs().max() / 254 + 1e-9
    with pytest.raises(ValueError, match="matrix"):
        quantize_rows(torch.ones(3))


def test_a_payload_round_trips_to_the_weights_the_page_uses(torch_model, tmp_path):
    torch.manual_seed(0)
    vocab = torch_model[1]
    model = Transformer(TransformerConfig.preset("tiny", max_len=64), len(vocab)).eval()
    for quantization, tolerance in (("int8", 1 / 254), ("float16", 1e-3)):
        path = tmp_path / f"{quantization}.js"
        write_payload(web_payload(model, vocab, quantization), path)
        back, back_vocab = payload_model(read_payload(path))
        assert len(back_vocab) == len(vocab)
        for (name, a), b in zip(model.state_dict().items(), back.state_dict().values()):
            assert (a - b).abs().max() <= tolerance * a.abs().max() + 1e-7, name
        # the shared matrix is written once
        assert len(read_payload(path)["tensors"]) < len(model.state_dict())


def test_read_payload_refuses_other_files(tmp_path):
    (tmp_path / "x.js").write_text("alert('hi');\n")
    with pytest.raises(ValueError, match="not a model written by"):
        read_payload(tmp_path / "x.js")
    (tmp_path / "y.js").write_text(PREFIX + json.dumps({"format": "other"}) + ";\n")
    with pytest.raises(ValueError, match="format"):
        read_payload(tmp_path / "y.js")


def test_the_export_refuses_what_the_page_cannot_compute(torch_model):
    vocab = torch_model[1]
    for change in (dict(norm_first=True), dict(positional="learned"), dict(share_embeddings=False),
                   dict(pointer_id=7)):
        model = Transformer(TransformerConfig.preset("tiny", **change), len(vocab))
        with pytest.raises(ValueError, match="page"):
            web_payload(model, vocab)
    with pytest.raises(ValueError, match="quantization"):
        web_payload(Transformer(TransformerConfig.preset("tiny"), len(vocab)), vocab, "int4")


def test_a_copy_of_the_shipped_model_is_labelled_only_with_its_record_named(tmp_path, capsys):
    """The record names its model by SHA-256: a copy elsewhere is the same model, labelled when its record
    is named, and unlabelled (no scores, no gallery) when it is not."""
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    shutil.copy(REPO / "results" / "multi30k-cpu" / "model.pt", model_dir / "model.pt")
    main([str(model_dir / "model.pt"), "--out", str(tmp_path / "bare.js")])
    assert "no scores shown" in capsys.readouterr().out
    bare = read_payload(tmp_path / "bare.js")
    assert bare["source"]["results"] is None and bare["gallery"] == []
    main([str(model_dir / "model.pt"), "--out", str(tmp_path / "labelled.js"),
          "--results", str(REPO / "results" / "multi30k-cpu")])
    labelled = read_payload(tmp_path / "labelled.js")
    assert labelled["source"]["results"] == "multi30k-cpu" and len(labelled["gallery"]) == 200


def test_the_committed_export_is_the_shipped_model_of_the_results_record(payload):
    record = json.loads((REPO / "results" / "multi30k-cpu" / "results.json").read_text())
    assert payload["source"]["sha256"] == record["shipped_model"]["sha256"]
    assert payload["source"]["commit"] == record["commit"]
    assert payload["quantization"] == "int8"
    assert EXPORT.stat().st_size < 10e6
    ours = (REPO / "results" / "multi30k-cpu" / "translations.de").read_text().splitlines()
    assert [g["ours"] for g in payload["gallery"]] == ours[:len(payload["gallery"])]
    assert len(payload["gallery"]) >= SENTENCES


# --- the page, in Chromium -------------------------------------------------------------------------------

def test_the_page_tokenizes_exactly_as_sentencepiece(selftest, torch_model):
    _, vocab = torch_model
    assert len(selftest["texts"]) > 2 * SENTENCES
    wrong = [(t, ids) for t, ids in zip(selftest["texts"], selftest["tokenized"]) if ids != vocab.encode(t)]
    assert wrong == []


def test_greedy_in_the_page_equals_pytorch_token_for_token(selftest, torch_model):
    model, vocab = torch_model
    results = selftest["results"]
    assert len(results) == SENTENCES
    wrong = [r["src"] for r in results if r["greedy"] != torch_search(model, vocab, r["src"], 1)]
    assert wrong == []


def test_beam_search_in_the_page_agrees_with_pytorch(selftest, torch_model, payload):
    model, vocab = torch_model
    results = selftest["results"]
    ours = [torch_search(model, vocab, r["src"], 4) for r in results]
    same = sum(r["beam"] == o for r, o in zip(results, ours))
    assert same >= 0.95 * len(results), f"only {same} of {len(results)} beam outputs agree"
    refs = [[g["ref"] for g in payload["gallery"][:len(results)]]]
    page = sacrebleu.corpus_bleu([r["beam_text"] for r in results], refs).score
    torch_bleu = sacrebleu.corpus_bleu([vocab.decode(o) for o in ours], refs).score
    assert abs(page - torch_bleu) <= 0.3, (page, torch_bleu)


def test_bad_input_gets_a_message(selftest, payload):
    errors = selftest["errors"]
    assert errors["empty"] == "Type an English sentence first."
    assert str(payload["limits"]["max_characters"]) in errors["long"]
    assert str(payload["limits"]["max_source_pieces"]) in errors["pieces"]


def test_text_in_the_address_is_translated_on_load(chromium, whole_book, torch_model, tmp_path):
    model, vocab = torch_model
    sentence = "Two dogs are playing in the snow ."
    url = (whole_book / PAGE).as_uri() + "?text=" + urllib.parse.quote(sentence)
    dom = open_page(chromium, url, tmp_path, seconds=60)
    out = element(dom, "td", "translator-output")
    assert out == vocab.decode(torch_search(model, vocab, sentence, 4))
    assert out and "<" not in out
    assert element(dom, "td", "translator-greedy") == vocab.decode(torch_search(model, vocab, sentence, 1))
    message = element(dom, "p", "translator-message")
    assert message == ""


def test_several_sentences_are_translated_one_by_one(chromium, whole_book, torch_model, tmp_path):
    """The model learned single captions: typed together, sentences are split and each translated
    alone, and the status line names both searches with their times."""
    model, vocab = torch_model
    first, second = "Two dogs are playing in the snow .", "A man rides a bike down the street."
    url = (whole_book / PAGE).as_uri() + "?text=" + urllib.parse.quote(f"{first} {second}")
    dom = open_page(chromium, url, tmp_path, seconds=90)
    for cell, k in (("translator-output", 4), ("translator-greedy", 1)):
        expected = " ".join(vocab.decode(torch_search(model, vocab, s, k)) for s in (first, second))
        assert element(dom, "td", cell) == expected
    status = element(dom, "span", "translator-status")
    assert "beam search (k = 4)" in status and "greedy search" in status and "2 sentences" in status


def test_empty_text_in_the_address_gets_the_message_in_the_page(chromium, whole_book, tmp_path):
    dom = open_page(chromium, (whole_book / PAGE).as_uri() + "?text=%20%20", tmp_path, seconds=60)
    assert element(dom, "p", "translator-message") == "Type an English sentence first."
    assert element(dom, "td", "translator-output") == ""


def test_characters_never_seen_are_named(chromium, whole_book, tmp_path):
    url = (whole_book / PAGE).as_uri() + "?text=" + urllib.parse.quote("A dog \u2603 runs.")
    dom = open_page(chromium, url, tmp_path, seconds=60)
    assert "\u2603" in element(dom, "p", "translator-message")
    assert element(dom, "td", "translator-output")


def test_the_chinese_edition_s_page_speaks_chinese(chromium, whole_book, torch_model, tmp_path):
    """The same model and searches, in the words of the edition around it (lang="zh-CN"): the form,
    the status line and a refusal, whose English the page's own words replace."""
    model, vocab = torch_model
    sentence = "Two dogs are playing in the snow ."
    url = (whole_book / "zh" / PAGE).as_uri() + "?text=" + urllib.parse.quote(sentence)
    dom = open_page(chromium, url, tmp_path, seconds=60)
    assert element(dom, "td", "translator-output") == vocab.decode(torch_search(model, vocab, sentence, 4))
    assert element(dom, "button", "translator-go") == "翻译"
    assert element(dom, "th", "translator-beam-label") == "束搜索（k = 4，\u03b1 = 0.6）"
    status = element(dom, "span", "translator-status")
    assert status.startswith("束搜索（k = 4）：") and "贪心解码" in status
    dom = open_page(chromium, (whole_book / "zh" / PAGE).as_uri() + "?text=%20%20", tmp_path, seconds=60)
    assert element(dom, "p", "translator-message") == "请先输入一个英语句子。"


def test_a_page_without_its_model_says_so(chromium, whole_book, tmp_path):
    root = tmp_path / "site"
    (root / "book").mkdir(parents=True)
    shutil.copy(whole_book / PAGE, root / PAGE)
    shutil.copytree(whole_book / "translator", root / "translator",
                    ignore=shutil.ignore_patterns("model.js"))
    dom = open_page(chromium, (root / PAGE).as_uri(), tmp_path, seconds=30)
    assert "did not load" in element(dom, "p", "translator-message")


# The page's script under node: a function of the JSON input, given the loaded vocabulary.
NODE = """
globalThis.window = globalThis;
const fs = require('fs'), vm = require('vm');
const [model, code, input] = process.argv.slice(2);
for (const f of [model, code]) vm.runInThisContext(fs.readFileSync(f, 'utf8'));
const data = JSON.parse(fs.readFileSync(input, 'utf8'));
const {vocab} = window.transformerBook.load();
(async () => console.log(JSON.stringify(await (%s)(data))))();
"""
needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node not found")


def run_node(tmp_path, model_js, function, data):
    (tmp_path / "run.js").write_text(NODE % function)
    (tmp_path / "input.json").write_text(json.dumps(data))
    command = ["node", str(tmp_path / "run.js"), str(model_js), str(EXPORT.with_name("translator.js")),
               str(tmp_path / "input.json")]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


@needs_node
def test_the_tokenizer_matches_on_the_whole_test_and_dev_sets(torch_model, tmp_path):
    """Every sentence of Multi30k's dev and test sets, both sides, encoded and decoded; and 3,000
    random id sequences (byte pieces, special ids, word pieces) decoded as Vocab.decode does."""
    from transformer.corpora import load_split
    from transformer.decode import as_typed
    _, vocab = torch_model
    texts = [s for split in ("dev", "test") for pair in load_split("multi30k", split) for s in pair]
    rng = random.Random(0)
    seqs = [[rng.choice([rng.randrange(4, 260), rng.randrange(0, 4), rng.randrange(260, len(vocab))])
             for _ in range(rng.randrange(13))] for _ in range(3000)]
    out = run_node(tmp_path, EXPORT, "d => ({ids: d.texts.map(t => vocab.encode(t).ids), "
                   "text: d.seqs.map(s => vocab.decode(s))})", {"texts": texts, "seqs": seqs})
    # the page reads text as every engine does, TYPED's characters replaced (the German side's „ “)
    assert out["ids"] == vocab.encode([as_typed(t) for t in texts])
    assert out["text"] == vocab.decode(seqs)
    assert any(0x80 <= i - 4 < 0xC0 for s in seqs for i in s)   # stray continuation bytes were tried


@needs_node
def test_the_tokenizer_applies_the_normalisation_rule_as_sentencepiece_does(tmp_path):
    """A vocabulary with chapter 5.1's rule (nmt_nfkc), learned from Multi30k's dev set: every Unicode
    character between two letters, and 3,000 strings of spaces, marks, compatibility forms and letters,
    get the library's ids from the page."""
    from tests.conftest import need_corpus
    from transformer.corpora import load_split
    from transformer.data import NORMALIZATION, train_vocab
    from transformer.decode import as_typed
    need_corpus("multi30k", "dev")
    vocab = train_vocab(load_split("multi30k", "dev"), vocab_size=1000)
    assert NORMALIZATION == "nmt_nfkc"
    model = Transformer(TransformerConfig(N=1, d_model=8, d_ff=8, h=2, max_len=64), len(vocab))
    write_payload(web_payload(model, vocab, "float16"), tmp_path / "model.js")
    texts = ["a" + chr(c) + "b" for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    rng = random.Random(0)
    odd = " \t\u00a0\u2009\u200b\u200f\ufeff\u2026\u2581\ufb01ＡＢ１²é\u0301\u3000，。ab"
    texts += ["".join(rng.choice(odd) for _ in range(rng.randrange(1, 12))) for _ in range(3000)]
    out = run_node(tmp_path, tmp_path / "model.js", "d => d.map(t => vocab.encode(t).ids)", texts)
    # the page reads text as every engine does: TYPED's characters replaced first
    assert out == vocab.encode([as_typed(t) for t in texts])
    assert any(as_typed(t) != t for t in texts)


@needs_node
def test_the_page_reads_pasted_hyphens_joiners_and_curly_quotes_as_the_plain_sentence(torch_model, tmp_path):
    """The committed page's model: a soft hyphen, a word joiner and curly quotes give the plain sentence's
    ids, as on every Python engine (decode.TYPED, which the payload carries)."""
    from transformer.decode import TYPED
    _, vocab = torch_model
    assert read_payload(EXPORT)["vocab"]["typed"] == TYPED
    plain = ["A man's dog runs across the \"old\" bridge.", "Zwei \"M\u00e4nner\" gehen."]
    pasted = ["A man\u2019s dog runs ac\u00adross the \u201cold\u201d bri\u2060dge.",
              "Zwei \u201eM\u00e4n\u00adner\u201c gehen."]
    out = run_node(tmp_path, EXPORT, "d => d.map(t => vocab.encode(t).ids)", pasted)
    assert out == vocab.encode(plain)


@needs_node
def test_every_search_setting_matches_the_readable_decoders_on_a_small_model(torch_model, tmp_path):
    """A small untrained model whose </s> is likely, and an output limit of 3 extra tokens: the
    page's searches must equal simple_greedy_decode and simple_beam_search exactly, through
    hypotheses that end early (never before a first token), all hypotheses ending, and the forced
    </s> at the limit."""
    vocab = torch_model[1]
    torch.manual_seed(1)
    model = Transformer(TransformerConfig.preset("tiny", max_len=64), len(vocab)).eval()
    with torch.no_grad():
        # the last layer's output leans towards </s>'s row of the (shared) output matrix, so
        # that some hypotheses end at once, some later, and some only at the limit
        lean = torch.randn(model.cfg.d_model)
        lean /= lean.norm()
        model.decoder.layers[-1].sublayers[2].norm.bias.copy_(3 * lean)
        model.tgt_embed.lut.weight[EOS] = lean
    payload = web_payload(model, vocab, "float16")
    payload["config"]["max_extra"] = 3
    path = tmp_path / "model.js"
    write_payload(payload, path)
    model, vocab = payload_model(read_payload(path))   # the weights the page uses
    sentences = ["A dog runs.", "Two men are sitting on a bench in the park .", "Hi", "x y z w"]
    cases = [(s, beam, alpha) for s in sentences for beam in (1, 2, 4, 8) for alpha in (0.0, 0.6, 2.0)]
    out = run_node(tmp_path, path, "async cases => { const out = []; for (const [t, beam, alpha] of "
                   "cases) out.push((await window.transformerBook.translate(t, {beam, alpha})).ids); "
                   "return out; }", cases)
    lengths = set()
    for (text, beam, alpha), page in zip(cases, out):
        src = torch.tensor([vocab.encode(text) + [EOS]])
        ours = (simple_greedy_decode(model, src, 2, EOS, max_extra=3) if beam == 1 else
                simple_beam_search(model, src, 2, EOS, beam_size=beam, alpha=alpha, max_extra=3))
        ours = [t for t in ours[0].tolist() if t != model.cfg.pad_id]
        assert page == ours[:-1], (text, beam, alpha)   # the page leaves out </s>
        lengths.add(len(page))
    # outputs of several lengths, the forced </s> at the limit among them, and none empty
    # (decode.not_empty: the first step cannot end a sentence)
    assert 0 not in lengths and len(lengths) >= 4, lengths
