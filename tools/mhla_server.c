/*
 * mhla_server.c — the mhla-server program (the server library is server/).
 */
#include "server.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    mhla_server_options o;
    char err[600];
    mhla_server_options_default(&o);
    int rc = mhla_server_parse_args(argc, argv, &o, err, sizeof err);
    if (rc == 1 || rc == 2) /* --help or --version: written */
        return 0;
    if (rc < 0) { /* a usage error */
        fprintf(stderr, "mhla-server: error: %s\n", err);
        return 2;
    }
    rc = mhla_server_run(&o, err, sizeof err);
    if (rc) {
        fprintf(stderr, "mhla-server: error: %s\n", err);
        return 1;
    }
    return 0;
}
