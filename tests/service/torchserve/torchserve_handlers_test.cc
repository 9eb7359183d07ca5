// The pieces of TorchServe's handlers: multipart forms, JSON instances,
// image decoding and preprocessing, top-5 answers.
#include "service/torchserve/torchserve_handlers.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>

#include "scheduler/repository/class_labels.h"
#include "service/http/multipart_form.h"
#include "service/torchserve/image_decode.h"
#include "service/torchserve/image_preprocess.h"
#include "service/torchserve/instance_codec.h"

namespace infergate {
namespace {

void PutBe(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void Chunk(std::string& png, const char* type, const std::string& data) {
  PutBe(png, static_cast<uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  png += body;
  PutBe(png, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), body.size())));
}

// A PNG of `width` x `height`, 8-bit RGB, rows of `pixels` (filter 0).
std::string Png(uint32_t width, uint32_t height, const std::string& pixels) {
  std::string png = "\x89PNG\r\n\x1A\n";
  std::string header;
  PutBe(header, width);
  PutBe(header, height);
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, no filter, no interlace
  Chunk(png, "IHDR", header);
  std::string raw;
  for (uint32_t y = 0; y < height && !pixels.empty(); ++y) raw += '\0' + pixels.substr(y * width * 3, width * 3);
  uLongf size = compressBound(raw.size());
  std::string packed(size, '\0');
  compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(raw.data()), raw.size());
  packed.resize(size);
  Chunk(png, "IDAT", packed);
  Chunk(png, "IEND", "");
  return png;
}

TEST(MultipartForm, TakesTheDataFieldElseTheFirst) {
  const std::string type = "multipart/form-data; boundary=\"XyZ\"";
  const std::string body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nfirst\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"data\"; filename=\"a.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
      "bytes\r\nwith lines\r\n--XyZ--\r\n";
  EXPECT_TRUE(IsMultipartForm(type));
  EXPECT_EQ(*MultipartFormField(type, body), "bytes\r\nwith lines");
  const std::string first = "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nonly\r\n--b--";
  EXPECT_EQ(*MultipartFormField("multipart/form-data; boundary=b", first), "only");
}

TEST(MultipartForm, RefusesMalformedBodies) {
  EXPECT_EQ(MultipartFormField("multipart/form-data", "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MultipartFormField("multipart/form-data; boundary=b", "no boundary here").ok());
  EXPECT_FALSE(MultipartFormField("multipart/form-data; boundary=b", "--b\r\nno headers end").ok());
  EXPECT_FALSE(MultipartFormField("multipart/form-data; boundary=b", "--b\r\nA: b\r\n\r\nnever closed").ok());
  EXPECT_FALSE(MultipartFormField("multipart/form-data; boundary=b", "--b--").ok());
}

TEST(InstanceCodec, NestedListsBecomeTensorsOfTheModelsDtype) {
  CodecLimits limits;
  absl::StatusOr<at::Tensor> t =
      InstanceTensor(nlohmann::json::parse("[[1, 2.5], [3, -4]]"), DType::kFloat32, "body", limits);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(at::equal(*t, at::tensor({1.0f, 2.5f, 3.0f, -4.0f}).reshape({2, 2})));
  absl::StatusOr<at::Tensor> ids =
      InstanceTensor(nlohmann::json::parse("[9007199254740993]"), DType::kInt64, "b", limits);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->item<int64_t>(), 9007199254740993);  // exact beyond a double's 53 bits
  EXPECT_TRUE(InstanceTensor(nlohmann::json::parse("[true, 0]"), DType::kBool, "b", limits).ok());
}

TEST(InstanceCodec, RefusalsNameWhere) {
  CodecLimits limits;
  auto refusal = [&](const char* json, DType dtype) {
    return std::string(InstanceTensor(nlohmann::json::parse(json), dtype, "instances[3]", limits).status().message());
  };
  EXPECT_NE(refusal("[[1, 2], [3]]", DType::kFloat32).find("instances[3][1]"), std::string::npos);
  EXPECT_NE(refusal("[1, \"x\"]", DType::kFloat32).find("instances[3][1]: expected a number"), std::string::npos);
  // The place is the one refused, after whole lists before it.
  EXPECT_NE(refusal("[[1, 2], [3, 4], [5, null]]", DType::kFloat32).find("instances[3][2][1]: expected a number"),
            std::string::npos);
  EXPECT_NE(refusal("[[[1], [2]], [[3], [4, 5]]]", DType::kFloat32).find("instances[3][1][1]: expected a list of 1"),
            std::string::npos);
  EXPECT_NE(refusal("[1.5]", DType::kInt64).find("not a whole number"), std::string::npos);
  EXPECT_NE(refusal("[300]", DType::kUInt8).find("does not fit UINT8"), std::string::npos);
  EXPECT_NE(refusal("[2]", DType::kBool).find("true or false"), std::string::npos);
  EXPECT_NE(refusal("[[[[[[[[[1]]]]]]]]]", DType::kFloat32).find("deeper than 8"), std::string::npos);
  std::vector<at::Tensor> rows = {at::zeros({2}), at::zeros({3})};
  EXPECT_NE(StackInstances(rows, 0, 2, "instances").status().message().find("instances[1]"), std::string::npos);
}

TEST(ImageDecode, ReadsAPngAsRgb) {
  const std::string pixels = "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c";
  absl::StatusOr<RgbImage> image = DecodeImage(Png(2, 2, pixels), "body");
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 2);
  EXPECT_EQ(image->height, 2);
  EXPECT_EQ(std::string(image->pixels.begin(), image->pixels.end()), pixels);
}

