"""--tokenizer-special-tokens as Megatron-LM takes it. TikTokenizer: the list is its special tokens
in id order, our ids equal tiktoken's Encoding built with them, </s> (wherever it stands) is the
end of document. HuggingFaceTokenizer and GPT2BPETokenizer: the tokens are added as Hugging
Face's add_special_tokens adds them (a vocabulary token keeps its id, a new one comes after the
vocabulary, each matched whole in the text), our ids equal tokenizers' own. What a type cannot
take is refused with the flag named; preprocess_data, pretrain_gpt and the Hugging Face export
carry the list."""
import json

import pytest

from data_helpers import read_mmidx, run
from hf_families import FAMILIES
from test_tokenizer import SPECIAL, corpus, random_strings

import tiktoken
import tokenizers
megatron_cpp = pytest.importorskip("megatron_cpp")
from test_tiktoken import PATTERNS, vocabulary  # noqa: E402,F401 (a fixture)

# The seven defaults in another order, with two more.
TIKTOKEN_LIST = ["<pad>", "</s>", "<s>", "<unk>", "<|im_start|>", "<mask>", "<cls>", "<sep>", "<|im_end|>"]
# New tokens, a vocabulary token ("the": matched whole, even inside a word) and one listed twice.
ADDED = ["<|im_start|>", "the", "<|im_end|>", "<|im_start|>"]


def texts():
    return (SPECIAL[:40] + random_strings(200, 11) +
            ["<|im_start|>user hi<|im_end|></s><pad>x <SPECIAL_12><s>", "other theme the<|im_end|>", "<<s>>"])


def test_tiktoken_takes_the_list_in_its_order(vocabulary):  # noqa: F811
    path, entries = vocabulary
    num_special = 20
    vocab_size = num_special + len(entries) - 7
    names = TIKTOKEN_LIST + [f"<SPECIAL_{i}>" for i in range(len(TIKTOKEN_LIST), num_special)]
    ranks = {b: i + num_special for i, b in enumerate(entries[:vocab_size - num_special])}
    ref = tiktoken.Encoding(name="t", pat_str=PATTERNS["v2"], mergeable_ranks=ranks,
                            special_tokens={t: i for i, t in enumerate(names)})
    ours = megatron_cpp.TikTokenizer(str(path), "v2", num_special, vocab_size, special_tokens=TIKTOKEN_LIST)
    built = megatron_cpp.build_tokenizer("TikTokenizer", tokenizer_model=str(path), tiktoken_num_special_tokens=20,
                                         vocab_size=vocab_size, special_tokens=TIKTOKEN_LIST)
    assert ours.special_tokens == names
    assert (ours.eod, ours.bos, built.eod, ours.vocab_size) == (1, 2, 1, vocab_size)
    for text in texts():
        expected = ref.encode(text, allowed_special="all")
        assert ours.tokenize(text) == expected, text
        assert built.tokenize(text) == expected, text
        assert ours.detokenize_bytes(expected) == ref.decode_bytes(expected), text


def test_tiktoken_refuses_a_list_it_cannot_take(vocabulary):  # noqa: F811
    path, entries = vocabulary
    size = 20 + len(entries) - 7
    cases = {
        "<sep> is missing": TIKTOKEN_LIST[:7],
        "expected each token once, found 1 repeated": TIKTOKEN_LIST + ["<pad>"],
        "10 tokens, more than --tiktoken-num-special-tokens (9)": TIKTOKEN_LIST + ["<x>"],
        "<SPECIAL_9> is the name of filler token 9": TIKTOKEN_LIST[:8] + ["<SPECIAL_9>"],
    }
    for message, tokens in cases.items():
        with pytest.raises(RuntimeError, match="--tokenizer-special-tokens") as e:
            megatron_cpp.TikTokenizer(str(path), "v2", 9 if "(9)" in message else 20, size, special_tokens=tokens)
        assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["gpt2", "llama3"])
def test_hugging_face_tokenizer_adds_them_as_tokenizers_does(name, tmp_path):
    ref = FAMILIES[name](corpus())
    ref.save(str(tmp_path / "tokenizer.json"))
    assert ref.token_to_id("the") is not None and ref.token_to_id("<|im_start|>") is None
    ours = megatron_cpp.HuggingFaceTokenizer(str(tmp_path), special_tokens=ADDED)
    size = ref.get_vocab_size(with_added_tokens=True)
    ref.add_special_tokens(ADDED)
    assert ref.get_vocab_size(with_added_tokens=True) == size + 2
    assert ours.vocab_size == size + 2
    assert [ours.token_to_id(t) for t in ADDED] == [ref.token_to_id(t) for t in ADDED]
    for text in texts():
        assert ours.tokenize(text) == ref.encode(text).ids, (name, text)


