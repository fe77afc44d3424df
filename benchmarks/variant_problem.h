// The problem a benchmark runs from its command line: VARIANT PARAMS SHAPE resolved
// against the variant table (its first implementation) and Gaussian inputs of seed 1.
// Shared by peak_memory and phase_times; throws attntune::UserError on bad input.
#pragma once

#include "core/generators.h"
#include "core/params.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "kernels/variant.h"

namespace attntune {

struct VariantProblem {
  const Variant* variant;
  const Implementation* impl;
  Shape shape;
  Params params;
  Tensors tensors;

  VariantProblem(const char* variant_id, const char* params_text, const char* shape_text)
      : variant(&FindVariant(variant_id, "VARIANT")),
        impl(&variant->implementations.front()),
        shape(ParseShape(shape_text, "SHAPE")) {
    ValidateShape(shape, "SHAPE");
    params = ResolveParams(*variant, impl, shape, ParseParams(params_text, "PARAMS"), "PARAMS");
    tensors = StructuredTensors(shape, "gaussian", 1, "inputs");
  }
};

}  // namespace attntune
