#include "profiler/nvtx.h"

#include <catch2/catch.hpp>

namespace attntune {

TEST_CASE("NvtxRange constructs and destructs without a tool attached") {
  {
    NvtxRange outer("tune");
    NvtxRange inner("candidate dense Br=64");
  }
  NvtxRange again("tune");  // the domain is reused
  SUCCEED();
}

TEST_CASE("NvtxCompiledIn matches the build") {
#ifdef ATTNTUNE_HAVE_NVTX
  CHECK(NvtxCompiledIn());
#else
  CHECK(!NvtxCompiledIn());
#endif
}

}  // namespace attntune
