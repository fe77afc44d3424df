// attntune_config.json read back by the library (library/config_file.h): parsed, then
// every entry looked up and mapped onto a configuration. A refusal is a UserError.
#include "fuzz/fuzz_main.h"
#include "library/config_file.h"

void FuzzOne(const std::string& input) {
  using namespace attntune::library;
  ConfigChecks checks;
  checks.allow_other_version = true;  // reach the entries' own checks too
  const ConfigFile file = ParseConfigFile(input, "attntune_config.json", "Fuzz CPU", checks);
  for (const EntryFields& e : file.entries) {
    try {
      const Config config = LookupConfig(file, e.variant, e.phase, e.head_dim, e.seq_len, 0.5);
      (void)config.params_text;
    } catch (const attntune::UserError&) {
    }
  }
}
