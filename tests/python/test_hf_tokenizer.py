"""HuggingFaceTokenizer: a tokenizer.json shaped as each family ships it (GPT-2, Llama 3, Qwen 2,
Mistral-Nemo, and Llama 2 metaspace with byte fallback, old and new style) is trained here by HF
tokenizers; our ids equal tokenizers' own on a multilingual corpus (emoji, CJK, combining marks,
invalid UTF-8), with and without the post-processor's tokens, and our decoding equals its decoder.
preprocess_data, pretrain_gpt and the Hugging Face export take it too."""
import json
import random

import numpy as np
import pytest

from data_helpers import read_mmidx, run
from test_tokenizer import SPECIAL, corpus, random_strings

megatron_cpp = pytest.importorskip("megatron_cpp")
from tokenizers import AddedToken, Tokenizer, models  # noqa: E402

from hf_families import FAMILIES, QWEN2, byte_level  # noqa: E402

# Invalid UTF-8 of every kind: stray and truncated sequences, overlong forms, surrogates, > U+10FFFF.
INVALID = [b"abc\xff\xfe def", b"\xe2\x82 x", b"\xf0\x9f\x98", b"\xc3(", b"ok \xed\xa0\x80 surrogate",
           b"\xf4\x90\x80\x80 big", b"\xe0\x80\xaf overlong", b"\x80\x80 lone", "caf\u00e9 \xff".encode("latin-1")]


def texts():
    specials = ["<|endoftext|>hello <|im_start|> x<|endoftext|>", "<s> hi </s>", "  <s>a",
                "<|begin_of_text|>x<|reserved_special_token_3|><|reserved_special_token_39|>y"]
    return SPECIAL + specials + random_strings(300, 7)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    tok = FAMILIES[request.param](corpus())
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    tok.save(str(path))
    return request.param, tok, path


def test_ids_and_decoding_equal_tokenizers(family):
    name, ref, path = family
    ours = megatron_cpp.HuggingFaceTokenizer(str(path))
    plain = megatron_cpp.HuggingFaceTokenizer(str(path), include_special_tokens=False)
    assert ours.vocab_size == ref.get_vocab_size(with_added_tokens=True)
    for text in texts():
        expected = ref.encode(text).ids
        assert ours.tokenize(text) == expected, (name, text)
        assert plain.tokenize(text) == ref.encode(text, add_special_tokens=False).ids, (name, text)
        # Megatron-LM's detokenize: the ids' tokens through the tokenizer.json's decoder.
        assert ours.detokenize(expected) == ref.decoder.decode([ref.id_to_token(i) for i in expected]), (name, text)
    for raw in INVALID:
        assert ours.tokenize(raw) == ref.encode(raw.decode("utf-8", "replace")).ids, (name, raw)


def test_added_token_options_match(tmp_path):
    """lstrip/rstrip eat the spaces beside a token, single_word only matches a whole word, and a
    normalized added token is matched after normalization (NFC here)."""
    ref = byte_level(corpus(), QWEN2, ["<|endoftext|>"], nfc=True)
    ref.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True),
                            AddedToken("<|im_start|>", single_word=True)])
    ref.add_tokens([AddedToken("hello world", normalized=True), AddedToken(" café", normalized=True)])
    ref.save(str(tmp_path / "tokenizer.json"))
    ours = megatron_cpp.HuggingFaceTokenizer(str(tmp_path))
    for text in ["a  <mask>  b <mask>c<mask>", "x<|im_start|>y <|im_start|> z <|im_start|>", "<|im_start|>",
                 "say hello world, café cafe\u0301 and hello  world", "\u00a0<mask>\u3000"]:
        assert ours.tokenize(text) == ref.encode(text).ids, text


