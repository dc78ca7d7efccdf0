// Fused ReLU MLP on the CPU: a stack of Linear layers (ReLU after every layer but the last),
// forward and backward, one tile of rows at a time through all the layers.
//
// Why: the networks of hash-grid fields are narrow (64 wide). A library GEMM runs such a layer at
// about a third of the machine's peak (packing, and every activation written to memory and read
// back, once per layer and again in the backward). Here a tile of 48 rows goes through every
// layer while its activations stay in the L1/L2 cache, and each register block keeps 6 rows x 64
// outputs in registers while one row of weights at a time is streamed from L1.
//
// Layout: weights as nn.Linear holds them, (out, in), biases (out,) or none. Widths are padded to
// multiples of the vector width (16 or 8 floats) inside the op (zero weights and biases, so padded
// activations are exactly 0).
//
// The backward recomputes the tile's forward (cheaper than storing every activation and reading
// it back) and sums weight gradients per fixed chunk of rows, then adds the chunks in order: the
// result does not depend on the number of threads.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gemm.h"  // gemm (register-blocked C = A @ W with an epilogue); vectors.h: vec, kLanes, kTile, ...; FMA on

namespace {

constexpr int64_t kChunk = 2048;  // rows per partial weight gradient

struct Layer {
  int64_t in, out, in_p, out_p;
  std::vector<float> fwd;   // in x out_p: row k holds the weights from input k
  std::vector<float> bwd;   // out_p x in_p: row m holds the weights into output m
  std::vector<float> bias;  // out_p
};

std::vector<Layer> make_layers(const at::Tensor& x, at::TensorList weights, at::TensorList biases) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2,
              "mlp: x must be a 2-D float32 CPU tensor");
  TORCH_CHECK(!weights.empty(), "mlp: no layers");
  TORCH_CHECK(biases.empty() || biases.size() == weights.size(), "mlp: one bias per layer, or none");
  std::vector<Layer> layers;
  int64_t in = x.size(1);
  for (size_t l = 0; l < weights.size(); ++l) {
    const at::Tensor w = weights[l].contiguous();
    TORCH_CHECK(w.scalar_type() == at::kFloat && w.dim() == 2 && w.size(1) == in,
                "mlp: layer ", l, " weight must be float32 (out, ", in, "), got ", w.sizes());
    Layer L{in, w.size(0), padded(in), padded(w.size(0)), {}, {}, {}};
    L.fwd.assign(L.in * L.out_p, 0.f);
    L.bwd.assign(L.out_p * L.in_p, 0.f);
    L.bias.assign(L.out_p, 0.f);
    const float* pw = w.data_ptr<float>();
    for (int64_t m = 0; m < L.out; ++m)
      for (int64_t k = 0; k < L.in; ++k) {
        L.fwd[k * L.out_p + m] = pw[m * L.in + k];
        L.bwd[m * L.in_p + k] = pw[m * L.in + k];
      }
    if (!biases.empty()) {
      const at::Tensor b = biases[l].contiguous();
      TORCH_CHECK(b.scalar_type() == at::kFloat && b.numel() == L.out, "mlp: layer ", l, " bias must be float32 (", L.out, ")");
      std::copy(b.data_ptr<float>(), b.data_ptr<float>() + L.out, L.bias.begin());
    }
    layers.push_back(std::move(L));
    in = layers.back().out;
  }
  return layers;
}

// One tile forward: acts[l] (n x out_p of layer l) for every layer; the last one without ReLU.
void forward_tile(const std::vector<Layer>& layers, int64_t n, const float* x, int64_t ldx,
                  std::vector<std::vector<float>>& acts) {
  const float* a = x;
  int64_t lda = ldx;
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& L = layers[l];
    gemm(n, a, lda, L.in, L.fwd.data(), L.out_p, L.bias.data(), acts[l].data(), L.out_p,
         l + 1 < layers.size() ? kRelu : kNone);
    a = acts[l].data();
    lda = L.out_p;
  }
}

std::vector<std::vector<float>> tile_buffers(const std::vector<Layer>& layers) {
  std::vector<std::vector<float>> acts;
  for (const Layer& L : layers) acts.emplace_back(kTile * L.out_p);
  return acts;
}

at::Tensor mlp_forward(const at::Tensor& x_in, at::TensorList weights, at::TensorList biases) {
  const at::Tensor x = x_in.contiguous();
  const std::vector<Layer> layers = make_layers(x, weights, biases);
  const int64_t n = x.size(0), in = x.size(1), out = layers.back().out, out_p = layers.back().out_p;
  at::Tensor y = at::empty({n, out}, x.options());
  const float* px = x.data_ptr<float>();
  float* py = y.data_ptr<float>();
  at::parallel_for(0, (n + kTile - 1) / kTile, 1, [&](int64_t t0, int64_t t1) {
    auto acts = tile_buffers(layers);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kTile, rows = std::min(kTile, n - r0);
      forward_tile(layers, rows, px + r0 * in, in, acts);
      for (int64_t r = 0; r < rows; ++r) std::memcpy(py + (r0 + r) * out, acts.back().data() + r * out_p, out * sizeof(float));
    }
  });
  return y;
}

