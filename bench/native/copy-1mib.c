/*
 * What one 1 MiB copy costs on this host, three ways: process_vm_readv out of another process (the
 * shm lane's pull), memcpy with both buffers in the caches (the same two buffers every time), and
 * memcpy through 64 MiB of buffers (each copy's source and destination cold). One thread, no checks.
 * Prints microseconds per copy and GB/s (10^9 bytes per second).
 * Build: gcc -O2 -o copy-1mib copy-1mib.c     Usage: copy-1mib [ITER]   (default 5000)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sys/wait.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void report(const char *what, double seconds, long iter, size_t n) {
    printf("%-28s %8.1f us per copy %7.2f GB/s\n", what, seconds / iter * 1e6, (double) n * iter / seconds / 1e9);
}

int main(int argc, char **argv) {
    const size_t n = 1 << 20;
    long iter = argc > 1 ? strtol(argv[1], NULL, 10) : 5000;
    char *src = aligned_alloc(4096, n);
    char *dst = aligned_alloc(4096, n);
    memset(src, 1, n);
    memset(dst, 2, n);
    pid_t child = fork(); /* (its copy of src, at the same address, is what process_vm_readv reads) */
    if (child == 0) {
        pause();
        return 0;
    }
    struct iovec local = {dst, n};
    struct iovec remote = {src, n};
    double t = now();
    for (long i = 0; i < iter; i++) {
        if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t) n) {
            perror("process_vm_readv");
            kill(child, SIGKILL);
            return 1;
        }
    }
    report("process_vm_readv, hot", now() - t, iter, n);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    t = now();
    for (long i = 0; i < iter; i++) {
        memcpy(dst, src, n);
        __asm__ volatile("" : : "r"(dst) : "memory");
    }
    report("memcpy, hot", now() - t, iter, n);
    const size_t big = 64 << 20;
    char *s = aligned_alloc(4096, big);
    char *d = aligned_alloc(4096, big);
    memset(s, 1, big);
    memset(d, 2, big);
    long cold = iter < 640 ? iter : 640;
    t = now();
    for (long i = 0; i < cold; i++) {
        size_t at = (size_t) (i % 64) << 20;
        memcpy(d + at, s + at, n);
        __asm__ volatile("" : : "r"(d) : "memory");
    }
    report("memcpy, cold (64 MiB round)", now() - t, cold, n);
    return 0;
}
