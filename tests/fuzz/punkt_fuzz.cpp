// A punkt_tab model and text: [1 byte: keep_newlines][4 x 2-byte lengths: abbrev_types.txt,
// collocations.tab, sent_starters.txt, ortho_context.tab][the four files][text]. Loaded, then the
// text split; every sentence must be a piece of the text, in order.
#include "fuzz_util.h"
#include "megatron/tokenizer/punkt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace megatron;
  if (size < 1) return 0;
  const bool keep_newlines = data[0] & 1;
  ++data, --size;
  for (const char* name : {"abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab"}) {
    const size_t n = fuzz::take_length(data, size, 2);
    fuzz::write_file(name, data, n);
    data += n, size -= n;
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean([&] {
    tokenizer::PunktSentenceSplitter splitter(fuzz::work_dir(), keep_newlines);
    const char* end = text.data();
    for (std::string_view s : splitter.split(text)) {
      if (s.empty() || s.data() < end || s.data() + s.size() > text.data() + text.size()) std::abort();
      end = s.data() + s.size();
    }
  });
  return 0;
}
