/*
 * bench.c — mhla-bench: parse flags, get the prompts, run each level, print
 * the table(s) and write --json / --svg.
 */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *msg, int status)
{
    fprintf(stderr, "mhla-bench: error: %s\n", msg);
    return status;
}

int cl_bench_main(int argc, char **argv)
{
    static cl_bench_args a; /* large (a level buffer); one per process */
    char err[CL_ERR_LEN];
    int prc = cl_bench_parse_args(argc, argv, &a, err);
    if (prc == 1) {
        cl_bench_print_help(stdout);
        return 0;
    }
    if (prc)
        return fail(err, 2);
    cl_bench_opts *o = &a.run;
    o->progress = a.progress_mode >= 0 ? a.progress_mode : isatty(STDERR_FILENO);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return fail("curl_global_init failed", 1);

    cl_prompts prompts;
    int rc = a.prompts_path
                 ? cl_prompts_load_jsonl(a.prompts_path, a.output.mean, &prompts, err)
                 : cl_prompts_synthesize(&o->conn, &a.input, &a.output, (size_t)a.num_prompts,
                                         o->rng_seed, &prompts, err);
    if (rc) {
        curl_global_cleanup();
        return fail(err, 1);
    }
    if (prompts.as_ids)
        fprintf(stderr,
                "mhla-bench: %zu of %zu synthesized prompts are sent as token ids (their "
                "text did not re-tokenize to the exact length)\n",
                prompts.as_ids, prompts.n);

    cl_level_result *res = calloc(o->n_levels, sizeof *res);
    size_t done = 0, failed = 0;
    if (!res) {
        cl_prompts_free(&prompts);
        curl_global_cleanup();
        return fail("out of memory", 1);
    }
    int status = 0;
    for (size_t i = 0; i < o->n_levels; i++) {
        if (cl_run_level(o, &prompts, o->levels[i], &res[i], err)) {
            status = fail(err, 1);
            break;
        }
        done++;
        failed += res[i].failed;
        cl_print_level(stdout, o, &res[i]);
        printf("\n");
        fflush(stdout);
    }
    if (done > 1)
        cl_print_sweep(stdout, o, res, done);
    if (status == 0 && a.json_path && cl_write_json(a.json_path, o, res, done, err))
        status = fail(err, 1);
    if (status == 0 && a.svg_path && cl_write_svg(a.svg_path, o, res, done, err))
        status = fail(err, 1);
    if (status == 0 && a.samples_path && cl_write_samples(a.samples_path, o, res, done, err))
        status = fail(err, 1);
    if (status == 0 && failed)
        status = 1;
    for (size_t i = 0; i < o->n_levels; i++)
        free(res[i].samples);
    free(res);
    cl_prompts_free(&prompts);
    curl_global_cleanup();
    return status;
}
