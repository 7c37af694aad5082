/* mhla_bench.c — the mhla-bench program (client/bench.c). */
#include "client.h"

int main(int argc, char **argv) { return cl_bench_main(argc, argv); }
