// The backends a program can run on: the CPU's, and the CUDA backend's declarations where the
// build has it (HAVE_CUDA). The one file of src/ that includes a header of cuda/.
#pragma once
#include "backend_cpu.h"
#ifdef HAVE_CUDA
#include "backend_cuda.h"
#endif
