/*
 * bench.c — mhla-bench: parse flags, get the prompts, run each level, print
 * the table(s) and write --json / --svg (the run picture for one level, the
 * sweep chart for several).
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

/* The prompts: --prompts' file, or synthesized through the server's tokenizer. */
static int get_prompts(const cl_bench_args *a, cl_prompts *prompts, char *err)
{
    const cl_bench_options *o = &a->run;
    int rc = a->prompts_path
                 ? cl_prompts_load_jsonl(a->prompts_path, a->output.mean, o->chat, prompts, err)
                 : cl_prompts_synthesize(&o->conn, &a->input, &a->output, (size_t)a->num_prompts,
                                         o->rng_seed, o->chat, prompts, err);
    if (rc == 0 && prompts->as_ids)
        fprintf(stderr,
                "mhla-bench: %zu of %zu synthesized prompts are sent as token ids (their "
                "text did not re-tokenize to the exact length)\n",
                prompts->as_ids, prompts->n);
    return rc;
}

/* Runs each level, printing its table; *done levels ran. The exit status. */
static int run_levels(const cl_bench_options *o, const cl_prompts *prompts, cl_level_result *res,
                      size_t *done, char *err)
{
    size_t failed = 0;
    int status = 0;
    for (*done = 0; *done < o->n_levels; (*done)++) {
        cl_level_result *r = &res[*done];
        if (cl_run_level(o, prompts, o->levels[*done], r, err)) {
            status = fail(err, 1);
            break;
        }
        failed += r->failed;
        cl_print_level(stdout, o, r);
        printf("\n");
        fflush(stdout);
    }
    if (*done > 1)
        cl_print_sweep(stdout, o, res, *done);
    return status ? status : failed ? 1 : 0;
}

/* --json, --svg and --samples. */
static int write_outputs(const cl_bench_args *a, const cl_level_result *res, size_t done, char *err)
{
    const cl_bench_options *o = &a->run;
    if ((a->json_path && cl_write_json(a->json_path, o, res, done, err)) ||
        (a->svg_path && done == 1 && cl_write_level_svg(a->svg_path, o, res, err)) ||
        (a->svg_path && done > 1 && cl_write_svg(a->svg_path, o, res, done, err)) ||
        (a->samples_path && cl_write_samples(a->samples_path, o, res, done, err)))
        return fail(err, 1);
    return 0;
}

int cl_bench_main(int argc, char **argv)
{
    static cl_bench_args a; /* large (a level buffer); one per process */
    char err[CL_ERR_LEN];
    int prc = cl_bench_parse_args(argc, argv, &a, err);
    if (prc == 1)
        cl_bench_print_help(stdout);
    if (prc == 1 || prc == 2) /* --help or --version */
        return 0;
    if (prc)
        return fail(err, 2);
    cl_bench_options *o = &a.run;
    o->progress = a.progress_mode >= 0 ? a.progress_mode : isatty(STDERR_FILENO);
    o->keep_tokens = a.svg_path && o->n_levels == 1; /* the run picture */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return fail("curl_global_init failed", 1);
    cl_prompts prompts;
    if (get_prompts(&a, &prompts, err)) {
        curl_global_cleanup();
        return fail(err, 1);
    }
    cl_level_result *res = calloc(o->n_levels, sizeof *res);
    size_t done = 0;
    int status = res ? 0 : fail("out of memory", 1);
    if (res) {
        int ran = run_levels(o, &prompts, res, &done, err);
        /* the outputs are written when every level ran (some requests may have failed) */
        int runs_done = done == o->n_levels;
        status = runs_done ? write_outputs(&a, res, done, err) : 0;
        status = status ? status : ran;
    }
    for (size_t i = 0; res && i < o->n_levels; i++)
        cl_level_result_free(&res[i]);
    free(res);
    cl_prompts_free(&prompts);
    curl_global_cleanup();
    return status;
}
