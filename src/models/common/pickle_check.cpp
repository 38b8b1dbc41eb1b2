#include "pickle_check.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

namespace megatron::models::common::detail {
namespace {

// Deeper values than this are refused: LibTorch destroys, hashes and compares nested values
// recursively, so a kilobyte of TUPLE1 opcodes would overflow the C++ stack. Checkpoints nest < 20.
constexpr uint32_t kMaxNesting = 1000;

// The globals a checkpoint holds; LibTorch resolves these to tensor and list builders, never to code.
bool checkpoint_global(const std::string& module, const std::string& name) {
  static const std::set<std::string> globals = {"torch._utils._rebuild_tensor_v2", "collections.OrderedDict",
                                                "torch.device"};
  const bool storage = module == "torch" && name.size() > 7 && name.compare(name.size() - 7, 7, "Storage") == 0;
  return storage || module == "torch.jit._pickle" || globals.count(module + "." + name);
}

}  // namespace

// LibTorch's unpickler trusts what a pickle declares: a string's length and a memo index are
// allocated before anything is read (gigabytes from a kilobyte file), and TUPLE, DICT, SETITEM
// or a misplaced MARK index its stack without bounds checks. No library checks a pickle's
// structure, so this walks the protocol-2 opcodes LibTorch reads with a model of its stack (each
// value's nesting depth, the marks, the memo) and refuses a file before LibTorch can misread it.
void check_pickle(const uint8_t* data, size_t size, const std::string& where) {
  struct Value {
    uint32_t nesting;  // 0 for a scalar, 1 + the deepest element for a container
    bool sealed;       // inside another value (or built by a global): changing it is refused
  };
  std::vector<Value> values;  // every value made so far; the stack and the memo hold indices
  std::vector<size_t> stack, memo, marks;
  size_t pos = 0;
  auto fail = [&](const auto&... what) {
    TORCH_CHECK(false, where, ": not a valid pickle at byte ", pos, ": ", what...);
  };
  auto take = [&](size_t n) {
    if (size - pos < n) fail("it ends inside an argument (", n, " bytes declared, ", size - pos, " left)");
    const uint8_t* at = data + pos;
    pos += n;
    return at;
  };
  auto u32 = [&]() {
    const uint8_t* b = take(4);
    return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  };
  auto line = [&]() {  // GLOBAL's module and name, each ending in a newline
    const void* end = std::memchr(data + pos, '\n', size - pos);
    if (!end) fail("a GLOBAL name without its newline");
    const std::string word(reinterpret_cast<const char*>(data + pos), static_cast<const uint8_t*>(end) - (data + pos));
    pos += word.size() + 1;
    return word;
  };
  auto push = [&](uint32_t nesting, bool sealed = false) {
    if (nesting > kMaxNesting) fail("values nested more than ", kMaxNesting, " deep");
    values.push_back({nesting, sealed});
    stack.push_back(values.size() - 1);
  };
  auto pop = [&](size_t n) {  // the deepest nesting among the top n values, which become elements
    if (stack.size() < n) fail("an opcode needs ", n, " values on the stack, which holds ", stack.size());
    uint32_t deepest = 0;
    for (size_t i = stack.size() - n; i < stack.size(); ++i) {
      deepest = std::max(deepest, values[stack[i]].nesting);
      values[stack[i]].sealed = true;
    }
    stack.resize(stack.size() - n);
    return deepest;
  };
  auto pop_mark = [&]() {
    if (marks.empty()) fail("an opcode needs a MARK and there is none");
    const size_t mark = marks.back();
    marks.pop_back();
    if (mark > stack.size()) fail("a MARK at stack depth ", mark, " with ", stack.size(), " values");
    return mark;
  };
  // Dict keys must be scalars: LibTorch hashes a key recursively, and a tuple of memo-shared
  // tuples costs time exponential in its depth.
  auto scalar_keys = [&](size_t first) {
    for (size_t i = first; i < stack.size(); i += 2)
      if (values[stack[i]].nesting > 0) fail("a dict key that is a container");
  };
  auto add_to = [&](size_t container, size_t elements) {  // APPENDS, SETITEMS, SETITEM
    Value& target = values[stack[container]];
    if (target.sealed) fail("a value changed after it was placed in another (a cycle?)");
    const uint32_t nesting = pop(elements) + 1;
    if (target.sealed) fail("a value placed in itself");
    if (nesting > kMaxNesting) fail("values nested more than ", kMaxNesting, " deep");
    target.nesting = std::max(target.nesting, nesting);
  };

  if (*take(1) != 0x80 || *take(1) != 2) fail("it does not start with PROTO 2 (torch.save's protocol)");
  while (true) {
    const uint8_t op = *take(1);
    switch (op) {
      case '.':  // STOP
        if (stack.size() != 1) fail("STOP with ", stack.size(), " values on the stack instead of 1");
        if (pos != size) fail(size - pos, " bytes after STOP");
        return;
      case '(': marks.push_back(stack.size()); break;  // MARK
      case ')':
      case ']':
      case '}': push(1); break;  // EMPTY_TUPLE, EMPTY_LIST, EMPTY_DICT
      case 'N':
      case 0x88:
      case 0x89: push(0); break;                  // NONE, NEWTRUE, NEWFALSE
      case 'K': take(1), push(0); break;          // BININT1
      case 'M': take(2), push(0); break;          // BININT2
      case 'J': take(4), push(0); break;          // BININT
      case 'G': take(8), push(0); break;          // BINFLOAT
      case 0x8a: take(*take(1)), push(0); break;  // LONG1
      case 'X': take(u32()), push(0); break;      // BINUNICODE
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT: the memo grows one by one
        const size_t id = op == 'q' ? *take(1) : u32();
        if (stack.empty()) fail("a memo PUT on an empty stack");
        if (id > memo.size()) fail("memo index ", id, " skips ahead of the ", memo.size(), " stored so far");
        if (id == memo.size()) memo.push_back(0);
        memo[id] = stack.back();
        break;
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET: the same value again
        const size_t id = op == 'h' ? *take(1) : u32();
        if (id >= memo.size()) fail("memo index ", id, " of ", memo.size());
        stack.push_back(memo[id]);
        break;
      }
      case 'c': {  // GLOBAL
        const std::string module = line(), name = line();
        if (!checkpoint_global(module, name)) fail("the global ", module, ".", name, " is not one a checkpoint holds");
        push(0);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: push(pop(op - 0x84) + 1); break;  // TUPLE1..3
      case 't':
      case 'l': {  // TUPLE, LIST
        const size_t mark = pop_mark();
        push(pop(stack.size() - mark) + 1);
        break;
      }
      case 'd': {  // DICT
        const size_t mark = pop_mark();
        if ((stack.size() - mark) % 2) fail("DICT over an odd number of values");
        scalar_keys(mark);
        push(pop(stack.size() - mark) + 1);
        break;
      }
      case 'e':
      case 'u': {  // APPENDS, SETITEMS: into the container below the mark
        const size_t mark = pop_mark();
        if (mark == 0) fail("APPENDS or SETITEMS without a container below its MARK");
        if (op == 'u' && (stack.size() - mark) % 2) fail("SETITEMS over an odd number of values");
        if (op == 'u') scalar_keys(mark);
        add_to(mark - 1, stack.size() - mark);
        break;
      }
      case 's':  // SETITEM
        if (stack.size() < 3) fail("SETITEM needs 3 values on the stack, which holds ", stack.size());
        scalar_keys(stack.size() - 2);
        add_to(stack.size() - 3, 2);
        break;
      case 0x81: pop(1); break;  // NEWOBJ
      case 'R':
      case 'b': push(pop(2), true); break;  // REDUCE, BUILD: what a global makes of its argument
      case 'Q': pop(1), push(0); break;     // BINPERSID: a storage's tensor
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail("opcode ", hex, " is not one LibTorch reads");
      }
    }
  }
}

}  // namespace megatron::models::common::detail
