#pragma once
// Decodes a JPEG or PNG a client sent into 8-bit RGB pixels, the way
// Pillow's Image.open(...).convert("RGB") sees them, for TorchServe's
// image_classifier handler:
//   - JPEG with libjpeg-turbo (the library Pillow uses) at its defaults:
//     the accurate integer IDCT and smooth chroma upsampling; grayscale is
//     replicated into three channels, CMYK and YCCK converted as Pillow
//     does (Adobe's inverted CMYK);
//   - PNG with libpng: palette and low-bit images expanded, 16-bit samples
//     cut to their high byte (as Pillow does), alpha dropped (not
//     composited), no gamma correction (Pillow ignores gAMA).
// Every size is checked before pixels are allocated: at most
// `max_pixels`, and nothing a damaged file claims is trusted. EXIF
// orientation is not applied, as Pillow does not.
// Pure function; thread-safe.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace infergate {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // row-major, R G B per pixel
};

// The default most pixels an image may have: 8192 x 8192.
inline constexpr uint64_t kMaxImagePixels = uint64_t{8192} * 8192;

// Whether `bytes` start like a JPEG or a PNG file.
bool LooksLikeImage(absl::string_view bytes);

// Asked for the bytes the decoded pixels will take, once the image's size
// is known and before they are allocated; its error refuses the image.
using PixelReservation = std::function<absl::Status(uint64_t bytes)>;

// INVALID_ARGUMENT naming `field` for anything that is not a whole,
// readable JPEG or PNG, or that has more than `max_pixels` pixels; or
// `reserve`'s error.
absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes, absl::string_view field,
                                     uint64_t max_pixels = kMaxImagePixels, const PixelReservation& reserve = {});

}  // namespace infergate
