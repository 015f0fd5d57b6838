# Finds Halide: the PyPI wheel in the project's virtual environment unless Halide_ROOT says
# otherwise, and defines the CPU target list every kernel is compiled for.
if (NOT Halide_ROOT AND NOT DEFINED ENV{Halide_ROOT})
  set(KILN_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
      "Python of the environment that holds the halide wheel")
  execute_process(
    COMMAND "${KILN_PYTHON}" -c "import halide; print(halide.install_dir())"
    OUTPUT_VARIABLE _kiln_halide_dir OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _kiln_halide_rc ERROR_QUIET)
  if (NOT _kiln_halide_rc EQUAL 0)
    message(FATAL_ERROR
            "Cannot import halide with ${KILN_PYTHON}. Run scripts/setup.sh first, or pass "
            "-DHalide_ROOT=<prefix> (or -DKILN_PYTHON=<python with halide==21.0.0>).")
  endif ()
  set(Halide_ROOT "${_kiln_halide_dir}" CACHE PATH "Halide install prefix")
endif ()
find_package(Halide 21 REQUIRED)

# Explicit targets, best first: the multi-target wrapper picks the first one the CPU supports,
# once, at the first call. Never `host`: that bakes in the build machine's features.
set(KILN_CPU_TARGETS
    x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake
    x86-64-linux-sse41-avx-f16c-fma-avx2
    x86-64-linux
    CACHE STRING "Halide targets of the CPU kernels, best first")
# Host code of CUDA kernels is baseline x86-64; the device code is PTX for sm_86, which the
# driver JIT-compiles for newer GPUs (sm_90 on an H200).
set(KILN_CUDA_TARGET x86-64-linux-cuda-cuda_capability_86
    CACHE STRING "Halide target of the CUDA kernels")
