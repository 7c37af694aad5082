/* base's system helpers: mhla_read_file (contents, NUL, size limit, missing
 * file), mhla_grow (doubling, keeps contents, refuses nonsense) and mhla_now
 * (monotonic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "check.h"

static void test_read_file(const char *dir)
{
    char path[4096], msg[256];
    snprintf(path, sizeof path, "%s/read_file.txt", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        die("cannot write %s", path);
    /* more than one 64 KiB read, with a NUL inside */
    size_t n = 200000;
    for (size_t i = 0; i < n; i++)
        fputc((int)(i % 251), f);
    fclose(f);
    char *data = NULL;
    size_t len = 0;
    CHECK(mhla_read_file(path, n, &data, &len, msg, sizeof msg) == 0, "read: %s", msg);
    CHECK(len == n, "length %zu, want %zu", len, n);
    int same = data != NULL;
    for (size_t i = 0; same && i < n; i++)
        same = (unsigned char)data[i] == i % 251;
    CHECK(same, "contents differ");
    CHECK(data && data[len] == 0, "no NUL after the bytes");
    free(data);

    CHECK(mhla_read_file(path, n - 1, &data, &len, msg, sizeof msg) == MHLA_READ_TOO_LARGE,
          "over the limit read");
    CHECK(data == NULL && strstr(msg, "larger than"), "limit message: %s", msg);

    snprintf(path, sizeof path, "%s/no/such/file", dir);
    CHECK(mhla_read_file(path, 10, &data, &len, msg, sizeof msg) == MHLA_READ_IO,
          "missing file read");
    CHECK(strstr(msg, path) != NULL, "message does not name the path: %s", msg);

    snprintf(path, sizeof path, "%s/empty.txt", dir);
    f = fopen(path, "wb");
    if (!f)
        die("cannot write %s", path);
    fclose(f);
    CHECK(mhla_read_file(path, 10, &data, &len, NULL, 0) == 0 && len == 0 && data && !data[0],
          "empty file");
    free(data);
}

static void test_grow(void)
{
    int *a = NULL, cap = 0;
    CHECK(mhla_grow(&a, sizeof *a, &cap, 0) == 0 && a == NULL, "need 0 allocates");
    for (int i = 0; i < 1000; i++) {
        CHECK(mhla_grow(&a, sizeof *a, &cap, i + 1) == 0 && cap >= i + 1, "grow to %d", i + 1);
        a[i] = i * 7;
    }
    int ok = 1;
    for (int i = 0; i < 1000; i++)
        ok &= a[i] == i * 7;
    CHECK(ok, "contents lost while growing");
    CHECK(cap < 2048, "cap %d: more than doubling", cap);
    int before = cap;
    CHECK(mhla_grow(&a, sizeof *a, &cap, -1) == 0 && cap == before, "need below cap changes it");
    char *huge = NULL;
    int hcap = 0;
    CHECK(mhla_grow(&huge, (size_t)1 << 62, &hcap, 8) == -1 && huge == NULL && hcap == 0,
          "an impossible size is refused and nothing changes");
    free(a);
}

static void test_now(void)
{
    double t0 = mhla_now();
    usleep(2000);
    double t1 = mhla_now();
    CHECK(t1 - t0 >= 0.0015, "2 ms sleep measured %.6f s", t1 - t0);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_sys WORK_DIR");
    test_read_file(argv[1]);
    test_grow();
    test_now();
    if (failures)
        return 1;
    printf("base.sys: OK\n");
    return 0;
}
