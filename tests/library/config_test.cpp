// Tuned configurations: attntune::FromEntry over generated-header entries and
// attntune::ConfigFile over attntune_config.json, with their checks (schema, attntune
// version, device) and their one-line refusals; the JSON lookup follows the header's rule.
#include <attntune/attntune.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "build_info.h"
#include "tests/temp_dir.h"

namespace {

// attntune_config::Entry as reports/config_header.cpp writes it, of a chosen schema and
// version.
template <int Schema, const char* Version>
struct EntryOf {
  static constexpr int kSchema = Schema;
  static constexpr const char* kToolVersion = Version;
  const char* device;
  const char* variant;
  const char* phase;
  const char* params;
  const char* impl;
  int Br;
  int Bc;
  const char* tunables;
  int head_dim;
  int seq_len;
  double median_ms;
  double rel_err;
  double mass_recall;
};
constexpr char kThisVersion[] = ATTNTUNE_VERSION;
constexpr char kOldVersion[] = "0.0.9";
using Entry = EntryOf<1, kThisVersion>;

// A header entry older than kSchema: no versions to check.
struct UnversionedEntry {
  const char* device;
};

std::string Cpu() { return attntune::DeviceName(attntune::Device::Cpu()); }

template <class E>
E Swa(const std::string& device) {
  return E{device.c_str(), "swa", "prefill", "sink=0,w=64", "tiled", 32, 64, "Bc=64,Br=32",
           64, 128, 1.5, 0.01, 0.9};
}

const std::string kWhat = "attntune_config.h entry swa prefill d=64 L=128";

std::string Write(const attntune::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.File(name);
  std::ofstream(path) << text;
  return path;
}

// An attntune_config.json as reports/config_json.cpp writes it.
std::string Json(const std::string& version, const std::string& entries, int schema = 1) {
  return "{\"schema\": " + std::to_string(schema) +
         ", \"tool\": \"attntune\", \"tool_version\": \"" + version +
         "\", \"devices\": [], \"entries\": [" + entries + "], \"allocations\": []}";
}

std::string JsonEntry(const std::string& device, const std::string& variant, int seq_len,
                      double median_ms, const std::string& params, const std::string& tunables,
                      const std::string& phase = "prefill", double mass_recall = 1.0,
                      const std::string& worst = "") {
  // `worst` given: measured on a calibration set, its worst (layer, head) mass_recall.
  const std::string quality =
      worst.empty() ? ", \"calibration\": null, \"mass_recall_worst\": null"
                    : ", \"calibration\": {\"id\": \"0123456789ab\", \"model\": \"m\"}, "
                      "\"mass_recall_worst\": " + worst;
  return "{\"device\": \"" + device + "\", \"variant\": \"" + variant + "\", \"phase\": \"" +
         phase + "\", \"implementation\": \"tiled\", \"params\": " + params +
         ", \"tunables\": " + tunables + ", \"head_dim\": 64, \"seq_len\": " +
         std::to_string(seq_len) + ", \"median_ms\": " + std::to_string(median_ms) +
         ", \"rel_err\": 0.0, \"mass_recall\": " + std::to_string(mass_recall) + quality + "}";
}

}  // namespace

TEST_CASE("FromEntry maps a generated entry onto a configuration") {
  const std::string cpu = Cpu();
  const attntune::Config config = attntune::FromEntry(Swa<Entry>(cpu));
  CHECK(config.variant() == "swa");
  CHECK(config.implementation() == "tiled");
  CHECK(config.params() == "sink=0,w=64");
  CHECK(config.tunables() == "Bc=64,Br=32");
  CHECK(config.device() == cpu);
  CHECK(config.warning().empty());
  // Lookup's nullptr is refused, not dereferenced.
  attntune::Config none;
  const Entry* missing = nullptr;
  CHECK(attntune::TryFromEntry(missing, &none).message ==
        "attntune: error: attntune_config.h: the lookup found no tuned entry (nullptr); tune "
        "this variant and head dimension, or pass a configuration by hand");
  // Through the C ABI, an entry whose identifying strings are NULL is refused by name.
  attntune_entry blank{};
  blank.schema = 1;
  attntune_configuration* made = nullptr;
  attntune_error error{};
  CHECK(attntune_config_from_entry(&blank, nullptr, &made, &error) == ATTNTUNE_USER_ERROR);
  CHECK(std::string(error.message) == "attntune: error: entry: tool_version: NULL (a value is required)");
  CHECK(made == nullptr);
  // An entry without the header's versions does not compile (static_assert).
  CHECK(!attntune::detail::IsVersionedEntry<UnversionedEntry>::value);
  CHECK(attntune::detail::IsVersionedEntry<Entry>::value);
}

