// ONNX frontend: import of supported ops and clear errors for bad files.
#include <gtest/gtest.h>

#include "graph/onnx/onnx_import.h"
