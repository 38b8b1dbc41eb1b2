// The sentence splitter of Megatron-LM's preprocess_data --split-sentences: NLTK's punkt
// (Kiss & Strunk) with a trained model in NLTK's punkt_tab form, giving the sentences nltk's
// PunktSentenceTokenizer.tokenize() gives (nltk 3.10), here on UTF-8 text.
#pragma once

#include "megatron/export.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::tokenizer {

namespace detail {
struct PunktModel;  // the trained parameters (src/tokenizer/punkt_model.h)
}

class MEGATRON_API PunktSentenceSplitter {
 public:
  // model_dir: a punkt_tab language folder (abbrev_types.txt, collocations.tab,
  // sent_starters.txt, ortho_context.tab). keep_newlines: Megatron-LM's --keep-newlines, whose
  // pattern keeps the whitespace after a sentence's end in that sentence.
  explicit PunktSentenceSplitter(const std::string& model_dir, bool keep_newlines = false);
  ~PunktSentenceSplitter();

  // NLTK's place for `lang`'s model: tokenizers/punkt_tab/{lang} under each folder of NLTK_DATA,
  // then under NLTK's default folders. An error lists where it looked.
  static std::string find_model(const std::string& lang);

  // The sentences of `text`, as views into it. Megatron-LM splits a document in pieces of 10^6
  // code points; so does this.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  std::unique_ptr<const detail::PunktModel> model_;
  bool keep_newlines_;
};

}  // namespace megatron::tokenizer
