/*
 * server.c — mhla_server_run: load the model, start the engine thread and
 * the HTTP daemon, wait for SIGTERM/SIGINT, drain, stop.
 */
#include "server_internal.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

/* --tool-call-format's word as a srv_tool_format; -1 for auto. */
static int tool_format_of(const mhla_server_options *o)
{
    static const int of_word[] = {-1, SRV_TOOLS_HERMES, SRV_TOOLS_LLAMA3, SRV_TOOLS_MISTRAL,
                                  SRV_TOOLS_NONE};
    return o->tool_call_format >= 0 && o->tool_call_format < 5 ? of_word[o->tool_call_format] : -1;
}

static const char *basename_of(const char *dir, char *buf, size_t len)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/')
        s--;
    size_t l = n - s < len - 1 ? n - s : len - 1;
    memcpy(buf, dir + s, l);
    buf[l] = 0;
    return buf[0] ? buf : "mhla";
}

/* What a running server holds, freed in mhla_server_run's order. */
typedef struct {
    mhla_model *model;
    mhla_engine *engine;
    srv_codec *codec;
    srv_gen_config gen;
    srv_chat_template chat;
    srv_chat_render render; /* chat's template compiled */
    srv_grammars *grammars; /* structured outputs: the vocabulary's bytes, compiled grammars */
    srv_sched *sched;
    srv_http *http;
    const mhla_config *cfg;
    const char *model_name;
    char namebuf[256];
    int port;
    size_t state_bytes; /* the state pool's budget; 0: unbounded */
    srv_memory_plan mem;
    srv_drafter *drafter; /* --speculate draft */
} server;

/* SIGTERM/SIGINT are taken with sigwait by this thread; every thread
 * started from here on inherits the mask. SIGPIPE never kills us. */