def test_preprocess_data_and_tokenizer_config(tmp_path):
    """preprocess_data --tokenizer-type HuggingFaceTokenizer on a folder: the eos that
    --append-eod appends is tokenizer_config.json's eos_token (as transformers reads it)."""
    ref = FAMILIES["llama3"](corpus())
    folder = tmp_path / "llama3"
    folder.mkdir()
    ref.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<|end_of_text|>"},
                                                              "bos_token": "<|begin_of_text|>"}))
    eos = ref.token_to_id("<|end_of_text|>")
    docs = SPECIAL[:30] + random_strings(150, 3)
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n")
    for extra, add_special in (([], True), (["--tokenizer-hf-no-include-special-tokens"], False)):
        prefix = str(tmp_path / f"out{len(extra)}")
        run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", folder, "--append-eod", "--workers", 2, "--batch-lines", 16, *extra)
        dtype, _, _, doc_idx, tokens = read_mmidx(prefix + "_text_document")
        assert dtype == np.uint16
        expected = []
        for d in docs:
            ids = ref.encode(d, add_special_tokens=add_special).ids
            expected.extend(ids + [eos] if ids else [])
        assert tokens.tolist() == expected
        assert len(doc_idx) == len(docs) + 1
    ours = megatron_cpp.build_tokenizer("HuggingFaceTokenizer", tokenizer_model=str(folder))
    assert ours.eod == eos and megatron_cpp.HuggingFaceTokenizer(str(folder)).bos == ref.token_to_id(
        "<|begin_of_text|>")


def test_what_cannot_be_read_is_named(tmp_path):
    good = FAMILIES["gpt2"](corpus())
    cases = {}
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    cases["wordpiece.json"] = (wordpiece.to_str(), "model: type 'WordPiece' is not supported")
    j = json.loads(good.to_str())
    j["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False}
    cases["regex.json"] = (json.dumps(j), "regex '(unclosed' does not compile")
    j = json.loads(good.to_str())
    j["model"]["merges"] = ["a"] + j["model"]["merges"]
    cases["merges.json"] = (json.dumps(j), "merge 0: expected two tokens separated by one space, found 'a'")
    j = json.loads(good.to_str())
    j["normalizer"] = {"type": "Lowercase"}
    cases["lower.json"] = (json.dumps(j), "normalizer type 'Lowercase' is not supported")
    cases["truncated.json"] = (good.to_str()[:200], "parse error")
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(RuntimeError) as e:
            megatron_cpp.HuggingFaceTokenizer(str(tmp_path / name))
        assert str(tmp_path / name) in str(e.value) and message in str(e.value), (name, str(e.value))
    with pytest.raises(RuntimeError, match="no such file or folder"):
        megatron_cpp.HuggingFaceTokenizer(str(tmp_path / "meta-llama" / "Llama-3-8B"))
    with pytest.raises(RuntimeError, match="expected a tokenizer.json in the folder"):
        megatron_cpp.HuggingFaceTokenizer(str(tmp_path))


def test_hugging_face_export_carries_the_tokenizer(tmp_path):
    """pretrain_gpt trains with a tokenizer.json folder; its export holds the tokenizer.json and a
    tokenizer_config.json naming eos/bos, so transformers' AutoTokenizer gives our ids and
    pipeline("text-generation") runs from the folder alone."""
    import transformers
    ref = FAMILIES["llama3"](corpus())
    folder = tmp_path / "tok"
    folder.mkdir()
    ref.save(str(folder / "tokenizer.json"))
    ck, hf = tmp_path / "ck", tmp_path / "hf"
    run("pretrain_gpt", "--num-layers", 2, "--hidden-size", 32, "--num-attention-heads", 4, "--seq-length", 16,
        "--micro-batch-size", 2, "--global-batch-size", 4, "--train-iters", 2, "--lr", 1e-3, "--mock-data",
        "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", folder, "--eval-iters", 0, "--save", ck)
    folder.rename(tmp_path / "moved")
    proc = run("convert_checkpoint", "--load", ck, "--export-hf", hf, check=False)
    assert proc.returncode == 1 and "pass --tokenizer-model to export its tokenizer" in proc.stderr, proc.stderr
    run("convert_checkpoint", "--load", ck, "--export-hf", hf, "--tokenizer-model", tmp_path / "moved")

    config = json.loads((hf / "config.json").read_text())
    bos, eos = ref.token_to_id("<|begin_of_text|>"), ref.token_to_id("<|end_of_text|>")
    assert (config["bos_token_id"], config["eos_token_id"]) == (bos, eos)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf))
    ours = megatron_cpp.HuggingFaceTokenizer(str(hf))
    for text in texts()[:60]:
        assert tokenizer(text)["input_ids"] == ours.tokenize(text), text
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (bos, eos)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(hf)).eval()
    prompt = tokenizer("the cat", return_tensors="pt")
    greedy = model.generate(**prompt, max_new_tokens=4, do_sample=False, pad_token_id=eos)
    generated = transformers.pipeline("text-generation", model=str(hf))("the cat", max_new_tokens=4, do_sample=False,
                                                                        pad_token_id=eos)[0]["generated_text"]
    assert generated == tokenizer.decode(greedy[0], skip_special_tokens=True)


