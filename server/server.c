/*
 * server.c — mhla_server_run: load the model, start the engine thread and
 * the HTTP daemon, wait for SIGTERM/SIGINT, drain, stop.
 */
#include "srv.h"

#include <cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int mhla_server_run(const mhla_server_options *o, char *err, size_t errlen)
{
    int rc = -1;
    mhla_model *model = NULL;
    mhla_engine *engine = NULL;
    srv_codec *codec = NULL;
    srv_gen_config gen;
    srv_sched *sched = NULL;
    srv_http *http = NULL;
    mhla_error e = {{0}};
    char namebuf[256];

    srv_log_set_level(o->log_level);
    srv_metrics_init();

    /* SIGTERM/SIGINT are taken with sigwait by this thread; every thread
     * started from here on inherits the mask. SIGPIPE never kills us. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL)) {
        snprintf(err, errlen, "cannot block SIGTERM/SIGINT");
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);

    double t0 = srv_now();
    mhla_model_options mo = {o->weights_bf16 ? MHLA_WEIGHTS_BF16 : MHLA_WEIGHTS_F32};
    if (mhla_model_load_with(o->model_dir, &mo, &model, &e)) {
        snprintf(err, errlen, "cannot load the model from '%s': %s", o->model_dir, e.msg);
        goto done;
    }
    const mhla_config *cfg = mhla_model_config(model);
    mhla_engine_options eo = {.n_threads = o->threads,
                              .cpu_isa = o->cpu_isa,
                              .state_bytes = (size_t)o->state_memory_mb << 20,
                              .resume_slots = o->state_memory_mb ? 64 : 0,
                              .device = (mhla_device)o->device,
                              .gpu_index = o->gpu_index,
                              .gpu_weights = (mhla_gpu_weights)o->gpu_weights,
                              .gpu_no_graphs = o->gpu_no_graphs};
    if (mhla_engine_create(model, &eo, &engine, &e)) {
        snprintf(err, errlen, "cannot create the engine: %s", e.msg);
        goto done;
    }
    srv_logf(MHLA_LOG_INFO, "cpu", "%s", mhla_engine_cpu_note(engine));
    srv_metrics_cpu_isa(mhla_engine_cpu_isa(engine));
    if (mhla_engine_device_note(engine)[0])
        srv_logf(MHLA_LOG_INFO, "device", "%s: running on the CPU",
                 mhla_engine_device_note(engine));
    if (srv_codec_create(o->model_dir, cfg->vocab_size, &codec, err, errlen) ||
        srv_gen_config_load(o->model_dir, cfg, &gen, err, errlen))
        goto done;
    const char *model_name = o->model_name ? o->model_name
                                           : basename_of(o->model_dir, namebuf, sizeof namebuf);
    srv_sched_config sc = {.engine = engine,
                           .model = model,
                           .codec = codec,
                           .gen = &gen,
                           .state_pool = o->state_memory_mb > 0,
                           .max_batch_tokens = o->max_batch_tokens,
                           .max_running = o->max_running,
                           .max_queue = o->max_queue,
                           .request_timeout_s = o->request_timeout_s};
    if (srv_sched_create(&sc, &sched, err, errlen))
        goto done;
    srv_http_config hc = {
        .opt = o, .model_name = model_name, .codec = codec, .gen = &gen, .cfg = cfg, .sched = sched};
    int port = 0;
    if (srv_http_start(&hc, &http, &port, err, errlen))
        goto done;
    cJSON *f = cJSON_CreateObject();
    if (f) {
        cJSON_AddStringToObject(f, "host", o->host);
        cJSON_AddNumberToObject(f, "port", port);
        cJSON_AddStringToObject(f, "model", model_name);
        cJSON_AddStringToObject(f, "model_dir", o->model_dir);
        cJSON_AddNumberToObject(f, "vocab_size", cfg->vocab_size);
        cJSON_AddNumberToObject(f, "context", cfg->max_positions);
        cJSON_AddNumberToObject(f, "layers", cfg->num_layers);
        cJSON_AddNumberToObject(f, "hidden", cfg->hidden_size);
        cJSON_AddStringToObject(f, "text_codec", srv_codec_name(codec));
        cJSON *eos = cJSON_AddArrayToObject(f, "eos_token_ids");
        for (int i = 0; eos && i < gen.n_eos; i++)
            cJSON_AddItemToArray(eos, cJSON_CreateNumber(gen.eos[i]));
        cJSON_AddStringToObject(f, "eos_from", gen.source);
        cJSON_AddNumberToObject(f, "state_memory_mb", o->state_memory_mb);
        cJSON_AddStringToObject(f, "weights", o->weights_bf16 ? "bf16" : "f32");
        cJSON_AddStringToObject(f, "device", mhla_engine_device_name(engine));
        cJSON_AddStringToObject(f, "cpu_isa", mhla_engine_cpu_isa(engine));
        cJSON_AddBoolToObject(f, "api_key", o->api_key != NULL);
        cJSON_AddNumberToObject(f, "load_s", (double)(long long)((srv_now() - t0) * 1000) / 1000);
    }
    srv_log(MHLA_LOG_INFO, "listening", f);

    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    srv_logf(MHLA_LOG_INFO, "draining", "signal %d: refusing new requests, %d still active, "
             "deadline %d s", sig, srv_sched_active(sched), o->shutdown_timeout_s);
    srv_sched_drain(sched);
    double deadline = srv_now() + o->shutdown_timeout_s;
    while (srv_sched_active(sched) > 0 && srv_now() < deadline) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        if (sigtimedwait(&set, NULL, &ts) > 0) {
            srv_logf(MHLA_LOG_WARN, "shutdown", "second signal: stopping now");
            break;
        }
    }
    if (srv_sched_active(sched) > 0)
        srv_logf(MHLA_LOG_WARN, "shutdown", "%d requests unfinished at the deadline",
                 srv_sched_active(sched));
    rc = 0;
done:
    /* the engine first: whatever still runs ends, so connection threads return */
    srv_sched_free(sched);
    srv_http_stop(http);
    srv_codec_free(codec);
    mhla_engine_free(engine);
    mhla_model_free(model);
    if (rc == 0)
        srv_logf(MHLA_LOG_INFO, "stopped", "bye");
    return rc;
}
