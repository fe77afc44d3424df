// The C ABI (attntune/attntune_c.h) over the library's configurations and run: C structs
// checked and converted, exceptions turned into a status and the CLI's one-line texts.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "attntune/attntune_c.h"
#include "build_info.h"
#include "core/config_schema.h"
#include "core/error.h"
#include "library/config.h"
#include "library/config_file.h"
#include "library/run.h"

static_assert(ATTNTUNE_CONFIG_SCHEMA == attntune::kConfigSchema,
              "attntune_c.h names the schema reports/ writes");

struct attntune_configuration {
  attntune::library::Config config;
};

struct attntune_config_file {
  attntune::library::ConfigFile file;
  attntune_config_options options;  // as loaded: the lookups' warnings follow its quiet
};

namespace attntune {
namespace library {
namespace {

void Fill(attntune_error* error, const std::string& line) {
  if (error == nullptr) return;
  std::snprintf(error->message, sizeof error->message, "%s", line.c_str());
}

// Runs `fn`, mapping what it throws as the CLI does (cli/main.cpp): UserError -> "attntune:
// error: ...", ATTNTUNE_USER_ERROR; anything else -> "attntune: failed: ...".
template <class Fn>
attntune_status Guard(attntune_error* error, Fn&& fn) noexcept {
  try {
    fn();
    Fill(error, "");
    return ATTNTUNE_OK;
  } catch (const UserError& e) {
    Fill(error, std::string("attntune: error: ") + e.what());
    return ATTNTUNE_USER_ERROR;
  } catch (const std::bad_alloc&) {
    Fill(error, "attntune: failed: out of memory");
    return ATTNTUNE_FAILED;
  } catch (const std::exception& e) {
    Fill(error, std::string("attntune: failed: ") + e.what());
    return ATTNTUNE_FAILED;
  } catch (...) {
    Fill(error, "attntune: failed: an unknown exception");
    return ATTNTUNE_FAILED;
  }
}

// UserError unless a struct was made for this library's API version.
void CheckApiVersion(int version, const char* what) {
  if (version != ATTNTUNE_API_VERSION) {
    throw UserError(std::string(what) + ": api_version " + std::to_string(version) +
                    " is not this libattntune's (" + std::to_string(ATTNTUNE_API_VERSION) +
                    "); rebuild against its headers and initialise the struct with its "
                    "_init() function");
  }
}

template <class T>
void Require(const T* pointer, const char* what) {
  if (pointer == nullptr) throw UserError(std::string(what) + ": NULL (a value is required)");
}

std::string Text(const char* text) { return text != nullptr ? text : ""; }

DeviceId ToDeviceId(const attntune_device& device, const char* what) {
  if (device.kind == ATTNTUNE_CPU) return DeviceId{"cpu", 0};
  if (device.kind == ATTNTUNE_CUDA && device.index >= 0) return DeviceId{"cuda", device.index};
  throw UserError(std::string(what) + ": device kind " + std::to_string(device.kind) + ", index " +
                  std::to_string(device.index) + " is not cpu or cuda:N (N >= 0)");
}

Dtype ToDtype(attntune_dtype dtype) {
  switch (dtype) {
    case ATTNTUNE_FP32: return Dtype::kF32;
    case ATTNTUNE_FP16: return Dtype::kF16;
    case ATTNTUNE_BF16: return Dtype::kBf16;
  }
  throw UserError("problem: dtype " + std::to_string(dtype) + " is not ATTNTUNE_FP32, ATTNTUNE_FP16 or ATTNTUNE_BF16");
}

ConfigChecks ToChecks(const attntune_config_options* options) {
  const attntune_config_options defaults = attntune_config_options_init();
  const attntune_config_options& o = options != nullptr ? *options : defaults;
  CheckApiVersion(o.api_version, "config options");
  ConfigChecks checks;
  checks.device = ToDeviceId(o.device, "config options");
  checks.allow_other_device = o.allow_other_device != 0;
  checks.allow_other_version = o.allow_other_version != 0;
  return checks;
}

// The config handle, its warning written to stderr unless quiet.
attntune_configuration* NewConfig(Config config, const attntune_config_options* options) {
  if (!config.warning.empty() && (options == nullptr || options->quiet == 0)) {
    std::fprintf(stderr, "attntune: warning: %s\n", config.warning.c_str());
  }
  return new attntune_configuration{std::move(config)};
}

Problem ToProblem(const attntune_problem& p) {
  CheckApiVersion(p.api_version, "problem");
  Problem problem;
  problem.shape = Shape{p.batch, p.q_heads, p.kv_heads, p.q_len, p.kv_len, p.head_dim, p.causal != 0};
  problem.dtype = ToDtype(p.dtype);
  problem.device = ToDeviceId(p.device, "problem");
  return problem;
}

}  // namespace
}  // namespace library
}  // namespace attntune

using namespace attntune::library;  // NOLINT: the C functions below are its interface