TEST_CASE("FromEntry refuses another device, version or schema in one line") {
  const std::string cpu = Cpu();
  attntune::Config config;
  CHECK(attntune::TryFromEntry(Swa<Entry>("Other CPU"), &config).message ==
        "attntune: error: " + kWhat + ": tuned on 'Other CPU', this is '" + cpu +
            "' (cpu) (tune on this device, or allow_other_device to use it with a warning)");
  CHECK(attntune::TryFromEntry(Swa<EntryOf<1, kOldVersion>>(cpu), &config).message ==
        "attntune: error: " + kWhat + ": written by attntune 0.0.9, this is attntune " +
            ATTNTUNE_VERSION +
            " (emit it again with this version, or allow_other_version to use it with a warning)");
  CHECK(attntune::TryFromEntry(Swa<EntryOf<2, kThisVersion>>(cpu), &config).message ==
        "attntune: error: " + kWhat +
            ": schema 2 is not the format this attntune reads (schema 1); emit it again with "
            "attntune " + ATTNTUNE_VERSION + " (attntune emit --db FILE)");
  CHECK(config.empty());

  // Allowed explicitly: used, with the reason as its warning (quiet: not on stderr).
  attntune::ConfigOptions allow;
  allow.allow_other_device = allow.allow_other_version = allow.quiet = true;
  config = attntune::FromEntry(Swa<EntryOf<1, kOldVersion>>("Other CPU"), allow);
  CHECK(config.warning() == kWhat + ": written by attntune 0.0.9, this is attntune " +
                                ATTNTUNE_VERSION + "; tuned on 'Other CPU', this is '" + cpu + "' (cpu)");
  // Another schema is never used: its fields may mean something else.
  CHECK(!attntune::TryFromEntry(Swa<EntryOf<2, kThisVersion>>(cpu), &config, allow).ok());
  // An entry naming what this attntune lacks.
  Entry bad = Swa<Entry>(cpu);
  bad.impl = "warp";
  CHECK(attntune::TryFromEntry(bad, &config).message.rfind(
            "attntune: error: " + kWhat + ": unknown implementation 'warp' of swa (known: tiled, generic", 0) == 0);
}

TEST_CASE("ConfigFile looks entries up by the generated header's rule") {
  attntune::TempDir dir;
  const std::string cpu = Cpu();
  // A floor is answered from calibrated entries only, by their worst layer and head: the
  // w=64 entry's mean passes 0.9 but its worst does not; w=16 was never calibrated.
  const std::string path = Write(dir, "attntune_config.json", Json(ATTNTUNE_VERSION,
      JsonEntry(cpu, "swa", 128, 0.9, "{\"sink\": 0, \"w\": 64}", "{\"Bc\": 64, \"Br\": 32}", "prefill", 0.95, "0.85") + "," +
      JsonEntry(cpu, "swa", 128, 1.0, "{\"sink\": 4, \"w\": 32}", "{\"Bc\": 32, \"Br\": 16}", "prefill", 0.99, "0.95") + "," +
      JsonEntry(cpu, "swa", 128, 0.8, "{\"sink\": 0, \"w\": 16}", "{\"Bc\": 16, \"Br\": 16}", "prefill", 0.99) + "," +
      JsonEntry(cpu, "swa", 512, 3.0, "{\"sink\": 0, \"w\": 256}", "{\"Bc\": 128, \"Br\": 64}") + "," +
      JsonEntry(cpu, "swa", 128, 0.5, "{\"sink\": 0, \"w\": 8}", "{\"Bc\": 16, \"Br\": 16}", "prefill", 0.5, "0.4") + "," +
      JsonEntry(cpu, "dense", 128, 0.4, "{}", "{\"Bc\": 64, \"Br\": 64}", "decode") + "," +
      JsonEntry("Other CPU", "swa", 64, 0.1, "{\"sink\": 0, \"w\": 16}", "{\"Bc\": 16, \"Br\": 16}")));
  const attntune::ConfigFile file = attntune::ConfigFile::Load(path);
  // The smallest tuned length >= L, the fastest there (mass_recall 0.5 is fastest overall).
  CHECK(file.Lookup("swa", 64, 100).params() == "sink=0,w=8");
  CHECK(file.Lookup("swa", 64, 100, 0.9).params() == "sink=4,w=32");
  CHECK(file.Lookup("swa", 64, 100, 0.9).tunables() == "Bc=32,Br=16");
  CHECK(file.Lookup("swa", 64, 300).params() == "sink=0,w=256");
  CHECK(file.Lookup("swa", 64, 4096).params() == "sink=0,w=256");  // beyond: the largest
  // This device's entries first: the other CPU's L=64 entry never answers.
  CHECK(file.Lookup("swa", 64, 10, 0.9).params() == "sink=4,w=32");
  CHECK(file.LookupDecode("dense", 64, 128).tunables() == "Bc=64,Br=64");
  attntune::Config config;
  CHECK(file.TryLookup("dense", "prefill", 64, 128, &config).message ==
        "attntune: error: " + path + ": no entry for dense prefill d=64 (it holds: dense decode "
        "d=64, swa prefill d=64)");
  CHECK(file.TryLookup("swa", "prefill", 64, 128, &config, 1.5).message ==
        "attntune: error: " + path + ": no entry for swa prefill d=64 measured on a calibration "
        "set with mass_recall >= 1.5 on its worst layer and head (it holds: dense decode d=64, "
        "swa prefill d=64)");
  // Floors against the worst, not the mean; uncalibrated entries answer no floor.
  CHECK(file.Lookup("swa", 64, 100, 0.8).params() == "sink=0,w=64");
  CHECK(file.Lookup("swa", 64, 100, 0.9).params() == "sink=4,w=32");
  CHECK(file.Lookup("swa", 64, 100, 0.3).params() == "sink=0,w=8");
  // w=256 (L=512) has no calibration: under a floor the largest calibrated length answers.
  CHECK(file.Lookup("swa", 64, 300, 0.9).params() == "sink=4,w=32");
  CHECK(file.TryLookup("swa", "later", 64, 128, &config).message ==
        "attntune: error: phase: 'later' is not prefill or decode");
}

