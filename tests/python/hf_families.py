"""Hugging Face tokenizer.json files shaped as each model family ships them, trained by HF
tokenizers on given texts: the tests' references and tools/bench/bench_data.py's subjects."""
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

# The published pre-tokenizer patterns of each family's tokenizer.json.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
         r"\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
          r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(40)]


def byte_level(texts, pattern, specials, bos=None, nfc=False, ignore_merges=False, add_prefix_space=False,
               vocab_size=3000):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    if pattern is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                           special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def metaspace(texts, legacy, vocab_size=2000):
    """Llama 2's shape: BPE over characters with byte fallback; <0xXX> are vocabulary entries."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if legacy:  # tokenizers < 0.15 wrote the space handling as a normalizer
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, limit_alphabet=300, show_progress=False,
        special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    j = json.loads(tok.to_str())
    j["added_tokens"] = [t for t in j["added_tokens"] if not t["content"].startswith("<0x")]
    return Tokenizer.from_str(json.dumps(j))


# Each takes the training texts and optionally vocab_size.
FAMILIES = {
    "gpt2": lambda texts, **kw: byte_level(texts, None, ["<|endoftext|>"], **kw),
    "gpt2_prefix_space": lambda texts, **kw: byte_level(texts, None, ["<|endoftext|>"], add_prefix_space=True, **kw),
    "llama3": lambda texts, **kw: byte_level(texts, LLAMA3, LLAMA3_SPECIALS, bos="<|begin_of_text|>",
                                             ignore_merges=True, **kw),
    "qwen2": lambda texts, **kw: byte_level(texts, QWEN2, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                            nfc=True, **kw),
    "mistral_nemo": lambda texts, **kw: byte_level(texts, TEKKEN, ["<unk>", "<s>", "</s>"], bos="<s>", **kw),
    "llama2": lambda texts, **kw: metaspace(texts, legacy=False, **kw),
    "llama2_legacy": lambda texts, **kw: metaspace(texts, legacy=True, **kw),
}

