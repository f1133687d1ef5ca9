// The operating system's own wake-up between two processes, the floor for a request to a peer whose
// progress thread sleeps: the child sleeps on a futex word in shared memory (FUTEX_WAIT, as the lane's
// sleeping progress thread does with futex_waitv); the parent, after a pause that lets the child fall
// asleep, stores a request, wakes it (FUTEX_WAKE) and spins until the child's answer appears in a second
// word. One round trip per pause, as bench's spaced READs to a sleeping peer.
// Usage: futex-pingpong [ROUNDS] [PAUSE_US]   (prints p50/p90/p99/mean/max of the round trip in us)
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
    _Alignas(128) _Atomic uint32_t request; // 0: nothing; the child sleeps on it
    _Alignas(128) _Atomic uint64_t answer;  // the last request answered
    _Alignas(128) _Atomic uint32_t stop;
};

static long futex(_Atomic uint32_t *word, int op, uint32_t val) {
    return syscall(SYS_futex, (uint32_t *)word, op, val, NULL, NULL, 0);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    int pause_us = argc > 2 ? atoi(argv[2]) : 25000;
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        uint64_t seq = 0;
        while (!atomic_load(&s->stop)) {
            uint32_t r = atomic_load_explicit(&s->request, memory_order_acquire);
            if (r == 0) {
                futex(&s->request, FUTEX_WAIT, 0); // shared, not private: another process wakes it
                continue;
            }
            atomic_store_explicit(&s->request, 0, memory_order_relaxed);
            atomic_store_explicit(&s->answer, ++seq, memory_order_release);
        }
        _exit(0);
    }
    uint64_t *rt = calloc(rounds, sizeof *rt);
    for (int i = 0; i < rounds; i++) {
        usleep(pause_us);
        uint64_t t0 = now_ns();
        atomic_store_explicit(&s->request, 1, memory_order_release);
        futex(&s->request, FUTEX_WAKE, 1);
        while (atomic_load_explicit(&s->answer, memory_order_acquire) != (uint64_t)i + 1) {
            __builtin_ia32_pause();
        }
        rt[i] = now_ns() - t0;
    }
    atomic_store(&s->stop, 1);
    atomic_store(&s->request, 1);
    futex(&s->request, FUTEX_WAKE, 1);
    waitpid(child, NULL, 0);
    uint64_t sum = 0;
    for (int i = 0; i < rounds; i++) {
        sum += rt[i];
    }
    qsort(rt, rounds, sizeof *rt, cmp);
    printf("futex-pingpong: %d round trips, each after a %d us pause: p50 %.1f us, p90 %.1f, p99 %.1f, mean %.1f, max %.1f\n",
           rounds, pause_us, rt[rounds / 2] / 1e3, rt[rounds * 9 / 10] / 1e3, rt[rounds * 99 / 100] / 1e3,
           (double)sum / rounds / 1e3, rt[rounds - 1] / 1e3);
    return 0;
}
