// Written by hand: LibTorch's Pickler writes IValues only (an object's state as a dict), and
// .metadata needs a tuple state, dtype globals and REDUCE calls (pickle_writer.h).
#include "training/checkpointing/pickle_writer.h"

#include <c10/util/Exception.h>

namespace megatron::training::detail {

PickleWriter::PickleWriter() {
  out_ += "\x80\x02";  // PROTO 2
}

void PickleWriter::global(const std::string& module, const std::string& name) {
  TORCH_CHECK(module.find('\n') == std::string::npos && name.find('\n') == std::string::npos,
              "[pickle] a global name with a newline");
  out_ += 'c' + module + '\n' + name + '\n';
}

void PickleWriter::object(const std::string& module, const std::string& name) {
  global(module, name);
  out_ += ")\x81";  // EMPTY_TUPLE, NEWOBJ
}

void PickleWriter::str(const std::string& s) {
  const auto n = static_cast<uint32_t>(s.size());
  TORCH_CHECK(n == s.size(), "[pickle] a string over 4 GiB");
  out_ += 'X';  // BINUNICODE: 4-byte little-endian length, UTF-8
  for (int i = 0; i < 4; ++i) out_ += static_cast<char>((n >> (8 * i)) & 0xff);
  out_ += s;
}

void PickleWriter::integer(int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out_ += 'J';  // BININT: 4-byte signed little-endian
    for (int i = 0; i < 4; ++i) out_ += static_cast<char>((static_cast<uint32_t>(v) >> (8 * i)) & 0xff);
    return;
  }
  out_ += "\x8a\x08";  // LONG1 of 8 bytes, two's complement
  for (int i = 0; i < 8; ++i) out_ += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}

void PickleWriter::none() {
  out_ += 'N';
}
void PickleWriter::boolean(bool v) {
  out_ += v ? '\x88' : '\x89';
}
void PickleWriter::mark() {
  out_ += '(';
}
void PickleWriter::tuple() {
  out_ += 't';
}
void PickleWriter::empty_dict() {
  out_ += '}';
}
void PickleWriter::empty_list() {
  out_ += ']';
}
void PickleWriter::setitems() {
  out_ += 'u';
}
void PickleWriter::appends() {
  out_ += 'e';
}
void PickleWriter::reduce() {
  out_ += 'R';
}
void PickleWriter::build() {
  out_ += 'b';
}

void PickleWriter::torch_size(const std::vector<int64_t>& values) {
  global("torch", "Size");
  mark();
  mark();
  for (int64_t v : values) integer(v);
  tuple();
  tuple();
  reduce();
}

std::string PickleWriter::finish() {
  out_ += '.';
  return std::move(out_);
}

}  // namespace megatron::training::detail
