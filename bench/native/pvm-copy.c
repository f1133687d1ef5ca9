/*
 * The kernel's floor for the shm lane's large copies: one process copies SIZE bytes out of (read) or
 * into (write) another process's buffer with process_vm_readv / process_vm_writev, ITER times, the
 * same buffers each time (as the benchmarks reuse theirs), one thread, no checks. Prints GB/s
 * (10^9 bytes per second) and ns per copy.
 * Build: gcc -O2 -o pvm-copy pvm-copy.c     Usage: pvm-copy SIZE ITER read|write
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: pvm-copy SIZE ITER read|write\n");
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 10);
    long iter = strtol(argv[2], NULL, 10);
    int writing = strcmp(argv[3], "write") == 0;
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        void *buf;
        if (posix_memalign(&buf, 4096, size) != 0) {
            return 1;
        }
        memset(buf, 7, size);
        unsigned long addr = (unsigned long) buf;
        if (write(p[1], &addr, sizeof addr) != sizeof addr) {
            return 1;
        }
        pause(); /* until killed */
        return 0;
    }
    unsigned long remote;
    if (read(p[0], &remote, sizeof remote) != sizeof remote) {
        perror("read");
        return 1;
    }
    void *local;
    if (posix_memalign(&local, 4096, size) != 0) {
        return 1;
    }
    memset(local, 3, size);
    struct iovec l = {local, size};
    struct iovec r = {(void *) remote, size};
    for (long i = 0; i < iter / 10 + 1; i++) { /* warm up */
        ssize_t n = writing ? process_vm_writev(child, &l, 1, &r, 1, 0) : process_vm_readv(child, &l, 1, &r, 1, 0);
        if (n != (ssize_t) size) {
            perror("process_vm");
            kill(child, SIGKILL);
            return 1;
        }
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iter; i++) {
        ssize_t n = writing ? process_vm_writev(child, &l, 1, &r, 1, 0) : process_vm_readv(child, &l, 1, &r, 1, 0);
        if (n != (ssize_t) size) {
            perror("process_vm");
            kill(child, SIGKILL);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("pvm-copy %s size=%zu iterations=%ld: %.2f GB/s, %.0f ns per copy\n", writing ? "writev" : "readv", size, iter,
           (double) size * iter / s / 1e9, s * 1e9 / iter);
    return 0;
}