def test_gpt2_bpe_adds_them_as_tokenizers_does(tmp_path):
    trained = tokenizers.ByteLevelBPETokenizer()
    trained.train_from_iterator(corpus(), vocab_size=3000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                show_progress=False)
    trained.save_model(str(tmp_path))
    vocab, merges = str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")
    ref = tokenizers.ByteLevelBPETokenizer(vocab, merges)
    size = ref.get_vocab_size()
    ref.add_special_tokens(ADDED)
    ours = megatron_cpp.GPT2BPETokenizer(vocab, merges, special_tokens=ADDED)
    assert ours.vocab_size == size + 2 == ref.get_vocab_size()
    for text in texts():
        expected = ref.encode(text).ids
        assert ours.tokenize(text) == expected, text
        assert ours.detokenize_bytes(expected) == text.encode(), text


def test_sentencepiece_refuses_them_and_null_tokenizer_ignores_them(tmp_path):
    # Megatron-LM's SentencePiece tokenizer refuses the list outside its legacy mode; its
    # NullTokenizer ignores it, so a launch script passing it still runs on mock data.
    with pytest.raises(RuntimeError, match="--tokenizer-special-tokens: SentencePieceTokenizer takes none"):
        megatron_cpp.build_tokenizer("SentencePieceTokenizer", tokenizer_model=str(tmp_path / "any.model"),
                                     special_tokens=["<x>"])
    assert megatron_cpp.build_tokenizer("NullTokenizer", vocab_size=10, special_tokens=["<x>"]).vocab_size == 10
    proc = run("pretrain_gpt", "--num-layers", 1, "--hidden-size", 16, "--num-attention-heads", 2, "--seq-length", 8,
               "--micro-batch-size", 1, "--train-iters", 1, "--lr", 1e-3, "--mock-data", "--vocab-size", 64,
               "--tokenizer-special-tokens", "<x>", "<y>", check=False)
    assert proc.returncode == 0 and " iteration " in proc.stdout, proc.stderr


def test_preprocess_data_training_and_export_carry_the_list(tmp_path):
    """preprocess_data's ids are the tokenizer's with the list; a run trained with it saves it, and
    its Hugging Face export lists the added tokens in tokenizer.json, so that transformers'
    AutoTokenizer gives the same ids from the folder alone."""
    import transformers
    ref = FAMILIES["llama3"](corpus())
    folder = tmp_path / "tok"
    folder.mkdir()
    ref.save(str(folder / "tokenizer.json"))
    ref.add_special_tokens(ADDED)
    docs = texts()[:50]
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"text": d}) for d in docs) + "\n")
    prefix = str(tmp_path / "out")
    run("preprocess_data", "--input", src, "--output-prefix", prefix, "--tokenizer-type", "HuggingFaceTokenizer",
        "--tokenizer-model", folder, "--tokenizer-special-tokens", *ADDED, "--workers", 2)
    _, _, _, _, tokens = read_mmidx(prefix + "_text_document")
    assert tokens.tolist() == [i for d in docs for i in ref.encode(d).ids]

    ck, hf = tmp_path / "ck", tmp_path / "hf"
    run("pretrain_gpt", "--num-layers", 2, "--hidden-size", 32, "--num-attention-heads", 4, "--seq-length", 16,
        "--micro-batch-size", 2, "--global-batch-size", 4, "--train-iters", 2, "--lr", 1e-3, "--mock-data",
        "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", folder, "--tokenizer-special-tokens",
        *ADDED, "--eval-iters", 0, "--save", ck)
    run("convert_checkpoint", "--load", ck, "--export-hf", hf)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf))
    for text in docs:
        assert tokenizer(text)["input_ids"] == ref.encode(text).ids, text


def test_gpt2_export_lists_them_for_transformers(tmp_path):
    """A GPT2BPETokenizer run with the list exports vocab.json and merges.txt with the tokens as
    additional_special_tokens: transformers adds them at the ids training gave them."""
    import transformers
    trained = tokenizers.ByteLevelBPETokenizer()
    trained.train_from_iterator(corpus(), vocab_size=3000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                show_progress=False)
    trained.save_model(str(tmp_path))
    vocab, merges = str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")
    ck, hf = tmp_path / "ck", tmp_path / "hf"
    run("pretrain_gpt", "--num-layers", 2, "--hidden-size", 32, "--num-attention-heads", 4, "--seq-length", 16,
        "--micro-batch-size", 2, "--global-batch-size", 4, "--train-iters", 2, "--lr", 1e-3, "--mock-data",
        "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", vocab, "--merge-file", merges,
        "--tokenizer-special-tokens", *ADDED, "--eval-iters", 0, "--save", ck)
    run("convert_checkpoint", "--load", ck, "--export-hf", hf)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf))
    ours = megatron_cpp.GPT2BPETokenizer(vocab, merges, special_tokens=ADDED)
    for text in [t for t in texts() if "<|endoftext|>" not in t][:60]:
        assert tokenizer(text)["input_ids"] == ours.tokenize(text), text