TEST(ImageDecode, RefusesDamagedAndHugeImagesWithoutReadingPastThem) {
  const std::string png = Png(4, 4, std::string(48, '\x7f'));
  for (size_t cut : {9u, 20u, 33u, 45u, 50u}) {  // up to inside the image data
    absl::StatusOr<RgbImage> image = DecodeImage(png.substr(0, cut), "body");
    EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << cut;
  }
  // A header claiming a billion pixels is refused before anything is allocated.
  absl::StatusOr<RgbImage> huge = DecodeImage(Png(40000, 40000, ""), "body");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("40000x40000"), std::string::npos) << huge.status();
  // The bound is the README's 8192 x 8192 pixels: one more row is refused for
  // its size; at the bound the size passes (and this header's missing image
  // data is what is refused).
  absl::Status over = DecodeImage(Png(8192, 8193, ""), "body").status();
  EXPECT_NE(over.message().find("8192x8193"), std::string::npos) << over;
  absl::Status at_bound = DecodeImage(Png(8192, 8192, ""), "body").status();
  EXPECT_EQ(at_bound.message().find("8192x8192"), std::string::npos) << at_bound;
  EXPECT_FALSE(at_bound.ok());
  absl::StatusOr<RgbImage> jpeg = DecodeImage(std::string("\xFF\xD8\xFF\xE0garbage", 11), "input");
  EXPECT_EQ(jpeg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(jpeg.status().message().find("input: not a readable JPEG"), std::string::npos) << jpeg.status();
  EXPECT_NE(DecodeImage("GIF89a", "body").status().message().find("not a JPEG or PNG"), std::string::npos);
}

TEST(ImagePreprocess, SizesAndCropFollowTorchvision) {
  EXPECT_EQ(ResizedSize(333, 250, 256), std::make_pair(int64_t{340}, int64_t{256}));  // int(256 * 333 / 250) = 340
  EXPECT_EQ(ResizedSize(281, 500, 256), std::make_pair(int64_t{256}, int64_t{455}));
  EXPECT_EQ(ResizedSize(256, 256, 256), std::make_pair(int64_t{256}, int64_t{256}));
  // Past what an int holds: a 1 x 1,000,000 strip's longer side.
  EXPECT_EQ(ResizedSize(1, 1000000, 256), std::make_pair(int64_t{256}, int64_t{256000000}));
  // A flat image stays flat through the resampling, and normalises to
  // (v / 255 - mean) / std per channel.
  RgbImage flat{300, 200, std::vector<uint8_t>(300 * 200 * 3, 128)};
  const RgbImage resized = ResizedWindowLikePillow(flat, 384, 256, 0, 0, 384, 256);
  EXPECT_EQ(resized.width, 384);
  EXPECT_EQ(resized.height, 256);
  for (uint8_t v : resized.pixels) ASSERT_EQ(v, 128);
  const at::Tensor x = ImageClassifierInput(flat);
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_NEAR(x[0][0][0].item<float>(), (128 / 255.0f - 0.485f) / 0.229f, 1e-6);
  EXPECT_NEAR(x[2][223][223].item<float>(), (128 / 255.0f - 0.406f) / 0.225f, 1e-6);
}

// A noisy image of `width` x `height` (the same every run).
RgbImage Noise(int width, int height, uint32_t seed) {
  RgbImage image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (uint8_t& v : image.pixels) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(seed >> 24);
  }
  return image;
}

