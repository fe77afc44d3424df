#include "core/tensors.h"

#include "core/random.h"

namespace attntune {

Tensors GaussianTensors(const Shape& shape, uint64_t seed) {
  Tensors t;
  t.shape = shape;
  t.q.resize(static_cast<size_t>(shape.QElems()));
  t.k.resize(static_cast<size_t>(shape.KvElems()));
  t.v.resize(static_cast<size_t>(shape.KvElems()));
  Normal normal(seed);
  for (TensorData<float>* x : {&t.q, &t.k, &t.v}) normal.Fill(x->data(), x->size());
  return t;
}

void RoundInputs(Tensors* t, Dtype dtype) {
  if (dtype == Dtype::kF32) return;
  for (TensorData<float>* x : {&t->q, &t->k, &t->v}) {
    if (x->IsView()) *x = TensorData<float>(x->ToVector());
    for (float& e : *x) e = RoundToDtype(e, dtype);
  }
}

}  // namespace attntune
