/* SPDX-License-Identifier: BSD-3-Clause */
/* Issue 20, case 5: the catalog is read without leaving a program's
 * folder, without blocking, within a budget, and a binary exec would
 * refuse is refused.  Each case lays out a program in a scratch catalog. */
#include "mesh/backend.h"

#include "../test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char root[64], outside[64];
static const uint32_t have_native[1] = {MESH_BACKEND_NATIVE};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        T_FAILF("writing %s: %s", path, strerror(errno));
    }
}

/* root/name/manifest.json for backend (native or wasm). */
static void program(const char *name, const char *backend)
{
    char path[256], json[256];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/%s/manifest.json", root, name);
    snprintf(json, sizeof(json),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"%s\"]}", name,
             backend);
    put(path, json);
}

/* A copy of the test worker as root/name/<dir>/name, with mode. */
static void binary(const char *name, const char *dir, mode_t mode)
{
    char path[512], cmd[1400];
    snprintf(path, sizeof(path), "%s/%s/%s", root, name, dir);
    mkdir(path, 0755);
    snprintf(cmd, sizeof(cmd), "cp '%s/t_ok/%s/t_ok' '%s/%s'",
             MESH_TEST_PROGRAMS, mesh_native_target(), path, name);
    T_TRUE(system(cmd) == 0);
    snprintf(path, sizeof(path), "%s/%s/%s/%s", root, name, dir, name);
    chmod(path, mode);
}

/* Reads program name: fails with want, and the message quotes nothing of
 * the file outside (its text holds SECRET). */
static void refused(const char *name, const char *want)
{
    mesh_payload p;
    char *err = NULL;
    bool ok = mesh_payload_read(root, name, &p, &err);
    if (!ok && err != NULL && strstr(err, "SECRET") != NULL) {
        T_FAILF("%s: the error quotes a file outside the catalog: %s", name,
                err);
    }
    if (ok) {
        mesh_payload_free(&p);
    }
    T_ERR(ok, err, want);
}

/* manifest.json is a link to a file outside: not read, not quoted. */
static void test_manifest_link(void)
{
    char path[256], target[256];
    snprintf(path, sizeof(path), "%s/m_link", root);
    mkdir(path, 0755);
    snprintf(target, sizeof(target), "%s/secret.json", outside);
    snprintf(path, sizeof(path), "%s/m_link/manifest.json", root);
    T_TRUE(symlink(target, path) == 0);
    refused("m_link", "missing: program m_link: manifest.json is a link out "
                      "of its directory");
    /* A link to a system file, as the issue found. */
    snprintf(path, sizeof(path), "%s/m_sys", root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/m_sys/manifest.json", root);
    T_TRUE(symlink("/etc/passwd", path) == 0);
    refused("m_sys", "missing: program m_sys: manifest.json is a link out");
    /* A program folder that is a link out of the catalog. */
    snprintf(path, sizeof(path), "%s/m_dir", root);
    T_TRUE(symlink(outside, path) == 0);
    refused("m_dir", "missing: program m_dir is a link out of the catalog");
}

/* A native binary, or a wasm module, that links to a file outside. */
static void test_binary_link(void)
{
    char path[512];
    program("b_sys", "native");
    snprintf(path, sizeof(path), "%s/b_sys/%s", root, mesh_native_target());
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/b_sys/%s/b_sys", root,
             mesh_native_target());
    T_TRUE(symlink("/bin/true", path) == 0);
    char rel[256];
    snprintf(rel, sizeof(rel),
             "missing: program b_sys: %s/b_sys is a link "
             "out",
             mesh_native_target());
    refused("b_sys", rel);
    mesh_manifest m = {.name = "b_sys",
                       .entry = "b_sys",
                       .backends = {MESH_BACKEND_NATIVE},
                       .nbackends = 1};
    snprintf(path, sizeof(path), "%s/b_sys", root);
    T_TRUE(!mesh_runs_here(path, &m, have_native, 1));

    program("w_sys", "wasm");
    char target[256];
    snprintf(target, sizeof(target), "%s/secret.json", outside);
    snprintf(path, sizeof(path), "%s/w_sys/w_sys.wasm", root);
    T_TRUE(symlink(target, path) == 0);
    refused("w_sys", "missing: program w_sys: w_sys.wasm is a link out");
}

/* A link that stays inside the program's folder is followed (where the
 * kernel has openat2; without it no link is). */