TEST_CASE("ConfigFile refuses another device or version at lookup, another schema at load") {
  attntune::TempDir dir;
  const std::string cpu = Cpu();
  const std::string entry = JsonEntry("Other CPU", "swa", 128, 1.0, "{\"w\": 64}", "{}");
  const std::string other = Write(dir, "other.json", Json(ATTNTUNE_VERSION, entry));
  attntune::Config config;
  CHECK(attntune::ConfigFile::Load(other).TryLookup("swa", "prefill", 64, 100, &config).message ==
        "attntune: error: " + other + ": entry swa prefill d=64 L=128: tuned on 'Other CPU', "
        "this is '" + cpu + "' (cpu) (tune on this device, or allow_other_device to use it with a warning)");
  attntune::ConfigOptions allow;
  allow.allow_other_device = allow.quiet = true;
  CHECK(attntune::ConfigFile::Load(other, allow).Lookup("swa", 64, 100).params() == "w=64");

  const std::string old = Write(dir, "old.json",
                                Json("0.0.1", JsonEntry(cpu, "swa", 128, 1.0, "{\"w\": 64}", "{}")));
  CHECK(attntune::ConfigFile::Load(old).TryLookup("swa", "prefill", 64, 100, &config).message ==
        "attntune: error: " + old + ": entry swa prefill d=64 L=128: written by attntune 0.0.1, "
        "this is attntune " + ATTNTUNE_VERSION +
            " (emit it again with this version, or allow_other_version to use it with a warning)");

  const std::string newer = Write(dir, "newer.json", Json(ATTNTUNE_VERSION, "", 2));
  attntune::ConfigFile file;
  CHECK(attntune::ConfigFile::TryLoad(newer, &file).message ==
        "attntune: error: " + newer + ": schema 2 is not the format this attntune reads (schema "
        "1); emit it again with attntune " + ATTNTUNE_VERSION + " (attntune emit --db FILE)");
}

