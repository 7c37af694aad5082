/*
 * version.c — the version, git commit and build type baked in at build time
 * (build_info.h, written by cmake/BuildInfo.cmake on every build).
 */
#include "base.h"

#include "build_info.h"

const char *mhla_version(void) { return MHLA_BUILD_VERSION; }

const char *mhla_commit(void) { return MHLA_BUILD_COMMIT; }

const char *mhla_build_type(void) { return MHLA_BUILD_TYPE; }
