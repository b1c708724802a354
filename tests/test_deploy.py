"""Export to CTranslate2 (transformer.deploy): the engine must decode our models as we do."""
import json
import shutil
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from tests.conftest import need_corpus
from transformer import Transformer, TransformerConfig
from transformer.run import save_checkpoint
from transformer.corpora import load_split
from transformer.data import BOS, EOS, PAD, train_vocab
from transformer.decode import beam_search, greedy_decode

from transformer.deploy import CTranslate2Model, ctranslate2_spec, export_ctranslate2, main

MAX_EXTRA = 8     # small, so that many outputs reach the length limit and the limits are compared too


@pytest.fixture(scope="module")
def sources():
    need_corpus("multi30k", "dev")
    return [src for src, _ in load_split("multi30k", "dev")[:400]]


@pytest.fixture(scope="module")
def vocab(sources):
    return train_vocab([(s, s) for s in sources], vocab_size=500)


def make_run(folder, vocab, **overrides):
    """A run folder with two checkpoints of an untrained model (any weights test a conversion)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(**{**dict(N=2, d_model=32, d_ff=64, h=4, max_len=96), **overrides})
    for step in (1, 2):
        model = Transformer(cfg, len(vocab))
        save_checkpoint(folder, step, {"model": model.state_dict(), "model_config": asdict(cfg), "vocab": vocab.proto},
                        keep=5)
    (folder / "profile.json").write_text(json.dumps({"average_last": 2}))
    return folder


def by_length(vocab, sentences, limit=40):
    """Source id lists (with </s>) grouped by length, so that a batch shares one output limit."""
    groups = defaultdict(list)
    for ids in vocab.encode(sentences):
        if len(ids) < limit:
            groups[len(ids) + 1].append(ids + [EOS])
    return groups


def compare(run, out_dir, vocab, sentences, beam_size, alpha=0.0):
    """(equal outputs, sentences, unequal ones where both outputs stopped at the length limit): ours
    against the engine's, batch by batch of equal source length."""
    from transformer.run import load_model
    model, _, _ = load_model(run, 2)
    export_ctranslate2(run, out_dir, average_last=2)
    engine = CTranslate2Model(out_dir, threads=1)
    same = total = both_at_limit = 0
    for length, rows in by_length(vocab, sentences).items():
        src = torch.tensor(rows)
        if beam_size == 1:
            ours = greedy_decode(model, src, BOS, EOS, max_extra=MAX_EXTRA)
        else:
            ours = beam_search(model, src, BOS, EOS, beam_size, alpha, max_extra=MAX_EXTRA)
        theirs = engine.translate_ids([r[:-1] for r in rows], beam_size, alpha, MAX_EXTRA)
        longest = length + MAX_EXTRA - 1                 # tokens before the forced </s>
        for row, other in zip(ours.tolist(), theirs):
            mine = [i for i in row if i not in (PAD, EOS)]
            same += mine == other
            both_at_limit += mine != other and len(mine) == len(other) == longest
            total += 1
    return same, total, both_at_limit


def test_greedy_output_equals_ours_token_for_token(tmp_path, vocab, sources):
    run = make_run(tmp_path / "run", vocab)
    same, total, _ = compare(run, tmp_path / "ct2", vocab, sources, beam_size=1)
    assert total > 300 and same == total, f"{total - same} of {total} greedy outputs differ"


@pytest.mark.parametrize("overrides", [dict(norm_first=True), dict(positional="learned"), dict(d_k=4, d_v=4)],
                         ids=["pre-norm", "learned-positions", "narrow-heads"])
def test_variants_convert_and_decode_alike(tmp_path, vocab, sources, overrides):
    run = make_run(tmp_path / "run", vocab, **overrides)
    same, total, _ = compare(run, tmp_path / "ct2", vocab, sources[:120], beam_size=1)
    assert same == total, f"{total - same} of {total} greedy outputs differ"


def test_beam_output_matches_ours_on_nearly_all_sentences(tmp_path, vocab, sources):
    run = make_run(tmp_path / "run", vocab)
    # Without a length penalty (the next test covers the penalty) the two rank finished hypotheses
    # alike. They part only at the length limit:
    # there ours ends every hypothesis with </s> and adds log P(</s>) to its score, while the engine
    # stops and ranks the unfinished hypotheses as they are.
    same, total, both_at_limit = compare(run, tmp_path / "ct2", vocab, sources, beam_size=4, alpha=0.0)
    print(f"beam 4: {same} of {total} outputs equal; {both_at_limit} of the others reached the limit in both")
    assert same >= 0.9 * total, f"only {same} of {total} beam outputs are equal"
    assert same + both_at_limit == total


