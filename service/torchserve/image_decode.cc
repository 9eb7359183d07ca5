#include "service/torchserve/image_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace infergate {
namespace {

constexpr char kJpegMagic[] = "\xFF\xD8\xFF";
constexpr char kPngMagic[] = "\x89PNG\r\n\x1A\n";

absl::Status Unreadable(absl::string_view field, absl::string_view kind, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": not a readable ", kind, " image (", why, ")"));
}

absl::Status CheckSize(uint64_t width, uint64_t height, uint64_t decoder_bytes, absl::string_view field,
                       const ImageDecodeOptions& options) {
  if (width == 0 || height == 0) return absl::InvalidArgumentError(absl::StrCat(field, ": the image has no pixels"));
  if (width * height > options.max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": the image is ", width, "x", height, ", more than the ",
                                                   options.max_pixels, " pixels allowed"));
  }
  const uint64_t longer = std::max(width, height);
  const uint64_t shorter = std::min(width, height);
  if (options.max_aspect_ratio > 0 && longer > shorter * options.max_aspect_ratio) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": the image is ", width, "x", height,
                                                   ", one side more than ", options.max_aspect_ratio,
                                                   " times the other"));
  }
  return options.reserve ? options.reserve(width, height, decoder_bytes) : absl::OkStatus();
}

// Pillow's CMYK to RGB: each channel is (255 - k) less its share of c, m, y.
uint8_t CmykChannel(uint8_t ink, uint8_t k) {
  const int not_k = 255 - k;
  int product = ink * not_k + 128;
  product = ((product >> 8) + product) >> 8;  // ink * not_k / 255, rounded
  return static_cast<uint8_t>(not_k - product);
}

// ---- JPEG (libjpeg-turbo). Errors longjmp back to DecodeJpeg; everything
// that lives across the jump is on the heap, reached through a pointer that
// does not change after setjmp.

struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errors{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool truncated = false;
  absl::Status stopped;  // keep_going's error, when it ended the decode
  RgbImage image;
  std::vector<uint8_t> row;
};

[[noreturn]] void JpegFail(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<JpegDecoder*>(cinfo->client_data);
  (*cinfo->err->format_message)(cinfo, d->message);
  std::longjmp(d->jump, 1);
}

// Warnings (level -1) are ignored, as Pillow ignores them, except a file
// that ends early: Pillow refuses a truncated image.
void JpegMessage(j_common_ptr cinfo, int level) {
  auto* d = reinterpret_cast<JpegDecoder*>(cinfo->client_data);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    d->truncated = true;
    JpegFail(cinfo);
  }
}

absl::StatusOr<RgbImage> DecodeJpeg(absl::string_view bytes, absl::string_view field,
                                    const ImageDecodeOptions& options) {
  auto d = std::make_unique<JpegDecoder>();
  d->cinfo.err = jpeg_std_error(&d->errors);
  d->errors.error_exit = JpegFail;
  d->errors.emit_message = JpegMessage;
  d->cinfo.client_data = d.get();
  if (setjmp(d->jump) != 0) {
    jpeg_destroy_decompress(&d->cinfo);
    if (!d->stopped.ok()) return d->stopped;
    return Unreadable(field, "JPEG", d->truncated ? "the file is truncated" : d->message);
  }
  jpeg_create_decompress(&d->cinfo);
  jpeg_mem_src(&d->cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&d->cinfo, TRUE);
  // A multi-scan (progressive) JPEG keeps every coefficient until its last
  // scan: 64 shorts per 8x8 block and component. libjpeg may hold that and
  // a little working memory, no more (it fails rather than exceed it).
  const uint64_t w = d->cinfo.image_width;
  const uint64_t h = d->cinfo.image_height;
  const uint64_t coefficients =
      jpeg_has_multiple_scans(&d->cinfo) ? ((w + 15) / 8) * ((h + 15) / 8) * 64 * 2 * d->cinfo.num_components : 0;
  if (absl::Status s = CheckSize(w, h, coefficients, field, options); !s.ok()) {
    jpeg_destroy_decompress(&d->cinfo);
    return s;
  }
  d->cinfo.mem->max_memory_to_use = static_cast<long>(coefficients + (uint64_t{32} << 20));
  const J_COLOR_SPACE in = d->cinfo.jpeg_color_space;
  const bool cmyk = in == JCS_CMYK || in == JCS_YCCK;
  d->cinfo.out_color_space = in == JCS_GRAYSCALE ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&d->cinfo);
  const int width = static_cast<int>(d->cinfo.output_width);
  const int height = static_cast<int>(d->cinfo.output_height);
  const int components = d->cinfo.output_components;
  // Adobe's CMYK JPEGs store inverted ink (Pillow's "CMYK;I").
  const bool inverted = cmyk && d->cinfo.saw_Adobe_marker;
  d->image.width = width;
  d->image.height = height;
  d->image.pixels.resize(static_cast<size_t>(width) * height * 3);
  d->row.resize(static_cast<size_t>(width) * components);
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    uint8_t* out = d->image.pixels.data() + static_cast<size_t>(d->cinfo.output_scanline) * width * 3;
    if (options.keep_going) {
      if (absl::Status s = options.keep_going(); !s.ok()) {
        d->stopped = std::move(s);
        jpeg_destroy_decompress(&d->cinfo);
        return d->stopped;
      }
    }
    JSAMPROW row = d->row.data();
    jpeg_read_scanlines(&d->cinfo, &row, 1);
    for (int x = 0; x < width; ++x) {
      const uint8_t* p = d->row.data() + static_cast<size_t>(x) * components;
      if (components == 1) {
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = p[0];
      } else if (components == 4) {
        uint8_t ink[4];
        for (int c = 0; c < 4; ++c) ink[c] = inverted ? static_cast<uint8_t>(255 - p[c]) : p[c];
        for (int c = 0; c < 3; ++c) out[3 * x + c] = CmykChannel(ink[c], ink[3]);
      } else {
        std::memcpy(out + 3 * x, p, 3);
      }
    }
  }
  jpeg_finish_decompress(&d->cinfo);
  jpeg_destroy_decompress(&d->cinfo);
  return std::move(d->image);
}

