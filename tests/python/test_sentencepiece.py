"""SentencePieceTokenizer (Megatron-LM's SentencePieceTokenizer, GPTSentencePieceTokenizer and
Llama2Tokenizer): .model files trained here by the sentencepiece package, BPE as Llama 2 ships
it (identity normalizer, byte fallback, split digits) and BPE and unigram with the default NFKC
character map, user-defined symbols and unknown characters. Our ids equal its encode_as_ids and
our text its decode_ids, on a multilingual corpus and on invalid UTF-8."""
import io
import json
import random

import pytest

from data_helpers import read_mmidx, run
from test_hf_tokenizer import INVALID
from test_tokenizer import SPECIAL, corpus, random_strings

import sentencepiece as spm
megatron_cpp = pytest.importorskip("megatron_cpp")

CONFIGS = {
    "llama2_bpe": dict(model_type="bpe", vocab_size=1000, byte_fallback=True, normalization_rule_name="identity",
                       remove_extra_whitespaces=False, split_digits=True, character_coverage=0.99),
    "bpe_nfkc": dict(model_type="bpe", vocab_size=800),
    "bpe_no_dummy_prefix": dict(model_type="bpe", vocab_size=800, add_dummy_prefix=False,
                                remove_extra_whitespaces=False, byte_fallback=True),
    "unigram_nfkc": dict(model_type="unigram", vocab_size=800),
    "unigram_byte_fallback_symbols": dict(model_type="unigram", vocab_size=800, byte_fallback=True,
                                          user_defined_symbols=["<mask>", "@@"], character_coverage=0.98),
    "bpe_symbols_unknowns": dict(model_type="bpe", vocab_size=800, user_defined_symbols=["<mask>", "@@"],
                                 character_coverage=0.98),
    # A character map of its own rules (full-width letters, circled digits, ligatures, one to many).
    "unigram_custom_rules": dict(model_type="unigram", vocab_size=800, normalization_rule_tsv=[
        "FF46\t66", "FF55\t75", "FF4C\t6C", "2460\t31", "2461\t32", "3000\t20", "FB01\t66 69", "FB02\t66 6C"]),
}
PROBE = SPECIAL + random_strings(300, 11) + [
    "<mask>x@@ y", "  <s> hi </s>  ", "ｆｕｌｌｗｉｄｔｈ ①②　ｶﾀｶﾅ", "\u00a0\u3000 a \t b", "ﬁ ﬂ ㍿ ½"]


def train(tmp_path, name, **config):
    if isinstance(config.get("normalization_rule_tsv"), list):
        rules = tmp_path / f"{name}.tsv"
        rules.write_text("\n".join(config["normalization_rule_tsv"]) + "\n")
        config = dict(config, normalization_rule_tsv=str(rules))
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus()), model_writer=model, minloglevel=2, **config)
    path = tmp_path / f"{name}.model"
    path.write_bytes(model.getvalue())
    return path


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_ids_and_text_equal_sentencepiece(tmp_path, name):
    path = train(tmp_path, name, **CONFIGS[name])
    ref = spm.SentencePieceProcessor(model_file=str(path))
    ours = megatron_cpp.SentencePieceTokenizer(str(path))
    assert (ours.vocab_size, ours.eod, ours.bos) == (ref.get_piece_size(), ref.eos_id(), ref.bos_id())
    for text in PROBE:
        expected = ref.encode_as_ids(text)
        assert ours.tokenize(text) == expected, (name, text)
        assert ours.detokenize(expected) == ref.decode_ids(expected), (name, text)
    for raw in INVALID:
        assert ours.tokenize(raw) == ref.encode_as_ids(raw.decode("utf-8", "replace")), (name, raw)
    # Any ids, control, unknown and byte pieces among them, decode as decode_ids decodes them.
    rng = random.Random(5)
    for _ in range(300):
        ids = [rng.randrange(ref.get_piece_size()) for _ in range(rng.randint(0, 12))]
        assert ours.detokenize(ids) == ref.decode_ids(ids), (name, ids)


def test_preprocess_data_with_llama2_tokenizer(tmp_path):
    path = train(tmp_path, "llama2", **CONFIGS["llama2_bpe"])
    ref = spm.SentencePieceProcessor(model_file=str(path))
    docs = SPECIAL[:30] + random_strings(100, 4)
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "Llama2Tokenizer",
        "--tokenizer-model", path, "--append-eod", "--workers", 2)
    _, _, _, _, tokens = read_mmidx(prefix + "_text_document")
    expected = []
    for d in docs:
        ids = ref.encode_as_ids(d)
        expected.extend(ids + [ref.eos_id()] if ids else [])
    assert tokens.tolist() == expected


def test_what_cannot_be_read_is_named(tmp_path):
    good = train(tmp_path, "good", **CONFIGS["llama2_bpe"]).read_bytes()
    word = train(tmp_path, "word", model_type="word", vocab_size=300).read_bytes()
    from sentencepiece import sentencepiece_model_pb2
    long_piece = sentencepiece_model_pb2.ModelProto()
    long_piece.ParseFromString(good)
    long_piece.pieces[300].piece = "x" * 2000  # would make the unigram lattice quadratic
    cases = {"truncated.model": (good[:1000], "truncated or not a SentencePiece model"),
             "long.model": (long_piece.SerializeToString(), "piece 300 is 2000 bytes long"),
             "json.model": (b'{"model": 1}', "not a SentencePiece model"),
             "word.model": (word, "model type 3 is not supported")}
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(RuntimeError) as e:
            megatron_cpp.SentencePieceTokenizer(str(tmp_path / name))
        assert str(tmp_path / name) in str(e.value) and message in str(e.value), (name, str(e.value))


def test_hugging_face_export_carries_the_model(tmp_path):
    """pretrain_gpt with --tokenizer-type Llama2Tokenizer; the export holds tokenizer.model and a
    tokenizer_config.json for transformers' LlamaTokenizer that adds no BOS, so AutoTokenizer gives
    our ids (transformers' Llama conversion differs from sentencepiece only on leading spaces)."""
    import transformers
    path = train(tmp_path, "llama2", **CONFIGS["llama2_bpe"])
    ck, hf = tmp_path / "ck", tmp_path / "hf"
    run("pretrain_gpt", "--num-layers", 2, "--hidden-size", 32, "--num-attention-heads", 4, "--seq-length", 16,
        "--micro-batch-size", 2, "--global-batch-size", 4, "--train-iters", 2, "--lr", 1e-3, "--mock-data",
        "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", path, "--eval-iters", 0, "--save", ck)
    run("convert_checkpoint", "--load", ck, "--export-hf", hf)
    ref = spm.SentencePieceProcessor(model_file=str(path))
    config = json.loads((hf / "config.json").read_text())
    assert (config["bos_token_id"], config["eos_token_id"]) == (ref.bos_id(), ref.eos_id())
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf))
    ours = megatron_cpp.SentencePieceTokenizer(str(hf / "tokenizer.model"))
    for text in [t for t in PROBE if t and not t[0].isspace()][:80]:
        assert tokenizer(text)["input_ids"] == ours.tokenize(text), text
    model = transformers.AutoModelForCausalLM.from_pretrained(str(hf)).eval()
    greedy = model.generate(**tokenizer("the cat", return_tensors="pt"), max_new_tokens=3, min_new_tokens=3,
                            do_sample=False, pad_token_id=ref.eos_id())
    assert greedy.shape[1] == len(ours.tokenize("the cat")) + 3
