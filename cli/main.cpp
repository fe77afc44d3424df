// attntune: profile and autotune sparse and hybrid attention kernels.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "build_info.h"
#include "cli/commands.h"
#include "kernels/kokkos/runtime.h"
#include "kernels/spec/error.h"

int main(int argc, char** argv) {
  CLI::App app{"attntune: profile and autotune sparse and hybrid attention kernels", "attntune"};
  app.set_version_flag("--version", std::string("attntune ") + ATTNTUNE_VERSION);
  app.require_subcommand(1);
  int rc = 0;
  attntune::RegisterCommands(app, &rc);
  attntune::KokkosRuntime kokkos;  // the subcommands run inside parse()
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
  }
  return rc;
}
