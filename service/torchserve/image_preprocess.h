#pragma once
// TorchServe's image_classifier preprocessing, as torchvision computes it
// on a Pillow image:
//   Resize(256)      the shorter side to 256, the longer in proportion
//                    (truncated), with Pillow's antialiased bilinear filter
//                    and its 8-bit fixed-point rounding, horizontal pass
//                    first;
//   CenterCrop(224)  offsets rounded half to even, as Python's round();
//   ToTensor         CHW float32 in [0, 1];
//   Normalize        ImageNet's mean and std.
// Only the pixels the crop keeps are computed: each output pixel of
// Pillow's two passes depends on its own window of inputs alone, so the
// window of the resized image that survives the crop comes out exactly as
// the whole resize would give it, while the work and memory are those of
// 224 x 224 pixels (plus the horizontal pass's rows the crop's vertical
// taps read), whatever the input's shape. A 1 x 1,000,000 image, resized
// whole, would be 256 x 256,000,000.
// Pure functions; thread-safe.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "service/torchserve/image_decode.h"

namespace infergate {

// The window [left, left + width) x [top, top + height) of `image` resized
// to `resized_width` x `resized_height` with Pillow's BILINEAR resampling
// (Image.resize without a box or reducing gap), computed without the rest
// of the resized image. The window must lie inside the resized size.
RgbImage ResizedWindowLikePillow(const RgbImage& image, int64_t resized_width, int64_t resized_height, int64_t left,
                                 int64_t top, int width, int height);

// The size torchvision's Resize(`shorter`) gives an image of `width` x
// `height`: {new width, new height} (64 bits: the longer side of a very
// narrow image grows past what an int holds).
std::pair<int64_t, int64_t> ResizedSize(int64_t width, int64_t height, int64_t shorter);

// The bytes ImageClassifierInput holds, besides the decoded pixels and its
// [3, 224, 224] answer, for an image `height` rows tall, at most: the
// horizontal pass's rows (crop-wide), the window and the taps.
uint64_t ImageClassifierWorkBytes(int64_t height);

// The whole pipeline: a [3, 224, 224] float32 tensor. An image smaller
// than the crop after resizing cannot happen (its shorter side is 256).
at::Tensor ImageClassifierInput(const RgbImage& image);

}  // namespace infergate
