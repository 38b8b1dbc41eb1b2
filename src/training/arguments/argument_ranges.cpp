#include "training/arguments/argument_ranges.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>
#include <string_view>
#include <type_traits>

namespace megatron::training::detail {
namespace {

#define ARG_CHECK(cond, ...) TORCH_CHECK(cond, "[arguments] ", __VA_ARGS__)

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

bool is_choice(const std::string& value, std::string_view choices) {
  size_t begin = 0;
  while (begin <= choices.size()) {
    const size_t end = std::min(choices.find('|', begin), choices.size());
    if (choices.substr(begin, end - begin) == value) return true;
    begin = end + 1;
  }
  return false;
}

// "a|b|c" -> "a, b, c"
std::string listed(const std::string& choices) {
  std::string out;
  for (char c : choices) out += c == '|' ? std::string(", ") : std::string(1, c);
  return out;
}

// The range check of one value (numbers), or of its choices (strings, which may also keep
// their default, usually "" for unset).
void check_value(const std::string& flag, double v, const ArgCheck& c) {
  using K = ArgCheck::Kind;
  if (c.kind == K::kRequired) {
    ARG_CHECK(v > 0, flag, " is required and must be positive (got ", number(v), ")");
  } else if (c.kind == K::kRange) {
    const bool ok = (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi);
    if (ok) return;
    if (c.hi >= arg::kInf) {
      ARG_CHECK(
          false, flag,
          c.lo == 0 ? (c.lo_open ? " must be positive" : " must not be negative") : " must be at least " + number(c.lo),
          " (got ", number(v), ")");
    }
    if (!c.lo_open && !c.hi_open)
      ARG_CHECK(false, flag, " must be between ", number(c.lo), " and ", number(c.hi), " (got ", number(v), ")");
    ARG_CHECK(false, flag, " must be in ", c.lo_open ? "(" : "[", number(c.lo), ", ", number(c.hi),
              c.hi_open ? ")" : "]", " (got ", number(v), ")");
  }
}
void check_field(const std::string& flag, const std::string& v, const std::string& default_value, const ArgCheck& c) {
  if (c.kind != ArgCheck::Kind::kChoices || v == default_value) return;
  ARG_CHECK(is_choice(v, c.choices), flag, " must be one of ", listed(c.choices), " (got '", v, "')");
}
template <typename T>
void check_field(const std::string& flag, const T& v, const T&, const ArgCheck& c) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) check_value(flag, static_cast<double>(v), c);
}
template <typename T>
void check_field(const std::string& flag, const std::optional<T>& v, const std::optional<T>&, const ArgCheck& c) {
  if (v) check_field(flag, *v, *v, c);
}
// Each element; a string element is checked against the choices even where it equals the
// field's default element (a list has no unset element).
template <typename T>
void check_field(const std::string& flag, const std::vector<T>& v, const std::vector<T>&, const ArgCheck& c) {
  for (const auto& x : v) check_field(flag, x, T{}, c);
}

}  // namespace

void check_ranges(const Arguments& a) {
  using namespace arg;
  const Arguments defaults;
#define MEGATRON_CHECK_FIELD(group_, field, saved, check, help) \
  if (ArgGroup::group_ != ArgGroup::derived) check_field(flag_of(#field), a.field, defaults.field, check);
  MEGATRON_ARGUMENTS(MEGATRON_CHECK_FIELD)
#undef MEGATRON_CHECK_FIELD
}

void check_range(const std::string& field, double value, const std::string& named_as) {
  using namespace arg;
#define MEGATRON_CHECK_ONE(group_, field_, saved, check, help) \
  if (field == #field_) check_value(named_as, value, check);
  MEGATRON_ARGUMENTS(MEGATRON_CHECK_ONE)
#undef MEGATRON_CHECK_ONE
}

}  // namespace megatron::training::detail
