#include "service/torchserve/image_preprocess.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace infergate {
namespace {

constexpr int kResizeShorter = 256;
constexpr int kCrop = 224;
constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
// Pillow's fixed point for 8-bit resampling: two bits of headroom for
// filters with negative lobes.
constexpr int kPrecisionBits = 32 - 8 - 2;

// The input windows and fixed-point weights of output indices
// [first_out, first_out + count) of a resize from `in_size` to `out_size`.
struct Taps {
  std::vector<int64_t> first;    // first input index, per output index
  std::vector<int> count;        // how many inputs, per output index
  std::vector<int32_t> weights;  // `stride` per output index
  int stride = 0;
};

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs for the bilinear filter (support 1), then its
// rounding of the normalised weights to fixed point, for some outputs.
Taps BilinearTaps(int64_t in_size, int64_t out_size, int64_t first_out, int count) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  Taps t;
  t.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(count);
  t.count.resize(count);
  t.weights.assign(static_cast<size_t>(count) * t.stride, 0);
  std::vector<double> w(t.stride);
  for (int k = 0; k < count; ++k) {
    const int64_t o = first_out + k;
    const double center = (static_cast<double>(o) + 0.5) * scale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int64_t hi = static_cast<int64_t>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = static_cast<int>(hi - lo);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      w[i] = Triangle((static_cast<double>(i + lo) - center + 0.5) / filter_scale);
      sum += w[i];
    }
    for (int i = 0; i < n; ++i) {
      const double normalised = sum != 0.0 ? w[i] / sum : w[i];
      const double fixed = normalised * (1 << kPrecisionBits);
      t.weights[static_cast<size_t>(k) * t.stride + i] = static_cast<int32_t>(fixed < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    t.first[k] = lo;
    t.count[k] = n;
  }
  return t;
}

uint8_t Clip8(int64_t accumulated) {
  const int64_t v = accumulated >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Python's round() of x.5 values: to the even neighbour.
int64_t RoundHalfEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

std::pair<int64_t, int64_t> ResizedSize(int64_t width, int64_t height, int64_t shorter) {
  const int64_t short_side = std::min(width, height);
  const int64_t long_side = std::max(width, height);
  const int64_t new_long = shorter * long_side / short_side;
  return width <= height ? std::make_pair(shorter, new_long) : std::make_pair(new_long, shorter);
}

RgbImage ResizedWindowLikePillow(const RgbImage& in, int64_t resized_width, int64_t resized_height, int64_t left,
                                 int64_t top, int width, int height) {
  // Pillow resamples horizontally (when the width changes), then
  // vertically (when the height changes), each pass rounded to 8 bits. The
  // vertical taps of the window's rows say which input rows the horizontal
  // pass must produce: only those are made, and only the window's columns.
  const bool vertical = resized_height != in.height;
  Taps rows_taps;
  int64_t first_row = top;
  int64_t row_count = height;
  if (vertical) {
    rows_taps = BilinearTaps(in.height, resized_height, top, height);
    first_row = rows_taps.first.front();
    row_count = rows_taps.first.back() + rows_taps.count.back() - first_row;
  }
  // The horizontal pass's rows [first_row, first_row + row_count), the
  // window's columns only.
  RgbImage wide;
  wide.width = width;
  wide.height = static_cast<int>(row_count);
  wide.pixels.assign(static_cast<size_t>(width) * row_count * 3, 0);
  if (resized_width != in.width) {
    const Taps taps = BilinearTaps(in.width, resized_width, left, width);
    for (int64_t y = 0; y < row_count; ++y) {
      const uint8_t* row = in.pixels.data() + static_cast<size_t>(first_row + y) * in.width * 3;
      uint8_t* out = wide.pixels.data() + static_cast<size_t>(y) * width * 3;
      for (int x = 0; x < width; ++x) {
        const int32_t* k = taps.weights.data() + static_cast<size_t>(x) * taps.stride;
        int64_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
        for (int i = 0; i < taps.count[x]; ++i) {
          const uint8_t* p = row + static_cast<size_t>(taps.first[x] + i) * 3;
          for (int c = 0; c < 3; ++c) acc[c] += static_cast<int64_t>(p[c]) * k[i];
        }
        for (int c = 0; c < 3; ++c) out[3 * x + c] = Clip8(acc[c]);
      }
    }
  } else {
    for (int64_t y = 0; y < row_count; ++y) {
      const uint8_t* row = in.pixels.data() + (static_cast<size_t>(first_row + y) * in.width + left) * 3;
      std::copy(row, row + static_cast<size_t>(width) * 3, wide.pixels.data() + static_cast<size_t>(y) * width * 3);
    }
  }
  if (!vertical) return wide;
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(width) * height * 3, 0);
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  std::vector<int64_t> acc(row_bytes);
  for (int y = 0; y < height; ++y) {
    const int32_t* k = rows_taps.weights.data() + static_cast<size_t>(y) * rows_taps.stride;
    std::fill(acc.begin(), acc.end(), int64_t{1} << (kPrecisionBits - 1));
    for (int i = 0; i < rows_taps.count[y]; ++i) {
      const uint8_t* row = wide.pixels.data() + static_cast<size_t>(rows_taps.first[y] - first_row + i) * row_bytes;
      for (size_t b = 0; b < row_bytes; ++b) acc[b] += static_cast<int64_t>(row[b]) * k[i];
    }
    uint8_t* dst = out.pixels.data() + static_cast<size_t>(y) * row_bytes;
    for (size_t b = 0; b < row_bytes; ++b) dst[b] = Clip8(acc[b]);
  }
  return out;
}

uint64_t ImageClassifierWorkBytes(int64_t height) {
  // The horizontal pass's rows (at most every input row, crop-wide), the
  // window, the vertical accumulator and the taps (a few KiB to 60 KiB).
  return static_cast<uint64_t>(height) * kCrop * 3 + uint64_t{kCrop} * kCrop * 3 + uint64_t{kCrop} * 3 * 8 +
         (uint64_t{256} << 10);
}

at::Tensor ImageClassifierInput(const RgbImage& image) {
  const auto [width, height] = ResizedSize(image.width, image.height, kResizeShorter);
  const int64_t top = RoundHalfEven(static_cast<double>(height - kCrop) / 2.0);
  const int64_t left = RoundHalfEven(static_cast<double>(width - kCrop) / 2.0);
  const RgbImage window = ResizedWindowLikePillow(image, width, height, left, top, kCrop, kCrop);
  at::Tensor out = at::empty({3, kCrop, kCrop}, at::kFloat);
  float* dst = out.data_ptr<float>();
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < kCrop; ++y) {
      const uint8_t* row = window.pixels.data() + static_cast<size_t>(y) * kCrop * 3;
      float* o = dst + (static_cast<size_t>(c) * kCrop + y) * kCrop;
      for (int x = 0; x < kCrop; ++x) o[x] = (static_cast<float>(row[3 * x + c]) / 255.0f - kMean[c]) / kStd[c];
    }
  }
  return out;
}

}  // namespace infergate
