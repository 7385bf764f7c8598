#include "kernels/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/philox.h"

namespace lmx::kernels::cpu {
namespace {

// y = penalized logits (duplicates in the history count once).
std::vector<float> penalized(const float* logits, int vocab, float penalty,
                             const int32_t* prev_ids, int prev_len) {
  std::vector<float> y(logits, logits + vocab);
  if (penalty != 1.0f && prev_ids) {
    std::vector<bool> seen(size_t(vocab), false);
    for (int i = 0; i < prev_len; ++i) {
      const int32_t id = prev_ids[i];
      if (id < 0 || id >= vocab || seen[size_t(id)]) continue;
      seen[size_t(id)] = true;
      float& l = y[size_t(id)];
      l = l < 0.0f ? l * penalty : l / penalty;
    }
  }
  return y;
}

// Kept mask of a non-greedy row over z = y / temperature.
std::vector<bool> kept(const std::vector<float>& z, const SamplingRow& p) {
  const int V = int(z.size());
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return z[size_t(a)] > z[size_t(b)]; });
  float threshold = -std::numeric_limits<float>::infinity();
  if (p.top_k > 0 && p.top_k < V) threshold = z[size_t(order[size_t(p.top_k - 1)])];
  int count = 0;  // tokens with z >= threshold (a prefix of `order`)
  while (count < V && z[size_t(order[size_t(count)])] >= threshold) ++count;
  if (p.top_p < 1.0f) {
    const float top = z[size_t(order[0])];
    double total = 0.0;
    for (int i = 0; i < count; ++i) total += std::exp(double(z[size_t(order[size_t(i)])] - top));
    // Keep while the mass strictly above (over distinct values) is < top_p * total.
    double above = 0.0;
    int i = 0;
    while (i < count) {
      const float v = z[size_t(order[size_t(i)])];
      if (above >= double(p.top_p) * total) break;
      int j = i;
      while (j < count && z[size_t(order[size_t(j)])] == v) {
        above += std::exp(double(v - top));
        ++j;
      }
      i = j;
    }
    count = std::max(i, 1);
  }
  std::vector<bool> keep(size_t(V), false);
  for (int i = 0; i < count; ++i) keep[size_t(order[size_t(i)])] = true;
  return keep;
}

}  // namespace

void sampling_probs(const float* logits, int vocab, const SamplingRow& p, const int32_t* prev_ids,
                    int prev_len, double* probs) {
  std::vector<float> z = penalized(logits, vocab, p.repetition_penalty, prev_ids, prev_len);
  for (float& v : z) v /= p.temperature;
  const std::vector<bool> keep = kept(z, p);
  const float top = *std::max_element(z.begin(), z.end());
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    probs[i] = keep[size_t(i)] ? std::exp(double(z[size_t(i)] - top)) : 0.0;
    total += probs[i];
  }
  for (int i = 0; i < vocab; ++i) probs[i] /= total;
}

void sample(const float* logits, int n, int vocab, const SamplingRow* params,
            const int32_t* prev_ids, int prev_stride, const int32_t* prev_len, int32_t* out_ids,
            float* out_logprob) {
  // Rows are independent: one thread each.
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int r = 0; r < n; ++r) {
    const float* row = logits + size_t(r) * vocab;
    const SamplingRow& p = params[r];
    const float* max_it = std::max_element(row, row + vocab);
    const float max_raw = *max_it;
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(double(row[i] - max_raw));
    const float log_z = max_raw + float(std::log(sum));
    if (p.greedy && p.repetition_penalty == 1.0f) {  // the common case: no copy
      out_ids[r] = int32_t(max_it - row);
      out_logprob[r] = max_raw - log_z;
      continue;
    }

    std::vector<float> y = penalized(row, vocab, p.repetition_penalty,
                                     prev_ids ? prev_ids + size_t(r) * prev_stride : nullptr,
                                     prev_len ? prev_len[r] : 0);
    int32_t chosen = 0;
    if (p.greedy) {
      chosen = int32_t(std::max_element(y.begin(), y.end()) - y.begin());
    } else {
      for (float& v : y) v /= p.temperature;
      const std::vector<bool> keep = kept(y, p);
      float best = -std::numeric_limits<float>::infinity();
      bool any = false;
      for (int i = 0; i < vocab; ++i) {
        if (!keep[size_t(i)]) continue;
        const float u = philox_uniform_at(p.seed, p.step, uint32_t(i));
        const float s = y[size_t(i)] - std::log(-std::log(u));
        if (!any || s > best) {
          best = s;
          chosen = i;
          any = true;
        }
      }
    }
    out_ids[r] = chosen;
    out_logprob[r] = row[chosen] - log_z;
  }
}

void draw_partials(const float* logits, int n, int ld, int cols, int first_id,
                   const SamplingRow* params, DrawPartial* out) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int r = 0; r < n; ++r) {
    const float* row = logits + size_t(r) * ld;
    const SamplingRow& p = params[r];
    DrawPartial d{kNone, first_id, kNone, kNone, 0.0f};
    if (cols > 0) {
      d.max = *std::max_element(row, row + cols);
      double sum = 0.0;
      for (int i = 0; i < cols; ++i) sum += std::exp(double(row[i] - d.max));
      d.sum = float(sum);
    }
    int best = -1;
    for (int i = 0; i < cols; ++i) {  // the same keys as sample(): strictly greater, lowest id
      float key = row[i];
      if (!p.greedy) {
        const float u = philox_uniform_at(p.seed, p.step, uint32_t(first_id + i));
        key = row[i] / p.temperature - std::log(-std::log(u));
      }
      if (best < 0 || key > d.key) {
        d.key = key;
        best = i;
      }
    }
    if (best >= 0) {
      d.id = first_id + best;
      d.logit = row[best];
    }
    out[r] = d;
  }
}

void combine_draws(const DrawPartial* parts, int ranks, int n, int32_t* out_ids, float* out_logprob) {
  for (int r = 0; r < n; ++r) {
    const DrawPartial* best = &parts[r];
    float top = parts[r].max;
    for (int k = 1; k < ranks; ++k) {
      const DrawPartial& d = parts[size_t(k) * n + r];
      if (d.key > best->key) best = &d;  // ranks in vocabulary order: ties keep the lower id
      top = std::max(top, d.max);
    }
    double sum = 0.0;
    for (int k = 0; k < ranks; ++k) {
      const DrawPartial& d = parts[size_t(k) * n + r];
      if (d.sum > 0.0f) sum += double(d.sum) * std::exp(double(d.max - top));
    }
    out_ids[r] = best->id;
    out_logprob[r] = best->logit - (top + float(std::log(sum)));
  }
}

}  // namespace lmx::kernels::cpu