SHIPPED = Path(__file__).resolve().parent.parent / "results" / "multi30k-cpu" / "model.pt"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The shipped model, its vocabulary and its CTranslate2 export, and the first 200 test
    sentences as source id lists (with </s>) grouped by length."""
    from transformer.run import load_model
    need_corpus("multi30k", "test")
    model, vocab, _ = load_model(SHIPPED)
    out = tmp_path_factory.mktemp("shipped") / "ct2"
    main([str(SHIPPED), str(out)])
    test = [src for src, _ in load_split("multi30k", "test")[:200]]
    groups = defaultdict(list)
    for ids in vocab.encode(test):
        groups[len(ids) + 1].append(ids + [EOS])
    return model, vocab, CTranslate2Model(out, threads=1), groups


def beam_outputs(shipped, alpha):
    """The shipped fixture's sentences translated with beam 4 by our beam_search and by the engine, as
    two lists of output ids (without </s> or padding), in the same order."""
    model, vocab, engine, groups = shipped
    ours, theirs = [], []
    for rows in groups.values():
        out = beam_search(model, torch.tensor(rows), BOS, EOS, 4, alpha, max_extra=50)
        ours += [[i for i in row if i not in (PAD, EOS)] for row in out.tolist()]
        theirs += engine.translate_ids([r[:-1] for r in rows], 4, alpha, 50)
    return ours, theirs


@pytest.mark.parametrize("alpha", [0.6, 2.5])
def test_both_engines_rank_by_the_paper_s_length_penalty(shipped, alpha):
    """The engine's own penalty is length ** alpha, the paper's ((5 + length) / 6) ** alpha: with
    the engine ranking by its own, 7 (alpha 0.6) and 17 (2.5) of these 200 sentences differed from
    ours, and this test failed. Ranked by the paper's penalty, its beam picks ours on nearly all,
    and an n-best score is ours: log-probability over the paper's penalty."""
    from transformer.decode import length_penalty
    model, vocab, engine, groups = shipped
    ours, theirs = beam_outputs(shipped, alpha)
    same, total = sum(a == b for a, b in zip(ours, theirs)), len(ours)
    assert total == 200 and same >= 0.97 * total, f"{total - same} of {total} differ"
    # an n-best score: the best hypothesis's log-probability under our model, over the penalty
    src = next(iter(groups.values()))[0]
    (best, score), = engine.translate_ids([src[:-1]], 4, alpha, 50, nbest=1)[0]
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([[BOS] + best]))
        logp = logits.float().log_softmax(-1)[0].gather(1, torch.tensor(best + [EOS])[:, None]).sum()
    assert abs(score - logp.item() / length_penalty(len(best) + 1, alpha)) < 1e-3


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_both_engines_stop_a_sentence_s_search_by_the_same_rule(shipped, alpha):
    """Our beam search stopped once k hypotheses had ended; the engine, searching without a penalty, also
    waits until an ending has ranked first at its step. Then 4 (alpha 0) and 2 (alpha 0.6) of these 200
    sentences differed, the engine's translation each time the one our model scores higher, and this test
    failed. With the engine's rule both give the same translation of every sentence."""
    ours, theirs = beam_outputs(shipped, alpha)
    assert len(ours) == 200 and ours == theirs


def test_at_alpha_0_no_sentence_of_words_is_translated_to_nothing(shipped):
    """Beam search at alpha 0 (nothing weighs length) ranked the empty output first for 2 of these 200
    test sentences and listed it among the n best; no engine finishes an output of only </s> now."""
    model, vocab, engine, groups = shipped
    for rows in groups.values():
        ours = beam_search(model, torch.tensor(rows), BOS, EOS, 4, 0.0, max_extra=50)
        assert (ours[:, 0] != EOS).all()
        theirs = engine.translate_ids([r[:-1] for r in rows], 4, 0.0, 50, nbest=4)
        assert all(ids for hyps in theirs for ids, _ in hyps)


def test_int8_model_translates_raw_text(tmp_path, vocab, sources):
    run = make_run(tmp_path / "run", vocab)
    main([str(run), str(tmp_path / "int8"), "--quantization", "int8"])
    engine = CTranslate2Model(tmp_path / "int8", compute_type="int8")
    out = engine.translate(sources[:5], beam_size=2, max_extra=5)
    assert len(out) == 5 and all(isinstance(t, str) for t in out)


def test_the_command_averages_the_profile_s_checkpoints(tmp_path, vocab, capsys):
    run = make_run(tmp_path / "run", vocab)
    main([str(run), str(tmp_path / "ct2")])
    assert "the average of step_0000001.pt, step_0000002.pt" in capsys.readouterr().out
    assert (tmp_path / "ct2" / "model.bin").exists() and (tmp_path / "ct2" / "vocab.model").exists()


