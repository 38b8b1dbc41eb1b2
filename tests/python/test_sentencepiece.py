"""Megatron-LM's SentencePiece tokenizer types (SentencePieceTokenizer, GPTSentencePieceTokenizer,
Llama2Tokenizer) against the sentencepiece package: a BPE model with byte fallback and whitespace
kept, as Llama 2's and Mistral's are, trained here on a multilingual corpus. The ids of text with
emoji, CJK, combining marks, runs of spaces and bytes that are not UTF-8 are the package's, through
the binding, preprocess_data and pretrain_gpt."""
import json

import pytest
import sentencepiece as spm
from data_helpers import TINY, read_mmidx, run

import megatron_cpp

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Ein Käse-Brötchen kostet 3,50 € in München.",
    "東京都の人口は約千四百万人です。北京是中国的首都。",
    "서울은 대한민국의 수도입니다.",
    "Привет, как дела? Всё хорошо!",
    "emoji 🙂🚀👩‍👩‍👧 and flags 🇫🇷",
    "e\u0301 a\u0300 n\u0303 (combining marks) vs é à ñ",
    "  two leading spaces,   three inside, tab\there\nand a newline ",
    "code: def f(x):\n    return x ** 2  # squared",
]
TYPES = ["SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer"]


def train(tmp_path, name, **options):
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS * 20), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "corpus.txt"), model_prefix=str(tmp_path / name),
                                   vocab_size=400, model_type="bpe", byte_fallback=True, character_coverage=1.0,
                                   hard_vocab_limit=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
                                   **options)
    return str(tmp_path / f"{name}.model")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return train(tmp_path_factory.mktemp("spm"), "llama_like", remove_extra_whitespaces=False)


@pytest.mark.parametrize("tokenizer_type", TYPES)
def test_ids_are_sentencepieces(model, tokenizer_type):
    reference = spm.SentencePieceProcessor(model_file=model)
    ours = megatron_cpp.build_tokenizer(tokenizer_type, tokenizer_model=model)
    assert ours.vocab_size == reference.get_piece_size() and ours.eod == reference.eos_id() == 2
    texts = CORPUS + ["unseen: Ελληνικά, हिन्दी, עברית, ⅯⅯⅩⅩⅥ, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", ""]
    for text in texts:
        ids = ours.tokenize(text)
        assert ids == reference.encode(text), text
        assert ours.detokenize(ids) == reference.decode(ids), text
    # Bytes that are not UTF-8 go to the library as they are, as the package passes bytes.
    for raw in (b"abc \xff\xfe def", b"\xe6\x9d\xb1\xe4", b"ok \xc3("):
        assert ours.tokenize(raw) == reference.encode(raw), raw


def test_preprocess_data_and_pretrain_gpt_take_the_model(model, tmp_path):
    reference = spm.SentencePieceProcessor(model_file=model)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in CORPUS * 3), encoding="utf-8")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "Llama2Tokenizer",
        "--tokenizer-model", model, "--append-eod", "--workers", 2)
    _, _, _, _, tokens = read_mmidx(prefix + "_text_document")
    assert tokens.tolist() == [i for t in CORPUS * 3 for i in reference.encode(t) + [reference.eos_id()]]
    proc = run("pretrain_gpt", *TINY, "--train-iters", "2", "--data-path", prefix + "_text_document",
               "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", model, "--split", "100,0,0",
               "--num-workers", "0")
    assert "iteration        2/       2" in proc.stdout


def test_a_model_that_removes_extra_whitespace_is_refused(tmp_path):
    squeezing = train(tmp_path, "squeezing", remove_extra_whitespaces=True)
    with pytest.raises(RuntimeError, match="removes extra whitespace"):
        megatron_cpp.build_tokenizer("Llama2Tokenizer", tokenizer_model=squeezing)
    with pytest.raises(RuntimeError, match="not a SentencePiece model"):
        megatron_cpp.build_tokenizer("Llama2Tokenizer", tokenizer_model=str(tmp_path / "corpus.txt"))
    proc = run("pretrain_gpt", *TINY, "--train-iters", "2", "--mock-data", "--tokenizer-type", "Llama2Tokenizer",
               check=False)
    assert proc.returncode == 2 and "needs --tokenizer-model" in proc.stderr, proc.stderr