def test_empty_matches_and_repeated_merges_as_tokenizers(tmp_path):
    """Regexes that match empty strings split where tokenizers' onig find_iter yields them; an empty
    String pattern splits between characters; a merge listed twice keeps its last rank."""
    base = json.loads(FAMILIES["gpt2"](corpus()).to_str())
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    variants = {
        "lookahead": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?=[0-9])"}, "behavior": "Isolated", "invert": False},
            byte_level]}},
        "empty_string": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": ""}, "behavior": "MergedWithNext", "invert": False},
            byte_level]}},
    }
    merges = base["model"]["merges"]
    repeated = dict(base, model=dict(base["model"], merges=merges + merges[:50]))
    texts = ["a1b2", "xx1 yx", "", "x", "12 34 hello world", "café 日本 x1"] + SPECIAL[:20]
    for name, change in list(variants.items()) + [("repeated_merges", {})]:
        spec = dict(repeated if name == "repeated_merges" else base, **change)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(spec))
        ref = Tokenizer.from_file(str(path))
        ours = megatron_cpp.HuggingFaceTokenizer(str(path))
        for text in texts:
            assert ours.tokenize(text) == ref.encode(text).ids, (name, text)
    spec = dict(base, pre_tokenizer={"type": "Metaspace", "replacement": "", "prepend_scheme": "always"})
    (tmp_path / "metaspace.json").write_text(json.dumps(spec))
    with pytest.raises(RuntimeError, match="replacement: expected one character, found ''"):
        megatron_cpp.HuggingFaceTokenizer(str(tmp_path / "metaspace.json"))


def test_a_hub_name_reads_the_local_hugging_face_cache(tmp_path, monkeypatch):
    """--tokenizer-model meta-llama/... (as Megatron-LM scripts pass it to AutoTokenizer) finds the
    snapshot huggingface_hub left in its cache; nothing is downloaded."""
    ref = FAMILIES["llama3"](corpus())
    repo = tmp_path / "hub" / "models--acme--tiny-llama"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd")
    (repo / "snapshots" / "0123abcd").mkdir(parents=True)
    ref.save(str(repo / "snapshots" / "0123abcd" / "tokenizer.json"))
    with pytest.raises(RuntimeError, match="no Hugging Face cache snapshot of that name"):
        megatron_cpp.HuggingFaceTokenizer("acme/tiny-llama")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    ours = megatron_cpp.HuggingFaceTokenizer("acme/tiny-llama")
    assert ours.tokenize("hello world") == ref.encode("hello world").ids
    with pytest.raises(RuntimeError, match="no Hugging Face cache snapshot"):
        megatron_cpp.HuggingFaceTokenizer("acme/not-cached")


@pytest.mark.parametrize("name", ["llama3", "qwen2"])
def test_hand_written_split_of_llama3_and_qwen2_patterns(name, tmp_path):
    """Their patterns run on a hand-written scanner (llama3_pretokenizer.h), not Oniguruma: random
    strings of the characters each alternative turns on (contractions in any case and the long s
    that folds to s, newlines in whitespace runs, digit runs, marks, Unicode spaces) split as
    tokenizers splits them."""
    ref = FAMILIES[name](corpus())
    ref.save(str(tmp_path / "tokenizer.json"))
    ours = megatron_cpp.HuggingFaceTokenizer(str(tmp_path))
    pieces = ["a", "B", "z", "'", "s", "S", "\u017f", "t", "T", "r", "e", "E", "v", "m", "l", "L", "d", "D", " ", "  ",
              "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "1", "2", "\u0663", "\u00bd", "!", "?", ".", "-", "\U0001f600",
              "\u65e5", "\u00e9", "e\u0301", "\u2028", "\x0b", "\x0c", "\x85", "\u01c5", "\u02b0", "\u0301"]
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert ours.tokenize(text) == ref.encode(text).ids, text