def test_a_saved_model_file_converts_like_its_run(tmp_path, vocab, sources, capsys):
    """The shipped form of a model (checkpoint.save_model, float16) converts too, and the engine's
    greedy output equals ours on the same loaded weights."""
    from transformer.checkpoint import save_model
    from transformer.run import load_model
    run = make_run(tmp_path / "run", vocab)
    model, _, _ = load_model(run, 2)
    save_model(model, vocab, tmp_path / "model.pt")
    main([str(tmp_path / "model.pt"), str(tmp_path / "ct2")])
    assert "the average of model.pt" in capsys.readouterr().out
    shipped, _, _ = load_model(tmp_path / "model.pt")
    engine = CTranslate2Model(tmp_path / "ct2")
    ids = [vocab.encode(s) for s in sources[:8]]
    for s in ids:
        ours = greedy_decode(shipped, torch.tensor([s + [EOS]]), BOS, EOS, max_extra=5)[0].tolist()
        ours = ours[:ours.index(EOS)] if EOS in ours else ours
        assert engine.translate_ids([s], beam_size=1, max_extra=5)[0] == ours


def test_an_export_refuses_a_vocabulary_that_is_not_its_own(tmp_path, vocab):
    """An export whose vocab.model was overwritten by another (a training run took its folder) translated
    "Zwei Hund spielen imow." with exit code 0: the loader compares the vocabulary with the engine's own
    (shared_vocabulary.json), and a damaged positions.json is named."""
    make_run(tmp_path / "run", vocab)
    main([str(tmp_path / "run"), str(tmp_path / "ct2")])
    CTranslate2Model(tmp_path / "ct2")
    other = train_vocab([("ein kleiner Hund", "a small dog")] * 50, vocab_size=300)
    other.save(tmp_path / "ct2" / "vocab.model")
    with pytest.raises(ValueError, match="vocab.model is not the vocabulary the model was exported with"):
        CTranslate2Model(tmp_path / "ct2")
    vocab.save(tmp_path / "ct2" / "vocab.model")
    (tmp_path / "ct2" / "positions.json").write_text('{"max_len": ')
    with pytest.raises(ValueError, match=r"positions\.json is damaged"):
        CTranslate2Model(tmp_path / "ct2")


