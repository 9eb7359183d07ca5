#include "tests/common/build_paths.h"

namespace infergate::testing {

const char* InfergateBinary() { return INFERGATE_BIN; }
const char* MakeDemoModelsBinary() { return MAKE_DEMO_MODELS_BIN; }
const char* InfergateCliBinary() { return INFERGATE_CLI_BIN; }
const char* FakeNvmlLibrary() { return FAKE_NVML_LIBRARY; }
const char* FlagsDocument() { return INFERGATE_FLAGS_DOC; }
const char* TestPython3() { return TEST_PYTHON3; }
const char* MakePt2ModelsScript() { return MAKE_PT2_MODELS; }

}  // namespace infergate::testing
