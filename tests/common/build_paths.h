#pragma once
// Where this build put the programs and files the tests run (the server,
// the demo-model maker, the CLI, the stand-in NVML library) and the source
// files and interpreter they read or start.
//
// Compiled into one small file (build_paths.cc, the only one given the
// paths as definitions) rather than passed to every translation unit of a
// test: a definition holding an absolute path differs in every clone, and
// ccache cannot reuse an object compiled with one, so a fresh clone
// recompiled every file of each test that had one (about three minutes of a
// warm CI run). Functions without state: safe from any thread.

namespace infergate::testing {

const char* InfergateBinary();
const char* MakeDemoModelsBinary();
const char* InfergateCliBinary();
// The fake NVML shared library (tests/devices/fake_nvml.cc).
const char* FakeNvmlLibrary();
// docs/configuration.md, whose flag table server_options_test checks.
const char* FlagsDocument();
// The tests' Python (Debian's, or the PyPI build's virtual environment's).
const char* TestPython3();
// tools/make_pt2_models.py.
const char* MakePt2ModelsScript();

}  // namespace infergate::testing