static void test_inside_link(void)
{
    char path[512], rel[300];
    program("in_link", "native");
    binary("in_link", "store", 0755);
    snprintf(path, sizeof(path), "%s/in_link/%s", root, mesh_native_target());
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/in_link/%s/in_link", root,
             mesh_native_target());
    T_TRUE(symlink("../store/in_link", path) == 0);
    mesh_payload p;
    char *err = NULL;
    snprintf(rel, sizeof(rel), "%s/in_link", mesh_native_target());
    if (mesh_payload_read(root, "in_link", &p, &err)) {
        T_TRUE(mesh_payload_find(&p, rel) != NULL);
        T_TRUE(mesh_payload_find(&p, "store/in_link") != NULL);
        mesh_payload_free(&p);
    } else {
        T_TRUE(err != NULL && strstr(err, "has no openat2") != NULL);
        printf("\n  no openat2: %s\n", err != NULL ? err : "?");
        free(err);
    }
}

/* A manifest that is a FIFO (nobody writes it) is refused at once. */
static void test_fifo(void)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/fifo", root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/fifo/manifest.json", root);
    T_TRUE(mkfifo(path, 0644) == 0);
    /* A read that blocked would end this test by SIGALRM: a hang guard. */
    alarm(60);
    uint64_t t0 = now_ms();
    refused("fifo", "missing: program fifo: manifest.json is not a regular "
                    "file");
    alarm(0);
    T_TRUE(now_ms() - t0 < 10000);
}

/* Twelve target folders holding the same 200 MB binary (hard links to one
 * sparse file): refused by the total budget before anything is read. */
static void test_budget(void)
{
    char path[512], store[512];
    program("big", "native");
    snprintf(store, sizeof(store), "%s/big/store", root);
    mkdir(store, 0755);
    snprintf(store, sizeof(store), "%s/big/store/big", root);
    int fd = open(store, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    T_TRUE(fd >= 0 && ftruncate(fd, 200ll << 20) == 0);
    if (fd >= 0) {
        close(fd);
    }
    for (int i = 0; i < 12; i++) {
        snprintf(path, sizeof(path), "%s/big/t%02d", root, i);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/big/t%02d/big", root, i);
        T_TRUE(link(store, path) == 0);
    }
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = now_ms();
    refused("big", "limits: program big: its files have more than");
    getrusage(RUSAGE_SELF, &ru1);
    /* Nothing was read: no 1 GiB of reads, no such resident growth. */
    T_TRUE(now_ms() - t0 < 10000);
    T_TRUE(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024);
}

/* A binary without its execute bit is refused, as exec would refuse it. */
static void test_no_exec_bit(void)
{
    program("noexec", "native");
    binary("noexec", mesh_native_target(), 0644);
    char want[300];
    snprintf(want, sizeof(want),
             "missing: program noexec: %s/noexec has no "
             "execute bit",
             mesh_native_target());
    refused("noexec", want);
    mesh_manifest m = {.name = "noexec",
                       .entry = "noexec",
                       .backends = {MESH_BACKEND_NATIVE},
                       .nbackends = 1};
    char path[256];
    snprintf(path, sizeof(path), "%s/noexec", root);
    T_TRUE(!mesh_runs_here(path, &m, have_native, 1));
    /* The same binary with the bit: read, and it runs here. */
    program("withexec", "native");
    binary("withexec", mesh_native_target(), 0755);
    mesh_payload p;
    char *err = NULL;
    T_OK(mesh_payload_read(root, "withexec", &p, &err), err);
    mesh_payload_free(&p);
    m.name = "withexec";
    m.entry = "withexec";
    snprintf(path, sizeof(path), "%s/withexec", root);
    T_TRUE(mesh_runs_here(path, &m, have_native, 1));
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/rig-test-catalog.XXXXXX");
    snprintf(outside, sizeof(outside), "/tmp/rig-test-outside.XXXXXX");
    if (mkdtemp(root) == NULL || mkdtemp(outside) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char secret[128];
    snprintf(secret, sizeof(secret), "%s/secret.json", outside);
    FILE *f = fopen(secret, "w");
    if (f == NULL) {
        perror(secret);
        return 1;
    }
    fputs("SECRET_TOKEN_4711 {\"name\": \"m_link\"}\n", f);
    fclose(f);
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("mesh_catalog", NULL, NULL);
    CU_add_test(s, "a manifest linking out is not read", test_manifest_link);
    CU_add_test(s, "a binary or module linking out is not read",
                test_binary_link);
    CU_add_test(s, "a link inside the program is followed", test_inside_link);
    CU_add_test(s, "a FIFO manifest does not block", test_fifo);
    CU_add_test(s, "the budget holds before any read", test_budget);
    CU_add_test(s, "a binary without its execute bit", test_no_exec_bit);
    int rc = t_run_registry();
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", root, outside);
    if (system(cmd) != 0) {
        rc = rc ? rc : 1;
    }
    return rc;
}
