// The engine's CUDA backend (engine/cuda), compiled as C++ against the CPU
// simulator (cudasim.h) so the tests can run every kernel without a GPU.
#include "device.cu"
#include "forward.cu"
#include "kernels.cu"
#include "sample.cu"