static int block_signals(sigset_t *set, char *err, size_t errlen)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, set, NULL)) {
        snprintf(err, errlen, "cannot block SIGTERM/SIGINT");
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* --state-prefault auto: pages made at start. A fixed size, so a fixed cost at start (1 GiB took
 * 0.1-2.3 s on a 2-vCPU guest, kvstate/pool.c) that covers a fresh server's first ~85 blocks of
 * the 340M shape; the pool caps it at its budget. */
#define PREFAULT_AUTO_BYTES ((size_t)1 << 30)

static size_t prefault_bytes(const server *sv, const mhla_server_options *o)
{
    if (!sv->state_bytes || o->state_prefault_mb == 0)
        return 0;
    if (o->state_prefault_mb == SRV_STATE_MEMORY_AUTO)
        return PREFAULT_AUTO_BYTES;
    return (size_t)o->state_prefault_mb << 20;
}

static mhla_engine_options engine_options(const server *sv, const mhla_server_options *o)
{
    return (mhla_engine_options){.n_threads = o->threads,
                                 .cpu_isa = o->cpu_isa,
                                 .thread_adapt = o->thread_adapt,
                                 .state_bytes = sv->state_bytes,
                                 .state_prefault_bytes = prefault_bytes(sv, o),
                                 .resume_slots = sv->state_bytes ? 64 : 0,
                                 .device = (mhla_device)o->device,
                                 .gpu_index = o->gpu_index,
                                 .gpu_weights = (mhla_gpu_weights)o->gpu_weights,
                                 .gpu_no_graphs = o->gpu_no_graphs,
                                 .state_dir = o->state_dir,
                                 .state_disk_max =
                                     srv_state_disk_limit(o->state_dir, o->state_disk_max)};
}

static int create_engine(server *sv, const mhla_server_options *o, char *err, size_t errlen)
{
    mhla_error e = {0};
    mhla_engine_options eo = engine_options(sv, o);
    if (mhla_engine_create(sv->model, &eo, &sv->engine, &e)) {
        /* the pages made at start are the likeliest to run out, and the flag can do without */
        int hint = e.code == MHLA_ERR_NOMEM && eo.state_prefault_bytes > 0;
        snprintf(err, errlen, "cannot create the engine: %s%s", e.msg,
                 hint ? " (--state-prefault 0 makes state pages only as they are needed)" : "");
        return -1;
    }
    return 0;
}

/* The pages --state-prefault made, when it made any. */
static void log_prefault(const mhla_engine *e)
{
    mhla_state_stats st;
    mhla_engine_state_stats(e, &st);
    if (st.pages_prefaulted <= 0)
        return;
    cJSON *f = cJSON_CreateObject();
    if (!f)
        return;
    cJSON_AddNumberToObject(f, "pages", (double)st.pages_prefaulted);
    cJSON_AddNumberToObject(f, "mib", (double)((size_t)st.pages_prefaulted * st.page_bytes >> 20));
    cJSON_AddNumberToObject(f, "seconds", (double)(long)(st.prefault_seconds * 1000.0) / 1000.0);
    srv_log(MHLA_LOG_INFO, "state_prefault", f);
}

/* The engine with the state pool --state-memory asks for. auto sizes the
 * pool from host memory; a GPU engine keeps its pages and its sequences'
 * buffers in device memory, so there the engine is made once to learn the
 * device's free memory with the weights on it, then made again with the
 * pool that memory holds (host memory does not bound it then). */
static int start_engine(server *sv, const mhla_server_options *o, char *err, size_t errlen)
{
    int is_auto = o->state_memory_mb == SRV_STATE_MEMORY_AUTO;
    char host_err[512] = "";
    sv->state_bytes = (size_t)(o->state_memory_mb > 0 ? o->state_memory_mb : 0) << 20;
    if (is_auto && srv_memory_plan_budget(&sv->mem, sv->model, o->max_running, o->max_batch_tokens,
                                          host_err, sizeof host_err) == 0)
        sv->state_bytes = sv->mem.pages;
    if (create_engine(sv, o, err, errlen))
        return -1;
    if (!is_auto)
        return 0;
    if (mhla_engine_device(sv->engine) != MHLA_DEVICE_CUDA) {
        if (host_err[0]) {
            snprintf(err, errlen, "%s", host_err);
            return -1;
        }
        srv_memory_log(&sv->mem);
        return 0;
    }
    if (srv_memory_plan_device(&sv->mem, sv->engine, sv->model, o->max_running, o->max_batch_tokens,
                               err, errlen))
        return -1;
    srv_memory_log(&sv->mem);
    mhla_engine_free(sv->engine);
    sv->engine = NULL;
    sv->state_bytes = sv->mem.pages;
    return create_engine(sv, o, err, errlen);
}

/* The bytes of dir's *.safetensors files (0 when it cannot be read). */
static double weight_file_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    double total = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        char path[4096];
        struct stat st;
        if (n < 12 || strcmp(de->d_name + n - 12, ".safetensors"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0)
            total += (double)st.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

typedef struct {
    double t0;
    int tenth; /* the last tenth logged */
} load_progress;

/* A progress line at each tenth of the layers. */
static void log_progress(void *ctx, int done, int total)
{
    load_progress *lp = ctx;
    int tenth = total > 0 ? done * 10 / total : 10;
    if (tenth <= lp->tenth)
        return;
    lp->tenth = tenth;
    srv_logf(MHLA_LOG_INFO, "loading", "%d%% (%d of %d layers) in %.1f s", done * 100 / total, done,
             total, mhla_now() - lp->t0);
}

/* The loading line (path, size) and, for checkpoints past 100 MB (or
 * MHLA_LOAD_PROGRESS_BYTES), progress lines while the weights load. */
static int load_model(server *sv, const mhla_server_options *o, mhla_error *e)
{
    double bytes = weight_file_bytes(o->model_dir);
    const char *t = getenv("MHLA_LOAD_PROGRESS_BYTES");
    double threshold = t && *t ? atof(t) : 100e6;
    load_progress lp = {.t0 = mhla_now(), .tenth = 0};
    mhla_model_options mo = {.weights = (mhla_weight_dtype)o->weights};
    if (bytes > threshold) {
        mo.progress = log_progress;
        mo.progress_ctx = &lp;
    }
    srv_logf(MHLA_LOG_INFO, "loading", "%s: %.1f MB of weights (%s)", o->model_dir, bytes / 1e6,
             mhla_weight_dtype_name(mo.weights));
    int rc = mhla_model_load_with(o->model_dir, &mo, &sv->model, e);
    if (rc == 0)
        srv_logf(MHLA_LOG_INFO, "loaded", "the weights in %.1f s", mhla_now() - lp.t0);
    return rc;
}

/* --speculate draft: the draft model, its engine like the model's (weights,
 * threads, device), with a state pool of its own. */
static int load_drafter(server *sv, const mhla_server_options *o, char *err, size_t errlen)
{
    if (o->speculate != SRV_SPEC_DRAFT)
        return 0;
    mhla_model_options mo = {.weights = (mhla_weight_dtype)o->weights};
    mhla_engine_options eo = engine_options(sv, o);
    eo.state_disk_max = 0;
    srv_drafter_options d = {.dir = o->draft_model,
                             .target_dir = o->model_dir,
                             .model_options = &mo,
                             .engine_options = &eo,
                             .target_cfg = sv->cfg,
                             .target_state_bytes = sv->state_bytes,
                             .state_mb = o->draft_state_memory_mb,
                             .catchup = o->max_batch_tokens};
    return srv_drafter_create(&d, &sv->drafter, err, errlen);
}

/* The model, the engine, the text codec and generation_config.json. */
static int load(server *sv, const mhla_server_options *o, char *err, size_t errlen)
{
    mhla_error e = {0};
    if (o->state_memory_mb == SRV_STATE_MEMORY_AUTO)
        srv_memory_probe(&sv->mem); /* before the weights take their share */
    if (load_model(sv, o, &e)) {
        snprintf(err, errlen, "cannot load the model from '%s': %s", o->model_dir, e.msg);
        return -1;
    }
    sv->cfg = mhla_model_config(sv->model);
    if (start_engine(sv, o, err, errlen) || load_drafter(sv, o, err, errlen))
        return -1;
    log_prefault(sv->engine);
    if (o->state_dir && o->state_dir[0])
        srv_state_disk_log_start(sv->engine);
    if (mhla_engine_cpu_note(sv->engine)[0])
        srv_logf(MHLA_LOG_INFO, "cpu", "%s", mhla_engine_cpu_note(sv->engine));
    srv_metrics_cpu_isa(mhla_engine_cpu_isa(sv->engine));
    if (mhla_engine_device_note(sv->engine)[0])
        srv_logf(MHLA_LOG_INFO, "device", "%s: running on the CPU",
                 mhla_engine_device_note(sv->engine));
    sv->model_name =
        o->model_name ? o->model_name : basename_of(o->model_dir, sv->namebuf, sizeof sv->namebuf);
    if (srv_codec_create(o->model_dir, sv->cfg->vocab_size, &sv->codec, err, errlen) ||
        srv_gen_config_load(o->model_dir, sv->cfg, &sv->gen, err, errlen) ||
        srv_chat_template_load(o->model_dir, o->chat_template, &sv->chat, err, errlen) ||
        srv_chat_render_init(&sv->render, &sv->chat, o->model_dir, tool_format_of(o), err,
                             errlen) ||
        srv_grammars_create(sv->codec, &sv->gen, sv->cfg->vocab_size, &sv->grammars, err, errlen))
        return -1;
    char why[256];
    if (srv_codec_text_refused(sv->codec, why, sizeof why))
        srv_logf(MHLA_LOG_WARN, "text_codec", "text prompts and chat requests will be refused: %s",
                 why);
    srv_logf(sv->chat.builtin ? MHLA_LOG_WARN : MHLA_LOG_INFO, "chat_template", "%s%s",
             sv->chat.source,
             sv->chat.builtin ? ": give --chat-template FILE for the model's own format" : "");
    srv_logf(MHLA_LOG_INFO, "tool_calls", "replies' tool calls are parsed as %s%s",
             srv_tool_format_name(sv->render.tool_format),
             o->tool_call_format ? " (--tool-call-format)" : " (by the chat template)");
    return 0;
}

/* The engine thread and the HTTP daemon. */
static int start(server *sv, const mhla_server_options *o, char *err, size_t errlen)
{
    srv_sched_options sc = {.engine = sv->engine,
                            .model = sv->model,
                            .codec = sv->codec,
                            .gen = &sv->gen,
                            .state_pool = sv->state_bytes > 0,
                            .max_batch_tokens = o->max_batch_tokens,
                            .itl_target_s = o->itl_target_ms / 1000.0,
                            .max_running = o->max_running,
                            .max_queue = o->max_queue,
                            .request_timeout_s = o->request_timeout_s,
                            .speculate = o->speculate,
                            .drafter = sv->drafter,
                            .draft_max = o->draft_max,
                            .draft_ngram = o->draft_ngram,
                            .draft_min = o->draft_min};
    if (srv_sched_create(&sc, &sv->sched, err, errlen))
        return -1;
    srv_http_options hc = {.opt = o,
                           .model_name = sv->model_name,
                           .codec = sv->codec,
                           .gen = &sv->gen,
                           .cfg = sv->cfg,
                           .chat = &sv->chat,
                           .render = &sv->render,
                           .grammars = sv->grammars,
                           .sched = sv->sched};
    return srv_http_start(&hc, &sv->http, &sv->port, err, errlen);
}

static void log_listening(const server *sv, const mhla_server_options *o, double load_s)
{
    cJSON *f = cJSON_CreateObject();
    if (f) {
        cJSON_AddStringToObject(f, "version", mhla_version());
        cJSON_AddStringToObject(f, "commit", mhla_commit());
        cJSON_AddStringToObject(f, "host", o->host);
        cJSON_AddNumberToObject(f, "port", sv->port);
        cJSON_AddStringToObject(f, "model", sv->model_name);
        cJSON_AddStringToObject(f, "model_dir", o->model_dir);
        cJSON_AddNumberToObject(f, "vocab_size", sv->cfg->vocab_size);
        cJSON_AddNumberToObject(f, "context", sv->cfg->max_positions);
        cJSON_AddNumberToObject(f, "layers", sv->cfg->num_layers);
        cJSON_AddNumberToObject(f, "hidden", sv->cfg->hidden_size);
        cJSON_AddStringToObject(f, "text_codec", srv_codec_name(sv->codec));
        cJSON *eos = cJSON_AddArrayToObject(f, "eos_token_ids");
        for (int i = 0; eos && i < sv->gen.n_eos; i++)
            cJSON_AddItemToArray(eos, cJSON_CreateNumber(sv->gen.eos[i]));
        cJSON_AddStringToObject(f, "eos_from", sv->gen.source);
        cJSON_AddNumberToObject(f, "state_memory_mb", (double)(sv->state_bytes >> 20));
        cJSON_AddStringToObject(f, "weights",
                                mhla_weight_dtype_name((mhla_weight_dtype)o->weights));
        cJSON_AddStringToObject(f, "device", mhla_engine_device_name(sv->engine));
        cJSON_AddStringToObject(f, "cpu_isa", mhla_engine_cpu_isa(sv->engine));
        cJSON_AddBoolToObject(f, "api_key", o->api_key != NULL);
        if (o->allowed_origins)
            cJSON_AddStringToObject(f, "allowed_origins", o->allowed_origins);
        if (o->state_dir && o->state_dir[0]) {
            srv_state_disk_log_fields(f, sv->engine, o->state_dir);
            srv_metrics_disk_engine(sv->engine);
        }
        cJSON_AddNumberToObject(f, "load_s", (double)(long long)(load_s * 1000) / 1000);
    }
    srv_log(MHLA_LOG_INFO, "listening", f);
}

/* Serves until SIGTERM/SIGINT, then refuses new requests and lets the
 * running ones finish until --shutdown-timeout. Returns 1 when a second
 * signal asked to stop at once. */
static int serve_until_signal(server *sv, const mhla_server_options *o, sigset_t *set)
{
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    srv_logf(MHLA_LOG_INFO, "draining",
             "signal %d: refusing new requests, %d still active, "
             "deadline %d s",
             sig, srv_sched_active(sv->sched), o->shutdown_timeout_s);
    srv_sched_drain(sv->sched);
    double deadline = mhla_now() + o->shutdown_timeout_s;
    while (srv_sched_active(sv->sched) > 0 && mhla_now() < deadline) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        if (sigtimedwait(set, NULL, &ts) > 0) {
            srv_logf(MHLA_LOG_WARN, "shutdown", "second signal: stopping now");
            return 1;
        }
    }
    if (srv_sched_active(sv->sched) > 0)
        srv_logf(MHLA_LOG_WARN, "shutdown", "%d requests unfinished at the deadline",
                 srv_sched_active(sv->sched));
    return 0;
}

int mhla_server_run(const mhla_server_options *o, char *err, size_t errlen)
{
    server sv = {0};
    sigset_t set;
    srv_log_set_level(o->log_level);
    srv_log_set_format(o->log_format == 1 || (o->log_format == 0 && isatty(STDERR_FILENO)));
    srv_json_hooks_install();
    srv_metrics_init();
    if (block_signals(&set, err, errlen))
        return -1;
    double t0 = mhla_now();
    int rc = -1, forced = 0;
    if (load(&sv, o, err, errlen) == 0 && start(&sv, o, err, errlen) == 0) {
        log_listening(&sv, o, mhla_now() - t0);
        forced = serve_until_signal(&sv, o, &set);
        rc = 0;
    }
    /* the engine first: whatever still runs ends, so connection threads return */
    srv_sched_free(sv.sched);
    if (!forced) /* their error events and [DONE] go out before the sockets close */
        srv_http_flush(sv.http, o->timeout_s);
    srv_http_stop(sv.http);
    srv_codec_free(sv.codec);
    srv_chat_render_free(&sv.render);
    srv_grammars_free(sv.grammars);
    srv_chat_template_free(&sv.chat);
    srv_drafter_free(sv.drafter);
    mhla_engine_free(sv.engine);
    mhla_model_free(sv.model);
    if (rc == 0)
        srv_logf(MHLA_LOG_INFO, "stopped", "bye");
    return rc;
}