extern "C" {

int attntune_api_version(void) { return ATTNTUNE_API_VERSION; }

const char* attntune_version(void) { return ATTNTUNE_VERSION; }

attntune_status attntune_device_name(attntune_device device, char* name, size_t bytes,
                                     attntune_error* error) {
  return Guard(error, [&] {
    Require(name, "name");
    const std::string text = DeviceName(ToDeviceId(device, "device"));
    // A cut name would match no entry's device: refused, never cut.
    if (text.size() >= bytes)
      throw attntune::UserError("name: a buffer of " + std::to_string(bytes) +
                                " bytes cannot hold the name (" + std::to_string(text.size() + 1) +
                                " bytes with its terminating NUL)");
    std::snprintf(name, bytes, "%s", text.c_str());
  });
}

attntune_status attntune_config_create(const char* variant, const char* implementation,
                                       const char* params, const char* tunables,
                                       attntune_configuration** out, attntune_error* error) {
  return Guard(error, [&] {
    Require(out, "out");
    *out = nullptr;
    Require(variant, "config: variant");
    Require(implementation, "config: implementation");
    *out = NewConfig(ConfigByHand(variant, implementation, Text(params), Text(tunables)), nullptr);
  });
}

attntune_status attntune_config_from_entry(const attntune_entry* entry,
                                           const attntune_config_options* options,
                                           attntune_configuration** out, attntune_error* error) {
  return Guard(error, [&] {
    Require(out, "out");
    *out = nullptr;
    Require(entry, "entry");
    Require(entry->tool_version, "entry: tool_version");
    Require(entry->device, "entry: device");
    Require(entry->variant, "entry: variant");
    Require(entry->phase, "entry: phase");
    const ConfigChecks checks = ToChecks(options);
    EntryFields fields;
    fields.schema = entry->schema;
    fields.tool_version = Text(entry->tool_version);
    fields.device = Text(entry->device);
    fields.variant = Text(entry->variant);
    fields.phase = Text(entry->phase);
    fields.params = Text(entry->params);
    fields.implementation = Text(entry->impl);
    fields.tunables = Text(entry->tunables);
    fields.head_dim = entry->head_dim;
    fields.seq_len = entry->seq_len;
    fields.median_ms = entry->median_ms;
    fields.rel_err = entry->rel_err;
    fields.mass_recall = entry->mass_recall;
    const std::string what = "attntune_config.h entry " + EntryName(fields);
    *out = NewConfig(ConfigFromEntry(fields, what, DeviceName(checks.device), checks), options);
  });
}

attntune_status attntune_config_file_load(const char* path, const attntune_config_options* options,
                                          attntune_config_file** out, attntune_error* error) {
  return Guard(error, [&] {
    Require(out, "out");
    *out = nullptr;
    Require(path, "path");
    const attntune_config_options o = options != nullptr ? *options : attntune_config_options_init();
    *out = new attntune_config_file{LoadConfigFile(path, ToChecks(&o)), o};
  });
}

attntune_status attntune_config_file_lookup(const attntune_config_file* file, const char* variant,
                                            const char* phase, int head_dim, int seq_len,
                                            double min_mass_recall, attntune_configuration** out,
                                            attntune_error* error) {
  return Guard(error, [&] {
    Require(out, "out");
    *out = nullptr;
    Require(file, "file");
    Require(variant, "variant");
    Require(phase, "phase");
    if (!attntune::PhaseFromString(phase)) {
      throw attntune::UserError(std::string("phase: '") + phase + "' is not prefill or decode");
    }
    Config config = LookupConfig(file->file, variant, phase, head_dim, seq_len, min_mass_recall);
    *out = NewConfig(std::move(config), &file->options);
  });
}

void attntune_config_free(attntune_configuration* config) { delete config; }

void attntune_config_file_free(attntune_config_file* file) { delete file; }

const char* attntune_config_variant(const attntune_configuration* c) {
  return c != nullptr ? c->config.variant.c_str() : "";
}
const char* attntune_config_implementation(const attntune_configuration* c) {
  return c != nullptr ? c->config.implementation.c_str() : "";
}
const char* attntune_config_params(const attntune_configuration* c) {
  return c != nullptr ? c->config.params_text.c_str() : "";
}
const char* attntune_config_tunables(const attntune_configuration* c) {
  return c != nullptr ? c->config.tunables_text.c_str() : "";
}
const char* attntune_config_device(const attntune_configuration* c) {
  return c != nullptr ? c->config.device.c_str() : "";
}
const char* attntune_config_warning(const attntune_configuration* c) {
  return c != nullptr ? c->config.warning.c_str() : "";
}

attntune_status attntune_run(const attntune_configuration* config, const attntune_problem* problem,
                             const attntune_tensors* tensors, const attntune_run_options* options,
                             attntune_error* error) {
  return Guard(error, [&] {
    Require(config, "config");
    Require(problem, "problem");
    Require(tensors, "tensors");
    const attntune_run_options defaults = attntune_run_options_init();
    const attntune_run_options& o = options != nullptr ? *options : defaults;
    CheckApiVersion(o.api_version, "run options");
    Buffers b;
    b.q = tensors->q;
    b.k = tensors->k;
    b.v = tensors->v;
    b.o = tensors->o;
    b.scores = tensors->scores;
    b.delta = tensors->delta;
    b.a = tensors->a;
    b.mu = tensors->mu;
    b.proj = tensors->proj;
    b.proj_bits = tensors->proj_bits;
    b.windows = tensors->windows;
    RunOptions run_options;
    run_options.check_inputs = o.check_inputs != 0;
    run_options.stream = o.stream;
    Run(config->config, ToProblem(*problem), b, run_options);
  });
}

}  // extern "C"
