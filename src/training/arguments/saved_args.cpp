// Arguments <-> the checkpoint's args: the argument table's saved settings, as Megatron-LM's
// argparse.Namespace with the names its loaders read.
#include "training/arguments/saved_args.h"

#include "megatron/training/checkpoint_schema.h"

#include <ATen/core/class_type.h>
#include <c10/util/Exception.h>

#include "training/arguments/moe_arguments.h"
#include "training/checkpointing/checkpoint_dicts.h"

namespace megatron::training {
namespace {

using GenericDict = c10::impl::GenericDict;
using detail::new_dict;
using detail::new_list;

// --- Arguments <-> dict, one entry per saved line of the table

struct ToDict {
  GenericDict& d;
  void operator()(const char* k, const int64_t& v) const { d.insert(k, v); }
  void operator()(const char* k, const uint64_t& v) const { d.insert(k, static_cast<int64_t>(v)); }
  void operator()(const char* k, const double& v) const { d.insert(k, v); }
  void operator()(const char* k, const bool& v) const { d.insert(k, v); }
  void operator()(const char* k, const std::string& v) const { d.insert(k, v); }
  template <typename T>
  void operator()(const char* k, const std::vector<T>& v) const {
    auto l = new_list();
    for (const auto& x : v) l.push_back(x);
    d.insert(k, l);
  }
  template <typename T>
  void operator()(const char* k, const std::optional<T>& v) const {
    if (v)
      (*this)(k, *v);
    else
      d.insert(k, c10::IValue());
  }
};

[[noreturn]] void bad(const char* k, const c10::IValue& v, const char* want) {
  TORCH_CHECK(false, "[checkpointing] the saved argument '", k, "' is a ", v.tagKind(), ", expected ", want);
}
// An int Megatron-LM kept as argparse gave it (--rampup-batch-size's strings).
bool int_string(const c10::IValue& v, int64_t& out) {
  if (!v.isString()) return false;
  const std::string& s = v.toStringRef();
  size_t used = 0;
  try {
    out = std::stoll(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size();
}
void set(const char* k, const c10::IValue& v, int64_t& out) {
  if (v.isInt())
    out = v.toInt();
  else if (!int_string(v, out))
    bad(k, v, "int");
}
void set(const char* k, const c10::IValue& v, uint64_t& out) {
  if (!v.isInt()) bad(k, v, "int");
  out = static_cast<uint64_t>(v.toInt());
}
void set(const char* k, const c10::IValue& v, double& out) {
  if (!v.isDouble() && !v.isInt()) bad(k, v, "float");
  out = v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt());
}
void set(const char* k, const c10::IValue& v, bool& out) {
  if (!v.isBool()) bad(k, v, "bool");
  out = v.toBool();
}
// A string setting Megatron-LM keeps as what it evaluated (--moe-layer-freq: an int or a list of
// ints) reads back as the text that evaluates to it.
void set(const char* k, const c10::IValue& v, std::string& out) {
  if (v.isInt()) {
    out = std::to_string(v.toInt());
  } else if (v.isList()) {
    out = "[";
    for (const auto& x : v.toListRef()) {
      if (!x.isInt()) bad(k, v, "str, int or list of ints");
      out += (out.size() > 1 ? "," : "") + std::to_string(x.toInt());
    }
    out += "]";
  } else if (!v.isString()) {
    bad(k, v, "str");
  } else {
    out = v.toStringRef();
  }
}
template <typename T>
void set(const char* k, const c10::IValue& v, std::vector<T>& out) {
  if (!v.isList()) bad(k, v, "list");
  out.clear();
  for (const auto& x : v.toListRef()) set(k, x, out.emplace_back());
}
// Megatron-LM saves None for a setting it leaves unset (--vocab-file without a BPE tokenizer);
// a field without an unset state keeps its default then.
template <typename T>
bool optional_field(const T&) {
  return false;
}
template <typename T>
bool optional_field(const std::optional<T>&) {
  return true;
}
template <typename T>
void set(const char* k, const c10::IValue& v, std::optional<T>& out) {
  if (v.isNone()) {
    out.reset();
    return;
  }
  T value{};
  set(k, v, value);
  out = value;
}

// What Megatron-LM's loaders read under names this table does not have (load_args_from_checkpoint,
// check_checkpoint_args, tools/checkpoint): derived from the saved settings, never read back.
void add_megatron_lm_names(GenericDict& d, const Arguments& a) {
  d.insert("add_bias_linear", !a.disable_bias_linear);
  d.insert("add_position_embedding", a.position_embedding_type == "learned_absolute");
  d.insert("use_rotary_position_embeddings", a.position_embedding_type == "rope");
  d.insert("squared_relu", false);
  d.insert("apply_query_key_layer_scaling", false);  // tools/checkpoint's saver reads it
  d.insert("transformer_impl", "local");
  if (a.num_experts) {  // Megatron-LM keeps --moe-layer-freq evaluated: an int or a list of 0/1
    if (a.moe_layer_freq.find('[') == std::string::npos) {
      d.insert_or_assign("moe_layer_freq", static_cast<int64_t>(std::stoll(a.moe_layer_freq)));
    } else {
      // A list of Any pickles as a Python list; a typed one as TorchScript's build_intlist, which
      // torch.load(weights_only=True) refuses.
      auto pattern = new_list();
      for (int64_t moe : detail::moe_layer_pattern(a.moe_layer_freq, a.num_layers)) pattern.push_back(moe);
      d.insert_or_assign("moe_layer_freq", pattern);
    }
  }
  d.insert("ckpt_format", a.ckpt_format);
  // --mock-data without --tokenizer-type draws ids as Megatron-LM's NullTokenizer does.
  if (a.tokenizer_type.empty()) d.insert_or_assign("tokenizer_type", "NullTokenizer");
}

// Megatron-LM pickles its args as an argparse.Namespace; LibTorch's pickler writes an object of a
// class named so the same way (GLOBAL, NEWOBJ, its attributes as a dict, BUILD).
c10::IValue python_namespace(const GenericDict& attributes) {
  auto type = c10::ClassType::create(c10::QualifiedName("argparse.Namespace"), {});
  for (const auto& e : attributes) type->addAttribute(e.key().toStringRef(), c10::AnyType::get());
  auto object = c10::ivalue::Object::create(type, attributes.size());
  size_t slot = 0;
  for (const auto& e : attributes) object->setSlot(slot++, e.value());
  return object;
}

}  // namespace

c10::impl::GenericDict arguments_to_dict(const Arguments& a) {
  auto d = new_dict();
  ToDict to{d};
#define MEGATRON_SAVED_TO_DICT(group, field, saved, check, help) \
  if (ArgSaved::saved == ArgSaved::kSaved) to(#field, a.field);
  MEGATRON_ARGUMENTS(MEGATRON_SAVED_TO_DICT)
#undef MEGATRON_SAVED_TO_DICT
  return d;
}

Arguments arguments_from_dict(const c10::IValue& value) {
  TORCH_CHECK(value.isGenericDict(), "[checkpointing] the saved 'args' is a ", value.tagKind(),
              ", expected an argparse.Namespace or a dict");
  Arguments a;
  const auto d = value.toGenericDict();
#define MEGATRON_SAVED_FROM_DICT(group, field, saved, check, help)                                     \
  if (ArgSaved::saved == ArgSaved::kSaved) {                                                           \
    if (auto it = d.find(#field); it != d.end() && (optional_field(a.field) || !it->value().isNone())) \
      set(#field, it->value(), a.field);                                                               \
  }
  MEGATRON_ARGUMENTS(MEGATRON_SAVED_FROM_DICT)
#undef MEGATRON_SAVED_FROM_DICT
  // Megatron-LM saves --num-query-groups as given (default 1) also without --group-query-attention.
  if (!a.group_query_attention) a.num_query_groups = a.num_attention_heads;
  // Its --disable-bias-linear is stored as add_bias_linear (its argparse dest); ours beside it.
  if (auto it = d.find("add_bias_linear"); it != d.end() && it->value().isBool() && !d.contains("disable_bias_linear"))
    a.disable_bias_linear = !it->value().toBool();
  return a;
}

namespace detail {

c10::IValue saved_args_namespace(c10::impl::GenericDict attributes, const Arguments& args) {
  add_megatron_lm_names(attributes, args);
  return python_namespace(attributes);
}

}  // namespace detail
}  // namespace megatron::training
