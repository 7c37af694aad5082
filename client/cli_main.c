/* cli_main.c — the mhla-cli executable (see cli.c). */
#include "client.h"

int main(int argc, char **argv)
{
    return cl_cli_main(argc, argv);
}
