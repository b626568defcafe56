/*
 * What keeping a retransmission deadline costs a round trip when both ends share one CPU: the
 * gap behind `saw_udp_1k`'s p99 at 1.22x sockperf's with `bench/compare.py --pin same`
 * (issue 42), and why `engine::alarm` sets its timer between round trips.
 *
 * Part 1, a POSIX timer (SIGEV_THREAD_ID, as `engine::alarm`'s) moved to 2 ms ahead, 2,000
 * times, with a pause of GAP between moves: what one `timer_settime` costs. A 2 ms deadline is
 * the CPU's next timer event (the tick is 4 ms at HZ=250), so moving it reprograms the local
 * APIC deadline; a 20 ms one is not. SIGEV_NONE arms no kernel timer at all.
 *
 * Part 2, a UDP ping-pong of 1 KiB (an echo child process, both on this CPU), 200,000 round
 * trips a run, each timed from before its send to after its receive:
 *   none     no timer
 *   inside   the timer moved to 2 ms ahead every 100 round trips (every ~1 ms, as a deadline
 *            kept to half its distance is), between the send and the receive
 *   between  the same, after the receive and before the next send's clock read
 *
 * Measured on the 2-vCPU VM of issue 42 (kernel 6.18, clockevent lapic-deadline, 2026-12-01),
 * two runs: part 1: tight loop 0.43 us; 1 ms apart 8.7 us (p90 12.8); 1 ms apart to 20 ms
 * ahead 0.43 us; SIGEV_NONE 0.29 us. Part 2: none p50 10.2-10.3 us, p99 11.3-11.8; inside p50
 * the same, p99 18.5-18.7; between p99 11.5-12.1. (An earlier variant that moved the timer
 * every round trip, inside: p50 11.0, p99 26.7.)
 *
 * Loopback only; no root. Usage:
 *   cc -O2 -o /tmp/timer-rearm-cost lab/timer-rearm-cost.c && taskset -c 1 /tmp/timer-rearm-cost
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void do_nothing(int sig) { (void)sig; }

static timer_t make_timer(int notify) {
    timer_t timer;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = notify;
    ev.sigev_signo = SIGURG;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) {
        perror("timer_create");
        exit(1);
    }
    return timer;
}

/* Moves `timer` to `ahead` ns from now (and every 1 ms after, as engine::alarm's); its cost. */
static uint64_t move_timer(timer_t timer, uint64_t ahead) {
    uint64_t start = now_ns(), at = start + ahead;
    struct itimerspec spec = {{0, 1000000}, {(time_t)(at / 1000000000ull), (long)(at % 1000000000ull)}};
    timer_settime(timer, TIMER_ABSTIME, &spec, NULL);
    return now_ns() - start;
}

static void part1(const char *what, int notify, uint64_t gap, uint64_t ahead) {
    enum { N = 2000 };
    static uint64_t cost[N];
    timer_t timer = make_timer(notify);
    for (int i = 0; i < N; i++) {
        uint64_t until = now_ns() + gap;
        while (now_ns() < until) {
        }
        cost[i] = move_timer(timer, ahead);
    }
    timer_delete(timer);
    qsort(cost, N, sizeof cost[0], by_value);
    printf("%-34s p50 %6.2f us  p90 %6.2f us\n", what, cost[N / 2] / 1e3, cost[N * 9 / 10] / 1e3);
}

static void part2(const char *what, int socket_fd, timer_t timer, int where) {
    enum { N = 200000, EVERY = 100 };
    static uint64_t rtt[N];
    char buf[1100];
    memset(buf, 1, sizeof buf);
    for (int i = 0; i < N; i++) {
        uint64_t start = now_ns();
        send(socket_fd, buf, 1024, 0);
        if (where == 1 && i % EVERY == 0)
            move_timer(timer, 2000000);
        recv(socket_fd, buf, sizeof buf, 0);
        rtt[i] = now_ns() - start;
        if (where == 2 && i % EVERY == 0)
            move_timer(timer, 2000000);
    }
    qsort(rtt, N, sizeof rtt[0], by_value);
    printf("%-8s p50 %6.2f us  p99 %6.2f us\n", what, rtt[N / 2] / 1e3, rtt[N * 99 / 100] / 1e3);
}

int main(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = do_nothing;
    sigaction(SIGURG, &action, NULL);

    part1("tight loop, 2 ms ahead", SIGEV_THREAD_ID, 0, 2000000);
    part1("1 ms apart, 2 ms ahead", SIGEV_THREAD_ID, 1000000, 2000000);
    part1("1 ms apart, 20 ms ahead", SIGEV_THREAD_ID, 1000000, 20000000);
    part1("1 ms apart, 2 ms ahead, SIGEV_NONE", SIGEV_NONE, 1000000, 2000000);

    int client = socket(AF_INET, SOCK_DGRAM, 0), echo = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in client_at, echo_at;
    socklen_t len = sizeof client_at;
    bind(client, (struct sockaddr *)&any, sizeof any);
    getsockname(client, (struct sockaddr *)&client_at, &len);
    bind(echo, (struct sockaddr *)&any, sizeof any);
    len = sizeof echo_at;
    getsockname(echo, (struct sockaddr *)&echo_at, &len);
    connect(client, (struct sockaddr *)&echo_at, sizeof echo_at);
    connect(echo, (struct sockaddr *)&client_at, sizeof client_at);
    pid_t child = fork();
    if (child == 0) {
        char buf[1100];
        for (;;) {
            ssize_t n = recv(echo, buf, sizeof buf, 0);
            if (n <= 0 || send(echo, buf, (size_t)n, 0) < 0)
                _exit(0);
        }
    }
    timer_t timer = make_timer(SIGEV_THREAD_ID);
    /* One run each: after some 600,000 round trips the scheduler settles into another rhythm on
     * one CPU (p50 3.4 us, p99 55 us, for all three alike). */
    part2("none", client, timer, 0);
    part2("inside", client, timer, 1);
    part2("between", client, timer, 2);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    return 0;
}
