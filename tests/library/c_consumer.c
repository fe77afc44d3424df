/* A C11 program over the installed C ABI (built with pkg-config by install_test.py):
 * dense attention of one small problem against a plain loop, and one refusal's line.
 * Kokkos is never initialised here: the library does it on the first run. */
#include <attntune/attntune_c.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { kHeads = 2, kLen = 37, kDim = 16 };

static float q[kHeads * kLen * kDim], k[kHeads * kLen * kDim], v[kHeads * kLen * kDim];
static float o[kHeads * kLen * kDim];

int main(void) {
  unsigned state = 12345u;
  for (int n = 0; n < kHeads * kLen * kDim; ++n) {
    state = state * 1103515245u + 12345u;
    q[n] = (float)((state >> 16) % 1000) / 500.0f - 1.0f;
    k[n] = (float)((state >> 8) % 1000) / 500.0f - 1.0f;
    v[n] = (float)(state % 1000) / 500.0f - 1.0f;
    o[n] = NAN;
  }
  attntune_error error;
  attntune_configuration* config = NULL;
  if (attntune_config_create("dense", "tiled", "", "Br=8,Bc=16", &config, &error) != ATTNTUNE_OK) {
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  attntune_problem problem = attntune_problem_init();
  problem.q_heads = problem.kv_heads = kHeads;
  problem.q_len = problem.kv_len = kLen;
  problem.head_dim = kDim;
  attntune_tensors tensors = attntune_tensors_init();
  tensors.q = q;
  tensors.k = k;
  tensors.v = v;
  tensors.o = o;
  if (attntune_run(config, &problem, &tensors, NULL, &error) != ATTNTUNE_OK) {
    fprintf(stderr, "%s\n", error.message);
    return 1;
  }
  double err = 0, norm = 0;
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < kLen; ++i) {
      const float* qi = q + (h * kLen + i) * kDim;
      double logit[kLen], top = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int c = 0; c < kDim; ++c) dot += (double)qi[c] * k[(h * kLen + j) * kDim + c];
        logit[j] = dot / sqrt((double)kDim);
        if (logit[j] > top) top = logit[j];
      }
      for (int j = 0; j <= i; ++j) sum += (logit[j] = exp(logit[j] - top));
      for (int c = 0; c < kDim; ++c) {
        double ref = 0;
        for (int j = 0; j <= i; ++j) ref += logit[j] / sum * v[(h * kLen + j) * kDim + c];
        const double got = o[(h * kLen + i) * kDim + c];
        err += (got - ref) * (got - ref);
        norm += ref * ref;
      }
    }
  }
  const double rel_err = sqrt(err / norm);
  problem.kv_heads = 3;
  const attntune_status refused = attntune_run(config, &problem, &tensors, NULL, &error);
  const int refusal_ok = refused == ATTNTUNE_USER_ERROR &&
      strcmp(error.message, "attntune: error: problem: Hq=2 is not divisible by Hkv=3") == 0;
  attntune_config_free(config);
  printf("attntune %s (API %d): dense rel_err %.3g, refusal '%s' %s\n", attntune_version(),
         attntune_api_version(), rel_err, error.message,
         rel_err < 1e-5 && refusal_ok ? "ok" : "FAILED");
  return rel_err < 1e-5 && refusal_ok ? 0 : 1;
}
