// The backends a program can run on: the CPU's, and where the build has the CUDA backend
// (HAVE_CUDA) its entry points (device.h), which cuda/programs.cpp defines. The one file of src/
// that names the choice; no file of src/ includes a header of cuda/.
#pragma once
#include "backend_cpu.h"
#ifdef HAVE_CUDA
#include "device.h"
#endif