def test_bad_input_is_refused_with_the_reason(tmp_path, vocab, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere"), str(tmp_path / "out")])
    assert "no run folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        main([str(tmp_path / "empty"), str(tmp_path / "out")])
    assert "no checkpoints" in capsys.readouterr().err
    other = train_vocab([("ein kleiner Hund", "a small dog")] * 50, vocab_size=300)
    model = Transformer(TransformerConfig(N=1, d_model=8, d_ff=16, h=2), len(vocab))
    with pytest.raises(ValueError, match="vocabulary has 300 pieces but the model's embeddings have 500"):
        ctranslate2_spec(model, other)
    uneven = Transformer(TransformerConfig(N=1, d_model=8, d_ff=16, h=2, d_k=4, d_v=2), len(vocab))
    with pytest.raises(ValueError, match="cannot be converted to CTranslate2: d_k=4 differs from d_v=2"):
        ctranslate2_spec(uneven, vocab)
    pointer = Transformer(TransformerConfig(N=1, d_model=8, d_ff=16, h=2, pointer_id=7), len(vocab))
    with pytest.raises(ValueError, match="cannot be converted to CTranslate2: pointer_id=7"):
        ctranslate2_spec(pointer, vocab)
    with pytest.raises(FileNotFoundError, match="no CTranslate2 model in"):
        CTranslate2Model(tmp_path / "empty")
    assert not (tmp_path / "out").exists()


# A sentence typed with characters that look like plain ones (chapter 5.1), and the same typed plainly.
ODDLY_TYPED = {
    "A man\u00a0is walking\u2026": "A man is walking...",          # no-break space, ellipsis
    "\ufeffTwo\u2009dogs\u200b run.": "Two dogs run.",             # byte-order mark, thin space, zero-width
    "A girl\u200f in a ｒｅｄ coat.": "A girl in a red coat.",      # direction mark, full-width letters
    "Ein ﬁsch\tschwimmt.": "Ein fisch schwimmt.",                  # a ligature, a tab
}


def test_oddly_typed_text_reads_as_plain_text_on_every_engine(tmp_path, vocab):
    """The vocabulary's normalisation is the one place text is rewritten: PyTorch (training,
    translate, evaluate) reads through Vocab, CTranslate2 through the vocab.model beside its weights,
    the browser page through its own tokenizer. Each gets the plain sentence's ids from the odd one,
    and both engines give it the plain sentence's translation."""
    from tests.test_translator_page import run_node
    from transformer.translate import Translator
    from transformer.web import web_payload, write_payload
    odd, plain = list(ODDLY_TYPED), list(ODDLY_TYPED.values())
    assert vocab.encode(odd) == vocab.encode(plain)
    run = make_run(tmp_path / "run", vocab)
    export_ctranslate2(run, tmp_path / "ct2")
    for engine in (Translator.from_run(run, beam_size=1), Translator.from_run(tmp_path / "ct2", beam_size=1)):
        assert engine.vocab.encode(odd) == vocab.encode(plain)
        assert engine.translate(odd) == engine.translate(plain)
    if shutil.which("node") is None:
        pytest.skip("node not found: the page's tokenizer was not run")
    model = Translator.from_run(run).engine.model
    write_payload(web_payload(model, vocab, "float16"), tmp_path / "model.js")
    page = run_node(tmp_path, tmp_path / "model.js", "d => d.map(t => vocab.encode(t).ids)", odd)
    assert page == vocab.encode(plain)


def test_both_engines_go_through_the_one_text_loop(shipped, monkeypatch):
    """Translator holds an engine and asks the package's one loop (decode.translate_text) for text, whichever
    engine it is; CTranslate2Model.translate is that loop too, and reports an over-long line the same way."""
    from transformer import decode
    from transformer.decode import ModelEngine
    from transformer.translate import Translator
    model, vocab, ct2, _ = shipped
    loop, seen = decode.translate_text, []

    def spy(engine, *args, **kwargs):
        seen.append(type(engine).__name__)
        return loop(engine, *args, **kwargs)

    monkeypatch.setattr(decode, "translate_text", spy)
    sentences = ["Two dogs play in the snow.", "", "A man rides a bike."]
    torch_out = Translator(ModelEngine(model.eval(), vocab)).translate(sentences)
    ct2_out = Translator(ct2).translate(sentences)
    direct = ct2.translate(sentences)
    assert seen == ["ModelEngine", "CTranslate2Model", "CTranslate2Model"]
    assert torch_out[1] == ct2_out[1] == "" and ct2_out == direct and all(torch_out[::2])
    too_long = [" ".join(["dog"] * (ct2.max_len + 5)), "A dog."]
    heard = []
    for engine in (ModelEngine(model, vocab), ct2):
        Translator(engine, beam_size=1).translate(too_long, too_long="skip",
                                                  report=lambda i, n: heard.append((type(engine).__name__, i)))
    assert heard == [("ModelEngine", 0), ("CTranslate2Model", 0)]


def test_pasted_hyphens_joiners_and_curly_quotes_read_as_the_plain_sentence_on_both_engines(shipped):
    """A soft hyphen or word joiner inside a word, and curly quotes and apostrophes, gave byte pieces or
    marks only the German side knows, and garbled translations; every engine reads the plain sentence's
    pieces through decode.TYPED, and so translates it the same."""
    from transformer.decode import ModelEngine, as_typed, translate_text
    model, vocab, ct2, _ = shipped
    plain = ["A man's dog runs across the \"old\" bridge.", "A man rides on a street with 'two' signs."]
    pasted = ["A man\u2019s dog runs ac\u00adross the \u201cold\u201d bri\u2060dge.",
              "A man rides on a str\u00adeet with \u2018two\u2019 si\u2060gns."]
    assert [vocab.pieces(as_typed(p)) for p in pasted] == [vocab.pieces(p) for p in plain]
    assert all(vocab.pieces(p) != vocab.pieces(q) for p, q in zip(pasted, plain))
    for engine in (ModelEngine(model.eval(), vocab), ct2):
        assert translate_text(engine, pasted, beam_size=2) == translate_text(engine, plain, beam_size=2)


def test_a_line_of_only_invisible_characters_is_blank_on_both_engines(shipped):
    """A line of only a byte-order mark, a zero-width space or a direction mark made up a sentence on PyTorch
    ("Ein Mann.") and gave an empty line on CTranslate2: the vocabulary drops those characters, so the line is
    blank, and both engines translate it to an empty line, as they do a blank one."""
    from transformer.decode import ModelEngine, translate_text
    model, vocab, ct2, _ = shipped
    lines = ["\ufeff", "\u200b", "\u200e", "\u200b \u200b", "A dog runs."]
    for engine in (ModelEngine(model.eval(), vocab), ct2):
        out = translate_text(engine, lines, beam_size=2)
        assert out[:4] == ["", "", "", ""] and out[4], type(engine).__name__