TEST_CASE("malformed or hostile attntune_config.json files are refused in one line") {
  attntune::TempDir dir;
  const std::string cpu = Cpu();
  const std::string good = JsonEntry(cpu, "swa", 128, 1.0, "{\"w\": 64}", "{}");
  struct Bad {
    std::string text;
    std::string error;  // after "<path>: "
  };
  auto replace = [&good](const std::string& from, const std::string& to) {
    std::string e = good;
    e.replace(e.find(from), from.size(), to);
    return Json(ATTNTUNE_VERSION, e);
  };
  const Bad cases[] = {
      {"", "not valid JSON (at byte 1)"},
      {"{\"schema\": 1, \"entries\": [", "not valid JSON (at byte 27)"},
      {"[1, 2]", "not an attntune_config.json (a JSON object with \"schema\", \"tool_version\" and "
                 "\"entries\" is expected)"},
      {"{\"schema\": \"1\"}", "schema -1 is not the format this attntune reads (schema 1); emit it "
                              "again with attntune " ATTNTUNE_VERSION " (attntune emit --db FILE)"},
      {"{\"schema\": 1}", "\"tool_version\" is missing"},
      {"{\"schema\": 1, \"tool_version\": \"0.1.0\", \"entries\": {}}", "\"entries\" is not an array"},
      {Json(ATTNTUNE_VERSION, "7"), "entries[0]: not an object"},
      {replace("\"head_dim\": 64", "\"head_dim\": 1e400"), "not valid JSON (a number out of range)"},
      {replace("\"head_dim\": 64", "\"head_dim\": 64.5"),
       "entries[0]: \"head_dim\" is not an integer (an integer from 1 to 1048576 is expected)"},
      {replace("\"head_dim\": 64", "\"head_dim\": 18446744073709551615"),
       "entries[0]: \"head_dim\" is 18446744073709551615, out of range (an integer from 1 to "
       "1048576 is expected)"},
      {replace("\"seq_len\": 128", "\"seq_len\": -3"),
       "entries[0]: \"seq_len\" is -3, out of range (an integer from 1 to 1099511627776 is "
       "expected)"},
      // 0 is read as an unsigned integer: its lower bound was not checked.
      {replace("\"head_dim\": 64", "\"head_dim\": 0"),
       "entries[0]: \"head_dim\" is 0, out of range (an integer from 1 to 1048576 is expected)"},
      {replace("\"seq_len\": 128", "\"seq_len\": 0"),
       "entries[0]: \"seq_len\" is 0, out of range (an integer from 1 to 1099511627776 is "
       "expected)"},
      {replace("\"phase\": \"prefill\"", "\"phase\": \"both\""),
       "entries[0]: \"phase\" is 'both' (prefill or decode is expected)"},
      {replace("\"device\": \"", "\"device\": \"\\n"), "entries[0]: \"device\" holds a control character"},
      {replace("{\"w\": 64}", "{\"w\": \"6,4\"}"),
       "entries[0]: \"params\" holds a value that is not a name with an integer or a word (e.g. "
       "{\"w\": 256, \"rule\": \"sign\"})"},
      {replace("{\"w\": 64}", "{\"w\": [64]}"),
       "entries[0]: \"params\" holds a value that is not a name with an integer or a word (e.g. "
       "{\"w\": 256, \"rule\": \"sign\"})"},
      {replace("\"median_ms\": 1.000000", "\"median_ms\": null"),
       "entries[0]: \"median_ms\" is not a finite number"},
      {replace("\"variant\": \"swa\"", "\"variant\": 5"), "entries[0]: \"variant\" is not a string"},
      {std::string(100000, '['), "not valid JSON (at byte 100001)"},
  };
  int n = 0;
  for (const Bad& bad : cases) {
    const std::string path = Write(dir, "bad" + std::to_string(n++) + ".json", bad.text);
    attntune::ConfigFile file;
    const attntune::Status status = attntune::ConfigFile::TryLoad(path, &file);
    INFO(bad.text.substr(0, 200));
    CHECK(status.code == ATTNTUNE_USER_ERROR);
    CHECK(status.message.find('\n') == std::string::npos);
    if (!bad.error.empty()) CHECK(status.message == "attntune: error: " + path + ": " + bad.error);
  }
  attntune::ConfigFile file;
  CHECK(attntune::ConfigFile::TryLoad(dir.File("missing.json"), &file).message ==
        "attntune: error: " + dir.File("missing.json") +
            ": cannot open (an attntune_config.json written by attntune tune is expected)");
  // A well-formed entry naming an unknown variant is refused when looked up.
  const std::string unknown = Write(dir, "unknown.json", Json(ATTNTUNE_VERSION,
      JsonEntry(cpu, "sparse9", 128, 1.0, "{}", "{}")));
  attntune::Config config;
  CHECK(attntune::ConfigFile::Load(unknown).TryLookup("sparse9", "prefill", 64, 128, &config).message ==
        "attntune: error: " + unknown + ": entry sparse9 prefill d=64 L=128: unknown variant "
        "'sparse9' (known: dense, swa, hybrid, lsh, ks, hax, dma, dma_decode)");
}
