// Written by hand, not LibTorch's torch::jit::Unpickler: that one reads what torch.jit writes and no
// more (no integer over 8 bytes, no bytes, no Python object but a few torch types), while a
// Megatron-LM checkpoint pickles its args as an argparse.Namespace with torch dtypes and enums,
// Python's random state as 32-bit integers in LONG1, numpy's as an ndarray. It also trusts what a
// pickle declares (lengths, memo indices, stack depth), so each opcode here is checked against a
// model of the stack before it is done, and nothing a pickle names is ever called.
#include "unpickler.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/util/Exception.h>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "input_files.h"

namespace megatron::models::common::detail {
namespace {

// Deeper values than the bound every reader shares are refused: LibTorch destroys, hashes and
// compares nested values recursively, so a kilobyte of TUPLE1 opcodes would overflow the C++
// stack. Checkpoints nest < 20.
constexpr uint32_t kMaxNesting = megatron::detail::kMaxNesting;

// The modules whose globals torch.save checkpoints hold (Megatron-LM's own list of safe globals
// among them). None is ever called; the list makes a pickle that is not a checkpoint one error.
bool checkpoint_global(const std::string& module, const std::string& name) {
  static const std::set<std::string> exact = {
      "collections.OrderedDict", "_codecs.encode", "argparse.Namespace", "types.SimpleNamespace", "pathlib.PosixPath",
      "signal.Signals",          "io.BytesIO",     "_io.BytesIO",        "builtins.set",          "builtins.frozenset",
      "builtins.slice",          "enum.Enum"};
  auto under = [&](const std::string& root) { return module == root || module.rfind(root + ".", 0) == 0; };
  return exact.count(module + "." + name) || under("torch") || under("numpy") || under("megatron");
}

std::optional<c10::ScalarType> storage_dtype(const std::string& global) {  // "torch.FloatStorage"
  if (global == "torch.UntypedStorage") return c10::kByte;
#define MEGATRON_STORAGE_NAME(_, name) \
  if (global == "torch." #name "Storage") return c10::k##name;
  AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(MEGATRON_STORAGE_NAME)
#undef MEGATRON_STORAGE_NAME
  return std::nullopt;
}

c10::impl::GenericDict new_dict() {
  return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
}

}  // namespace

c10::IValue unpickle(const uint8_t* data, size_t size, const StorageLookup& storage, const std::string& where) {
  // kPairs: a dict keyed by objects (DCP's MetadataIndex), kept as a list of (key, value) tuples.
  enum class Kind : uint8_t { kValue, kGlobal, kObject, kOrderedDict, kPairs };
  struct Slot {
    c10::IValue value;
    uint32_t nesting;  // 0 for a scalar, 1 + the deepest element for a container
    bool sealed;       // inside another value: changing it is refused (no cycles)
    Kind kind;
    std::string global;  // kGlobal: "module.name"
  };
  std::vector<Slot> values;  // every value made so far; the stack and the memo hold indices
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
  auto little = [&](size_t n) {  // an unsigned little-endian integer of n <= 8 bytes
    const uint8_t* b = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(b[i]) << (8 * i);
    return v;
  };
  auto line = [&]() {  // GLOBAL's module and name, each ending in a newline
    const void* end = std::memchr(data + pos, '\n', size - pos);
    if (!end) fail("a GLOBAL name without its newline");
    const std::string word(reinterpret_cast<const char*>(data + pos), static_cast<const uint8_t*>(end) - (data + pos));
    pos += word.size() + 1;
    return word;
  };
  auto push = [&](c10::IValue v, uint32_t nesting, Kind kind = Kind::kValue, std::string global = {}) {
    if (nesting > kMaxNesting) fail("values nested more than ", kMaxNesting, " deep");
    values.push_back({std::move(v), nesting, false, kind, std::move(global)});
    stack.push_back(values.size() - 1);
  };
  auto need = [&](size_t n) {
    if (stack.size() < n) fail("an opcode needs ", n, " values on the stack, which holds ", stack.size());
  };
  // The top n values, which become elements of a new or existing container: sealed, popped.
  auto pop = [&](size_t n, uint32_t* deepest = nullptr) {
    need(n);
    std::vector<c10::IValue> out;
    out.reserve(n);
    uint32_t d = 0;
    for (size_t i = stack.size() - n; i < stack.size(); ++i) {
      d = std::max(d, values[stack[i]].nesting);
      values[stack[i]].sealed = true;
      out.push_back(values[stack[i]].value);
    }
    stack.resize(stack.size() - n);
    if (deepest) *deepest = d;
    return out;
  };
  auto pop_mark = [&]() {
    if (marks.empty()) fail("an opcode needs a MARK and there is none");
    const size_t mark = marks.back();
    marks.pop_back();
    if (mark > stack.size()) fail("a MARK at stack depth ", mark, " with ", stack.size(), " values");
    return mark;
  };
  // Dict keys must be scalars or flat tuples of them (distrib_optim.pt keys a buffer by its
  // (param dtype, grad dtype); dict_key below): deeper keys could cost time exponential in their depth.
  // An object key (DCP's MetadataIndex) makes the dict a list of pairs, where nothing hashes it;
  // returns whether there is one.
  auto scalar_keys = [&](size_t first) {
    bool objects = false;
    for (size_t i = first; i < stack.size(); i += 2) {
      const Slot& key = values[stack[i]];
      if (key.kind == Kind::kObject) {
        objects = true;
        continue;
      }
      if (key.nesting > 1 || (key.nesting == 1 && !key.value.isTuple())) fail("a dict key that is a container");
    }
    return objects;
  };
  // APPEND(S), SETITEM(S), BUILD: the top n values go into the container at stack[at].
  auto add_to = [&](size_t at, size_t n) {
    Slot& target = values[stack[at]];
    if (target.sealed) fail("a value changed after it was placed in another (a cycle?)");
    uint32_t deepest = 0;
    auto elements = pop(n, &deepest);
    if (target.sealed) fail("a value placed in itself");
    if (deepest + 1 > kMaxNesting) fail("values nested more than ", kMaxNesting, " deep");
    target.nesting = std::max(target.nesting, deepest + 1);
    return elements;
  };
  // LibTorch's dicts cannot hash a tuple: a tuple key becomes its Python repr, its strings (globals
  // such as torch.float32) unquoted: "(torch.bfloat16, torch.float32)".
  auto dict_key = [&](const c10::IValue& key) -> c10::IValue {
    if (!key.isTuple()) return key;
    std::string repr = "(";
    for (const auto& e : key.toTupleRef().elements()) {
      if (repr.size() > 1) repr += ", ";
      if (e.isString())
        repr += e.toStringRef();
      else if (e.isInt())
        repr += std::to_string(e.toInt());
      else if (e.isBool())
        repr += e.toBool() ? "True" : "False";
      else if (e.isNone())
        repr += "None";
      else
        fail("a dict key holding a ", e.tagKind());
    }
    return repr + (key.toTupleRef().elements().size() == 1 ? ",)" : ")");
  };
  auto into_dict = [&](Slot& target, const std::vector<c10::IValue>& kv, bool object_keys) {
    if (object_keys && target.kind == Kind::kValue && target.value.isGenericDict()) {
      c10::impl::GenericList pairs(c10::AnyType::get());
      for (const auto& e : target.value.toGenericDict())
        pairs.push_back(c10::ivalue::Tuple::create(std::vector<c10::IValue>{e.key(), e.value()}));
      target.value = pairs;
      target.kind = Kind::kPairs;
    }
    if (target.kind == Kind::kPairs) {
      auto pairs = target.value.toList();
      for (size_t i = 0; i + 1 < kv.size(); i += 2)
        pairs.push_back(c10::ivalue::Tuple::create(std::vector<c10::IValue>{kv[i], kv[i + 1]}));
      return;
    }
    if (!target.value.isGenericDict()) fail("SETITEMS into a ", target.value.tagKind(), ", not a dict");
    auto d = target.value.toGenericDict();
    for (size_t i = 0; i + 1 < kv.size(); i += 2) d.insert_or_assign(dict_key(kv[i]), kv[i + 1]);
  };
  auto int_list = [&](const c10::IValue& v, const char* what) {
    if (!v.isTuple()) fail("a tensor's ", what, " is a ", v.tagKind(), ", not a tuple");
    std::vector<int64_t> out;
    for (const auto& e : v.toTupleRef().elements()) {
      if (!e.isInt()) fail("a tensor's ", what, " holds a ", e.tagKind());
      out.push_back(e.toInt());
    }
    return out;
  };
  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...), checked to lie inside
  // its storage (the pickle says where a tensor is; nothing else does).
  auto rebuild_tensor = [&](const std::vector<c10::IValue>& args) {
    if (args.size() < 4 || !args[0].isTensor() || !args[1].isInt())
      fail("_rebuild_tensor_v2 without (storage, offset, size, stride)");
    const at::Tensor& holder = args[0].toTensor();
    const int64_t offset = args[1].toInt();
    const auto sizes = int_list(args[2], "size"), strides = int_list(args[3], "stride");
    if (sizes.size() != strides.size()) fail("a tensor with ", sizes.size(), " sizes and ", strides.size(), " strides");
    bool empty = false, fits = offset >= 0;
    int64_t last = offset;  // the last element's index in the storage
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t step = 0;
      empty = empty || sizes[d] == 0;
      fits = fits && sizes[d] >= 0 && strides[d] >= 0;
      fits = fits && (sizes[d] == 0 || (!__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) &&
                                        !__builtin_add_overflow(last, step, &last)));
    }
    int64_t end = 0;
    fits = fits && (empty || (!__builtin_add_overflow(last, 1, &end) &&
                              !__builtin_mul_overflow(end, static_cast<int64_t>(holder.element_size()), &end) &&
                              static_cast<uint64_t>(end) <= holder.storage().nbytes()));
    if (!fits)
      fail("a tensor of shape ", c10::IntArrayRef(sizes), ", strides ", c10::IntArrayRef(strides), " and offset ",
           offset, " reaches past its storage of ", holder.storage().nbytes(), " bytes");
    return at::empty({0}, holder.options()).set_(holder.storage(), offset, sizes, strides);
  };
  auto latin1 = [&](const std::string& text) {  // _codecs.encode(str, "latin1"): protocol 2's bytes
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<uint8_t>(text[i]);
      if (c < 0x80) {
        out += static_cast<char>(c);
      } else if ((c == 0xc2 || c == 0xc3) && i + 1 < text.size() && (uint8_t(text[i + 1]) & 0xc0) == 0x80) {
        out += static_cast<char>(((c & 0x03) << 6) | (uint8_t(text[++i]) & 0x3f));
      } else {
        fail("bytes encoded as latin1 hold a character above U+00FF");
      }
    }
    return out;
  };
  auto object = [&](const std::string& cls, const std::vector<c10::IValue>& args) {
    auto d = new_dict();
    d.insert("__class__", cls);
    if (!args.empty()) d.insert("__args__", c10::ivalue::Tuple::create(args));
    return d;
  };
  // REDUCE: what a global makes of its arguments, for the globals checkpoints hold; any other
  // becomes an object dict.
  auto reduce = [&](const std::string& fn, const std::vector<c10::IValue>& args, uint32_t nesting) {
    auto first = [&](const char* want) -> const c10::IValue& {
      if (args.empty()) fail(fn, " without its argument (", want, ")");
      return args[0];
    };
    if (fn == "torch._utils._rebuild_tensor_v2" || fn == "torch._utils._rebuild_tensor") {
      push(rebuild_tensor(args), nesting);
    } else if (fn == "torch._utils._rebuild_parameter" || fn == "torch._utils._rebuild_parameter_with_state") {
      if (!first("a tensor").isTensor()) fail(fn, " of a ", args[0].tagKind());
      push(args[0], nesting);
    } else if (fn == "collections.OrderedDict") {
      auto d = new_dict();
      if (!args.empty()) {
        if (!args[0].isList()) fail("OrderedDict of a ", args[0].tagKind());
        for (const auto& pair : args[0].toListRef()) {
          const bool ok = (pair.isList() && pair.toListRef().size() == 2) ||
                          (pair.isTuple() && pair.toTupleRef().elements().size() == 2);
          if (!ok) fail("OrderedDict of something other than pairs");
          const auto kv = pair.isList() ? pair.toListRef().vec() : pair.toTupleRef().elements().vec();
          if (kv[0].isList() || kv[0].isTuple() || kv[0].isGenericDict()) fail("a dict key that is a container");
          d.insert_or_assign(kv[0], kv[1]);
        }
      }
      push(d, nesting, Kind::kOrderedDict);
    } else if (fn == "torch.device" || fn == "pathlib.PosixPath") {
      if (!first("a string").isString()) fail(fn, " of a ", args[0].tagKind());
      push(args[0], 0);
    } else if (fn == "_codecs.encode") {
      if (!first("a string").isString()) fail("_codecs.encode of a ", args[0].tagKind());
      push(latin1(args[0].toStringRef()), 0);
    } else if (fn == "torch.Size" || fn == "builtins.set" || fn == "builtins.frozenset" ||
               fn.rfind("torch.jit._pickle.", 0) == 0) {
      push(args.empty() ? c10::IValue(c10::impl::GenericList(c10::AnyType::get())) : args[0], nesting);
    } else {
      push(object(fn, args), nesting, Kind::kObject);
    }
  };

  // torch.save writes protocol 2; PyTorch Distributed Checkpoint's .metadata, Python's default (4).
  if (*take(1) != 0x80 || *take(1) < 2 || data[pos - 1] > 5) fail("it does not start with PROTO 2 to 5");
  while (true) {
    const uint8_t op = *take(1);
    switch (op) {
      case '.':  // STOP
        if (stack.size() != 1) fail("STOP with ", stack.size(), " values on the stack instead of 1");
        if (pos != size) fail(size - pos, " bytes after STOP");
        return values[stack[0]].value;
      case '(': marks.push_back(stack.size()); break;                                    // MARK
      case '0': need(1), stack.pop_back(); break;                                        // POP
      case '1': stack.resize(pop_mark()); break;                                         // POP_MARK
      case '2': need(1), stack.push_back(stack.back()); break;                           // DUP
      case ')': push(c10::ivalue::Tuple::create(std::vector<c10::IValue>{}), 1); break;  // EMPTY_TUPLE
      case ']': push(c10::impl::GenericList(c10::AnyType::get()), 1); break;             // EMPTY_LIST
      case '}': push(new_dict(), 1); break;                                              // EMPTY_DICT
      case 'N': push(c10::IValue(), 0); break;                                           // NONE
      case 0x88: push(true, 0); break;                                                   // NEWTRUE
      case 0x89: push(false, 0); break;                                                  // NEWFALSE
      case 'K': push(static_cast<int64_t>(little(1)), 0); break;                         // BININT1
      case 'M': push(static_cast<int64_t>(little(2)), 0); break;                         // BININT2
      case 'J': push(static_cast<int64_t>(static_cast<int32_t>(little(4))), 0); break;   // BININT
      case 'G': {                                                                        // BINFLOAT, big-endian
        const uint8_t* b = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | b[i];
        double v;
        std::memcpy(&v, &bits, sizeof v);
        push(v, 0);
        break;
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4: little-endian two's complement; past 64 bits, a float as Python's float()
        const size_t n = op == 0x8a ? little(1) : little(4);
        if (n > size - pos) take(n);
        if (n <= 8) {
          uint64_t v = little(n);
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);
          push(static_cast<int64_t>(v), 0);
        } else {
          const uint8_t* b = take(n);
          double v = 0;
          for (size_t i = n; i-- > 0;) v = v * 256 + b[i];
          if (b[n - 1] & 0x80) v -= std::ldexp(1.0, static_cast<int>(8 * n));
          push(v, 0);
        }
        break;
      }
      case 'X':
      case 'T':
      case 'U':
      case 0x8c:
      case 0x8d:
      case 'C':
      case 'B':
      case 0x8e: {  // BINUNICODE, BINSTRING, SHORT_BINSTRING, SHORT_BINUNICODE, BINUNICODE8; bytes as strings
        const size_t n = (op == 'U' || op == 0x8c || op == 'C') ? little(1)
                         : (op == 0x8d || op == 0x8e)           ? little(8)
                                                                : little(4);
        const uint8_t* b = take(n);
        push(std::string(reinterpret_cast<const char*>(b), n), 0);
        break;
      }
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT: the memo grows one by one
        const size_t id = op == 'q' ? little(1) : little(4);
        if (stack.empty()) fail("a memo PUT on an empty stack");
        if (id > memo.size()) fail("memo index ", id, " skips ahead of the ", memo.size(), " stored so far");
        if (id == memo.size()) memo.push_back(0);
        memo[id] = stack.back();
        break;
      }
      case 0x94:  // MEMOIZE: the next memo index
        if (stack.empty()) fail("MEMOIZE on an empty stack");
        memo.push_back(stack.back());
        break;
      case 0x95:  // FRAME: a length to read ahead, which this reader does not need
        take(8);
        break;
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET: the same value again
        const size_t id = op == 'h' ? little(1) : little(4);
        if (id >= memo.size()) fail("memo index ", id, " of ", memo.size());
        stack.push_back(memo[id]);
        break;
      }
      case 'c':     // GLOBAL: a name, never resolved to code
      case 0x93: {  // STACK_GLOBAL: the same, its module and name from the stack
        std::string module, name;
        if (op == 'c') {
          module = line();
          name = line();
        } else {
          need(2);
          const Slot &m = values[stack[stack.size() - 2]], &n = values[stack.back()];
          if (m.kind != Kind::kValue || !m.value.isString() || n.kind != Kind::kValue || !n.value.isString())
            fail("STACK_GLOBAL of something other than two strings");
          module = m.value.toStringRef();
          name = n.value.toStringRef();
          stack.resize(stack.size() - 2);
        }
        if (!checkpoint_global(module, name)) fail("the global ", module, ".", name, " is not one a checkpoint holds");
        const std::string global = module + "." + name;
        push(global, 0, Kind::kGlobal, global);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87:   // TUPLE1..3
      case 't': {  // TUPLE
        const size_t n = op == 't' ? stack.size() - pop_mark() : size_t(op - 0x84);
        uint32_t deepest = 0;
        auto elements = pop(n, &deepest);
        push(c10::ivalue::Tuple::create(std::move(elements)), deepest + 1);
        break;
      }
      case 'l': {  // LIST
        uint32_t deepest = 0;
        auto elements = pop(stack.size() - pop_mark(), &deepest);
        c10::impl::GenericList list(c10::AnyType::get());
        for (auto& e : elements) list.push_back(std::move(e));
        push(list, deepest + 1);
        break;
      }
      case 'd': {  // DICT
        const size_t mark = pop_mark();
        if ((stack.size() - mark) % 2) fail("DICT over an odd number of values");
        const bool object_keys = scalar_keys(mark);
        uint32_t deepest = 0;
        const auto kv = pop(stack.size() - mark, &deepest);
        push(new_dict(), deepest + 1);
        into_dict(values[stack.back()], kv, object_keys);
        break;
      }
      case 'a':
      case 'e': {  // APPEND, APPENDS: into the list below
        const size_t at = op == 'a' ? (need(2), stack.size() - 2) : pop_mark() - 1;
        if (at + 1 == 0) fail("APPENDS without a list below its MARK");
        if (!values[stack[at]].value.isList()) fail("APPEND to a ", values[stack[at]].value.tagKind(), ", not a list");
        auto list = values[stack[at]].value.toList();
        for (auto& e : add_to(at, stack.size() - at - 1)) list.push_back(std::move(e));
        break;
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS: into the dict below
        const size_t at = op == 's' ? (need(3), stack.size() - 3) : pop_mark() - 1;
        if (at + 1 == 0) fail("SETITEMS without a dict below its MARK");
        if ((stack.size() - at - 1) % 2) fail("SETITEMS over an odd number of values");
        const bool object_keys = scalar_keys(at + 1);
        const auto kv = add_to(at, stack.size() - at - 1);
        into_dict(values[stack[at]], kv, object_keys);
        break;
      }
      case 0x81:   // NEWOBJ: cls.__new__(cls, *args), an object dict
      case 'R': {  // REDUCE: fn(*args)
        const char* what = op == 'R' ? "REDUCE" : "NEWOBJ";
        need(2);
        const std::string global = values[stack[stack.size() - 2]].global;
        if (values[stack[stack.size() - 2]].kind != Kind::kGlobal)
          fail(what, " of a ", values[stack[stack.size() - 2]].value.tagKind(), ", not a global");
        uint32_t deepest = 0;
        auto args = pop(1, &deepest);
        if (!args[0].isTuple()) fail(what, " arguments are a ", args[0].tagKind(), ", not a tuple");
        stack.pop_back();
        auto elements = args[0].toTupleRef().elements().vec();
        if (op == 'R')
          reduce(global, elements, deepest);
        else
          push(object(global, elements), deepest, Kind::kObject);
        break;
      }
      case 'b': {  // BUILD: an object's state (an OrderedDict's attributes, such as _metadata, are dropped)
        need(2);
        const size_t at = stack.size() - 2;
        const Kind kind = values[stack[at]].kind;
        if (kind != Kind::kObject && kind != Kind::kOrderedDict)
          fail("BUILD on a ", values[stack[at]].value.tagKind(), ", not an object");
        const c10::IValue state = add_to(at, 1)[0];
        if (kind == Kind::kOrderedDict) break;
        auto obj = values[stack[at]].value.toGenericDict();
        if (state.isGenericDict()) {
          for (const auto& e : state.toGenericDict())
            if (!(e.key().isString() && e.key().toStringRef() == "__class__")) obj.insert_or_assign(e.key(), e.value());
        } else {
          obj.insert_or_assign("__state__", state);
        }
        break;
      }
      case 'Q': {  // BINPERSID: ('storage', torch.<Type>Storage, key, location, numel), its zip record
        const auto id = pop(1)[0];
        const bool ok = id.isTuple() && id.toTupleRef().elements().size() >= 3 &&
                        id.toTupleRef().elements()[0].isString() &&
                        id.toTupleRef().elements()[0].toStringRef() == "storage" &&
                        id.toTupleRef().elements()[1].isString() && id.toTupleRef().elements()[2].isString();
        if (!ok) fail("a persistent id that is not a storage");
        const auto& type = id.toTupleRef().elements()[1].toStringRef();
        const auto dtype = storage_dtype(type);
        if (!dtype) fail("a storage of type ", type);
        const c10::Storage s = storage(id.toTupleRef().elements()[2].toStringRef());
        push(at::empty({0}, at::TensorOptions().dtype(*dtype)).set_(s), 0);
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail("opcode ", hex, " is not one this reader takes");
      }
    }
  }
}

}  // namespace megatron::models::common::detail
