"""Files that are hostile or not files at all, at every reader a user hands one to: nesting and size
past the bounds every structured reader shares (src/input_files.h), safetensors headers checked as
the safetensors package checks them (the package itself is the reference here), numbers checked
before they are narrowed, and folders, devices or endless pipes where a file belongs. Each ends in
one line naming the file, never a signal or a silently different run."""
import json
import os
import struct
import subprocess
import threading

import pytest
import torch
from safetensors.torch import load_file, save_file

import megatron_cpp
from data_helpers import program, TINY

MOCK = ["--mock-data", "--vocab-size", "256", "--train-iters", "1"]
DEEP = 200_000  # past any C++ stack when walked recursively


def run(cmd, timeout=240):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)


def one_error(proc, name, code):
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    lines = [l for l in proc.stderr.splitlines() if l.startswith(f"{name}: error: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "frame #" not in proc.stderr and "terminate called" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def pretrain(*flags):
    return run([program("pretrain_gpt"), *TINY, *MOCK, *flags])


def deep_json(kind):
    return "[" * DEEP + "]" * DEEP if kind == "lists" else '{"a":' * DEEP + "1" + "}" * DEEP


# --- nesting and size

@pytest.mark.parametrize("kind", ["lists", "objects"])
def test_deep_json_is_refused_by_every_json_reader(tmp_path, kind):
    text = deep_json(kind)
    with pytest.raises(RecursionError):
        json.loads(text)  # Python's reader has its bound too
    path = tmp_path / "deep.json"
    path.write_text(text)
    line = one_error(pretrain("--deepspeed", "--deepspeed_config", path), "pretrain_gpt", 2)
    assert f"--deepspeed_config {path}: malformed JSON: nested deeper than 100" in line, line
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "tokenizer.json").write_text(text)
    for make in (lambda: megatron_cpp.GPT2BPETokenizer(str(path), str(tmp_path / "merges.txt")),
                 lambda: megatron_cpp.HuggingFaceTokenizer(str(tmp_path / "hf")),
                 lambda: megatron_cpp.TikTokenizer(str(path), vocab_size=1256)):
        with pytest.raises(RuntimeError, match="malformed JSON: nested deeper than 100"):
            make()
    hf = tmp_path / "model"
    hf.mkdir()
    (hf / "config.json").write_text(text)
    line = one_error(run([program("convert_checkpoint"), "--import-hf", hf, "--save", tmp_path / "out"]),
                     "convert_checkpoint", 1)
    assert f"{hf / 'config.json'}: malformed JSON: nested deeper than 100" in line, line


@pytest.mark.parametrize("text", [
    ".".join(["a"] * DEEP) + " = 1\n",                       # one dotted key
    "[" + ".".join(["a"] * DEEP) + "]\nseed = 1\n",          # one table header
    "x = " + "{a.b = " * 60 + "1" + "}" * 60 + "\n",         # inline tables with dotted keys
])
def test_deep_toml_is_refused_before_toml_parses_it(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text)
    line = one_error(pretrain("--config", path), "pretrain_gpt", 2)
    assert f"--config {path}:1: tables, dotted keys and lists nest deeper than 100 levels" in line, line


def test_a_shallow_toml_with_many_numbers_still_reads(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("lr = 0.0015\nmin-lr = 1.5e-5\ndata-path = [" + ", ".join(["0.5", '"a"'] * 400) + "]\n"
                    "[ignored]\n")
    line = one_error(pretrain("--config", path), "pretrain_gpt", 2)
    assert "unknown setting 'ignored'" in line  # read past the numbers to the last key


def test_an_error_line_quotes_a_short_prefix_of_a_value(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"train_batch_size": 2, "gradient_clipping": "x" * 5_000_000}))
    line = one_error(pretrain("--deepspeed", "--deepspeed_config", path), "pretrain_gpt", 2)
    assert '"gradient_clipping" must be a number, found "xxx' in line and "(5000002 bytes)" in line
    assert len(line) < 500
    (tmp_path / "vocab.json").write_text(json.dumps({"x" * 5_000_000: -1}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    with pytest.raises(RuntimeError, match=r"token 'xxx.*\(5000000 bytes\)' expected a non-negative") as error:
        megatron_cpp.GPT2BPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    assert len(str(error.value)) < 1000


def test_a_device_or_an_endless_pipe_is_not_read_whole(tmp_path):
    line = one_error(pretrain("--config", "/dev/zero"), "pretrain_gpt", 2)
    assert "--config /dev/zero: is a character device, expected a file" in line
    pipe = tmp_path / "ds.json"
    os.mkfifo(pipe)

    def endless():
        try:
            with open(pipe, "wb") as f:
                chunk = b" " * (1 << 20)
                while True:
                    f.write(chunk)
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=endless, daemon=True)
    writer.start()
    line = one_error(pretrain("--deepspeed", "--deepspeed_config", pipe), "pretrain_gpt", 2)
    assert f"--deepspeed_config {pipe}: holds more than 1073741824 bytes" in line
    writer.join(timeout=30)


# --- a folder where a file belongs

def test_a_folder_where_a_file_belongs_is_named(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    for flags in (["--config", folder], ["--deepspeed", "--deepspeed_config", folder]):
        line = one_error(pretrain(*flags), "pretrain_gpt", 2)
        assert f"{folder}: is a directory, expected a file" in line, line
    with pytest.raises(RuntimeError, match="is a directory, expected a file"):
        megatron_cpp.GPT2BPETokenizer(str(folder), str(folder))
    # A punkt model whose abbreviations file is a folder read as no abbreviations before.
    punkt = tmp_path / "nltk" / "tokenizers" / "punkt_tab" / "english"
    punkt.mkdir(parents=True)
    (punkt / "abbrev_types.txt").mkdir()
    for name in ("collocations.tab", "sent_starters.txt", "ortho_context.tab"):
        (punkt / name).write_text("")
    (tmp_path / "docs.jsonl").write_text('{"text": "Dr. Smith came. He left."}\n')
    proc = subprocess.run([program("preprocess_data"), "--input", str(tmp_path / "docs.jsonl"), "--output-prefix",
                           str(tmp_path / "out"), "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
                           "--split-sentences"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, NLTK_DATA=str(tmp_path / "nltk")))
    line = one_error(proc, "preprocess_data", 1)
    assert f"[punkt] {punkt / 'abbrev_types.txt'} (" in line and "): is a directory, expected a file" in line, line


# --- numbers checked before they are narrowed

@pytest.mark.parametrize("config, message", [
    ({"fp16": {"enabled": True, "initial_scale_power": 2 ** 40}},
     '"fp16.initial_scale_power" is 1099511627776; 2 to that power is not a number here'),
    ({"fp16": {"enabled": True, "loss_scale_window": 2 ** 64 - 1}},
     '"fp16.loss_scale_window" is 18446744073709551615, beyond a 64-bit integer'),
    ({"fp16": {"enabled": True, "loss_scale_window": 1e30}}, '"fp16.loss_scale_window" is 1e+30, beyond'),
    ({"fp16": {"enabled": True, "hysteresis": -3}}, '"fp16.hysteresis" must'),
    ({"train_micro_batch_size_per_gpu": 0}, '"train_micro_batch_size_per_gpu" is required and must be positive'),
])
def test_ds_config_numbers_are_checked_in_their_own_type_and_named_by_key(tmp_path, config, message):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    line = one_error(pretrain("--deepspeed", "--deepspeed_config", path), "pretrain_gpt", 2)
    assert f"--deepspeed_config {path}: {message}" in line, line


# --- safetensors headers, as the safetensors package reads them

@pytest.fixture(scope="module")
def hf_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    proc = run([program("pretrain_gpt"), *TINY, *MOCK, "--save", root / "ckpt", "--save-interval", "1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run([program("convert_checkpoint"), "--load", root / "ckpt", "--export-hf", root / "hf"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "hf"


def rewrite(path, edit):
    """The file with its header edited by `edit(header) -> header` and its data kept."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = edit(json.loads(raw[8:8 + n]))
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def tensors(header):
    return sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"])


def wrap_offsets(h):  # begin + the data's start wraps past 2^64 to the file's first byte
    name = tensors(h)[0]
    begin, end = h[name]["data_offsets"]
    n = 8 + len(json.dumps(h)) + (-len(json.dumps(h)) % 8)
    h[name]["data_offsets"] = [2 ** 64 - n, 2 ** 64 - n + end - begin]
    return h


def overlap(h):  # the second tensor reads the first one's bytes
    a, b = tensors(h)[:2]
    if h[a]["shape"] == h[b]["shape"]:
        h[b]["data_offsets"] = h[a]["data_offsets"]
    else:
        h[b]["data_offsets"] = [h[a]["data_offsets"][0], h[a]["data_offsets"][0] + h[b]["data_offsets"][1] -
                                h[b]["data_offsets"][0]]
    return h


def huge_shape(h):  # a shape whose byte count overflows 64 bits
    h[tensors(h)[0]]["shape"] = [2 ** 62, 2 ** 62]
    return h


@pytest.mark.parametrize("edit, message", [
    (wrap_offsets, "has offsets ["),
    (overlap, "has offsets ["),
    (huge_shape, "'s shape holds more bytes than 2^64"),
])
def test_a_safetensors_header_the_package_refuses_is_refused(tmp_path, hf_model, edit, message):
    hf = tmp_path / "hf"
    subprocess.run(["cp", "-r", str(hf_model), str(hf)], check=True)
    rewrite(hf / "model.safetensors", edit)
    with pytest.raises(Exception):
        load_file(hf / "model.safetensors")  # the reference refuses it
    line = one_error(run([program("convert_checkpoint"), "--import-hf", hf, "--save", tmp_path / "out"]),
                     "convert_checkpoint", 1)
    assert f"[safetensors] {hf / 'model.safetensors'}: tensor " in line and message in line, line
    assert not (tmp_path / "out").exists()


def test_trailing_bytes_and_repeated_names_are_refused(tmp_path, hf_model):
    hf = tmp_path / "hf"
    subprocess.run(["cp", "-r", str(hf_model), str(hf)], check=True)
    path = hf / "model.safetensors"
    path.write_bytes((hf_model / "model.safetensors").read_bytes() + b"\0" * 8)
    with pytest.raises(Exception):
        load_file(path)
    line = one_error(run([program("convert_checkpoint"), "--import-hf", hf, "--save", tmp_path / "out"]),
                     "convert_checkpoint", 1)
    assert "the rest belongs to no tensor" in line, line
    raw = (hf_model / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = raw[8:8 + n].decode().rstrip()
    first = header[1:header.index("}") + 1]  # '"name":{...}' of the first entry
    twice = ("{" + first + "," + header[1:]).encode()
    twice += b" " * (-len(twice) % 8)
    path.write_bytes(struct.pack("<Q", len(twice)) + twice + raw[8 + n:])
    line = one_error(run([program("convert_checkpoint"), "--import-hf", hf, "--save", tmp_path / "out"]),
                     "convert_checkpoint", 1)
    assert "appears twice in one object" in line, line


def test_integer_tensors_are_not_imported_as_weights(tmp_path, hf_model):
    hf = tmp_path / "hf"
    subprocess.run(["cp", "-r", str(hf_model), str(hf)], check=True)
    weights = load_file(hf / "model.safetensors")
    name = next(k for k in weights if k.endswith("c_fc.weight"))
    weights[name] = weights[name].to(torch.int32)
    save_file(weights, hf / "model.safetensors", metadata={"format": "pt"})
    line = one_error(run([program("convert_checkpoint"), "--import-hf", hf, "--save", tmp_path / "out"]),
                     "convert_checkpoint", 1)
    assert f"tensor {name} is Int; model weights are floating point" in line, line


def shard(hf, tmp_path, weight_map_text):
    """hf's weights in two shards, the second also holding (other values for) one tensor of the
    first; returns that tensor's name and its two values."""
    out = tmp_path / "sharded"
    out.mkdir(parents=True)
    for f in hf.iterdir():
        if f.name != "model.safetensors":
            subprocess.run(["cp", str(f), str(out)], check=True)
    weights = load_file(hf / "model.safetensors")
    names = sorted(weights)
    first, second = names[: len(names) // 2], names[len(names) // 2:]
    name = first[0]
    other = torch.full_like(weights[name], 0.25)
    save_file({k: weights[k] for k in first}, out / "a.safetensors", metadata={"format": "pt"})
    save_file(dict({k: weights[k] for k in second}, **{name: other}), out / "b.safetensors", metadata={"format": "pt"})
    mapping = [(k, "a.safetensors") for k in first] + [(k, "b.safetensors") for k in second]
    (out / "model.safetensors.index.json").write_text(weight_map_text(mapping, name))
    return out, name, weights[name], other


def test_a_sharded_import_takes_each_tensor_from_the_shard_weight_map_names(tmp_path, hf_model):
    def named_in_b(mapping, name):
        return json.dumps({"weight_map": dict(mapping, **{name: "b.safetensors"})})
    out, name, _, other = shard(hf_model, tmp_path, named_in_b)
    proc = run([program("convert_checkpoint"), "--import-hf", out, "--save", tmp_path / "ckpt"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = run([program("convert_checkpoint"), "--load", tmp_path / "ckpt", "--export-hf", tmp_path / "back"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert torch.equal(load_file(tmp_path / "back" / "model.safetensors")[name], other)

    def listed_twice(mapping, name):
        entries = [f'"{k}": "{v}"' for k, v in mapping] + [f'"{name}": "b.safetensors"']
        return '{"weight_map": {' + ", ".join(entries) + "}}"
    out, name, _, _ = shard(hf_model, tmp_path / "twice", listed_twice)
    line = one_error(run([program("convert_checkpoint"), "--import-hf", out, "--save", tmp_path / "ckpt2"]),
                     "convert_checkpoint", 1)
    assert f'model.safetensors.index.json: malformed JSON: the key "{name}" appears twice in one object' in line
