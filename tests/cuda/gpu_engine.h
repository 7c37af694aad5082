/*
 * gpu_engine.h — what the CUDA tests share: an engine on the options given,
 * or, when they ask for a GPU and none is usable, exit 77 (ctest: skipped).
 */
#ifndef MHLA_TESTS_GPU_ENGINE_H
#define MHLA_TESTS_GPU_ENGINE_H

#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mhla_engine *engine_or_skip(const mhla_model *m, const mhla_engine_options *o)
{
    mhla_engine *e;
    mhla_error err;
    if (mhla_engine_create(m, o, &e, &err)) {
        if (strstr(err.msg, "device cuda:")) {
            printf("SKIP: %s\n", err.msg);
            exit(77);
        }
        fprintf(stderr, "FAIL: engine: %s\n", err.msg);
        exit(1);
    }
    return e;
}

#endif
