#include "service/image_preprocess.h"

#include <ATen/ATen.h>

#include <cmath>

namespace infergate {
namespace {

constexpr int kResizeShorter = 256;
constexpr int kCrop = 224;
constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
// Pillow's fixed point for 8-bit resampling: two bits of headroom for
// filters with negative lobes.
constexpr int kPrecisionBits = 32 - 8 - 2;

// One output pixel's window of input pixels and their fixed-point weights.
struct Taps {
  std::vector<int> first;   // first input index, per output index
  std::vector<int> count;   // how many inputs, per output index
  std::vector<int32_t> weights;  // `stride` per output index
  int stride = 0;
};

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs for the bilinear filter (support 1), then its
// rounding of the normalised weights to fixed point.
Taps BilinearTaps(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  Taps t;
  t.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(static_cast<size_t>(out_size) * t.stride, 0);
  std::vector<double> w(t.stride);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      w[i] = Triangle((i + lo - center + 0.5) / filter_scale);
      sum += w[i];
    }
    for (int i = 0; i < n; ++i) {
      const double normalised = sum != 0.0 ? w[i] / sum : w[i];
      const double fixed = normalised * (1 << kPrecisionBits);
      t.weights[static_cast<size_t>(o) * t.stride + i] = static_cast<int32_t>(fixed < 0 ? fixed - 0.5 : fixed + 0.5);
    }
    t.first[o] = lo;
    t.count[o] = n;
  }
  return t;
}

uint8_t Clip8(int64_t accumulated) {
  const int64_t v = accumulated >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Python's round() of x.5 values: to the even neighbour.
int RoundHalfEven(double x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

std::pair<int, int> ResizedSize(int width, int height, int shorter) {
  const int short_side = std::min(width, height);
  const int long_side = std::max(width, height);
  const int new_long = static_cast<int>(static_cast<int64_t>(shorter) * long_side / short_side);
  return width <= height ? std::make_pair(shorter, new_long) : std::make_pair(new_long, shorter);
}

RgbImage ResizeBilinearLikePillow(const RgbImage& in, int width, int height) {
  // Horizontal pass (when the width changes), then vertical, each rounded
  // to 8 bits, as Pillow does.
  RgbImage wide = in;
  if (width != in.width) {
    const Taps taps = BilinearTaps(in.width, width);
    wide.width = width;
    wide.pixels.assign(static_cast<size_t>(width) * in.height * 3, 0);
    for (int y = 0; y < in.height; ++y) {
      const uint8_t* row = in.pixels.data() + static_cast<size_t>(y) * in.width * 3;
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
  }
  if (height == in.height) return wide;
  const Taps taps = BilinearTaps(in.height, height);
  RgbImage out;
  out.width = wide.width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(out.width) * height * 3, 0);
  const size_t row_bytes = static_cast<size_t>(out.width) * 3;
  std::vector<int64_t> acc(row_bytes);
  for (int y = 0; y < height; ++y) {
    const int32_t* k = taps.weights.data() + static_cast<size_t>(y) * taps.stride;
    std::fill(acc.begin(), acc.end(), int64_t{1} << (kPrecisionBits - 1));
    for (int i = 0; i < taps.count[y]; ++i) {
      const uint8_t* row = wide.pixels.data() + static_cast<size_t>(taps.first[y] + i) * row_bytes;
      for (size_t b = 0; b < row_bytes; ++b) acc[b] += static_cast<int64_t>(row[b]) * k[i];
    }
    uint8_t* dst = out.pixels.data() + static_cast<size_t>(y) * row_bytes;
    for (size_t b = 0; b < row_bytes; ++b) dst[b] = Clip8(acc[b]);
  }
  return out;
}

at::Tensor ImageClassifierInput(const RgbImage& image) {
  const auto [width, height] = ResizedSize(image.width, image.height, kResizeShorter);
  const RgbImage resized = (width == image.width && height == image.height)
                               ? image
                               : ResizeBilinearLikePillow(image, width, height);
  const int top = RoundHalfEven((resized.height - kCrop) / 2.0);
  const int left = RoundHalfEven((resized.width - kCrop) / 2.0);
  at::Tensor out = at::empty({3, kCrop, kCrop}, at::kFloat);
  float* dst = out.data_ptr<float>();
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < kCrop; ++y) {
      const uint8_t* row = resized.pixels.data() + (static_cast<size_t>(top + y) * resized.width + left) * 3;
      float* o = dst + (static_cast<size_t>(c) * kCrop + y) * kCrop;
      for (int x = 0; x < kCrop; ++x) o[x] = (static_cast<float>(row[3 * x + c]) / 255.0f - kMean[c]) / kStd[c];
    }
  }
  return out;
}

}  // namespace infergate