std::tuple<at::Tensor, std::vector<at::Tensor>, std::vector<at::Tensor>> mlp_backward(
    const at::Tensor& grad_in, const at::Tensor& x_in, at::TensorList weights, at::TensorList biases, bool input_grad) {
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad = grad_in.contiguous();
  const std::vector<Layer> layers = make_layers(x, weights, biases);
  const int64_t n = x.size(0), in = x.size(1), nl = static_cast<int64_t>(layers.size());
  const int64_t out = layers.back().out, out_p = layers.back().out_p;
  TORCH_CHECK(grad.scalar_type() == at::kFloat && grad.dim() == 2 && grad.size(0) == n && grad.size(1) == out,
              "mlp: grad_out must be float32 (", n, ", ", out, ")");
  at::Tensor grad_x = input_grad ? at::empty({n, in}, x.options()) : at::empty({0}, x.options());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  // partial gradients per chunk, in the forward layout (in x out_p) and (out_p)
  std::vector<int64_t> w_size(nl), w_offset(nl + 1, 0), b_offset(nl + 1, 0);
  for (int64_t l = 0; l < nl; ++l) {
    w_size[l] = layers[l].in * layers[l].out_p;
    w_offset[l + 1] = w_offset[l] + w_size[l];
    b_offset[l + 1] = b_offset[l] + layers[l].out_p;
  }
  std::vector<float> part_w(chunks * w_offset[nl], 0.f), part_b(chunks * b_offset[nl], 0.f);
  int64_t widest = in;
  for (const Layer& L : layers) widest = std::max({widest, L.in_p, L.out_p});
  const float* px = x.data_ptr<float>();
  const float* pg = grad.data_ptr<float>();
  float* pgx = input_grad ? grad_x.data_ptr<float>() : nullptr;

  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    auto acts = tile_buffers(layers);
    std::vector<float> g(kTile * widest), g_prev(kTile * widest);
    for (int64_t c = c0; c < c1; ++c) {
      float* dw = part_w.data() + c * w_offset[nl];
      float* db = part_b.data() + c * b_offset[nl];
      for (int64_t r0 = c * kChunk; r0 < std::min(n, (c + 1) * kChunk); r0 += kTile) {
        const int64_t rows = std::min({kTile, n - r0, (c + 1) * kChunk - r0});
        forward_tile(layers, rows, px + r0 * in, in, acts);
        std::fill(g.begin(), g.begin() + rows * out_p, 0.f);
        for (int64_t r = 0; r < rows; ++r) std::memcpy(g.data() + r * out_p, pg + (r0 + r) * out, out * sizeof(float));
        for (int64_t l = nl - 1; l >= 0; --l) {
          const Layer& L = layers[l];
          const float* a = l > 0 ? acts[l - 1].data() : px + r0 * in;
          const int64_t lda = l > 0 ? layers[l - 1].out_p : in;
          wgrad(rows, a, lda, L.in, g.data(), L.out_p, dw + w_offset[l], db + b_offset[l]);
          if (l > 0) {  // through the weights and the previous layer's ReLU
            gemm(rows, g.data(), L.out_p, L.out_p, L.bwd.data(), L.in_p, nullptr, g_prev.data(), L.in_p, kMask, a, lda);
            std::swap(g, g_prev);
          } else if (input_grad) {
            gemm(rows, g.data(), L.out_p, L.out_p, L.bwd.data(), L.in_p, nullptr, g_prev.data(), L.in_p);
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(pgx + (r0 + r) * in, g_prev.data() + r * L.in_p, in * sizeof(float));
          }
        }
      }
    }
  });

  std::vector<at::Tensor> grad_w, grad_b;
  for (int64_t l = 0; l < nl; ++l) {
    const Layer& L = layers[l];
    at::Tensor gw = at::empty({L.out, L.in}, x.options());
    at::Tensor gb = at::empty({L.out}, x.options());
    float* pw = gw.data_ptr<float>();
    float* pb = gb.data_ptr<float>();
    at::parallel_for(0, L.out, 1, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        for (int64_t k = 0; k < L.in; ++k) {
          float s = 0.f;
          for (int64_t c = 0; c < chunks; ++c) s += part_w[c * w_offset[nl] + w_offset[l] + k * L.out_p + m];
          pw[m * L.in + k] = s;
        }
        float s = 0.f;
        for (int64_t c = 0; c < chunks; ++c) s += part_b[c * b_offset[nl] + b_offset[l] + m];
        pb[m] = s;
      }
    });
    grad_w.push_back(gw);
    grad_b.push_back(gb);
  }
  return {grad_x, grad_w, grad_b};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(inr_native, m) {
  m.def("mlp_forward(Tensor x, Tensor[] weights, Tensor[] biases) -> Tensor");
  m.def("mlp_backward(Tensor grad_out, Tensor x, Tensor[] weights, Tensor[] biases, bool input_grad) "
        "-> (Tensor, Tensor[], Tensor[])");
}

TORCH_LIBRARY_IMPL(inr_native, CPU, m) {
  m.impl("mlp_forward", &mlp_forward);
  m.impl("mlp_backward", &mlp_backward);
}
