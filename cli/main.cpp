// attntune: profile and autotune sparse and hybrid attention kernels.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "build_info.h"
#include "cli/commands.h"
#include "kernels/kokkos/runtime.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"attntune: profile and autotune sparse and hybrid attention kernels", "attntune"};
  app.set_version_flag("--version", std::string("attntune ") + ATTNTUNE_VERSION);
  app.require_subcommand(1);
  int rc = 0;
  attntune::RegisterCommands(app, &rc);
  attntune::KokkosRuntime kokkos;  // the subcommands run inside parse()
  // A mistyped command gets named (CLI11 alone would only say one is required).
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "attntune: error: unknown command '%s' (known: %s)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attntune: error: %s\n", e.what());
    return 2;
  } catch (const attntune::UserError& e) {
    std::fprintf(stderr, "attntune: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Not the user's mistake (a full disk, an I/O error): what is stored stays stored,
    // every trial having been committed on its own.
    std::fprintf(stderr, "attntune: failed: %s\n", e.what());
    return 1;
  }
  return rc;
}
