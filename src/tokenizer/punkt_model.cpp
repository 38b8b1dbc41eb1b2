// Reading a punkt_tab model folder and finding it where NLTK would.
#include "punkt_model.h"

#include <c10/util/Exception.h>

#include <sys/stat.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "input_files.h"

namespace megatron::tokenizer {

PunktSentenceSplitter::PunktSentenceSplitter(const std::string& model_dir, bool keep_newlines)
    : keep_newlines_(keep_newlines) {
  auto model = std::make_unique<detail::PunktModel>();
  // Lines as Python's text mode reads them (\n, \r\n or \r ends one).
  auto lines = [&](const char* name) {
    const std::string path = model_dir + "/" + name;
    const std::string text = megatron::detail::read_whole_file(
        path, "[punkt] " + path +
                  " (a punkt_tab model folder holds abbrev_types.txt, collocations.tab, "
                  "sent_starters.txt and ortho_context.tab)");
    std::vector<std::string> out;
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find_first_of("\r\n", begin);
      if (end == std::string::npos) end = text.size();
      out.push_back(text.substr(begin, end - begin));
      begin = end + (text.compare(end, 2, "\r\n") == 0 ? 2 : 1);
    }
    return std::make_pair(path, out);
  };
  for (auto [set, name] : {std::make_pair(&model->abbrev_types, "abbrev_types.txt"),
                           std::make_pair(&model->sent_starters, "sent_starters.txt")}) {
    for (auto& l : lines(name).second) set->insert(std::move(l));
  }
  auto [collocations_path, collocations] = lines("collocations.tab");
  for (size_t i = 0; i < collocations.size(); ++i) {
    const auto& l = collocations[i];
    const size_t tab = l.find('\t');
    TORCH_CHECK(tab != std::string::npos && l.find('\t', tab + 1) == std::string::npos, "[punkt] ", collocations_path,
                ":", i + 1, ": expected two words separated by a tab, found '", l, "'");
    model->collocations.insert(l);
  }
  auto [ortho_path, ortho] = lines("ortho_context.tab");
  for (size_t i = 0; i < ortho.size(); ++i) {
    const auto& l = ortho[i];
    const size_t tab = l.find('\t');
    char* end = nullptr;
    const long flags = tab == std::string::npos ? -1 : std::strtol(l.c_str() + tab + 1, &end, 10);
    TORCH_CHECK(tab != std::string::npos && end == l.c_str() + l.size() && flags >= 0 && flags < 128, "[punkt] ",
                ortho_path, ":", i + 1, ": expected a word, a tab and its context flags (0-127), found '", l, "'");
    model->ortho_context[l.substr(0, tab)] = static_cast<int>(flags);
  }
  model_ = std::move(model);
}

PunktSentenceSplitter::~PunktSentenceSplitter() = default;

std::string PunktSentenceSplitter::find_model(const std::string& lang) {
  TORCH_CHECK(
      !lang.empty() && lang.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") ==
                           std::string::npos,
      "[punkt] --lang: expected a model name such as english (letters, digits, - and _), found '", lang, "'");
  std::vector<std::string> roots;
  if (const char* env = std::getenv("NLTK_DATA")) {
    std::stringstream list(env);
    for (std::string r; std::getline(list, r, ':');)
      if (!r.empty()) roots.push_back(r);
  }
  if (const char* home = std::getenv("HOME")) roots.push_back(std::string(home) + "/nltk_data");
  for (const char* r :
       {"/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"})
    roots.emplace_back(r);
  std::string looked;
  for (const auto& r : roots) {
    const std::string dir = r + "/tokenizers/punkt_tab/" + lang;
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return dir;
    const std::string pickle = r + "/tokenizers/punkt/" + lang + ".pickle";
    TORCH_CHECK(::stat(pickle.c_str(), &st) != 0, "[punkt] found ", pickle,
                ", NLTK's old pickled model, which is not read (unpickling runs code); install the same model "
                "as punkt_tab: python -c \"import nltk; nltk.download('punkt_tab')\"");
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  TORCH_CHECK(false, "[punkt] --split-sentences: no punkt_tab model for --lang ", lang, "; looked in ", looked,
              ". Install it with python -c \"import nltk; nltk.download('punkt_tab')\", or point NLTK_DATA at the "
              "folder holding tokenizers/punkt_tab");
  return "";
}

}  // namespace megatron::tokenizer
