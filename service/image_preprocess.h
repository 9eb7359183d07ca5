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
// Pure functions; thread-safe.

#include <ATen/core/Tensor.h>

#include "service/image_decode.h"

namespace infergate {

// `image` resized to `width` x `height` with Pillow's BILINEAR resampling
// (Image.resize without a box or reducing gap).
RgbImage ResizeBilinearLikePillow(const RgbImage& image, int width, int height);

// The size torchvision's Resize(`shorter`) gives an image of `width` x
// `height`: {new width, new height}.
std::pair<int, int> ResizedSize(int width, int height, int shorter);

// The whole pipeline: a [3, 224, 224] float32 tensor. An image smaller
// than the crop after resizing cannot happen (its shorter side is 256).
at::Tensor ImageClassifierInput(const RgbImage& image);

}  // namespace infergate
