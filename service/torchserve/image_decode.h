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
// `max_pixels`, within `max_aspect_ratio`, reserved by the caller, and
// nothing a damaged file claims is trusted. EXIF
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

// What a decode may take, and who may stop it.
struct ImageDecodeOptions {
  uint64_t max_pixels = kMaxImagePixels;
  // The longer side at most this many times the shorter (0: any ratio).
  uint64_t max_aspect_ratio = 0;
  // Asked with the image's size once it is known and before its pixels are
  // allocated, with what the decoder itself will hold besides them
  // (`decoder_bytes`: a progressive JPEG's coefficients, about 2 bytes per
  // pixel and component); its error refuses the image. May be empty.
  std::function<absl::Status(uint64_t width, uint64_t height, uint64_t decoder_bytes)> reserve;
  // Polled between rows while decoding; its error abandons the image (a
  // deadline that passed, a client that left). May be empty.
  std::function<absl::Status()> keep_going;
};

// INVALID_ARGUMENT naming `field` for anything that is not a whole,
// readable JPEG or PNG, or whose size breaks `options`' bounds; or the
// error of `options.reserve` or `options.keep_going`.
absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes, absl::string_view field,
                                     const ImageDecodeOptions& options = {});

}  // namespace infergate
