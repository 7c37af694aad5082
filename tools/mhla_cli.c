/* mhla_cli.c — the mhla-cli program (client/cli.c). */
#include "client.h"

int main(int argc, char **argv) { return cl_cli_main(argc, argv); }
