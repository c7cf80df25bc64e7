/*
 * C caller of cuzk's C ABI (include/cuzk.h), linked against the static library.
 *
 * Built and run by tests/ffi_c.rs:
 *
 *     cc -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude tests/c/prove.c \
 *        target/release/libcuzk.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o prove
 *     ./prove PARAM_DIR C1_JSON SECTOR_ID ACTOR_ID PROVER_ID_HEX [PROOF_OUT]
 *
 * Checks the status codes of bad inputs (NULL pointers, malformed JSON, a prover id of the
 * wrong length, a missing parameter directory, a bad option), that error messages are kept per
 * thread, then proves the sector on the CPU and prints the result's partitions and timings.
 * Writes the proof bytes to PROOF_OUT when given. Exits 0 when every check passed.
 */
#include "cuzk.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static const char *last_error(void) {
    static _Thread_local char buf[4096];
    cuzk_last_error_message(buf, sizeof buf);
    return buf;
}

/* Checks that `got` is `want`; prints the last error message either way. */
static void expect_status(const char *what, cuzk_status_t got, cuzk_status_t want) {
    if (got == want) {
        printf("ok   %-44s status %d: %s\n", what, (int)got, last_error());
    } else {
        printf("FAIL %-44s status %d, expected %d: %s\n", what, (int)got, (int)want,
               last_error());
        failures++;
    }
}

static void expect(const char *what, int cond) {
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    if (!cond) failures++;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return NULL; }
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int parse_hex32(const char *hex, uint8_t out[CUZK_PROVER_ID_LEN]) {
    if (strlen(hex) != 2 * CUZK_PROVER_ID_LEN) return 0;
    for (size_t i = 0; i < CUZK_PROVER_ID_LEN; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
        out[i] = (uint8_t)v;
    }
    return 1;
}

