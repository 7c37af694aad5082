/* bench_main.c — the mhla-bench executable (see bench.c). */
#include "client.h"

int main(int argc, char **argv)
{
    return cl_bench_main(argc, argv);
}
