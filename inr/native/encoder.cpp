// Transformer encoder layers over many short token sequences, for inference: the point-cloud
// network's stage 2 (inr/pointcloud/network.py PointNet), where each voxel's sequence is its own
// token and up to 32 neighbouring points', 64 wide, and only the voxel token's output is read.
//
// The layers are nn.TransformerEncoderLayer's with norm_first=False and a ReLU feed-forward:
//   h = LayerNorm1(x + OutProj(MultiHeadAttention(x))),  x' = LayerNorm2(h + W2 relu(W1 h + b1) + b2),
// keys left out where `keep` is false. The last layer computes the first token's row alone.
//
// Why: torch runs each step as its own pass over all the voxels' tokens (the projections, the
// attention, the norms), and a 64-wide product with a depth of 64 runs at about a third of the
// machine's peak. Here a group of voxels' tokens (kVoxels x T rows) goes through every step of
// every layer while it stays in the L1/L2 cache, the products in register blocks (gemm.h), the
// softmax's exponentials in vector registers. Each voxel is computed by one thread in a fixed order:
// the result does not depend on the number of threads.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gemm.h"  // gemm; vectors.h: vec, kLanes, splat/load/store, padded; FMA on

namespace {

constexpr int64_t kVoxels = 2;  // sequences per group

typedef int32_t ivec __attribute__((vector_size(sizeof(vec))));

// e^x per lane for x <= 0 (as the softmax asks; clamped to [-87, 88]): x = n ln2 + r, |r| <= ln2 / 2,
// e^r by its Taylor series to r^6 (relative error < 2e-7), 2^n from the exponent bits.
inline vec vexp(vec x) {
  x = x < splat(-87.f) ? splat(-87.f) : x;
  x = x > splat(88.f) ? splat(88.f) : x;
  const vec shifter = splat(12582912.f);  // 1.5 * 2^23: adding it rounds to an integer
  const vec n = (x * splat(1.44269504f) + shifter) - shifter;
  const vec r = (x - n * splat(0.693145751953125f)) - n * splat(1.428606765330187e-06f);
  vec p = splat(1.f / 720.f);
  p = p * r + splat(1.f / 120.f);
  p = p * r + splat(1.f / 24.f);
  p = p * r + splat(1.f / 6.f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.f);
  p = p * r + splat(1.f);
  const ivec bits = (__builtin_convertvector(n, ivec) + 127) << 23;
  vec scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float lane_sum(vec v) {
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

struct Dense {  // rows [first, first + count) of an nn.Linear, in gemm's (in, out_p) layout
  int64_t in, out, out_p;
  std::vector<float> w, b;
  std::vector<uint32_t> wb;  // w in bf16 pairs (gemm.h), where the products run in bf16
};

Dense dense(const at::Tensor& weight, const at::Tensor& bias, int64_t first, int64_t count, bool bf16,
            float scale = 1.f) {
  const at::Tensor w = weight.contiguous(), b = bias.contiguous();
  TORCH_CHECK(w.scalar_type() == at::kFloat && w.dim() == 2 && w.size(0) >= first + count,
              "encoder: a weight must be float32 (out, in), got ", w.sizes());
  TORCH_CHECK(b.scalar_type() == at::kFloat && b.numel() == w.size(0), "encoder: a bias must be float32 (", w.size(0), ")");
  Dense D{w.size(1), count, padded(count), {}, {}};
  D.w.assign(D.in * D.out_p, 0.f);
  D.b.assign(D.out_p, 0.f);
  const float* pw = w.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  for (int64_t m = 0; m < count; ++m) {
    for (int64_t k = 0; k < D.in; ++k) D.w[k * D.out_p + m] = pw[(first + m) * D.in + k] * scale;
    D.b[m] = pb[first + m] * scale;
  }
  if (bf16) {
    D.wb.resize(pairs(D.in) * D.out_p);
    pack_weight_bf16(D.w.data(), D.in, D.out_p, D.wb.data());
  }
  return D;
}

struct Norm {
  const float* w;
  const float* b;
};

struct Layer {
  Dense q, kv, o, ff1, ff2;
  Norm n1, n2;
};

// x[0, d) = LayerNorm(a + b) (elementwise affine w, b), in place over a allowed
void add_norm(const float* a, const float* y, float* x, int64_t d, const Norm& n, float eps) {
  const int64_t full = d / kLanes * kLanes;
  vec s = splat(0.f);
  for (int64_t c = 0; c < full; c += kLanes) {
    const vec v = load(a + c) + load(y + c);
    store(x + c, v);
    s += v;
  }
  float sum = lane_sum(s);
  for (int64_t c = full; c < d; ++c) sum += (x[c] = a[c] + y[c]);
  const float mean = sum / d;
  vec q = splat(0.f);
  for (int64_t c = 0; c < full; c += kLanes) {
    const vec v = load(x + c) - splat(mean);
    q += v * v;
  }
  float sq = lane_sum(q);
  for (int64_t c = full; c < d; ++c) sq += (x[c] - mean) * (x[c] - mean);
  const float inv = 1.f / std::sqrt(sq / d + eps);
  for (int64_t c = 0; c < d; ++c) x[c] = (x[c] - mean) * inv * n.w[c] + n.b[c];
}

// p[0, Tp) = softmax of s over the kept columns (weight > 0 in keep; none past the sequence), 0 elsewhere
void softmax(const float* s, const float* keep, float* p, int64_t Tp) {
  const vec none = splat(-std::numeric_limits<float>::infinity()), zero = splat(0.f);
  vec most = none;  // the kept columns' maximum per lane (the columns past T are not kept)
  for (int64_t c = 0; c < Tp; c += kLanes) {
    const vec v = load(s + c);
    most = load(keep + c) > zero && v > most ? v : most;
  }
  float top = most[0];
  for (int i = 1; i < kLanes; ++i) top = std::max(top, most[i]);
  if (top == -std::numeric_limits<float>::infinity()) {  // nothing to attend to
    std::fill(p, p + Tp, 0.f);
    return;
  }
  vec total = splat(0.f);
  for (int64_t c = 0; c < Tp; c += kLanes) {
    const vec e = vexp(load(s + c) - splat(top)) * load(keep + c);
    store(p + c, e);
    total += e;
  }
  const vec inv = splat(1.f / lane_sum(total));
  for (int64_t c = 0; c < Tp; c += kLanes) store(p + c, load(p + c) * inv);
}

struct Buffers {
  std::vector<float> x, q, kv, o, y, f, kt, vh, s, oh, keep;
  std::vector<uint32_t> ab;  // a product's left rows in bf16 pairs
  Buffers(int64_t T, int64_t dp, int64_t kvp, int64_t ffp, int64_t dh, int64_t Tp)
      : x(kVoxels * T * dp, 0.f), q(kVoxels * T * dp), kv(kVoxels * T * kvp), o(kVoxels * T * dp, 0.f),
        y(kVoxels * T * dp), f(kVoxels * T * ffp), kt(dh * Tp, 0.f), vh(Tp * padded(dh), 0.f), s(T * Tp),
        oh(T * padded(dh)), keep(kVoxels * Tp, 0.f) {}
};

// C[n, out_p] = A[n, in] @ D (+ its bias), then the epilogue: in bf16 where D carries bf16 weights
void linear(int64_t n, const float* A, int64_t lda, const Dense& D, float* C, int64_t ldc, Buffers& B,
            Epilogue epilogue = kNone) {
#if INR_BF16
  if (!D.wb.empty()) return gemm_bf16(n, A, lda, D.in, D.wb.data(), D.out_p, D.b.data(), C, ldc, epilogue, B.ab);
#endif
  gemm(n, A, lda, D.in, D.w.data(), D.out_p, D.b.data(), C, ldc, epilogue);
}

// One layer on G sequences of T tokens in B.x (rows of stride dp). every_row: every token's row,
// written back to B.x; else the first token's alone, written to B.y's first G rows. The attention's
// own products (queries x keys, weights x values) stay in float32.
void run_layer(const Layer& L, int64_t G, int64_t T, bool every_row, int64_t d, int64_t heads, float eps, Buffers& B) {
  const int64_t dp = padded(d), kvp = L.kv.out_p, ffp = L.ff1.out_p, dh = d / heads, dhp = padded(dh);
  const int64_t Tp = padded(T), rq = every_row ? T : 1, nq = G * rq;
  float* X = B.x.data();
  // queries (scaled by 1/sqrt(dh) in their weights) of the rows asked for; keys and values of all
  linear(nq, X, every_row ? dp : T * dp, L.q, B.q.data(), dp, B);
  linear(G * T, X, dp, L.kv, B.kv.data(), kvp, B);
  for (int64_t v = 0; v < G; ++v) {
    const float* kv = B.kv.data() + v * T * kvp;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < T; ++j)
        for (int64_t c = 0; c < dh; ++c) {
          B.kt[c * Tp + j] = kv[j * kvp + h * dh + c];
          B.vh[j * dhp + c] = kv[j * kvp + d + h * dh + c];
        }
      gemm(rq, B.q.data() + v * rq * dp + h * dh, dp, dh, B.kt.data(), Tp, nullptr, B.s.data(), Tp);
      for (int64_t i = 0; i < rq; ++i)
        softmax(B.s.data() + i * Tp, B.keep.data() + v * Tp, B.s.data() + i * Tp, Tp);
      gemm(rq, B.s.data(), Tp, Tp, B.vh.data(), dhp, nullptr, B.oh.data(), dhp);
      for (int64_t i = 0; i < rq; ++i)
        std::memcpy(B.o.data() + (v * rq + i) * dp + h * dh, B.oh.data() + i * dhp, dh * sizeof(float));
    }
  }
  linear(nq, B.o.data(), dp, L.o, B.y.data(), dp, B);
  for (int64_t i = 0; i < nq; ++i)  // h = norm1(x + attention)
    add_norm(X + (every_row ? i : i * T) * dp, B.y.data() + i * dp, B.y.data() + i * dp, d, L.n1, eps);
  linear(nq, B.y.data(), dp, L.ff1, B.f.data(), ffp, B, kRelu);
  linear(nq, B.f.data(), ffp, L.ff2, B.o.data(), dp, B);
  float* out = every_row ? X : B.y.data();
  for (int64_t i = 0; i < nq; ++i)  // x' = norm2(h + feed-forward)
    add_norm(B.y.data() + i * dp, B.o.data() + i * dp, out + i * dp, d, L.n2, eps);
}

// tokens (V, T, d) float32, keep (V, T) bool, 12 tensors per layer (in_proj weight and bias,
// out_proj weight and bias, norm1 weight and bias, linear1 weight and bias, linear2 weight and
// bias, norm2 weight and bias) -> (V, d): the first token's output of the last layer. bf16: the
// linear layers' products in bfloat16 with float32 sums (where the CPU has them: bf16_products()).
at::Tensor encoder_first_token(const at::Tensor& tokens_in, const at::Tensor& keep_in, at::TensorList params,
                               int64_t heads, double eps, bool bf16) {
  const at::Tensor tokens = tokens_in.contiguous(), keep = keep_in.contiguous();
  TORCH_CHECK(tokens.device().is_cpu() && tokens.scalar_type() == at::kFloat && tokens.dim() == 3,
              "encoder: tokens must be a (V, T, d) float32 CPU tensor");
  const int64_t V = tokens.size(0), T = tokens.size(1), d = tokens.size(2);
  TORCH_CHECK(keep.scalar_type() == at::kBool && keep.dim() == 2 && keep.size(0) == V && keep.size(1) == T,
              "encoder: keep must be bool (", V, ", ", T, ")");
  TORCH_CHECK(!params.empty() && params.size() % 12 == 0, "encoder: 12 tensors per layer");
  TORCH_CHECK(heads > 0 && d % heads == 0 && T > 0, "encoder: d = ", d, " is not a multiple of heads = ", heads);
  const int64_t dh = d / heads;
  TORCH_CHECK(!bf16 || INR_BF16, "encoder: this CPU build has no bfloat16 dot products");
  std::vector<Layer> layers;
  for (size_t l = 0; l < params.size(); l += 12) {
    const at::TensorList p = params.slice(l, 12);
    TORCH_CHECK(p[0].dim() == 2 && p[0].size(0) == 3 * d && p[0].size(1) == d, "encoder: in_proj weight must be (",
                3 * d, ", ", d, ")");
    for (int i : {4, 5, 10, 11})
      TORCH_CHECK(p[i].scalar_type() == at::kFloat && p[i].is_contiguous() && p[i].numel() == d,
                  "encoder: norm weights and biases must be contiguous float32 (", d, ")");
    Layer L{dense(p[0], p[1], 0, d, bf16, 1.f / std::sqrt(static_cast<float>(dh))), dense(p[0], p[1], d, 2 * d, bf16),
            dense(p[2], p[3], 0, d, bf16), dense(p[6], p[7], 0, p[6].size(0), bf16), dense(p[8], p[9], 0, d, bf16),
            Norm{p[4].data_ptr<float>(), p[5].data_ptr<float>()}, Norm{p[10].data_ptr<float>(), p[11].data_ptr<float>()}};
    TORCH_CHECK(L.o.in == d && L.ff1.in == d && L.ff2.in == L.ff1.out, "encoder: layer widths do not chain");
    layers.push_back(std::move(L));
  }
  at::Tensor out = at::empty({V, d}, tokens.options());
  const float* pt = tokens.data_ptr<float>();
  const bool* pk = keep.data_ptr<bool>();
  float* po = out.data_ptr<float>();
  const int64_t dp = padded(d), Tp = padded(T);
  at::parallel_for(0, (V + kVoxels - 1) / kVoxels, 1, [&](int64_t g0, int64_t g1) {
    Buffers B(T, dp, layers[0].kv.out_p, layers[0].ff1.out_p, dh, Tp);
    for (const Layer& L : layers) B.f.resize(std::max<size_t>(B.f.size(), kVoxels * T * L.ff1.out_p));
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t v0 = g * kVoxels, G = std::min(kVoxels, V - v0);
      for (int64_t r = 0; r < G * T; ++r) std::memcpy(B.x.data() + r * dp, pt + (v0 * T + r) * d, d * sizeof(float));
      for (int64_t v = 0; v < G; ++v)
        for (int64_t j = 0; j < T; ++j) B.keep[v * Tp + j] = pk[(v0 + v) * T + j] ? 1.f : 0.f;
      for (size_t l = 0; l < layers.size(); ++l)
        run_layer(layers[l], G, T, l + 1 < layers.size(), d, heads, static_cast<float>(eps), B);
      for (int64_t v = 0; v < G; ++v) std::memcpy(po + (v0 + v) * d, B.y.data() + v * dp, d * sizeof(float));
    }
  });
  return out;
}

bool bf16_products() { return INR_BF16; }

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("bf16_products", &bf16_products);  // no tensor to dispatch on: one kernel for every key
  m.def("encoder_first_token(Tensor tokens, Tensor keep, Tensor[] params, int heads, float eps, bool bf16=False) -> Tensor");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) { m.impl("encoder_first_token", &encoder_first_token); }
