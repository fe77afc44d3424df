// The Hugging Face config.json reader (model geometry and attention layout).
#include "fuzz/fuzz_main.h"
#include "tuner/model.h"

void FuzzOne(const std::string& input) {
  const attntune::ModelGeometry g = attntune::ParseHfConfig(input, "config.json");
  (void)g.SlidingLayers();
}