/* A second thread's failure must not change the main thread's last-error message. */
static void *other_thread(void *arg) {
    (void)arg;
    uint8_t id[CUZK_PROVER_ID_LEN];
    cuzk_status_t s = cuzk_prover_id_from_actor_id(5, NULL);
    int ok = s == CUZK_STATUS_INVALID_CONFIG && strstr(last_error(), "out") != NULL;
    s = cuzk_prover_id_from_actor_id(5, id);
    ok = ok && s == CUZK_STATUS_OK && last_error()[0] == '\0' && id[0] == 5;
    return ok ? (void *)1 : NULL;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s PARAM_DIR C1_JSON SECTOR_ID ACTOR_ID PROVER_ID_HEX [PROOF_OUT]\n",
                argv[0]);
        return 2;
    }
    const char *param_dir = argv[1];
    const char *c1_path = argv[2];
    uint64_t sector_id = strtoull(argv[3], NULL, 10);
    uint64_t actor_id = strtoull(argv[4], NULL, 10);
    uint8_t fixture_prover_id[CUZK_PROVER_ID_LEN];
    if (!parse_hex32(argv[5], fixture_prover_id)) {
        fprintf(stderr, "bad PROVER_ID_HEX %s\n", argv[5]);
        return 2;
    }
    const char *proof_out = argc > 6 ? argv[6] : NULL;
    cuzk_status_t s;
    size_t c1_len = 0;
    uint8_t *c1 = read_file(c1_path, &c1_len);
    if (!c1) {
        fprintf(stderr, "cannot read %s\n", c1_path);
        return 2;
    }

    /* Prover id of an actor id: the fixture's one, and NULL handling. */
    uint8_t prover_id[CUZK_PROVER_ID_LEN];
    expect_status("prover_id_from_actor_id", cuzk_prover_id_from_actor_id(actor_id, prover_id),
                  CUZK_STATUS_OK);
    expect("prover id of the actor is the fixture's",
           memcmp(prover_id, fixture_prover_id, CUZK_PROVER_ID_LEN) == 0);
    expect_status("prover_id_from_actor_id(out = NULL)",
                  cuzk_prover_id_from_actor_id(actor_id, NULL), CUZK_STATUS_INVALID_CONFIG);
    expect("the message names the argument", strstr(last_error(), "out") != NULL);
    expect("cuzk_last_error_message(NULL, 0) returns the length",
           cuzk_last_error_message(NULL, 0) == strlen(last_error()));
    {
        char tiny[4];
        size_t n = cuzk_last_error_message(tiny, sizeof tiny);
        expect("a short buffer gets a truncated, terminated copy",
               n > sizeof tiny && tiny[3] == '\0' && strlen(tiny) == 3);
    }

    /* Options and engines. */
    cuzk_options_t opts;
    expect_status("options_init(sizeof opts)", cuzk_options_init(&opts, sizeof opts),
                  CUZK_STATUS_OK);
    expect("default options: its size, verify on, backend auto, no caps",
           opts.struct_size == sizeof opts && opts.verify && opts.backend == CUZK_BACKEND_AUTO &&
               opts.parameter_dir == NULL && opts.vram_limit_bytes == 0 &&
               !opts.allow_cpu_fallback);
    expect_status("options_init(NULL)", cuzk_options_init(NULL, sizeof opts),
                  CUZK_STATUS_INVALID_CONFIG);
    {
        cuzk_options_t small;
        expect_status("options_init(size 4)", cuzk_options_init(&small, 4),
                      CUZK_STATUS_INVALID_CONFIG);
        /* A struct_size smaller than the first version is rejected by engine_new too. */
        cuzk_options_init(&small, sizeof small);
        small.struct_size = 4;
        cuzk_engine_t *e = NULL;
        expect_status("engine_new(struct_size 4)", cuzk_engine_new(&small, &e),
                      CUZK_STATUS_INVALID_CONFIG);
    }
    cuzk_engine_t *engine = (cuzk_engine_t *)&opts; /* must be overwritten with NULL */
    opts.backend = 7;
    expect_status("engine_new(backend = 7)", cuzk_engine_new(&opts, &engine),
                  CUZK_STATUS_INVALID_CONFIG);
    expect("a failed engine_new sets *out to NULL", engine == NULL);
    opts.backend = CUZK_BACKEND_CPU;
    opts.devices = NULL;
    opts.devices_len = 2;
    expect_status("engine_new(devices = NULL, devices_len = 2)", cuzk_engine_new(&opts, &engine),
                  CUZK_STATUS_INVALID_CONFIG);
    opts.devices_len = 0;
    expect_status("engine_new(out = NULL)", cuzk_engine_new(&opts, NULL),
                  CUZK_STATUS_INVALID_CONFIG);
    cuzk_engine_free(NULL);
    cuzk_result_free(NULL);

    /* An engine whose parameter directory does not exist. */
    cuzk_options_t missing;
    cuzk_options_init(&missing, sizeof missing);
    missing.backend = CUZK_BACKEND_CPU;
    missing.parameter_dir = "/nonexistent/cuzk-ffi-test/params";
    cuzk_engine_t *no_params = NULL;
    cuzk_result_t *result = (cuzk_result_t *)&opts; /* must be overwritten with NULL */
    s = cuzk_engine_new(&missing, &no_params);
    if (s == CUZK_STATUS_PARAMETERS_NOT_FOUND) {
        /* An engine may check its parameter directory when it is created. */
        expect_status("engine_new(missing parameter dir)", s, CUZK_STATUS_PARAMETERS_NOT_FOUND);
    } else {
        expect_status("engine_new(missing parameter dir)", s, CUZK_STATUS_OK);
    }
    if (no_params) {
        expect_status("prove with missing parameters",
                      cuzk_prove_porep_c2(no_params, c1, c1_len, sector_id, prover_id,
                                          CUZK_PROVER_ID_LEN, &result),
                      CUZK_STATUS_PARAMETERS_NOT_FOUND);
        expect("a failed prove sets *out to NULL", result == NULL);
        cuzk_engine_free(no_params);
    }

    /* The real engine: CPU backend, the fixture's parameters. */
    cuzk_options_init(&opts, sizeof opts);
    opts.backend = CUZK_BACKEND_CPU;
    opts.parameter_dir = param_dir;
    engine = NULL;
    expect_status("engine_new(CPU, fixture parameters)", cuzk_engine_new(&opts, &engine),
                  CUZK_STATUS_OK);
    if (!engine) {
        printf("%d check(s) failed\n", failures + 1);
        return 1;
    }

    static const char bad_json[] = "{\"registered_proof\": \"StackedDrg2KiBV1_1\", \"vanilla";
    expect_status("malformed JSON",
                  cuzk_prove_porep_c2(engine, (const uint8_t *)bad_json, sizeof bad_json - 1,
                                      sector_id, prover_id, CUZK_PROVER_ID_LEN, &result),
                  CUZK_STATUS_MALFORMED_INPUT);
    expect_status("empty C1 (NULL, 0)",
                  cuzk_prove_porep_c2(engine, NULL, 0, sector_id, prover_id, CUZK_PROVER_ID_LEN,
                                      &result),
                  CUZK_STATUS_MALFORMED_INPUT);
    expect_status("c1_json = NULL with c1_len = 10",
                  cuzk_prove_porep_c2(engine, NULL, 10, sector_id, prover_id, CUZK_PROVER_ID_LEN,
                                      &result),
                  CUZK_STATUS_INVALID_CONFIG);
    expect_status("prover id of 31 bytes",
                  cuzk_prove_porep_c2(engine, c1, c1_len, sector_id, prover_id,
                                      CUZK_PROVER_ID_LEN - 1, &result),
                  CUZK_STATUS_INVALID_PROVER_ID);
    expect_status("prover_id = NULL with length 32",
                  cuzk_prove_porep_c2(engine, c1, c1_len, sector_id, NULL, CUZK_PROVER_ID_LEN,
                                      &result),
                  CUZK_STATUS_INVALID_CONFIG);
    expect("the message names the argument", strstr(last_error(), "prover_id") != NULL);
    expect_status("prover id (NULL, 0)",
                  cuzk_prove_porep_c2(engine, c1, c1_len, sector_id, NULL, 0, &result),
                  CUZK_STATUS_INVALID_PROVER_ID);
    expect_status("engine = NULL",
                  cuzk_prove_porep_c2(NULL, c1, c1_len, sector_id, prover_id, CUZK_PROVER_ID_LEN,
                                      &result),
                  CUZK_STATUS_INVALID_CONFIG);
    expect_status("out = NULL",
                  cuzk_prove_porep_c2(engine, c1, c1_len, sector_id, prover_id,
                                      CUZK_PROVER_ID_LEN, NULL),
                  CUZK_STATUS_INVALID_CONFIG);
    cuzk_result_free(NULL);
    cuzk_engine_free(NULL);
    expect("functions without a status keep the message", strstr(last_error(), "out") != NULL);

    /* Last-error messages are per thread. */
    expect_status("malformed JSON (again)",
                  cuzk_prove_porep_c2(engine, (const uint8_t *)bad_json, sizeof bad_json - 1,
                                      sector_id, prover_id, CUZK_PROVER_ID_LEN, &result),
                  CUZK_STATUS_MALFORMED_INPUT);
    char before[4096];
    snprintf(before, sizeof before, "%s", last_error());
    pthread_t t;
    void *thread_ok = NULL;
    if (pthread_create(&t, NULL, other_thread, NULL) == 0) pthread_join(t, &thread_ok);
    expect("another thread's calls set its own message", thread_ok != NULL);
    expect("this thread's message is unchanged", strcmp(before, last_error()) == 0);

    /* The proof. */
    s = cuzk_prove_porep_c2(engine, c1, c1_len, sector_id, prover_id,
                                          CUZK_PROVER_ID_LEN, &result);
    expect_status("prove the fixture (CPU)", s, CUZK_STATUS_OK);
    if (s == CUZK_STATUS_OK && result) {
        expect("after a success the message is empty", last_error()[0] == '\0');
        printf("proof: %zu bytes, %zu partition(s), verified %d, total %.1f ms\n",
               result->proof_len, result->partitions_len, (int)result->verified,
               result->total_ms);
        expect("192 bytes per partition",
               result->partitions_len >= 1 &&
                   result->proof_len ==
                       result->partitions_len * CUZK_PROOF_BYTES_PER_PARTITION);
        expect("verified", result->verified);
        for (size_t i = 0; i < result->partitions_len; i++) {
            const cuzk_partition_t *p = &result->partitions[i];
            printf("  partition %zu: backend %d device %d tier %s\n", p->index, (int)p->backend,
                   (int)p->device, p->tier ? p->tier : "(none)");
            expect("partition ran on the CPU",
                   p->index == i && p->backend == CUZK_BACKEND_CPU && p->device == -1);
        }
        int has_total = 0;
        for (size_t i = 0; i < result->timings_len; i++) {
            const cuzk_timing_t *tm = &result->timings[i];
            printf("  timing: partition %" PRId64 " %-12s (%d) %10.3f ms\n", tm->partition,
                   tm->stage_name, (int)tm->stage, tm->ms);
            if (tm->stage == CUZK_STAGE_TOTAL && strcmp(tm->stage_name, "total") == 0)
                has_total = 1;
        }
        expect("timings include the total", has_total && result->total_ms > 0);
        if (proof_out) {
            FILE *f = fopen(proof_out, "wb");
            int wrote = f && fwrite(result->proof, 1, result->proof_len, f) == result->proof_len;
            if (f) fclose(f);
            expect("proof written", wrote);
        }
        cuzk_result_free(result);
    }
    cuzk_engine_free(engine);
    free(c1);

    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