// ---- PNG (libpng), with the same care for its longjmp.

struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  absl::string_view bytes;
  size_t at = 0;
  char message[256] = {};
  const ImageDecodeOptions* options = nullptr;
  absl::Status stopped;  // keep_going's error, when it ended the decode
  RgbImage image;
  std::vector<png_bytep> rows;
};

[[noreturn]] void PngFail(png_structp png, png_const_charp message) {
  auto* d = static_cast<PngDecoder*>(png_get_error_ptr(png));
  std::snprintf(d->message, sizeof(d->message), "%s", message);
  png_longjmp(png, 1);
}

void PngWarn(png_structp, png_const_charp) {}

// Called by libpng after each row (of each interlace pass).
void PngRowDone(png_structp png, png_uint_32, int) {
  auto* d = static_cast<PngDecoder*>(png_get_io_ptr(png));
  if (absl::Status s = d->options->keep_going(); !s.ok()) {
    d->stopped = std::move(s);
    png_error(png, "stopped");
  }
}

void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* d = static_cast<PngDecoder*>(png_get_io_ptr(png));
  if (n > d->bytes.size() - d->at) png_error(png, "the file is truncated");
  std::memcpy(out, d->bytes.data() + d->at, n);
  d->at += n;
}

absl::StatusOr<RgbImage> DecodePng(absl::string_view bytes, absl::string_view field,
                                   const ImageDecodeOptions& options) {
  auto d = std::make_unique<PngDecoder>();
  d->bytes = bytes;
  d->options = &options;
  d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d.get(), PngFail, PngWarn);
  if (d->png == nullptr) return absl::ResourceExhaustedError("libpng could not start");
  d->info = png_create_info_struct(d->png);
  if (d->info == nullptr) {
    png_destroy_read_struct(&d->png, nullptr, nullptr);
    return absl::ResourceExhaustedError("libpng could not start");
  }
  if (setjmp(png_jmpbuf(d->png)) != 0) {
    png_destroy_read_struct(&d->png, &d->info, nullptr);
    if (!d->stopped.ok()) return d->stopped;
    return Unreadable(field, "PNG", d->message);
  }
  png_set_read_fn(d->png, d.get(), PngRead);
  // Ancillary chunks (text, ICC profiles) may not make the server allocate much.
  png_set_chunk_malloc_max(d->png, 8 << 20);
  png_read_info(d->png, d->info);
  const png_uint_32 width = png_get_image_width(d->png, d->info);
  const png_uint_32 height = png_get_image_height(d->png, d->info);
  if (absl::Status s = CheckSize(width, height, 0, field, options); !s.ok()) {
    png_destroy_read_struct(&d->png, &d->info, nullptr);
    return s;
  }
  png_set_expand(d->png);       // palette to RGB, gray below 8 bits to 8, tRNS to alpha
  png_set_strip_16(d->png);     // the high byte, as Pillow keeps
  png_set_strip_alpha(d->png);  // dropped, not composited, as convert("RGB")
  png_set_gray_to_rgb(d->png);
  png_set_interlace_handling(d->png);
  if (options.keep_going) png_set_read_status_fn(d->png, PngRowDone);
  png_read_update_info(d->png, d->info);
  if (png_get_rowbytes(d->png, d->info) != static_cast<size_t>(width) * 3) png_error(d->png, "unexpected row size");
  d->image.width = static_cast<int>(width);
  d->image.height = static_cast<int>(height);
  d->image.pixels.resize(static_cast<size_t>(width) * height * 3);
  d->rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) d->rows[y] = d->image.pixels.data() + static_cast<size_t>(y) * width * 3;
  png_read_image(d->png, d->rows.data());
  png_destroy_read_struct(&d->png, &d->info, nullptr);
  return std::move(d->image);
}

}  // namespace

bool LooksLikeImage(absl::string_view bytes) {
  return absl::StartsWith(bytes, absl::string_view(kJpegMagic, 3)) ||
         absl::StartsWith(bytes, absl::string_view(kPngMagic, 8));
}

absl::StatusOr<RgbImage> DecodeImage(absl::string_view bytes, absl::string_view field,
                                     const ImageDecodeOptions& options) {
  if (absl::StartsWith(bytes, absl::string_view(kJpegMagic, 3))) return DecodeJpeg(bytes, field, options);
  if (absl::StartsWith(bytes, absl::string_view(kPngMagic, 8))) return DecodePng(bytes, field, options);
  return absl::InvalidArgumentError(absl::StrCat(field, ": not a JPEG or PNG image"));
}

}  // namespace infergate