// The window the crop keeps comes out exactly as the whole resize gives it
// there, for images wider, taller, smaller and larger than the resize, so
// computing only the window changes no answer.
TEST(ImagePreprocess, TheWindowIsExactlyTheWholeResizesCrop) {
  for (auto [w, h] : std::vector<std::pair<int, int>>{{300, 200},
                                                      {200, 300},
                                                      {1000, 260},
                                                      {256, 256},
                                                      {250, 333},
                                                      {7, 700},
                                                      {640, 9},
                                                      {224, 224},
                                                      {100, 80},
                                                      {4000, 3000}}) {
    const RgbImage image = Noise(w, h, static_cast<uint32_t>(w * 7919 + h));
    const auto [rw, rh] = ResizedSize(w, h, 256);
    const RgbImage whole = ResizedWindowLikePillow(image, rw, rh, 0, 0, static_cast<int>(rw), static_cast<int>(rh));
    const int64_t top = static_cast<int64_t>(std::nearbyint((rh - 224) / 2.0));
    const int64_t left = static_cast<int64_t>(std::nearbyint((rw - 224) / 2.0));
    const RgbImage window = ResizedWindowLikePillow(image, rw, rh, left, top, 224, 224);
    ASSERT_EQ(window.pixels.size(), size_t{224} * 224 * 3);
    for (int y = 0; y < 224; ++y) {
      const uint8_t* want = whole.pixels.data() + (static_cast<size_t>(top + y) * rw + left) * 3;
      ASSERT_EQ(std::memcmp(want, window.pixels.data() + static_cast<size_t>(y) * 224 * 3, 224 * 3), 0)
          << w << "x" << h << " row " << y;
    }
  }
}

// A 1 x 1,000,000 strip, resized whole, would be 256 x 256,000,000 (196 GB).
// Its window needs a few rows; the work stays that of the crop.
TEST(ImagePreprocess, AStripCostsTheCropNotTheResize) {
  const RgbImage strip = Noise(1, 1000000, 1);
  const at::Tensor x = ImageClassifierInput(strip);
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_TRUE(at::isfinite(x).all().item<bool>());
  const RgbImage wide = Noise(1000000, 1, 2);
  EXPECT_EQ(ImageClassifierInput(wide).sizes().vec(), (std::vector<int64_t>{3, 224, 224}));
  // What the work holds besides the pixels: the horizontal pass's rows.
  EXPECT_LE(ImageClassifierWorkBytes(8192), uint64_t{8} << 20);
}

// The decoder's bounds: the aspect ratio, and the caller's reservation
// asked with the size before any pixel is allocated.
TEST(ImageDecode, BoundsTheShapeAndAsksBeforeAllocating) {
  ImageDecodeOptions options;
  options.max_aspect_ratio = 100;
  uint64_t asked_w = 0, asked_h = 0;
  options.reserve = [&](uint64_t w, uint64_t h, uint64_t) {
    asked_w = w;
    asked_h = h;
    return absl::OkStatus();
  };
  absl::StatusOr<RgbImage> strip = DecodeImage(Png(1, 1000000, ""), "instances[3]", options);
  EXPECT_EQ(strip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(strip.status().message().find("instances[3]: the image is 1x1000000"), std::string::npos) << strip.status();
  EXPECT_EQ(asked_w, 0u) << "refused before the reservation";
  ASSERT_TRUE(DecodeImage(Png(2, 2, std::string(12, '\x10')), "body", options).ok());
  EXPECT_EQ(asked_w, 2u);
  EXPECT_EQ(asked_h, 2u);
  options.reserve = [](uint64_t, uint64_t, uint64_t) { return absl::ResourceExhaustedError("no room"); };
  EXPECT_EQ(DecodeImage(Png(2, 2, std::string(12, '\x10')), "body", options).status().code(),
            absl::StatusCode::kResourceExhausted);
  // keep_going stops a decode between rows with its own status.
  options.reserve = {};
  options.keep_going = [] { return absl::DeadlineExceededError("body: the deadline passed"); };
  EXPECT_EQ(DecodeImage(Png(2, 2, std::string(12, '\x10')), "body", options).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TorchServeHandlers, TopFiveMostLikelyFirstByLabel) {
  InferenceResult result;
  result.outputs.push_back({"out", at::tensor({0.0f, 3.0f, 1.0f, 2.0f, -1.0f, 5.0f, 0.5f}).reshape({1, 7})});
  auto labels = std::make_shared<ClassLabels>();
  labels->model_wide = {"a", "b", "c", "d", "e", "f"};  // class 6 has no label: its index names it
  result.labels = labels;
  const std::string out = HandlerOutput(MarHandler::kImageClassifier, result, 0);
  nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(out);
  std::vector<std::string> order;
  for (const auto& [k, v] : parsed.items()) order.push_back(k);
  EXPECT_EQ(order, (std::vector<std::string>{"f", "b", "d", "c", "6"})) << out;
  EXPECT_NEAR(parsed["f"].get<double>(), at::softmax(result.outputs[0].tensor[0], 0)[5].item<float>(), 1e-7);
  EXPECT_EQ(HandlerOutput(MarHandler::kBase, result, 0), "[0.0,3.0,1.0,2.0,-1.0,5.0,0.5]");
}

}  // namespace
}  // namespace infergate
